"""`cofferctl service install | uninstall | status`: start cofferd with the OS.

Linux: a systemd user service (Type=notify) plus a socket unit (socket activation: a
client connecting before the daemon is up simply waits). macOS: a launchd agent.
Everything is written with absolute paths of this installation, so the service runs the
same cofferd as this cofferctl. Idempotent; `--dry-run` prints what would be written and
run, and does nothing.

The systemd service is sandboxed (ProtectSystem=strict, PrivateTmp): it may write only in
the data home and in the folders attached as knowledge bases, each listed in the unit
(`-` so that a folder on a disk not mounted does not stop the service). Attaching or
deleting a knowledge base rewrites the unit and restarts the service (`refresh`). A data
home or an attached folder in /tmp or /var/tmp is out of its sight: both say so.
"""

from __future__ import annotations

import os
import plistlib
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from coffer_kernel.locations import SOCKET_IN_RUNTIME_DIR, Locations, chosen_socket, home_from_env

LABEL = "com.coffer.cofferd"
UNIT = "cofferd.service"
SOCKET_UNIT = "cofferd.socket"


def cofferd_path() -> str:
    beside = Path(sys.executable).parent / "cofferd"
    found = str(beside) if beside.is_file() else shutil.which("cofferd")
    if not found:
        raise FileNotFoundError("cofferd is not installed next to cofferctl or on PATH")
    return str(Path(found).absolute())


def _unit_path(path: Path, prefix: str = "") -> str:
    """A path as a unit file word: specifiers and quotes escaped, quoted if it has spaces."""
    word = prefix + str(path).replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    return f'"{word}"' if any(c.isspace() for c in word) else word


def systemd_service(
    cofferd: str, home: Path, socket: Path | None, writable: Sequence[Path] = ()
) -> str:
    socket_env = f"Environment=COFFER_SOCKET={socket}\n" if socket else ""
    attached = "".join(f"ReadWritePaths={_unit_path(p, '-')}\n" for p in writable)
    return f"""\
# Written by `cofferctl service install`; `cofferctl service uninstall` removes it.
[Unit]
Description=Coffer knowledge base daemon
Requires={SOCKET_UNIT}
After={SOCKET_UNIT}

[Service]
Type=notify
NotifyAccess=main
ExecStart={cofferd}
Environment=COFFER_HOME={home}
{socket_env}Restart=on-failure
RestartSec=2
TimeoutStopSec=20
UMask=0077
NoNewPrivileges=yes
ProtectSystem=strict
ReadWritePaths={home}
{attached}PrivateTmp=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectControlGroups=yes
RestrictSUIDSGID=yes
RestrictRealtime=yes
LockPersonality=yes

[Install]
WantedBy=default.target
"""


def systemd_socket(socket: Path | None) -> str:
    listen = socket or f"%t/{SOCKET_IN_RUNTIME_DIR}"  # %t: the user runtime directory
    return f"""\
# Written by `cofferctl service install`: systemd holds the socket, so clients that
# connect while cofferd starts (or restarts) wait instead of failing.
[Unit]
Description=Coffer knowledge base daemon socket

[Socket]
ListenStream={listen}
SocketMode=0600
DirectoryMode=0700

[Install]
WantedBy=sockets.target
"""


def launchd_plist(cofferd: str, home: Path, socket: Path | None, logs: Path) -> bytes:
    env = {"COFFER_HOME": str(home), **({"COFFER_SOCKET": str(socket)} if socket else {})}
    return plistlib.dumps(
        {
            "Label": LABEL,
            "ProgramArguments": [cofferd],
            "RunAtLoad": True,
            "KeepAlive": {"SuccessfulExit": False},  # restart after a crash, not after a stop
            "ProcessType": "Background",
            "EnvironmentVariables": env,
            "StandardOutPath": str(logs / "cofferd.log"),
            "StandardErrorPath": str(logs / "cofferd.log"),
            "Umask": 0o077,
        }
    )


@dataclass(frozen=True)
class Plan:
    files: dict[Path, bytes]
    commands: list[list[str]]
    removals: list[Path]


def plan(action: str, platform: str = sys.platform) -> Plan:
    home_dir = Path.home()
    if platform == "darwin":
        agent = home_dir / "Library" / "LaunchAgents" / f"{LABEL}.plist"
        domain = f"gui/{os.getuid()}"
        if action == "install":
            logs = home_dir / "Library" / "Logs" / "coffer"
            return Plan(
                {agent: launchd_plist(cofferd_path(), home_from_env(), chosen_socket(), logs)},
                [["launchctl", "bootout", f"{domain}/{LABEL}"],
                 ["launchctl", "bootstrap", domain, str(agent)]],
                [],
            )  # fmt: skip
        if action == "uninstall":
            return Plan({}, [["launchctl", "bootout", f"{domain}/{LABEL}"]], [agent])
        return Plan({}, [["launchctl", "print", f"{domain}/{LABEL}"]], [])
    units = _units_dir()
    ctl = ["systemctl", "--user"]
    if action == "install":
        return Plan(
            {
                units / UNIT: _service_unit(),
                units / SOCKET_UNIT: systemd_socket(chosen_socket()).encode(),
            },
            [[*ctl, "daemon-reload"], [*ctl, "enable", "--now", SOCKET_UNIT, UNIT]],
            [],
        )
    if action == "uninstall":
        return Plan(
            {},
            [[*ctl, "disable", "--now", UNIT, SOCKET_UNIT], [*ctl, "daemon-reload"]],
            [units / UNIT, units / SOCKET_UNIT],
        )
    return Plan({}, [[*ctl, "status", "--no-pager", UNIT, SOCKET_UNIT]], [])


def _units_dir() -> Path:
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "systemd" / "user"


def _service_unit() -> bytes:
    locations = Locations.from_env()
    return systemd_service(
        cofferd_path(), locations.home, chosen_socket(), locations.attached_folders()
    ).encode()


def refresh(write: Callable[[str], None] = print) -> None:
    """Rewrite an installed systemd service after a folder was attached or let go, so that
    the sandbox lets cofferd write there, and restart it. Nothing when not installed."""
    unit = _units_dir() / UNIT
    if sys.platform == "darwin" or not unit.is_file():
        return
    content = _service_unit()
    if unit.read_bytes() == content:
        return
    _write_file(unit, content)
    write(f"updated {unit}: the folders cofferd may write")
    for unreachable in private_tmp_problems(Locations.from_env()):
        write(f"warning: {unreachable}")
    if problem := user_bus_problem():
        write(f"restart it yourself: {problem}")
    else:
        for command in (["systemctl", "--user", "daemon-reload"],
                        ["systemctl", "--user", "try-restart", UNIT]):  # fmt: skip
            subprocess.run(command, check=False)
        write("restarted the service")


def _write_file(path: Path, content: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(content)
    os.replace(tmp, path)


def user_bus_problem(platform: str = sys.platform) -> str | None:
    """Why `systemctl --user` cannot work here (it would say "Failed to connect to bus"),
    or None when a systemd user session is reachable."""
    if platform == "darwin":
        return None
    if not shutil.which("systemctl"):
        return "systemctl is not installed here: start cofferd yourself (run `cofferd`)"
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if os.environ.get("DBUS_SESSION_BUS_ADDRESS") or (runtime and Path(runtime, "bus").exists()):
        return None
    return (
        "no systemd user session is reachable here (DBUS_SESSION_BUS_ADDRESS is unset and "
        "there is no $XDG_RUNTIME_DIR/bus), as in a container, under sudo or su, or in a "
        "shell started without a login session. Log in as this user (a desktop or ssh "
        "session) and run it there; `loginctl enable-linger $USER` keeps the service running "
        "after you log out. Or run `cofferd` in the foreground instead."
    )


PRIVATE_TMP = ("/tmp", "/var/tmp")  # the service has its own (PrivateTmp=yes)


def private_tmp_problems(locations: Locations, platform: str = sys.platform) -> list[str]:
    """What the systemd service cannot reach because it has a /tmp and /var/tmp of its
    own: a data home or an attached folder there, each with what to do."""
    if platform == "darwin":
        return []
    problems = []
    if tmp := _private_tmp_of(locations.home):
        problems.append(
            f"the data home {locations.home} is in {tmp}, and the service has a /tmp and "
            "/var/tmp of its own (PrivateTmp=yes): cofferd would not see your knowledge bases "
            "there, and what it wrote would vanish when it stops. Move the data home "
            "elsewhere, or set COFFER_HOME to a folder outside /tmp and /var/tmp, and run "
            "`cofferctl service install` again"
        )
    for folder in locations.attached_folders():
        if tmp := _private_tmp_of(folder):
            problems.append(
                f"the attached folder {folder} is in {tmp}, which the service does not see "
                "(PrivateTmp=yes): move the folder elsewhere and attach it there "
                "(cofferctl kb attach NAME DIR)"
            )
    return problems


def _private_tmp_of(path: Path) -> str | None:
    """/tmp or /var/tmp when `path` really is in it (through links too), else None."""
    real = os.path.realpath(path)
    return next((tmp for tmp in PRIVATE_TMP if real == tmp or real.startswith(tmp + "/")), None)


def execute(action: str, dry_run: bool, write: Callable[[str], None] = print) -> int:
    steps = plan(action)
    if action == "install":
        for unreachable in private_tmp_problems(Locations.from_env()):
            write(f"warning: {unreachable}")
    if not dry_run and (problem := user_bus_problem()):
        doing = {"status": "show the state of"}.get(action, action)
        write(f"cannot {doing} the service: {problem}")
        return 1
    for path, content in steps.files.items():
        if dry_run:
            write(f"# would write {path}")
            write(content.decode())
        else:
            _write_file(path, content)
    for path in steps.removals:
        if dry_run:
            write(f"# would remove {path}")
        else:
            path.unlink(missing_ok=True)
    code = 0
    for command in steps.commands:
        if dry_run:
            write("# would run: " + " ".join(command))
            continue
        result = subprocess.run(command, check=False)
        # bootout of an agent that is not loaded, disable of a unit that is gone: fine
        if result.returncode != 0 and command[1:2] not in (["bootout"], ["disable"]):
            code = result.returncode
    return code
