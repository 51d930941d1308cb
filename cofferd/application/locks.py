"""Per-knowledge-base locks: writes to one KB never interleave; different KBs run side by side."""

from __future__ import annotations

import asyncio
from collections import defaultdict


class KBLocks:
    def __init__(self) -> None:
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)

    def __call__(self, kb: str) -> asyncio.Lock:
        return self._locks[kb]
