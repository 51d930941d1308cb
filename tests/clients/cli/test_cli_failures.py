"""cofferctl never prints a traceback: a daemon that dies while a request is in flight, one
that closes the connection in the middle of its answer, Ctrl-C, a reader that goes away
(`| head -1`). Each is one line on stderr and an exit code, with the real cofferctl."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import ctl, ctl_env
from tests.support.daemon import BIN, Daemon, wait_for
from tests.support.helpers import write


def cofferctl(socket_path: Path, *argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(BIN / "cofferctl"), *argv],
        env=ctl_env(COFFER_SOCKET=str(socket_path)),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ctrl_c_as_at_a_terminal,
    )


def _ctrl_c_as_at_a_terminal() -> None:
    """A suite run in the background (`cmd &` ignores SIGINT) would hand that on, and the
    cofferctl under test would never see Ctrl-C at all."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def waiting_for_an_answer(proc: subprocess.Popen[str]) -> bool:
    """The process sleeps in poll() on its socket: its request is sent, it awaits the answer."""
    return "poll" in Path(f"/proc/{proc.pid}/wchan").read_text()


@pytest.fixture
def stopped(daemon: Daemon) -> Iterator[Daemon]:
    """The daemon stopped (SIGSTOP): connections wait in its queue, never answered."""
    assert daemon.proc is not None
    daemon.proc.send_signal(signal.SIGSTOP)
    try:
        yield daemon
    finally:
        if daemon.proc.poll() is None:
            daemon.proc.send_signal(signal.SIGCONT)


def assert_one_line(stderr: str) -> str:
    assert "Traceback" not in stderr and len(stderr.strip().splitlines()) == 1, stderr
    return stderr


def test_a_daemon_that_dies_during_a_request_is_one_line_and_exit_3(stopped: Daemon) -> None:
    assert stopped.proc is not None
    proc = cofferctl(stopped.socket, "status")
    wait_for(lambda: waiting_for_an_answer(proc))
    stopped.proc.kill()  # the request it had not answered yet dies with it
    stopped.proc.wait()
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 3
    assert "cofferd closed the connection before answering" in assert_one_line(err)
    assert "cofferctl status" in err


def test_ctrl_c_is_exit_130_without_a_traceback(stopped: Daemon) -> None:
    proc = cofferctl(stopped.socket, "search", "notes", "words")
    wait_for(lambda: waiting_for_an_answer(proc))
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        # what held it: its signal masks (blocked, ignored, caught) and where it waits
        said = Path(f"/proc/{proc.pid}/status").read_text().splitlines()
        held = [line for line in said if line.startswith(("State", "Sig", "Shd"))]
        wchan = Path(f"/proc/{proc.pid}/wchan").read_text()
        mine = [line for line in Path("/proc/self/status").read_text().splitlines()
                if line.startswith("Sig")]  # fmt: skip
        proc.kill()
        raise AssertionError(f"Ctrl-C did not end it: {held} in {wchan}; pytest: {mine}") from None
    assert proc.returncode == 130 and out == "" and "Traceback" not in err


class HalfAnswer:
    """A server on a Unix socket that reads a request and answers `reply`, then closes."""

    def __init__(self, path: Path, reply: bytes) -> None:
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(str(path))
        self.server.listen()
        self.reply = reply
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        conn, _ = self.server.accept()
        with conn:
            request = b""
            while b"\r\n\r\n" not in request:
                request += conn.recv(65536)
            conn.sendall(self.reply)

    def close(self) -> None:
        self.thread.join(30)
        self.server.close()


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        (b"", "cofferd closed the connection before answering"),
        (
            b'HTTP/1.1 200 OK\r\nContent-Length: 200\r\n\r\n{"version": "0.1',
            "cofferd closed the connection in the middle of its answer",
        ),
        (
            b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n{"versi',
            "cofferd closed the connection in the middle of its answer",
        ),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nnot json!", "is not JSON"),
        (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "cut short or is not HTTP"),
    ],
    ids=["nothing", "cut body", "cut chunks", "not json", "not http"],
)
def test_an_answer_cut_short_is_one_line_and_exit_3(
    tmp_path: Path, reply: bytes, said: str
) -> None:
    server = HalfAnswer(tmp_path / "half.sock", reply)
    proc = cofferctl(tmp_path / "half.sock", "status")
    _, err = proc.communicate(timeout=30)
    server.close()
    assert proc.returncode == 3 and said in assert_one_line(err)


def test_a_reader_that_goes_away_is_quiet(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = "pipe-" + os.urandom(3).hex()
    assert ctl(d, "kb", "create", kb).returncode == 0
    for i in range(30):
        write(d.docs(kb) / f"note{i}.md", f"# Note {i}\n\nwords\n")
    wait_for(lambda: d.client.get(d.client.kb(kb, "/documents"))["total"] == 30)
    for argv in (("docs", kb), ("--help",), ("show", kb, "note1")):
        read, written = os.pipe()
        os.close(read)  # `| head -1` that has read its line already
        proc = subprocess.run(
            [str(BIN / "cofferctl"), *argv],
            env=ctl_env(COFFER_SOCKET=str(d.socket)),
            stdout=written,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
        os.close(written)
        assert proc.returncode == 0 and proc.stderr == "", (argv, proc.stderr)
