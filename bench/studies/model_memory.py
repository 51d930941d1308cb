"""Issue 22: what cofferd holds in memory with the bundled local model (all-MiniLM-L6-v2).

A real `cofferd` (this venv's, running the code of `--repo`; `--old DIR` runs another
checkout too, in the same run, rounds alternated) on a scratch data home whose KB `vault`
holds 100 notes (SciFact abstracts, ~250 tokens each: the model reads 256). In order:

1. keyword only: indexed, idle (no model yet);
2. vectors turned on with the bundled model (`embedding.provider: local`): sampled while
   every note is embedded (the peak), then idle: "after embedding everything"; the
   embedding rate is chunks over the time from the settings change to none pending;
3. the daemon restarted: idle after its start-up reconcile;
4. a burst of hybrid searches (SciFact claims, one after another): sampled during;
5. idle again for `--settle` s: settled; the daemon's VmHWM is its peak since the restart;
6. with `--idle S`, S s more without use (a local model is unloaded after 5 minutes).

RSS is read from /proc every 0.1 s for the daemon and every process below it (the
worker processes that prepare documents). The embedding rate is given per second and per
CPU second of the daemon (the model runs on one thread: less sensitive to a busy machine).
The first embedding also assembles the bundled model's folder in the data home (once).

    python -m bench.studies.model_memory [--old /tmp/oldwt] [--rounds 1] [--idle 320] [--repo DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import (
    DATA,
    add_comparison_arguments,
    daemon_memory,
    describe_code,
    indexer_idle,
    kb_status,
    machine,
    median,
    scifact_notes,
    scratch_home,
    start_daemon,
    stop_daemon,
    wait,
)
from cofferctl.client import Client

KB = "vault"
NOTES = 100
SEARCHES = 200
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
LOCAL_VECTORS = {
    "enabled_modes": ["keyword", "grep", "vector"],
    "embedding": {"provider": "local"},
}


@dataclass
class Sample:
    daemon_mb: float
    total_mb: float  # the daemon and every process below it


@dataclass
class Sampler:
    """The largest RSS seen while a phase runs, read every `interval_s`."""

    pid: int
    interval_s: float = 0.1
    peak: Sample = field(default_factory=lambda: Sample(0.0, 0.0))

    def read(self) -> Sample:
        memory = daemon_memory(self.pid)
        return Sample(memory.rss_mb, memory.rss_mb + memory.children_rss_mb)

    @contextmanager
    def watching(self) -> Iterator[Sampler]:
        self.peak = Sample(0.0, 0.0)
        done = threading.Event()

        def sample() -> None:
            while not done.wait(self.interval_s):
                try:
                    now = self.read()
                except (OSError, KeyError):  # the daemon is stopping
                    continue
                self.peak = Sample(
                    max(self.peak.daemon_mb, now.daemon_mb), max(self.peak.total_mb, now.total_mb)
                )

        thread = threading.Thread(target=sample, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            done.set()
            thread.join()


@dataclass
class Figures:
    keyword_idle: Sample
    embedding_peak: Sample
    after_embedding: Sample
    embed_rate: float  # chunks per second
    embed_cpu_rate: float  # chunks per CPU second of the daemon (less sensitive to a busy machine)
    chunks: int
    after_restart: Sample
    searching_peak: Sample
    settled: Sample
    daemon_hwm_since_restart: float
    after_idle: Sample | None  # after --idle s more without use (None: not waited for)
    search_ms: float  # median of the burst


def cpu_seconds(pid: int) -> float:
    """User and system time of a process so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def claims() -> list[str]:
    with open(DATA / "scifact" / "queries.jsonl") as queries:
        return [json.loads(line)["text"] for line, _ in zip(queries, range(SEARCHES), strict=False)]


class Run:
    """One checkout's daemon through the phases, on its own scratch data home."""

    def __init__(self, repo: Path, settle_s: float, idle_s: float) -> None:
        self.repo = repo
        self.settle_s = settle_s
        self.idle_s = idle_s
        self.home = scratch_home("model-memory")
        self.socket = Path(f"/tmp/coffer-bench-model-{os.getpid()}.sock")
        self.client = Client(self.socket, timeout=120)
        docs = self.home / "knowledge" / KB / "docs"
        docs.mkdir(parents=True)
        for name, text in scifact_notes(NOTES):
            (docs / name).write_text(text)
        self.daemon: subprocess.Popen[bytes] | None = None

    def start(self) -> Sampler:
        self.daemon = start_daemon(self.repo, self.home, self.socket)
        self.until(lambda: self._idle() and kb_status(self._status(), KB)["documents"] >= NOTES)
        return Sampler(self.daemon.pid)

    def stop(self) -> None:
        if self.daemon is not None:
            stop_daemon(self.daemon)
            self.daemon = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.home, ignore_errors=True)
        self.socket.unlink(missing_ok=True)

    def _status(self) -> dict[str, Any]:
        status: dict[str, Any] = self.client.get("/api/v1/status")
        return status

    def _idle(self) -> bool:
        return indexer_idle(self._status())

    def _embedded(self) -> Callable[[], bool]:
        """A condition: every note has its vectors. The flags that say a note owes them are
        set a moment after the settings change: none owed counts once some were."""
        owed = False

        def done() -> bool:
            nonlocal owed
            pending = int(kb_status(self._status(), KB)["vectors"]["embed_pending"])
            owed = owed or pending > 0
            return owed and pending == 0

        return done

    def until(self, condition: Callable[[], object], timeout: float = 1800) -> None:
        assert self.daemon is not None
        wait(condition, self.daemon, timeout, 0.2)

    def settled(self, sampler: Sampler) -> Sample:
        time.sleep(self.settle_s)
        return sampler.read()

    def measure(self) -> Figures:
        sampler = self.start()
        keyword_idle = self.settled(sampler)
        with sampler.watching():
            started, cpu = time.perf_counter(), cpu_seconds(sampler.pid)
            self.client.request("PATCH", f"/api/v1/knowledge_bases/{KB}", {"config": LOCAL_VECTORS})
            self.until(self._embedded())
            embed_s, embed_cpu_s = time.perf_counter() - started, cpu_seconds(sampler.pid) - cpu
        embedding_peak = sampler.peak
        chunks = int(self.client.get(f"/api/v1/knowledge_bases/{KB}/metrics")["chunks"])
        after_embedding = self.settled(sampler)
        self.stop()
        sampler = self.start()
        after_restart = self.settled(sampler)
        took = []
        with sampler.watching():
            for claim in claims():
                started = time.perf_counter()
                answer = self.client.post(
                    f"/api/v1/knowledge_bases/{KB}/search", {"query": claim, "top_k": 10}
                )
                took.append((time.perf_counter() - started) * 1000)
                assert answer["mode"] == "hybrid", answer.get("fallback")
        searching_peak = sampler.peak
        settled = self.settled(sampler)
        assert self.daemon is not None
        hwm = daemon_memory(self.daemon.pid).peak_mb
        after_idle = None
        if self.idle_s:
            time.sleep(self.idle_s)
            after_idle = sampler.read()
        return Figures(
            keyword_idle, embedding_peak, after_embedding, chunks / embed_s,
            chunks / embed_cpu_s, chunks,
            after_restart, searching_peak, settled, hwm, after_idle, median(took),
        )  # fmt: skip


def report(name: str, repo: Path, runs: list[Figures], idle_s: float) -> None:
    def both(pick: Callable[[Figures], Sample]) -> str:
        daemon = median([pick(f).daemon_mb for f in runs])
        total = median([pick(f).total_mb for f in runs])
        return f"{daemon:6.1f} MB (with workers {total:6.1f} MB)"

    print(f"{name}: {describe_code(repo)}; median of {len(runs)}")
    print(f"  keyword only, idle                     {both(lambda f: f.keyword_idle)}")
    print(
        f"  while embedding {runs[0].chunks} chunks, peak       {both(lambda f: f.embedding_peak)}"
    )
    print(f"  after embedding everything             {both(lambda f: f.after_embedding)}")
    print(f"  after a restart                        {both(lambda f: f.after_restart)}")
    print(f"  during {SEARCHES} hybrid searches, peak     {both(lambda f: f.searching_peak)}")
    print(f"  settled after the searches             {both(lambda f: f.settled)}")
    if idle_s:
        idle = f"after {idle_s:.0f} s more without use"
        print(f"  {idle:<38} {both(lambda f: f.after_idle or Sample(0.0, 0.0))}")
    hwm = median([f.daemon_hwm_since_restart for f in runs])
    print(f"  daemon VmHWM since the restart         {hwm:6.1f} MB")
    rate = median([f.embed_rate for f in runs])
    cpu_rate = median([f.embed_cpu_rate for f in runs])
    print(f"  embedding rate                         {rate:6.1f} chunks/s, "
          f"{cpu_rate:.1f} per CPU second")  # fmt: skip
    print(f"  hybrid search p50 over the socket      {median([f.search_ms for f in runs]):6.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_comparison_arguments(parser)
    parser.add_argument(
        "--idle", type=float, default=0, help="then this many seconds more, and read again"
    )
    args = parser.parse_args()
    checkouts = {"NEW": args.repo, **({"OLD": args.old} if args.old else {})}
    figures: dict[str, list[Figures]] = {name: [] for name in checkouts}
    for _ in range(args.rounds):
        for name, repo in checkouts.items():
            run = Run(repo, args.settle, args.idle)
            try:
                figures[name].append(run.measure())
            finally:
                run.close()
    print(f"machine: {machine()}; {NOTES} notes, {SEARCHES} searches, settle {args.settle:g} s")
    for name, repo in checkouts.items():
        report(name, repo, figures[name], args.idle)


if __name__ == "__main__":
    main()
