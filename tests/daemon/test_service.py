"""Starting with the OS: systemd units and launchd agent, socket activation, readiness."""

from __future__ import annotations

import io
import os
import plistlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from coffer_kernel.locations import Locations
from cofferctl import cli
from cofferctl import service_units as service
from tests.support.cofferd_process import start_cofferd
from tests.support.daemon import BIN, REPO, ContractClient, new_daemon

needs_systemd = pytest.mark.skipif(
    shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed"
)


def verify(*units: Path) -> None:
    """systemd-analyze verify, strictly: warnings exit 0, so any stderr fails."""
    runtime = tempfile.mkdtemp()
    proc = subprocess.run(
        ["systemd-analyze", "verify", "--user", "--man=no", *map(str, units)],
        env={**os.environ, "XDG_RUNTIME_DIR": runtime},
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


@needs_systemd
def test_shipped_units_verify(tmp_path: Path) -> None:
    for name in ("cofferd.service", "cofferd.socket"):
        shutil.copy(REPO / "systemd" / name, tmp_path / name)
    verify(tmp_path / "cofferd.service", tmp_path / "cofferd.socket")


@needs_systemd
def test_generated_units_verify(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("COFFER_HOME", str(tmp_path / "data"))
    steps = service.plan("install", platform="linux")
    for path, content in steps.files.items():
        (tmp_path / path.name).write_bytes(content)
    text = (tmp_path / "cofferd.service").read_text()
    assert f"ExecStart={BIN / 'cofferd'}\n" in text
    assert f"ReadWritePaths={tmp_path / 'data'}\n" in text and "Type=notify" in text
    verify(tmp_path / "cofferd.service", tmp_path / "cofferd.socket")
    assert steps.commands[-1][-4:] == ["enable", "--now", "cofferd.socket", "cofferd.service"]


def test_shipped_units_are_what_install_writes() -> None:
    shipped = (REPO / "systemd" / "cofferd.service").read_text()
    generated = service.systemd_service(
        "/usr/bin/env cofferd", Path("%h/.local/share/coffer"), None
    )
    assert shipped.split("[Unit]", 1)[1] == generated.split("[Unit]", 1)[1]
    assert (REPO / "systemd" / "cofferd.socket").read_text() == service.systemd_socket(None)


@pytest.mark.parametrize(
    "plist",
    [
        (REPO / "launchd" / "com.coffer.cofferd.plist").read_bytes(),
        service.launchd_plist(
            "/opt/coffer/bin/cofferd", Path("/Users/a/data"), None, Path("/Users/a/Logs")
        ),
    ],
    ids=["shipped", "generated"],
)
def test_launchd_plist(plist: bytes) -> None:
    data = plistlib.loads(plist)
    assert data["Label"] == "com.coffer.cofferd"
    assert isinstance(data["ProgramArguments"], list) and data["ProgramArguments"][0].startswith(
        "/"
    )
    assert data["RunAtLoad"] is True
    assert data["KeepAlive"] == {"SuccessfulExit": False}
    assert "/Logs/" in data["StandardErrorPath"] and "/Logs/" in data["StandardOutPath"]
    assert isinstance(data["EnvironmentVariables"]["COFFER_HOME"], str)


def test_dry_run_prints_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    for action in ("install", "uninstall", "status"):
        out = io.StringIO()
        assert cli.main(["service", action, "--dry-run"], stdout=out) == 0
        assert "# would run: systemctl --user" in out.getvalue()
    assert not list(tmp_path.rglob("*"))
    macos = service.plan("install", platform="darwin")
    assert [c[1] for c in macos.commands] == ["bootout", "bootstrap"]


def test_socket_activation(tmp_path: Path) -> None:
    d = new_daemon(tmp_path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(d.socket))
    listener.listen(16)
    fd = listener.fileno()
    # as systemd does: the socket is fd 3, LISTEN_PID is the daemon's own pid
    exec_as_systemd = (
        "import os, sys; os.dup2(int(sys.argv[1]), 3); os.environ['LISTEN_FDS'] = '1';"
        " os.environ['LISTEN_PID'] = str(os.getpid()); os.execv(sys.argv[2], sys.argv[2:])"
    )
    proc = start_cofferd(
        d.env(COFFER_SOCKET=str(tmp_path / "unused.sock")),
        log_level=None,
        under=[sys.executable, "-c", exec_as_systemd, str(fd)],
        pass_fds=(fd,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # a client that connects before the daemon serves simply waits
        status = ContractClient(d.socket, timeout=60).get("/api/v1/status")
        assert status["data_home"] == str(d.home)
        assert not (tmp_path / "unused.sock").exists()  # served on the inherited socket
        assert status["socket"] == str(d.socket)  # the socket it really serves on
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
        listener.close()
    assert d.socket.exists()  # the socket belongs to the service manager, not to cofferd


def test_readiness_is_sent_once_the_api_answers(tmp_path: Path) -> None:
    d = new_daemon(tmp_path)
    notify_path = Path(tempfile.mkdtemp(dir="/tmp")) / "notify"
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(notify_path))
    notify.settimeout(30)
    d.start(wait=False, NOTIFY_SOCKET=str(notify_path))
    try:
        message = notify.recv(4096).decode()
        assert "READY=1" in message
        assert d.client.get("/api/v1/health")["status"] == "ok"  # answering at once
        assert d.stop() == 0
        assert "STOPPING=1" in notify.recv(4096).decode()
    finally:
        notify.close()
        shutil.rmtree(notify_path.parent, ignore_errors=True)
        if d.proc and d.proc.poll() is None:
            d.proc.kill()


@needs_systemd
def test_install_honours_the_chosen_socket_and_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sock = tmp_path / "run" / "my.sock"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("COFFER_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("COFFER_SOCKET", str(sock))
    steps = service.plan("install", platform="linux")
    for path, content in steps.files.items():
        (tmp_path / path.name).write_bytes(content)
    unit = (tmp_path / "cofferd.service").read_text()
    assert f"Environment=COFFER_SOCKET={sock}\n" in unit
    assert f"Environment=COFFER_HOME={tmp_path / 'data'}\n" in unit
    assert f"ListenStream={sock}\n" in (tmp_path / "cofferd.socket").read_text()
    verify(tmp_path / "cofferd.service", tmp_path / "cofferd.socket")
    agent = plistlib.loads(service.plan("install", platform="darwin").files.popitem()[1])
    assert agent["EnvironmentVariables"]["COFFER_SOCKET"] == str(sock)


@needs_systemd
def test_attached_folders_are_writable_in_the_unit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "data"
    odd = tmp_path / "My Notes 100%"
    for name, folder in (("plain", tmp_path / "notes"), ("odd", odd)):
        folder.mkdir()
        (home / "knowledge" / name).mkdir(parents=True)
        (home / "knowledge" / name / "docs").symlink_to(folder, target_is_directory=True)
    (home / "knowledge/own/docs").mkdir(parents=True)  # a folder in the data home: no entry
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("COFFER_HOME", str(home))
    monkeypatch.setattr(service.shutil, "which", lambda name: None)  # no systemctl to call
    assert Locations.from_env().attached_folders() == [odd, tmp_path / "notes"]
    unit = service._units_dir() / "cofferd.service"
    service.refresh()
    assert not unit.exists()  # not installed: nothing to refresh
    for path, content in service.plan("install", platform="linux").files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    text = unit.read_text()
    assert f'ReadWritePaths="-{tmp_path}/My Notes 100%%"\n' in text
    assert f"ReadWritePaths=-{tmp_path / 'notes'}\n" in text
    verify(unit, unit.with_name("cofferd.socket"))
    shutil.rmtree(home / "knowledge/odd")
    printed: list[str] = []
    service.refresh(printed.append)
    assert "My Notes" not in unit.read_text() and printed[0].startswith("updated")


def test_install_warns_of_a_data_home_or_folder_in_tmp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "data"  # pytest's tmp_path is in /tmp, which the service does not see
    vault = tmp_path / "vault"
    vault.mkdir()
    (home / "knowledge" / "vault").mkdir(parents=True)
    (home / "knowledge" / "vault" / "docs").symlink_to(vault, target_is_directory=True)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("COFFER_HOME", str(home))
    out = io.StringIO()
    assert cli.main(["service", "install", "--dry-run"], stdout=out) == 0
    said = out.getvalue()
    assert f"warning: the data home {home} is in /tmp" in said and "PrivateTmp=yes" in said
    assert "set COFFER_HOME to a folder outside /tmp and /var/tmp" in said
    assert f"warning: the attached folder {vault} is in /tmp" in said
    assert "# would write" in said and not (tmp_path / "config").exists()

    elsewhere = Locations(home=Path.home() / ".local/share/coffer-nowhere", socket=tmp_path / "s")
    assert service.private_tmp_problems(elsewhere, platform="linux") == []
    assert service.private_tmp_problems(Locations.from_env(), platform="darwin") == []
