"""Messages between the daemon and its worker processes: length-prefixed pickles over pipes.

A request is (head, items): what the job shares (a KB's folder and settings, the model's
settings) and the items to work on; the worker answers each item with one reply, in
order (`serve_items`), after a first READY when it has started.

A reply is unpickled against its pool's own list of the classes a reply may name (the
values its workers send back, and the date types they may hold; `Replies`), looked up by
their module and name exactly: a worker reads hostile files, so what it sends back never
names code, nor reaches any through an attribute path (`posixpath.os.system`).

A reply is bounded by construction: no class it may name takes a size (pickle builds
lists, dicts, sets, bytes and bytearrays from what the frame holds, never from a number:
`bytearray(2**33)` or `range(2**60)` cannot be named), so what a frame builds grows with
its length; a frame longer than its pool allows is refused before it is read, a long one
is counted first (`MAX_ELEMENTS`: the objects it would build) and one nested deeper than
the interpreter can walk is refused once built (the daemon's own code could not read it).
"""

from __future__ import annotations

import contextlib
import datetime
import io
import os
import pickle
import pickletools
import struct
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import IO, Any

READY = "ready"
HEADER = struct.Struct(">I")
MAX_FRAME = 1024 * 1024 * 1024  # far beyond any budget: a larger length is a broken stream
MAX_REPLY_BYTES = 256 * 1024 * 1024  # a pool's default: far beyond a document's budget
# What a frame may build, counted in the objects its opcodes make (a set's weighs more):
# a reply of a document at its budget (16 MiB indexed) makes under a million.
MAX_ELEMENTS = 2_000_000
SET_WEIGHT = 4  # an empty set is ~4 times an empty list
# A frame this short makes at most this many objects: it is not counted (counting costs
# several times the unpickling).
COUNTED_FROM = 256 * 1024
# the date types frontmatter may hold (YAML reads dates and times as such)
DATE_TYPES: frozenset[type] = frozenset(
    {datetime.date, datetime.datetime, datetime.time, datetime.timedelta, datetime.timezone}
)


@dataclass(frozen=True)
class Replies:
    """What one pool's workers may answer: the classes a reply may name (none: builtins
    only) and the longest frame (the objects any frame makes: MAX_ELEMENTS)."""

    classes: frozenset[type] = frozenset()
    max_bytes: int = MAX_REPLY_BYTES

    @cached_property
    def allowed(self) -> dict[tuple[str, str], type]:
        return {(cls.__module__, cls.__qualname__): cls for cls in self.classes}


class BrokenStream(Exception):
    """The other side sent something that is not a frame of ours."""


def encode(message: Any) -> bytes:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(data)) + data


def frame_length(header: bytes, limit: int = MAX_FRAME) -> int:
    (length,) = HEADER.unpack(header)
    if length > limit:
        raise BrokenStream(f"a frame of {length:,} bytes")
    return int(length)


class _Unpickler(pickle.Unpickler):
    def __init__(self, data: bytes, allowed: Mapping[tuple[str, str], type]) -> None:
        super().__init__(io.BytesIO(data))
        self.allowed = allowed

    def find_class(self, module: str, name: str) -> Any:
        found = self.allowed.get((module, name))
        if found is None:
            raise BrokenStream(f"a frame naming {module}.{name}"[:200])
        return found


def decode(data: bytes, replies: Replies) -> Any:
    """The reply a frame holds, or BrokenStream with why: a class its pool's replies do
    not hold, more objects than MAX_ELEMENTS (refused before any is made), nesting deeper
    than the interpreter walks, or bytes that are no pickle of ours."""
    if len(data) > replies.max_bytes:
        raise BrokenStream(f"a frame of {len(data):,} bytes")
    try:
        if len(data) >= COUNTED_FROM and _elements(data) > MAX_ELEMENTS:
            raise BrokenStream(f"a frame that would make over {MAX_ELEMENTS:,} objects")
        reply = _Unpickler(data, replies.allowed).load()
    except BrokenStream:
        raise
    except Exception as exc:  # whatever the unpickler raises on bytes it cannot read
        raise BrokenStream(f"an unreadable frame ({type(exc).__name__})") from exc
    try:  # the pickler walks it as deep as the interpreter's own code would (C: fast)
        pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
    except RecursionError:
        raise BrokenStream("a frame nested too deeply") from None
    return reply


_SETS = {"EMPTY_SET", "FROZENSET"}
# the opcodes that end what a MARK began (pickletools: they pop the mark stack)
_CLOSING = {
    "APPENDS", "SETITEMS", "ADDITEMS", "TUPLE", "LIST", "DICT", "FROZENSET", "OBJ", "INST",
    "POP_MARK",
}  # fmt: skip
MAX_MARKS = 100  # open marks (nesting) a counted frame may hold; a reply nests a few


def _elements(data: bytes) -> int:
    """How many objects unpickling `data` would make, at most (each opcode makes at most
    one); counting stops past MAX_ELEMENTS. Nesting past MAX_MARKS is refused here too,
    before anything is made."""
    count = marks = 0
    for opcode, _arg, _at in pickletools.genops(data):
        name = opcode.name
        count += SET_WEIGHT if name in _SETS else 1
        if name == "MARK":
            marks += 1
            if marks > MAX_MARKS:
                raise BrokenStream("a frame nested too deeply")
        elif name in _CLOSING:
            marks -= 1
        if count > MAX_ELEMENTS:
            break
    return count


def write(stream: IO[bytes], message: Any) -> None:
    stream.write(encode(message))
    stream.flush()


def read(stream: IO[bytes]) -> Any | None:
    """The next message, or None at the end of the stream (blocking; for workers)."""
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        return None
    data = stream.read(frame_length(header))
    return pickle.loads(data)  # from the daemon that started this worker: trusted


def serve_stdio(serve: Callable[[IO[bytes], IO[bytes]], None]) -> None:
    """A worker process's main: requests from stdin, replies on a private copy of stdout;
    anything a library prints goes to stderr."""
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    with contextlib.suppress(BrokenPipeError, KeyboardInterrupt):
        serve(sys.stdin.buffer, replies)


def serve_items(
    handle: Callable[[Any, Any], Any], after: Callable[[Any], None] | None = None
) -> None:
    """A worker process's main: READY, then for each request (head, items) one reply per
    item, `handle(head, item)`, written as soon as it is made (an item's time runs from
    the previous reply), then `after(item)` (once the reply is let go). `handle` answers
    every failure of the item itself; anything it lets through ends the process (the
    daemon replaces it)."""

    def serve(requests: IO[bytes], replies: IO[bytes]) -> None:
        write(replies, READY)
        while (request := read(requests)) is not None:
            head, items = request
            for item in items:
                write(replies, handle(head, item))
                if after is not None:
                    after(item)

    serve_stdio(serve)
