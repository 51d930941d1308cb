"""Running the real `cofferctl` against a test daemon: its exit status and output, in a pipe
or on a terminal."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import threading

from cofferctl import cli
from tests.support.daemon import BIN, Daemon


def run(d: Daemon, *argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = cli.main(["--socket", str(d.socket), *argv], stdout=out)
    return code, out.getvalue()


def ctl_env(**extra: str) -> dict[str, str]:
    """A bare environment for the real cofferctl (PYTHONPATH kept: this checkout's code)."""
    kept = {k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ}
    return {"PATH": "/usr/bin:/bin", **kept, **extra}


def ctl(d: Daemon, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "cofferctl"), *argv],
        env=ctl_env(COFFER_SOCKET=str(d.socket), **env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def on_terminal(
    d: Daemon, *argv: str, answer: str = "", stdout_tty: bool = False, **env: str
) -> tuple[int, str, str]:
    """Run the real cofferctl with stdin and stderr (and stdout if asked) on a terminal;
    `answer` is typed in. Returns (exit code, stdout, what the terminal showed)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [str(BIN / "cofferctl"), *argv],
        env=ctl_env(COFFER_SOCKET=str(d.socket), **env),
        stdin=slave,
        stdout=slave if stdout_tty else subprocess.PIPE,
        stderr=slave,
    )
    os.close(slave)
    shown: list[bytes] = []

    def read_terminal() -> None:
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # EIO: every process let go of the terminal
                return
            if not data:
                return
            shown.append(data)

    reader = threading.Thread(target=read_terminal)
    reader.start()
    if answer:
        os.write(master, answer.encode())
    out = proc.stdout.read().decode() if proc.stdout else ""
    code = proc.wait(60)
    reader.join(10)
    os.close(master)
    return code, out, b"".join(shown).decode(errors="replace")
