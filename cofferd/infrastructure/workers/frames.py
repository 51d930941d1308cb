"""Messages between the daemon and its worker processes: length-prefixed pickles over pipes.

A reply is unpickled with only the classes Coffer's domain defines (plus the builtins
pickle needs): a worker reads hostile files, so what it sends back is never trusted to
name arbitrary code.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import struct
import sys
from collections.abc import Callable
from typing import IO, Any

HEADER = struct.Struct(">I")
MAX_FRAME = 1024 * 1024 * 1024  # far beyond any budget: a larger length is a broken stream
ALLOWED_MODULES = ("cofferd.domain.",)
ALLOWED_BUILTINS = frozenset({"frozenset", "set", "complex", "bytearray", "slice", "range"})


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
        if module.startswith(ALLOWED_MODULES) or (
            module == "builtins" and name in ALLOWED_BUILTINS
        ):
            return super().find_class(module, name)
        raise BrokenStream(f"a frame names {module}.{name}")


def decode(data: bytes) -> Any:
    try:
        return _Unpickler(io.BytesIO(data)).load()
    except BrokenStream:
        raise
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError) as exc:
        raise BrokenStream(f"an unreadable frame: {exc}") from exc


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
