"""What a local model's one process embeds next: its lanes (domain.index_records.EmbedLane,
chosen by the caller). A search's query goes first, always; then a save's texts; then bulk
work. In each lane the users (each knowledge base's embedder) take turns, a slice each, so
one KB's bulk pass shares the process with another's and never holds its saves.

A slice is what the process is sent at once: at most SLICE_TEXTS texts and SLICE_TOKENS
tokens (estimated; a longer text goes alone). A query waits for the slice in flight, about
one text's time, never a batch's.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Collection, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cofferd.domain.index_records import EmbedLane

SLICE_TEXTS = 16
SLICE_TOKENS = 256  # MiniLM reads at most this many of a text; e5 ~0.1-0.4 s of CJK


def estimated_tokens(text: str) -> int:
    """About how many tokens a model reads in `text`: one per character outside ASCII (a
    CJK character is one or two), one per four ASCII characters (English words)."""
    chars = len(text)
    wide = (len(text.encode("utf-8", "surrogatepass")) - chars) // 2  # 3-byte characters
    return wide + (chars - wide) // 4 + 1


def slices(texts: Sequence[str]) -> list[list[str]]:
    """The texts in slices of at most SLICE_TEXTS texts and SLICE_TOKENS tokens."""
    found: list[list[str]] = []
    current: list[str] = []
    tokens = 0
    for text in texts:
        size = estimated_tokens(text)
        if current and (len(current) == SLICE_TEXTS or tokens + size > SLICE_TOKENS):
            found.append(current)
            current, tokens = [], 0
        current.append(text)
        tokens += size
    if current:
        found.append(current)
    return found


@dataclass(eq=False)
class Slice:
    """Texts sent to the process at once, with what it is sent with (`head`) and its
    caller's timeout, and where its reply goes (a caller gone cancels it: not sent)."""

    head: Any
    timeout_s: float
    lane: EmbedLane
    texts: list[str]
    reply: asyncio.Future[Any] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class Lanes:
    """The slices waiting, by lane and, in a lane, by user (in turn)."""

    def __init__(self) -> None:
        self._waiting: dict[EmbedLane, dict[Hashable, deque[Slice]]] = {
            lane: {} for lane in EmbedLane
        }
        self.ready = asyncio.Event()  # set when a slice may be waiting

    def add(self, user: Hashable, pieces: Sequence[Slice]) -> None:
        for piece in pieces:
            self._waiting[piece.lane].setdefault(user, deque()).append(piece)
        self.ready.set()

    def next(self, lanes: Collection[EmbedLane] = tuple(EmbedLane)) -> Slice | None:
        """The next slice to send from `lanes`: the first lane's that has one, from the
        user whose turn it is (then last in that lane's turn); slices whose caller is gone
        are dropped."""
        for lane, users in self._waiting.items():  # in EmbedLane's order
            if lane not in lanes:
                continue
            while users:
                user = next(iter(users))
                queue = users.pop(user)
                while queue and queue[0].reply.done():
                    queue.popleft()
                if not queue:
                    continue
                piece = queue.popleft()
                if queue:
                    users[user] = queue  # last in turn
                return piece
        return None

    def waiting(self) -> list[Slice]:
        return [piece for users in self._waiting.values() for q in users.values() for piece in q]

    def clear(self) -> None:
        for users in self._waiting.values():
            users.clear()
