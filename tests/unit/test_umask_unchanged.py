"""The daemon never changes its umask while threads run (issue 33 §8): reading it, or
binding its socket, would change it for every thread a moment, and a file another thread
made meanwhile would get the wrong permissions."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from cofferd.surfaces.http import unix_socket


def never(mask: int) -> int:
    raise AssertionError("the umask was changed")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="read from /proc on Linux")
def test_reading_the_umask_never_sets_it_not_even_at_import() -> None:
    code = (
        "import os\n"
        "def never(mask): raise AssertionError('the umask was changed')\n"
        "os.umask = never\n"
        "from cofferd.infrastructure.files import durable\n"
        "print(oct(durable.umask_mode()))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    current = os.umask(0o022)
    os.umask(current)
    assert done.stdout.strip() == oct(0o666 & ~current)


def test_the_socket_is_private_without_a_umask_change(monkeypatch: pytest.MonkeyPatch) -> None:
    current = os.umask(0o002)  # a loose umask, as a session may have
    try:
        monkeypatch.setattr(os, "umask", never)
        with tempfile.TemporaryDirectory(prefix="cof", dir="/tmp") as run:
            bound = unix_socket.bind(Path(run) / "d" / "cofferd.sock")
            try:
                assert stat.S_IMODE(os.stat(Path(run) / "d" / "cofferd.sock").st_mode) == 0o600
            finally:
                bound.sock.close()
                bound.remove()
    finally:
        monkeypatch.undo()
        os.umask(current)
