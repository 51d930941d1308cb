"""Issue 32: idle memory with the bundled local model loaded for two knowledge bases, and
hybrid query latency through the daemon.

A real `cofferd` (this venv's, running the code of `--repo`; `--old DIR` runs another
checkout too, in the same run, rounds alternated) on a scratch data home with two KBs,
`alpha` and `beta`, of `--notes` SciFact abstracts each (different ones). In order:

1. keyword only: indexed, idle for `--settle` s (no model yet);
2. vectors turned on in both with the bundled all-MiniLM-L6-v2 (`embedding.provider:
   local`, the same settings), and every note of both embedded;
3. `--searches` hybrid searches (SciFact claims), alternating between the two KBs, one
   after another over the socket, after 10 warm-up searches: p50 / p95 in the client;
4. idle for `--settle` s (the model is unloaded only after 5 minutes without use, so it
   stays loaded; bulk workers beyond the first stop after 30 s), then /proc is read for
   the daemon and every process below it: RSS, PSS, and which of them are model
   processes (`model_main`, or `model_process` before issue 32 §2, in the command line).

    .venv/bin/python -m bench.studies.model_memory_two_kbs [--old DIR] [--rounds 1] [--settle 40]
        [--notes 100] [--searches 200] [--repo DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import (
    DATA,
    add_comparison_arguments,
    descendants,
    describe_code,
    indexer_idle,
    kb_status,
    machine,
    median,
    memory_mb,
    percentile,
    pss_mb,
    scifact_notes,
    scratch_home,
    start_daemon,
    stop_daemon,
    wait,
)
from cofferctl.client import Client

KBS = ("alpha", "beta")
WARMUP = 10
LOCAL_VECTORS = {
    "enabled_modes": ["keyword", "grep", "vector"],
    "embedding": {"provider": "local"},
}


@dataclass
class Process:
    pid: int
    command: str
    rss_mb: float
    pss_mb: float

    @property
    def model(self) -> bool:
        # model_process: the entry point before issue 32 §2 (fca49cf, 8eeab84)
        return "model_main" in self.command or "model_process" in self.command


@dataclass
class Memory:
    processes: list[Process]  # the daemon first

    @property
    def total_rss(self) -> float:
        return sum(p.rss_mb for p in self.processes)

    @property
    def total_pss(self) -> float:
        return sum(p.pss_mb for p in self.processes)

    @property
    def daemon_rss(self) -> float:
        return self.processes[0].rss_mb

    @property
    def models(self) -> list[Process]:
        return [p for p in self.processes[1:] if p.model]

    @property
    def others(self) -> list[Process]:
        return [p for p in self.processes[1:] if not p.model]


@dataclass
class Figures:
    keyword_idle: Memory
    two_models_idle: Memory
    embed_s: float
    chunks: int
    hybrid_ms: list[float]


def command(pid: int) -> str:
    words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    return " ".join(w.decode(errors="replace") for w in words if w)


def read_memory(pid: int) -> Memory:
    processes = []
    for each in [pid, *descendants(pid)]:
        try:
            processes.append(Process(each, command(each), memory_mb(each)[0], pss_mb(each)))
        except (OSError, KeyError, ValueError):  # ended meanwhile, or a zombie
            if each == pid:
                raise
    return Memory(processes)


def claims(count: int) -> list[str]:
    with open(DATA / "scifact" / "queries.jsonl") as queries:
        found = [json.loads(line)["text"] for line in queries]
    return (found * (1 + count // len(found)))[:count]


class Run:
    """One checkout's daemon through the phases, on its own scratch data home."""

    def __init__(self, repo: Path, settle_s: float, notes: int, searches: int) -> None:
        self.repo = repo
        self.settle_s = settle_s
        self.notes = notes
        self.searches = searches
        self.home = scratch_home("model-two-kbs")
        self.socket = Path(f"/tmp/coffer-bench-model2-{os.getpid()}.sock")
        self.client = Client(self.socket, timeout=120)
        abstracts = scifact_notes(notes * len(KBS))
        for i, kb in enumerate(KBS):
            docs = self.home / "knowledge" / kb / "docs"
            docs.mkdir(parents=True)
            for name, text in abstracts[i * notes : (i + 1) * notes]:
                (docs / name).write_text(text)
        self.daemon: subprocess.Popen[bytes] | None = None

    def close(self) -> None:
        if self.daemon is not None:
            stop_daemon(self.daemon)
            self.daemon = None
        shutil.rmtree(self.home, ignore_errors=True)
        self.socket.unlink(missing_ok=True)

    def _status(self) -> dict[str, Any]:
        status: dict[str, Any] = self.client.get("/api/v1/status")
        return status

    def until(self, condition: Callable[[], object], timeout: float = 1800) -> None:
        assert self.daemon is not None
        wait(condition, self.daemon, timeout, 0.2)

    def _indexed(self) -> bool:
        status = self._status()
        return indexer_idle(status) and all(
            kb_status(status, kb)["documents"] >= self.notes for kb in KBS
        )

    def _embedded(self) -> Callable[[], bool]:
        """Every note of both KBs has its vectors: none owed, once some were (the flags
        are set a moment after the settings change)."""
        owed = False

        def done() -> bool:
            nonlocal owed
            status = self._status()
            pending = sum(int(kb_status(status, kb)["vectors"]["embed_pending"]) for kb in KBS)
            owed = owed or pending > 0
            return owed and pending == 0

        return done

    def measure(self) -> Figures:
        self.daemon = start_daemon(self.repo, self.home, self.socket)
        self.until(self._indexed)
        time.sleep(self.settle_s)
        keyword_idle = read_memory(self.daemon.pid)

        started = time.perf_counter()
        for kb in KBS:
            self.client.request("PATCH", f"/api/v1/knowledge_bases/{kb}", {"config": LOCAL_VECTORS})
        self.until(self._embedded())
        embed_s = time.perf_counter() - started
        chunks = sum(
            int(self.client.get(f"/api/v1/knowledge_bases/{kb}/metrics")["chunks"]) for kb in KBS
        )

        took = []
        for n, claim in enumerate(claims(WARMUP + self.searches)):
            kb = KBS[n % len(KBS)]
            t0 = time.perf_counter()
            answer = self.client.post(
                f"/api/v1/knowledge_bases/{kb}/search", {"query": claim, "top_k": 10}
            )
            if n >= WARMUP:
                took.append((time.perf_counter() - t0) * 1000)
            assert answer["mode"] == "hybrid", answer.get("fallback")

        time.sleep(self.settle_s)
        two_models_idle = read_memory(self.daemon.pid)
        return Figures(keyword_idle, two_models_idle, embed_s, chunks, took)


def describe(memory: Memory) -> str:
    models = memory.models
    others = memory.others
    return (
        f"total RSS {memory.total_rss:6.1f} MB (PSS {memory.total_pss:6.1f}): daemon "
        f"{memory.daemon_rss:.1f}, {len(models)} model process(es) "
        f"{sum(p.rss_mb for p in models):.1f}, {len(others)} other child(ren) "
        f"{sum(p.rss_mb for p in others):.1f}"
    )


def report(name: str, repo: Path, runs: list[Figures], settle_s: float) -> None:
    print(f"{name}: {describe_code(repo)}")
    for i, f in enumerate(runs):
        print(f"  round {i + 1}")
        print(f"    keyword only, idle {settle_s:g} s        {describe(f.keyword_idle)}")
        print(f"    model loaded for both, idle {settle_s:g} s {describe(f.two_models_idle)}")
        for p in f.two_models_idle.processes:
            print(f"      {p.pid:>7} RSS {p.rss_mb:6.1f} PSS {p.pss_mb:6.1f}  {p.command[:90]}")
        print(
            f"    embedded {f.chunks} chunks of both in {f.embed_s:.1f} s; hybrid p50 "
            f"{percentile(f.hybrid_ms, 50):.1f} / p95 {percentile(f.hybrid_ms, 95):.1f} ms "
            f"over {len(f.hybrid_ms)}"
        )
    idle = [f.two_models_idle for f in runs]
    keyword = [f.keyword_idle for f in runs]
    print(f"  median of {len(runs)}:")
    print(
        f"    keyword only, idle: total RSS {median([m.total_rss for m in keyword]):.1f} MB "
        f"(PSS {median([m.total_pss for m in keyword]):.1f})"
    )
    print(
        f"    model loaded for two KBs, idle: total RSS "
        f"{median([m.total_rss for m in idle]):.1f} MB (PSS "
        f"{median([m.total_pss for m in idle]):.1f}); daemon "
        f"{median([m.daemon_rss for m in idle]):.1f} MB; model processes "
        f"{median([len(m.models) for m in idle]):g}, "
        f"{median([sum(p.rss_mb for p in m.models) for m in idle]):.1f} MB"
    )
    print(
        f"    hybrid search p50 {median([percentile(f.hybrid_ms, 50) for f in runs]):.1f} / "
        f"p95 {median([percentile(f.hybrid_ms, 95) for f in runs]):.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_comparison_arguments(parser)
    parser.set_defaults(settle=40)
    parser.add_argument("--notes", type=int, default=100, help="SciFact abstracts per KB")
    parser.add_argument("--searches", type=int, default=200, help="hybrid searches timed")
    args = parser.parse_args()
    checkouts = {"NEW": args.repo, **({"OLD": args.old} if args.old else {})}
    figures: dict[str, list[Figures]] = {name: [] for name in checkouts}
    for round_ in range(args.rounds):
        names = list(checkouts) if round_ % 2 == 0 else list(checkouts)[::-1]
        for name in names:
            run = Run(checkouts[name], args.settle, args.notes, args.searches)
            try:
                figures[name].append(run.measure())
            finally:
                run.close()
            print(f"round {round_ + 1}: {name} done", flush=True)
    print(
        f"machine: {machine()}; {len(KBS)} KBs of {args.notes} notes, {args.searches} "
        f"hybrid searches, settle {args.settle:g} s"
    )
    for name, repo in checkouts.items():
        report(name, repo, figures[name], args.settle)


if __name__ == "__main__":
    main()
