"""A worker for tests of the worker pool: it follows the pool's protocol (infrastructure.frames)
and does to each item what the item says: echo it, sleep, die, answer with a class the
daemon must refuse to unpickle, or with a frame that is no reply of ours (raw bytes)."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from cofferd.infrastructure.workers.frames import HEADER, read, write

# frames that are not replies: each must fail its item, with a reason, and nothing more
RAW = {
    "garbage": b"\x00not a pickle at all\xff",
    # pickles that make the unpickler raise what it rarely does: OverflowError
    "overflow": (
        b"\x80\x04\x8c\x08datetime\x8c\ttimedelta\x93\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x01\x85R."
    ),
    # an attribute path through a module a reply's classes come from
    "dotted": b"\x80\x04\x8c\x14cofferd.domain.links\x8c\nre.compile\x93)R.",
}


def serve() -> None:
    replies = os.fdopen(os.dup(1), "wb")
    write(replies, "ready")
    while (request := read(sys.stdin.buffer)) is not None:
        _head, items = request
        for item in items:
            if item[0] in RAW:
                replies.write(HEADER.pack(len(RAW[item[0]])) + RAW[item[0]])
                replies.flush()
            elif item[0] == "huge":  # a length no frame may have
                replies.write(HEADER.pack(2**32 - 1))
                replies.flush()
            else:
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
