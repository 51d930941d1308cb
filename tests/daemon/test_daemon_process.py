"""cofferd as a process: one per data home, safe socket, clean shutdown, foreign users refused."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.daemon import BIN, Daemon, new_daemon, wait_for


def test_fresh_home_gets_the_default_kb(daemon: Daemon) -> None:
    names = [k["name"] for k in daemon.client.get("/api/v1/knowledge_bases")["knowledge_bases"]]
    assert names == ["notes"]
    assert daemon.docs("notes").is_dir()


def test_socket_is_private(daemon: Daemon) -> None:
    assert stat.S_IMODE(daemon.socket.stat().st_mode) == 0o600
    assert stat.S_IMODE(daemon.socket.parent.stat().st_mode) == 0o700


def test_second_daemon_is_refused_and_the_first_keeps_running(
    daemon: Daemon, tmp_path: Path
) -> None:
    inode = daemon.socket.stat().st_ino
    other = subprocess.run(
        [str(BIN / "cofferd")], env=daemon.env(), capture_output=True, text=True, timeout=30
    )
    assert other.returncode == 1 and "already running" in other.stderr
    # the same socket path, another data home: refused without touching the live socket
    third = subprocess.run(
        [str(BIN / "cofferd")],
        env=daemon.env(COFFER_HOME=str(tmp_path / "other")),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert third.returncode == 1 and "another cofferd is answering" in third.stderr
    assert daemon.socket.stat().st_ino == inode
    assert daemon.healthy()


def test_stale_socket_is_replaced(tmp_path: Path) -> None:
    d = new_daemon(tmp_path)
    d.socket.parent.chmod(0o700)
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(str(d.socket))
    dead.close()  # a socket file nobody listens on: what a crash leaves behind
    d.start()
    try:
        assert d.healthy()
    finally:
        assert d.stop() == 0


def test_a_socket_folder_it_did_not_make_keeps_its_mode_and_a_too_open_one_is_refused(
    tmp_path: Path,
) -> None:
    """`--socket ./cofferd.sock` in a shared project folder: its mode is the user's, never
    closed to 0700; a folder others may write in (no sticky bit) is refused with the reason."""
    d = new_daemon(tmp_path)
    shared = d.socket.parent
    shared.chmod(0o755)  # the user's project folder, readable by the group and others
    d.start()
    try:
        assert d.healthy()
        assert stat.S_IMODE(shared.stat().st_mode) == 0o755
    finally:
        assert d.stop() == 0
    shared.chmod(0o775)  # writable by the group: anyone in it could swap the socket
    proc = subprocess.run(
        [str(BIN / "cofferd")], env=d.env(), capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 1
    assert f"{shared} is writable by its group (mode 775)" in proc.stderr
    assert "--socket" in proc.stderr and "chmod go-w" in proc.stderr
    assert stat.S_IMODE(shared.stat().st_mode) == 0o775 and not d.socket.exists()
    made = shared / "made" / "cofferd.sock"  # a folder cofferd makes itself is private
    d.socket = made
    d.start()
    try:
        assert stat.S_IMODE(made.parent.stat().st_mode) == 0o700
    finally:
        assert d.stop() == 0


def test_a_file_that_is_not_a_socket_is_never_removed(tmp_path: Path) -> None:
    d = new_daemon(tmp_path)
    d.socket.write_text("precious")
    proc = subprocess.run([str(BIN / "cofferd")], env=d.env(), capture_output=True, text=True)
    assert proc.returncode == 1 and "not a socket" in proc.stderr
    assert d.socket.read_text() == "precious"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_stop_cleanly(tmp_path: Path, sig: int) -> None:
    d = new_daemon(tmp_path).start()
    started = time.monotonic()
    assert d.stop(sig) == 0
    assert time.monotonic() - started < 5
    assert not d.socket.exists()
    assert "stopped" in d.log.read_text()


def test_api_answers_while_the_startup_reconcile_runs(tmp_path: Path) -> None:
    d = new_daemon(tmp_path)
    docs = d.home / "knowledge" / "notes" / "docs"
    docs.mkdir(parents=True)
    for i in range(12000):
        (docs / f"n{i}.md").write_text(f"# Note {i}\n\nstartup text {i}")
    d.start(wait=False)
    try:
        first = wait_for(lambda: d.client.get("/api/v1/status"), timeout=30, interval=0.01)
        assert first["startup_reconcile_done"] is False
        body = d.client.post(d.client.kb("notes", "/search"), {"query": "startup"})
        assert isinstance(body["passages"], list)  # answers from what is indexed so far
        wait_for(lambda: d.client.get("/api/v1/status")["startup_reconcile_done"], timeout=60)
        assert d.client.get(d.client.kb("notes", "/metrics"))["documents"] == 12000
    finally:
        assert d.stop() == 0


def _as_nobody(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
         sys.executable, "-c", code, *args],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip


CONNECT = """
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
except PermissionError:
    print("EACCES"); sys.exit()
s.sendall(b"GET /api/v1/status HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n")
data = b""
while chunk := s.recv(65536):
    data += chunk
print(data.decode())
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user")
def test_another_user_is_refused(daemon: Daemon) -> None:
    # the socket's permissions stop other users first...
    assert _as_nobody(CONNECT, str(daemon.socket)).stdout.strip() == "EACCES"
    # ...and if they were ever too wide, the peer uid check still refuses
    daemon.socket.parent.chmod(0o711)
    daemon.socket.chmod(0o666)
    out = _as_nobody(CONNECT, str(daemon.socket)).stdout
    assert "403" in out and "FORBIDDEN" in out
    assert daemon.healthy()
