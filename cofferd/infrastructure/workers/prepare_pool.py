"""The Preparer port over worker processes: documents prepared on every core, each within
its time, off the serving loop. Its process (surfaces/processes/prepare_main, a layer
above) is given to it by the composition root, with what that process may answer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import replace
from typing import Any

from cofferd.domain.index_records import DocumentWrite
from cofferd.domain.prepare_jobs import (
    Failed,
    Gone,
    Outcome,
    PrepareItem,
    PrepareSettings,
    Skipped,
    Unchanged,
    Unconverted,
)
from cofferd.infrastructure.files.confinement import Boundary
from cofferd.infrastructure.workers.pool import WorkerEntry, WorkerPool, WorkFailed

# A unit (what one worker gets at once) ends at whichever comes first: small units keep
# every worker busy and let a save in between.
UNIT_FILES = 128
UNIT_BYTES = 1024 * 1024
# A unit's outcomes come back together, once it is done: the first units are small (their
# size doubles from this up to UNIT_BYTES), so the writer has work within a few files
# rather than after a megabyte of them.
FIRST_UNIT_BYTES = 32 * 1024
OUTCOMES = (Gone, Unchanged, Skipped, Unconverted, DocumentWrite)


class ProcessPreparer:
    def __init__(self, boundary: Boundary, workers: int, *, entry: WorkerEntry) -> None:
        self.boundary = boundary
        self.pool = WorkerPool(entry, workers)

    def start(self) -> None:
        self.pool.start()

    def warm(self) -> None:
        """Every bulk worker started now: a pass that prepares every file is on its way."""
        self.pool.warm(self.pool.size)

    async def close(self) -> None:
        await self.pool.close()

    def status(self) -> dict[str, Any]:
        return self.pool.status()

    async def prepare(
        self,
        kb: str,
        settings: PrepareSettings,
        items: Sequence[PrepareItem],
        *,
        interactive: bool,
    ) -> AsyncIterator[Outcome]:
        locations = self.boundary.locations
        derived, home = str(locations.derived_dir(kb)), str(locations.home)
        # workers read below the root checked now
        head = (str(self.boundary.root(kb)), replace(settings, derived=derived, data_home=home))
        budget = settings.budget.prepare_s
        units = list(_units(items)) if interactive else await asyncio.to_thread(list, _units(items))
        async for item, reply in self.pool.run(
            head, units, interactive=interactive, timeout_of=lambda _: budget
        ):
            if isinstance(reply, WorkFailed):
                yield Failed(
                    item.path,
                    f"{reply.reason} to prepare" if reply.cause == "time" else reply.reason,
                    lasting=reply.cause != "outside",
                )
            elif isinstance(reply, OUTCOMES) and reply.path == item.path:
                yield reply
            else:
                yield Failed(item.path, "its worker process answered out of turn")


def _units(items: Sequence[PrepareItem]) -> Iterator[list[PrepareItem]]:
    unit: list[PrepareItem] = []
    size = 0
    limit = FIRST_UNIT_BYTES
    for item in items:
        if unit and (len(unit) >= UNIT_FILES or size + item.size > limit):
            yield unit
            unit, size = [], 0
            limit = min(2 * limit, UNIT_BYTES)
        unit.append(item)
        size += item.size
    if unit:
        yield unit
