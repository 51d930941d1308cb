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
    # constructors that take a size: bytearray(2**33), range(2**60), set(range(2**60))
    "bytearray": b"\x80\x04\x8c\x08builtins\x8c\tbytearray\x93\x8a\x05\x00\x00\x00\x00\x02\x85R.",
    "range": (
        b"\x80\x04\x8c\x08builtins\x8c\x05range\x93\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x10\x85R."
    ),
    "set": (
        b"\x80\x04\x8c\x08builtins\x8c\x03set\x93\x8c\x08builtins\x8c\x05range\x93"
        b"\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x10\x85R\x85R."
    ),
    # a list in a list ... 200,000 deep (no pickler makes it; any code walking it fails)
    "deep": b"\x80\x05" + b"](" * 200_000 + b"e" * 200_000 + b".",
    # 3 million empty sets in 3 MB: ~700 MB once made
    "sets": b"\x80\x05](" + b"\x8f" * 3_000_000 + b"e.",
}


def serve() -> None:
    if len(sys.argv) > 1 and not os.path.exists(sys.argv[1]):  # frozen before it says ready
        open(sys.argv[1], "w").close()  # (once: the next start goes on)
        time.sleep(3600)
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
