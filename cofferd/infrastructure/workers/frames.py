"""Messages between the daemon and its worker processes: length-prefixed pickles over pipes.

A request is (head, items): what the job shares (a KB's folder and settings, the model's
settings) and the items to work on; the worker answers each item with one reply, in
order (`serve_items`), after a first READY when it has started.

A reply is unpickled against an explicit list of the classes a reply may hold (the values
workers send back, and the few builtins and date types they are made of), looked up by
their module and name exactly: a worker reads hostile files, so what it sends back never
names code, nor reaches any through an attribute path (`posixpath.os.system`).
"""

from __future__ import annotations

import contextlib
import datetime
import io
import os
import pickle
import struct
import sys
from collections.abc import Callable
from typing import IO, Any

from cofferd.domain.file_records import FileStat
from cofferd.domain.index_records import Converted, DocumentWrite, IndexedChunk
from cofferd.domain.links import Link
from cofferd.domain.models import Document
from cofferd.domain.prepare_jobs import Failed, Gone, Skipped, Unchanged, Unconverted

READY = "ready"
HEADER = struct.Struct(">I")
MAX_FRAME = 1024 * 1024 * 1024  # far beyond any budget: a larger length is a broken stream
REPLY_CLASSES: frozenset[type] = frozenset(
    {
        # what preparing a document answers (domain.prepare_jobs, domain.index_records)
        Gone, Unchanged, Skipped, Unconverted, Failed, DocumentWrite, IndexedChunk,
        Document, Link, FileStat,
        # what converting a document answers (the model's replies are builtins only)
        Converted,
        # builtins pickle names by reference, and the date types frontmatter may hold
        frozenset, set, complex, bytearray, slice, range,
        datetime.date, datetime.datetime, datetime.time, datetime.timedelta, datetime.timezone,
    }
)  # fmt: skip
_ALLOWED = {(cls.__module__, cls.__qualname__): cls for cls in REPLY_CLASSES}


class BrokenStream(Exception):
    """The other side sent something that is not a frame of ours."""


def encode(message: Any) -> bytes:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(data)) + data


def frame_length(header: bytes) -> int:
    (length,) = HEADER.unpack(header)
    if length > MAX_FRAME:
        raise BrokenStream(f"a frame of {length:,} bytes")
    return int(length)


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        found = _ALLOWED.get((module, name))
        if found is None:
            raise BrokenStream(f"a frame naming {module}.{name}"[:200])
        return found


def decode(data: bytes) -> Any:
    try:
        return _Unpickler(io.BytesIO(data)).load()
    except BrokenStream:
        raise
    except Exception as exc:  # whatever the unpickler raises on bytes it cannot read
        raise BrokenStream(f"an unreadable frame ({type(exc).__name__})") from exc


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
