"""The worker pool with real processes (tests/support/pool_worker.py): every item answered once,
budgets enforced by replacing the worker, saves ahead of bulk work."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import itertools
import logging
import os
import random
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cofferd.domain.errors import EngineUnavailable
from cofferd.domain.file_records import FileStat
from cofferd.domain.models import Document
from cofferd.infrastructure.workers import frames
from cofferd.infrastructure.workers import pool as pool_module
from cofferd.infrastructure.workers import process as process_module
from cofferd.infrastructure.workers.pool import WorkerEntry, WorkerPool, WorkFailed
from cofferd.surfaces.processes import prepare_main
from tests.support.pool_worker import RAW as HOSTILE

MODULE = WorkerEntry("tests.support.pool_worker", frames.Replies(frames.DATE_TYPES))
# a worker's pipes are closed by the pool, however its end comes: none is left for the
# garbage collector to close after the loop is gone ("Event loop is closed")
pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")


@pytest.fixture
async def pool() -> AsyncIterator[WorkerPool]:
    p = WorkerPool(MODULE, 2, idle_s=60)
    p.start()
    yield p
    await p.close()


async def run(
    pool: WorkerPool, units: list[list[Any]], interactive: bool = False, timeout: float = 10
) -> list[tuple[Any, Any]]:
    return [
        pair
        async for pair in pool.run(
            "head", units, interactive=interactive, timeout_of=lambda _: timeout
        )
    ]


async def test_every_item_is_answered_exactly_once() -> None:
    pool = WorkerPool(MODULE, 2, idle_s=0.05)  # bulk workers start afresh in every round
    pool.start()
    try:
        for _ in range(3):
            jobs = [
                [[("echo", (j, u, i)) for i in range(n)] for u, n in enumerate((1, 7, 32, 3))]
                for j in range(6)
            ]
            answers = await asyncio.gather(
                *(run(pool, units, j % 2 == 0) for j, units in enumerate(jobs))
            )
            for units, pairs in zip(jobs, answers, strict=True):
                asked = [item for unit in units for item in unit]
                assert sorted(item for item, _ in pairs) == sorted(asked)
                assert all(reply[0] == "done" and reply[1] == item for item, reply in pairs)
            await asyncio.sleep(0.3)
    finally:
        await pool.close()


async def test_an_item_over_its_time_fails_and_its_worker_is_replaced(pool: WorkerPool) -> None:
    unit = [("echo", 1), ("sleep", 30), ("echo", 2), ("echo", 3)]
    started = time.monotonic()
    pairs = dict(await run(pool, [unit], timeout=0.5))
    assert time.monotonic() - started < 10
    assert isinstance(pairs[("sleep", 30)], WorkFailed)
    assert "longer than 0.5 s" in pairs[("sleep", 30)].reason
    assert pairs[("echo", 1)][2] != pairs[("echo", 3)][2]  # answered by a new process
    assert pool.state.replaced_over_time == 1
    assert [r[0] for i, r in pairs.items() if i != ("sleep", 30)] == ["done"] * 3


async def test_a_worker_that_dies_is_replaced_and_its_item_tried_once_more(
    pool: WorkerPool, tmp_path: Path
) -> None:
    marker = str(tmp_path / "died")
    pairs = dict(await run(pool, [[("echo", 1), ("die-once", marker), ("echo", 2)]]))
    assert pairs[("die-once", marker)][0] == "done"  # the second try worked
    pairs = dict(await run(pool, [[("echo", 3), ("die", 0), ("echo", 4)]]))
    assert isinstance(pairs[("die", 0)], WorkFailed) and "died" in pairs[("die", 0)].reason
    assert pairs[("echo", 3)][0] == pairs[("echo", 4)][0] == "done"


async def test_a_reply_that_names_code_is_refused(pool: WorkerPool) -> None:
    pairs = dict(await run(pool, [[("hostile", 0), ("echo", 5)]]))
    assert isinstance(pairs[("hostile", 0)], WorkFailed)
    assert pairs[("echo", 5)][0] == "done"


async def test_a_save_is_served_while_every_bulk_worker_is_busy(pool: WorkerPool) -> None:
    bulk = asyncio.create_task(run(pool, [[("sleep", 2)], [("sleep", 2)], [("sleep", 2)]]))
    await asyncio.sleep(0.5)  # both bulk workers are asleep now
    started = time.monotonic()
    (pair,) = await run(pool, [[("echo", "save")]], interactive=True)
    assert pair[1][0] == "done" and time.monotonic() - started < 1.0
    assert not bulk.done()
    await bulk


async def test_bulk_workers_stop_when_idle_and_one_stays() -> None:
    pool = WorkerPool(MODULE, 2, idle_s=0.3)
    pool.start()
    try:
        await run(pool, [[("sleep", 0.2)], [("sleep", 0.2)]])
        assert pool.status()["running"] >= 2
        deadline = time.monotonic() + 10
        while pool.status()["running"] > 1 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        (pid,) = pool.status()["pids"]  # the express worker, kept for saves
        os.kill(pid, 0)
    finally:
        await pool.close()
    assert pool.status()["running"] == 0


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("cofferd.domain.links", "re.compile"),  # an attribute path through a domain module
        ("cofferd.domain.models", "os.system"),
        ("cofferd.domain.file_records", "Path.unlink"),
        ("posixpath", "os.getpid"),
        ("builtins", "eval"),
        ("cofferd.domain.errors", "CofferError"),  # domain, but no reply holds one
    ],
)
def test_a_frame_may_name_only_the_classes_a_reply_holds(module: str, name: str) -> None:
    # protocol 4's STACK_GLOBAL: the module and the (dotted) name, then the call of it
    data = (
        b"\x80\x04"
        + b"\x8c" + bytes([len(module)]) + module.encode()
        + b"\x8c" + bytes([len(name)]) + name.encode()
        + b"\x93)R."
    )  # fmt: skip
    with pytest.raises(frames.BrokenStream, match="naming"):
        frames.decode(data, prepare_main.REPLIES)


def test_every_reply_a_worker_sends_is_read_back() -> None:
    import datetime as dt

    from cofferd.domain.prepare_jobs import Skipped

    reply = [
        Skipped("a.md", FileStat(1, 2), "why"), {"when": dt.date(2024, 1, 2)}, {1, 2},
        frozenset({3}), bytearray(b"x"),  # (made by pickle's own opcodes, from the frame)
    ]  # fmt: skip
    assert frames.decode(_frame(reply), prepare_main.REPLIES) == reply


@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        # bytearray(2**33): 34 bytes that once decoded to 8 GiB
        (HOSTILE["bytearray"], "naming builtins.bytearray"),
        (HOSTILE["range"], "naming builtins.range"),
        (HOSTILE["set"], "naming builtins.set"),
        (HOSTILE["deep"], "nested too deeply"),
        (HOSTILE["sets"], "over 2,000,000 objects"),
        (frames.HEADER.pack(1), "a frame of"),  # longer than its pool allows
    ],
)
def test_a_reply_that_would_build_more_than_its_budget_is_refused_fast(
    frame: bytes, reason: str
) -> None:
    replies = frames.Replies(prepare_main.REPLIES.classes, max_bytes=4 * 1024 * 1024)
    if reason == "a frame of":
        frame = b"\x00" * (replies.max_bytes + 1)
    started = time.monotonic()
    with pytest.raises(frames.BrokenStream, match=reason):
        frames.decode(frame, replies)
    assert time.monotonic() - started < 2


async def test_a_hostile_reply_never_holds_the_serving_loop(pool: WorkerPool) -> None:
    """A reply that counts as many objects as it may is decoded off the loop: the loop
    answers every tick meanwhile (a daemon's /health)."""
    lags: list[float] = []

    async def tick() -> None:
        while True:
            started = time.monotonic()
            await asyncio.sleep(0.01)
            lags.append(time.monotonic() - started)

    ticker = asyncio.create_task(tick())
    try:
        unit = [("echo", 1), ("sets", 0), ("deep", 0), ("bytearray", 0), ("echo", 2)]
        pairs = dict(await asyncio.wait_for(run(pool, [unit], timeout=10), 60))
    finally:
        ticker.cancel()
    assert all(isinstance(pairs[(bad, 0)], WorkFailed) for bad in ("sets", "deep", "bytearray"))
    assert pairs[("echo", 1)][0] == pairs[("echo", 2)][0] == "done"
    assert max(lags) < 0.5, max(lags)


async def test_a_slot_that_fails_unforeseen_answers_every_item_and_goes_on(
    pool: WorkerPool,
) -> None:
    """A unit whose message cannot even be sent (here: a head pickle refuses) fails its
    items with a reason; the slot and the pass go on (it once waited for ever)."""

    def unsendable() -> None: ...

    items = [("echo", n) for n in range(3)]
    pairs = await asyncio.wait_for(
        _collect(pool.run(unsendable, [items], interactive=True, timeout_of=lambda _: 5)), 30
    )
    assert sorted(item for item, _ in pairs) == sorted(items)
    assert all(isinstance(reply, WorkFailed) for _, reply in pairs)
    assert [reply[:2] for _, reply in await run(pool, [[("echo", 9)]])] == [("done", ("echo", 9))]


async def _collect(pairs: AsyncIterator[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    return [pair async for pair in pairs]


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (("die", 0), "died"),
        (("sleep", 30), "longer than 3 s"),
        (("garbage", 0), "sent an unreadable frame"),
        (("overflow", 0), "sent an unreadable frame (OverflowError)"),
        (("huge", 0), "sent a frame of"),
        (("hostile", 0), "sent a frame naming posix.system"),
        (("dotted", 0), "sent a frame naming cofferd.domain.links.re.compile"),
    ],
)
async def test_a_worker_failing_in_any_way_costs_its_item_with_a_reason(
    pool: WorkerPool, bad: tuple[str, int], reason: str
) -> None:
    """Crash, hang past its time, garbage, a frame no reply may be, an attribute path: the
    item fails with its reason, the others are answered, the pass ends, the pool goes on."""
    unit = [("echo", 1), bad, ("echo", 2)]
    # 3 s an item: a worker started again after the bad one answers within it on a loaded
    # machine (1 s was not always enough there)
    pairs = dict(await asyncio.wait_for(run(pool, [unit], timeout=3), 30))
    assert sorted(pairs) == sorted(unit)
    failed = pairs[bad]
    assert isinstance(failed, WorkFailed) and reason in failed.reason, failed
    assert pairs[("echo", 1)][0] == pairs[("echo", 2)][0] == "done"
    assert [r[0] for _, r in await run(pool, [[("echo", 3)]], interactive=True)] == ["done"]


async def test_closing_the_pool_ends_every_job_it_holds(pool: WorkerPool) -> None:
    """A job in flight, or waiting for a worker, when the pool closes ends at once (a
    daemon stopping once left its callers waiting for ever)."""
    running = asyncio.ensure_future(run(pool, [[("sleep", 30)]], interactive=True))
    waiting = asyncio.ensure_future(run(pool, [[("sleep", 30)]] * 8))
    while pool.state.busy < 2:  # polled: both started
        await asyncio.sleep(0.02)
    await pool.close()
    for job in (running, waiting):
        with pytest.raises(EngineUnavailable, match="stopping"):
            await asyncio.wait_for(job, 10)
    assert pool.status()["running"] == 0
    await pool.close()  # twice is once


async def test_a_pool_that_keeps_no_worker_lets_every_process_go() -> None:
    """The converter's and the model's pools: nothing stays once idle."""
    for express in (True, False):
        pool = WorkerPool(MODULE, 1, idle_s=0.2, express=express, keep_express=False)
        try:
            pairs = await run(pool, [[("echo", 1)]], interactive=True)  # starts with its job
            assert pairs[0][1][0] == "done"
            deadline = time.monotonic() + 10
            while pool.status()["running"] and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert pool.status()["running"] == 0
            assert (await run(pool, [[("echo", 2)]]))[0][1][0] == "done"  # and again
        finally:
            await pool.close()


_LAYERS = {"cofferd.domain": 0, "cofferd.application": 1, "cofferd.infrastructure": 1,
           "cofferd.surfaces": 2}  # fmt: skip


def _place(module: str) -> tuple[int, str]:
    """A cofferd module's layer, and its family (`cofferd.infrastructure.models`)."""
    layer = next(n for prefix, n in _LAYERS.items() if module.startswith(prefix + "."))
    return layer, ".".join(module.split(".")[:3])


def _entries() -> list[tuple[str, str]]:
    """(owner, entry module) for every WorkerEntry made in cofferd: its module must be an
    imported module's `__name__` (an arrow import-linter sees), never a string."""
    import ast

    found = []
    for path in sorted(Path("cofferd").rglob("*.py")):
        owner = ".".join(path.with_suffix("").parts)
        tree = ast.parse(path.read_text())
        imported = {
            alias.asname or alias.name: f"{node.module}.{alias.name}"
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module
            for alias in node.names
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "WorkerEntry":
                module = (
                    node.args[0]
                    if node.args
                    else next(k.value for k in node.keywords if k.arg == "module")
                )
                assert isinstance(module, ast.Attribute) and module.attr == "__name__", (
                    f"{owner}: a WorkerEntry's module is named by a string"
                )
                assert isinstance(module.value, ast.Name) and module.value.id in imported, owner
                found.append((owner, imported[module.value.id]))
    return found


def test_every_process_coffer_starts_is_named_by_its_owner_at_or_above_its_layer() -> None:
    """The worker mechanism knows no job: each pool's entry point is imported by its owner
    (the composition root for documents: surfaces/processes is a layer above the pool),
    so the import graph sees the arrow, and it points down or within a family."""
    entries = _entries()
    assert {entry for _, entry in entries} == {
        "cofferd.surfaces.processes.prepare_main",
        "cofferd.infrastructure.conversion.convert_main",
        "cofferd.infrastructure.models.model_main",
    }
    for owner, entry in entries:
        assert importlib.util.find_spec(entry) is not None
        (owner_layer, owner_family), (entry_layer, entry_family) = _place(owner), _place(entry)
        root = owner == "cofferd.surfaces.core"  # the composition root, beside surfaces
        assert root or owner_family == entry_family or owner_layer > entry_layer, (owner, entry)


def test_each_pool_answers_with_its_own_replies_only() -> None:
    """A converter's reply of a DocumentWrite is refused; the model's may name no class."""
    from cofferd.domain.index_records import Converted, DocumentWrite
    from cofferd.infrastructure.conversion.converter import ConverterPool
    from cofferd.infrastructure.models import model_process

    write = DocumentWrite(
        Document("id", "r", "a.md", "t", None, "0" * 64, "edited", {}, "", ""),
        FileStat(1, 2), "c", [], "kb_document_ingested",
    )  # fmt: skip
    converted = Converted("# x", None)
    converter = ConverterPool().pool.entry.replies
    model = model_process.PROCESS.replies
    prepare = prepare_main.REPLIES
    assert frames.decode(_frame(converted), converter) == converted
    assert frames.decode(_frame(write), prepare) == write
    for reply, replies in [(write, converter), (converted, prepare), (converted, model)]:
        with pytest.raises(frames.BrokenStream, match="naming"):
            frames.decode(_frame(reply), replies)


def _frame(message: Any) -> bytes:
    return frames.encode(message)[frames.HEADER.size :]


@pytest.fixture
def quick_restarts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pool_module, "RESTART_S", 0.02)
    monkeypatch.setattr(process_module, "START_TIMEOUT_S", 1.0)


async def test_a_worker_that_can_never_start_ends_its_job_with_the_reason(
    quick_restarts: None,
) -> None:
    """Whatever stops every start (here its environment cannot be made) ends the job that
    waits for it once START_TRIES starts in a row have failed, with why; the pool still
    closes."""
    tries = 0

    def environment() -> dict[str, str]:
        nonlocal tries
        tries += 1
        raise RuntimeError("no scratch folder")

    pool = WorkerPool(MODULE, 1, express=False, environment=environment)
    try:
        with pytest.raises(EngineUnavailable, match="RuntimeError: no scratch folder"):
            await asyncio.wait_for(run(pool, [[("echo", 1)]]), 30)
        assert tries == pool_module.START_TRIES
    finally:
        await pool.close()


async def test_a_start_that_fails_or_freezes_is_a_worker_to_start_again(
    quick_restarts: None, tmp_path: Path
) -> None:
    """A start that fails (its environment, once), or a worker frozen before it says
    ready (once), costs the job nothing: every item is answered (it once ended the pass:
    "could not start", 0 of 3000 files)."""
    failures = [RuntimeError("a start that fails")]

    def environment() -> None:
        if failures:
            raise failures.pop()

    frozen = str(tmp_path / "frozen-once")
    pool = WorkerPool(MODULE, 2, express=False, environment=environment, args=(frozen,))
    try:
        units = [[("echo", n)] for n in range(6)]
        pairs = await asyncio.wait_for(run(pool, units), 60)
        assert sorted(item for item, _ in pairs) == [("echo", n) for n in range(6)]
        assert all(reply[0] == "done" for _, reply in pairs)
        assert Path(frozen).exists() and not failures
    finally:
        await pool.close()


async def test_a_worker_killed_while_it_starts_is_reaped_by_asyncio_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Workers killed from outside before they say ready: each start fails with why, and
    asyncio's child watcher reaps each one (a kill that polled first reaped some itself:
    the watcher then logged "Unknown child process pid" and reported 255, a crash)."""
    caplog.set_level(logging.WARNING, logger="asyncio")
    for n in range(60):  # (the race it shows is lost about once in 30)
        frozen = tmp_path / f"frozen-{n}"  # the worker sleeps before it says ready
        start = asyncio.ensure_future(process_module.Worker.start(MODULE, args=(str(frozen),)))
        while not frozen.exists():
            await asyncio.sleep(0.002)
        found = subprocess.run(["pgrep", "-f", str(frozen)], capture_output=True, text=True)
        for pid in found.stdout.split():
            os.kill(int(pid), signal.SIGKILL)
        with pytest.raises(EngineUnavailable, match="could not start"):
            await asyncio.wait_for(start, 30)
    assert "Unknown child process pid" not in caplog.text


async def _busy_pid(pool: WorkerPool) -> int:
    while not pool.state.busy:
        await asyncio.sleep(0.01)
    (pid,) = pool.status()["pids"]
    return pid


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGSTOP])
async def test_a_worker_killed_or_stopped_from_outside_blames_no_item(
    quick_restarts: None, how: signal.Signals
) -> None:
    """A worker killed (the OOM killer, kill -9) or stopped (SIGSTOP) from outside
    mid-unit: its items are all answered by the next worker, none failed."""
    pool = WorkerPool(MODULE, 1, express=False, idle_s=60)
    try:
        unit = [("sleep", 0.5), ("echo", 1), ("echo", 2)]
        job = asyncio.ensure_future(run(pool, [unit], timeout=2))
        for _ in range(2 if how == signal.SIGKILL else 1):  # twice: the same item each time
            pid = await _busy_pid(pool)
            os.kill(pid, how)
            while pid in pool.status()["pids"]:
                await asyncio.sleep(0.01)
        pairs = dict(await asyncio.wait_for(job, 30))
        assert [reply[0] for reply in pairs.values()] == ["done"] * 3, pairs
    finally:
        await pool.close()


async def test_only_an_item_that_crashes_fresh_workers_alone_is_blamed(
    quick_restarts: None, tmp_path: Path
) -> None:
    """A crash on an item among others is no evidence: the item goes alone to a fresh
    worker; only when it crashes that one too is it blamed (a poison pill). An item that
    crashed once, by chance, is answered."""
    marker = str(tmp_path / "died")
    unit = [("echo", 1), ("die-once", marker), ("echo", 2), ("die", 0), ("echo", 3)]
    pool = WorkerPool(MODULE, 1, express=False, idle_s=60)
    try:
        pairs = dict(await asyncio.wait_for(run(pool, [unit]), 60))
    finally:
        await pool.close()
    assert isinstance(pairs[("die", 0)], WorkFailed)
    assert [pairs[item][0] for item in unit if item != ("die", 0)] == ["done"] * 4


async def test_a_save_goes_to_the_running_express_worker_not_a_new_one() -> None:
    """A bulk slot with no worker does not start one for a job a running worker, idle, can
    take: a save (or a converted document indexed again) waits for no process start."""
    pool = WorkerPool(MODULE, 2, idle_s=60)
    pool.start()
    try:
        deadline = time.monotonic() + 10
        while pool.status()["running"] < 1 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        for n in range(5):
            (pair,) = await run(pool, [[("echo", n)]], interactive=True)
            assert pair[1][0] == "done"
        assert pool.state.started == 1  # the express worker only
    finally:
        await pool.close()


def _nices(pid: int) -> set[int]:
    """The niceness of every thread of a process."""
    tasks = Path(f"/proc/{pid}/task")
    return {
        int((tasks / tid / "stat").read_text().rsplit(")", 1)[1].split()[16])
        for tid in os.listdir(tasks)
    }


async def test_a_warmed_worker_starts_at_full_priority_and_is_lowered_after_its_first_unit() -> (
    None
):
    """The converter's pool: a bulk worker started ahead of its work (`warm`) waits at full
    priority, takes its first unit so, then yields the CPU for the rest of the backlog."""
    pool = WorkerPool(
        MODULE, 1, idle_s=60, express=False, keep_express=False, first_at_full_priority=True
    )
    try:
        pool.warm()
        deadline = time.monotonic() + 10
        while not pool.status()["running"] and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        (pid,) = pool.status()["pids"]
        assert _nices(pid) == {0}
        assert (await run(pool, [[("echo", 1)]]))[0][1][0] == "done"
        assert _nices(pid) == {10}
        assert (await run(pool, [[("echo", 2)]]))[0][1][0] == "done"
        assert pool.status()["pids"] == [pid] and pool.state.started == 1
    finally:
        await pool.close()


def _dead(pid: int) -> bool:
    """Whether process `pid` has ended (gone, or a zombie not reaped yet); a stopped one lives."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return True
    return stat.rsplit(b")", 1)[-1].split()[:1] == [b"Z"]


async def test_no_kill_stop_or_failed_start_leaves_a_job_unanswered(quick_restarts: None) -> None:
    """Saves and bulk jobs while workers are killed (idle or busy), stopped for a while and
    starts fail: every job ends, each item answered once, and no dead worker is listed as
    running for long. (A save once waited for ever: the express worker had died while
    idle, unnoticed; a bulk slot took the save, its start failed, it put the unit back
    without waking anyone and left it to the express slot, "waiting" for ever.)"""
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    starts = itertools.count()

    def environment() -> None:
        if next(starts) % 3 == 2:  # (never START_TRIES in a row: no job may fail for it)
            raise RuntimeError("a start that fails")

    pool = WorkerPool(MODULE, 2, idle_s=60, environment=environment)
    pool.start()
    loop = asyncio.get_running_loop()
    listed_dead: dict[int, float] = {}  # pid: since when the pool lists it, dead
    longest = 0.0

    def resume(pid: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)

    async def havoc() -> None:
        nonlocal longest
        while True:
            await asyncio.sleep(rng.uniform(0.02, 0.2))
            pids = pool.status()["pids"]
            now = time.monotonic()
            for pid in list(listed_dead):
                if pid not in pids:
                    del listed_dead[pid]
            for pid in pids:
                if _dead(pid):
                    longest = max(longest, now - listed_dead.setdefault(pid, now))
            if pids and rng.random() < 0.5:
                pid = rng.choice(pids)
                how = rng.choice([signal.SIGKILL, signal.SIGKILL, signal.SIGSTOP])
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, how)
                if how == signal.SIGSTOP:
                    loop.call_later(rng.uniform(0.05, 0.5), resume, pid)

    async def job(n: int, interactive: bool) -> None:
        units = [[("echo", (n, u, i)) for i in range(2)] for u in range(1 if interactive else 4)]
        units[0].append(("sleep", 0.02))
        pairs = await run(pool, units, interactive, timeout=1)
        asked = sorted(item for unit in units for item in unit)
        assert sorted(item for item, _ in pairs) == asked, f"seed {seed}"
        assert all(isinstance(r, WorkFailed) or r[0] == "done" for _, r in pairs)

    chaos = asyncio.ensure_future(havoc())
    try:
        for n in range(30):
            jobs = [job(n * 10 + k, interactive=k > 0) for k in range(rng.randint(1, 3))]
            try:
                await asyncio.wait_for(asyncio.gather(*jobs), 20)
            except TimeoutError:
                pytest.fail(f"a job was never answered (round {n}, seed {seed}): {pool.status()}")
            assert longest < 1, f"a dead worker was listed for {longest:.1f} s (seed {seed})"
            # idle: workers die waiting too, now and then with nothing to come for a while
            await asyncio.sleep(rng.uniform(0, 0.3) if rng.random() < 0.85 else 1.5)
    finally:
        chaos.cancel()
        await pool.close()


async def test_warm_starts_as_many_bulk_workers_as_asked_before_any_work() -> None:
    """A pass that prepares every file is on its way (a new index): every bulk worker starts
    at once, beside the rest of the start, not when the first unit comes."""
    pool = WorkerPool(MODULE, 2, idle_s=60)
    try:
        pool.start()
        pool.warm(2)
        deadline = time.monotonic() + 10
        while pool.status()["running"] < 3 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert pool.status()["running"] == 3  # the express worker and both bulk ones
        assert pool.state.started == 3
        assert (await run(pool, [[("echo", 1)], [("echo", 2)]]))[0][1][0] == "done"
        assert pool.state.started == 3  # the work went to the workers started
    finally:
        await pool.close()
