"""Giving memory back to the operating system after large work.

Freed memory stays in the C allocator's heap (glibc keeps it for the process), so after a
document of many megabytes is indexed or deleted the daemon would keep its peak size for
good. `trim()` asks glibc to return what is free; elsewhere it does nothing.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable

_trim: Callable[[int], int] | None = None
if sys.platform.startswith("linux"):
    try:
        # the process's own symbols, libc's among them (find_library ran `ldconfig -p`: 20 ms
        # of every worker's start)
        _trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
        _trim = None


def trim() -> None:
    if _trim is not None:
        _trim(0)
