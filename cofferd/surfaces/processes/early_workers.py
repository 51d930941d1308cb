"""The processes that prepare documents, made here for the daemon and the composition
root alike; a first index's bulk workers started before the daemon imports the rest of
its code.

Over a new index every file of its KBs is to be prepared: the daemon's own imports take
~0.3 s of one core, so the bulk workers, started first, import their code on the other
core meanwhile and are ready when the first files come (Coffer.open warms the same pool
again, which does nothing once its workers run). This module imports no more than the
workers' pool and their entry point.
"""

from __future__ import annotations

import asyncio
import os

from coffer_kernel.locations import Locations
from cofferd.infrastructure.workers.pool import WorkerEntry, WorkerPool
from cofferd.surfaces.processes import prepare_main

SPAWN_TURNS = 100  # turns of the loop allowed for the processes to be started


def default_workers() -> int:
    """One per core this process may run on. They run at a lower CPU priority than the
    daemon (and the express worker that serves saves), so serving and writing go first;
    measured on 2 cores, one fewer left a core idle: 1.2-1.4x slower cold indexing."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on macOS
        return max(1, os.cpu_count() or 1)


def preparing_pool(workers: int) -> WorkerPool:
    """The pool of `workers` bulk processes (and the express one) preparing documents."""
    return WorkerPool(WorkerEntry(prepare_main.__name__, prepare_main.REPLIES), workers)


def first_index(locations: Locations) -> bool:
    """Whether this start makes the index anew over KB folders: no database yet, and
    something in knowledge/ (as Coffer.open finds it: a new database and a KB)."""
    if locations.db_path.exists():
        return False
    try:
        return any(not name.startswith(".") for name in os.listdir(locations.knowledge_root))
    except OSError:  # no knowledge/ yet: a first start, with no KB
        return False


async def started_early(locations: Locations, workers: int) -> WorkerPool | None:
    """The preparing pool with its bulk workers started now, over a first index (None
    otherwise): their processes exist when this returns, and say READY later, whatever
    the loop does meanwhile."""
    if not first_index(locations):
        return None
    pool = preparing_pool(workers)
    pool.warm(pool.size)
    wanted = pool.size + (1 if pool.express else 0)
    for _ in range(SPAWN_TURNS):
        status = pool.status()
        if status["starting"] + status["running"] >= wanted:
            break
        await asyncio.sleep(0)
    return pool
