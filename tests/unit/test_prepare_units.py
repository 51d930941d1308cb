"""How a pass's files are cut into units for the worker processes and into batches for the
writer: the first units small (a unit's outcomes come back together, once it is done), so
the writer starts within a few files; a batch written early while the writer is idle."""

from __future__ import annotations

from itertools import pairwise

from cofferd.application.indexing import reindexer
from cofferd.domain.prepare_jobs import PrepareItem
from cofferd.infrastructure.workers import prepare_pool


def test_the_first_units_are_small_and_grow_to_the_full_size() -> None:
    items = [PrepareItem(f"f{i:04}.md", 10 * 1024, None) for i in range(1000)]
    units = list(prepare_pool._units(items))
    assert [item for unit in units for item in unit] == items  # each once, in order
    sizes = [sum(item.size for item in unit) for unit in units]
    assert sizes[0] <= prepare_pool.FIRST_UNIT_BYTES
    assert all(later <= 2 * earlier + 10 * 1024 for earlier, later in pairwise(sizes))
    assert max(sizes) <= prepare_pool.UNIT_BYTES
    assert max(sizes) > prepare_pool.UNIT_BYTES // 2
    assert all(len(unit) <= prepare_pool.UNIT_FILES for unit in units)


def test_a_batch_is_written_early_while_the_writer_is_idle() -> None:
    batch = reindexer._Batch(bytes=reindexer.IDLE_BATCH_BYTES)  # the text it holds
    assert batch.full(writer_idle=True)
    assert not batch.full(writer_idle=False)
    batch.bytes = reindexer.BATCH_BYTES
    assert batch.full(writer_idle=False)
