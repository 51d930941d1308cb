"""Progress of long work: the board `status` reads while indexing and embedding run, and the
line cofferd draws on a terminal from it."""

from __future__ import annotations

import asyncio
import io
import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest

from coffer_kernel.durations import rate, time_left, two_figures
from cofferd.application.indexing.progress import Progress, ProgressBoard
from cofferd.domain.models import KnowledgeBase
from cofferd.surfaces.core import Coffer
from cofferd.surfaces.progress_bar import CLEAR, ProgressBar, render
from tests.support.daemon import Daemon
from tests.support.fake_embeddings import FakeEmbeddings
from tests.support.helpers import write


async def watch(coffer: Coffer, kb: str, work: Any) -> list[dict[str, Any]]:
    """Run `work`, noting every progress `status` would have shown meanwhile."""
    seen: list[dict[str, Any]] = []
    task = asyncio.ensure_future(work)
    while not task.done():
        progress = coffer.progress.get(kb)
        if progress is not None:
            seen.append(progress.as_dict())
        await asyncio.sleep(0)
    await task
    return seen


async def test_a_reconcile_shows_its_progress_then_none(coffer: Coffer, kb: KnowledgeBase) -> None:
    for i in range(1200):  # three batches
        write(coffer.locations.docs_dir(kb.name) / f"n{i:04}.md", f"# Note {i}\n\nword{i}")
    seen = await watch(coffer, kb.name, coffer.reindexer.reconcile(kb))
    assert seen and {s["phase"] for s in seen} == {"indexing"}
    assert {s["total"] for s in seen} == {1200}
    done = [s["done"] for s in seen]
    assert done == sorted(done) and done[0] < 1200
    assert all(s["rate_per_s"] >= 0 and s["started_at"] for s in seen)
    assert all((s["eta_s"] is None) == (s["done"] == 0) for s in seen)
    assert coffer.progress.get(kb.name) is None


@pytest.fixture
async def server() -> AsyncIterator[FakeEmbeddings]:
    s = await FakeEmbeddings().start()
    yield s
    await s.stop()


async def test_embedding_catch_up_shows_its_progress(
    coffer: Coffer, server: FakeEmbeddings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COFFER_TEST_EMBED_KEY", "sk-test")
    kb = await coffer.kbs.create("vec", server.config())
    for i in range(40):  # three batches of the queue
        write(coffer.locations.docs_dir("vec") / f"n{i}.md", f"# Note {i}\n\nword{i}")
    await coffer.reindexer.reconcile(kb)
    seen = await watch(coffer, kb.name, coffer.embeddings.drain(kb.name))
    assert seen and {(s["phase"], s["unit"], s["total"]) for s in seen} == {
        ("embedding", "chunks", 40)  # a chunk a note
    }
    assert max(s["done"] for s in seen) >= 32
    assert coffer.progress.get(kb.name) is None


def test_the_terminal_line_has_counts_and_a_rate() -> None:
    board = ProgressBoard()
    progress = board.start("notes", "indexing", 4000)
    progress.started -= 2.0  # two seconds in
    progress.advance(1000)
    line = render([progress], 200)
    assert line.startswith("cofferd: notes indexing [#####...............] 1,000/4,000 files, ")
    assert line.endswith("/s, 6 s left") and len(render([progress], 30)) == 30
    assert progress.as_dict()["eta_s"] == pytest.approx(6.0, abs=0.2)
    assert progress.as_dict()["unit"] == "files"

    stream = io.StringIO()
    bar = ProgressBar(board, stream)
    bar.draw()
    assert stream.getvalue().startswith(CLEAR + "cofferd: notes indexing [#####")
    assert "1,000/4,000" in stream.getvalue() and bar.shown
    board.finish(progress)
    bar.draw()
    assert stream.getvalue().endswith(CLEAR) and not bar.shown


def test_a_daemon_not_on_a_terminal_draws_no_bar(shared_daemon: Daemon) -> None:
    shared_daemon.client.get("/api/v1/status")
    assert "\x1b[K" not in shared_daemon.log.read_text(errors="replace")


def test_time_left_reads_as_people_say_it() -> None:
    assert [time_left(s) for s in (4.2, 59.4, 61, 725, 3569, 3600, 11_100)] == [
        "4 s", "59 s", "1 min", "12 min", "59 min", "1 h 00 min", "3 h 05 min",
    ]  # fmt: skip


def test_the_rate_moves_with_recent_work_and_has_two_figures() -> None:
    progress = Progress("kb", "embedding", 1000, started=0.0)
    for t in range(1, 11):  # 10 a second for 10 s
        progress.advance(10, now=float(t))
    assert progress.rate_per_s() == 10.0
    for t in range(11, 131):  # then 1 a second for two minutes: the rate follows it
        progress.advance(1, now=float(t))
    assert 1.0 <= progress.rate_per_s() < 1.5
    progress.advance(1, now=132.0)  # 0.5 a second: still two figures, never more
    assert progress.rate_per_s() == float(f"{progress.rate_per_s():.2g}")
    assert two_figures(0.021347) == 0.021 and two_figures(1234.5) == 1200.0
    assert [rate(x) for x in (0.0, 0.021347, 4.56, 12.3, 1234.5)] == [
        "0", "0.021", "4.6", "12", "1,200",
    ]  # fmt: skip


def test_the_time_left_counts_down_while_a_batch_runs() -> None:
    """16 of 61 done, then a batch that takes long: the estimate counts down with the
    time that passes, never grows, until the batch ends (then it is estimated again)."""
    progress = Progress("kb", "embedding", 61, started=0.0)
    for t in (20.0, 40.0, 60.0, 80.0):  # four a batch, every 20 s: 0.2 a second
        progress.advance(4, now=t)
    assert progress.rate_per_s() == 0.2
    at_completion = progress.eta_s(now=80.0)
    assert at_completion == pytest.approx(45 / 0.2)
    waits = [progress.eta_s(now=80.0 + s) for s in range(0, 400, 10)]
    assert all(later <= earlier for earlier, later in itertools.pairwise(waits))
    assert waits[1] == pytest.approx(at_completion - 10)
    assert waits[-1] == 0.0  # past its own estimate, it says so rather than growing
    progress.advance(4, now=480.0)  # the slow batch ends: now the estimate may move
    assert progress.eta_s(now=480.0) > 0.0
