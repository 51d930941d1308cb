"""A worker for tests of the worker pool: it follows the pool's protocol (infrastructure.frames)
and does to each item what the item says: echo it, sleep, die, or answer with a class
the daemon must refuse to unpickle."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from cofferd.infrastructure.workers.frames import read, write


def serve() -> None:
    replies = os.fdopen(os.dup(1), "wb")
    write(replies, "ready")
    while (request := read(sys.stdin.buffer)) is not None:
        _head, items = request
        for item in items:
            write(replies, answer(item))


def answer(item: Any) -> Any:
    what, value = item
    if what == "sleep":
        time.sleep(value)
    elif what == "die":
        os._exit(3)
    elif what == "die-once" and not os.path.exists(value):
        open(value, "w").close()  # a marker: the next worker answers
        os._exit(4)
    elif what == "hostile":
        return os.system  # pickled by reference: the daemon must refuse to load it
    return ("done", item, os.getpid())


if __name__ == "__main__":
    serve()
