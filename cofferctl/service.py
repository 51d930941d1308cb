"""`cofferctl service install | uninstall | status`: start cofferd with the OS.

Linux: a systemd user service (Type=notify) plus a socket unit (socket activation: a
client connecting before the daemon is up simply waits). macOS: a launchd agent.
Everything is written with absolute paths of this installation, so the service runs the
same cofferd as this cofferctl. Idempotent; `--dry-run` prints what would be written and
run, and does nothing.
"""

from __future__ import annotations

import os
import plistlib
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cofferd.locations import APP_NAME, SOCKET_NAME, home_from_env

LABEL = "com.coffer.cofferd"
UNIT = "cofferd.service"
SOCKET_UNIT = "cofferd.socket"


def cofferd_path() -> str:
    beside = Path(sys.executable).parent / "cofferd"
    found = str(beside) if beside.is_file() else shutil.which("cofferd")
    if not found:
        raise FileNotFoundError("cofferd is not installed next to cofferctl or on PATH")
    return str(Path(found).absolute())


def socket_override() -> Path | None:
    """The socket the user chose with COFFER_SOCKET, if any (else the runtime default)."""
    value = os.environ.get("COFFER_SOCKET")
    return Path(value).expanduser().absolute() if value else None


def systemd_service(cofferd: str, home: Path, socket: Path | None) -> str:
    socket_env = f"Environment=COFFER_SOCKET={socket}\n" if socket else ""
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
PrivateTmp=yes
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
    listen = socket or f"%t/{APP_NAME}/{SOCKET_NAME}"
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
                {agent: launchd_plist(cofferd_path(), home_from_env(), socket_override(), logs)},
                [["launchctl", "bootout", f"{domain}/{LABEL}"],
                 ["launchctl", "bootstrap", domain, str(agent)]],
                [],
            )  # fmt: skip
        if action == "uninstall":
            return Plan({}, [["launchctl", "bootout", f"{domain}/{LABEL}"]], [agent])
        return Plan({}, [["launchctl", "print", f"{domain}/{LABEL}"]], [])
    units = Path(os.environ.get("XDG_CONFIG_HOME", home_dir / ".config")) / "systemd" / "user"
    ctl = ["systemctl", "--user"]
    if action == "install":
        return Plan(
            {
                units / UNIT: systemd_service(
                    cofferd_path(), home_from_env(), socket_override()
                ).encode(),
                units / SOCKET_UNIT: systemd_socket(socket_override()).encode(),
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


def execute(action: str, dry_run: bool, write: Callable[[str], None] = print) -> int:
    steps = plan(action)
    for path, content in steps.files.items():
        if dry_run:
            write(f"# would write {path}")
            write(content.decode())
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_bytes(content)
            os.replace(tmp, path)
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
