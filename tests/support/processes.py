"""A daemon's processes as /proc shows them: the process and those below it, and their peak
memory."""

from __future__ import annotations

import contextlib
from pathlib import Path


def peak_kb(pid: int) -> int:
    """A process's peak resident memory; 0 once it has ended (a worker let go when idle:
    gone, or a zombie not yet waited on, whose status holds no memory)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
    except FileNotFoundError:
        return 0
    return next((int(line.split()[1]) for line in status if line.startswith("VmHWM")), 0)


def family(pid: int) -> list[int]:
    """The process and every process below it (the daemon and its workers)."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        with contextlib.suppress(FileNotFoundError):  # ended meanwhile
            for task in Path(f"/proc/{current}/task").iterdir():
                queue += [int(c) for c in (task / "children").read_text().split()]
    return found
