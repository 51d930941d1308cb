"""Killing a process asyncio started, without racing asyncio for its exit status."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal


def kill(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL, by os.kill, unless asyncio has seen the process end. Not by Popen.kill: it
    polls first, and a poll reaps a process that has just ended (killed from outside, or
    done by itself) before asyncio's child watcher does, which then logs "Unknown child
    process pid" and reports an exit of 255 for it (a crash, to a worker pool)."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):  # (a zombie takes it: no harm)
            os.kill(proc.pid, signal.SIGKILL)
