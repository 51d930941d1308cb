"""Issue 23: how fast the bundled local model (all-MiniLM-L6-v2) embeds, through the daemon.

A real `cofferd` (this venv's, running the code of `--repo`; `--old DIR` runs another
checkout too, in the same run, rounds alternated so both see the same load) on a scratch
data home whose KB `vault` holds one of two sets of notes:

* `scifact`: 500 SciFact abstracts (~250 tokens each: the model reads 256);
* `tldr`: 1,000 English tldr pages (short Markdown, a few chunks each).

Once the notes are indexed (keyword only), vectors are turned on with the bundled model
(`embedding.provider: local`) and timed until none is pending: documents and chunks per
second, and per CPU second of the daemon and every process below it (the model's own
process, if it has one: less sensitive to another program using the CPU). RSS of the
daemon and its children is sampled every 0.1 s while it embeds (the peak) and read again
`--settle` s after. Last, in a process of its own running the checkout's code, the latency
of a one-line query's embedding (`LocalEmbedder.embed`, warm: the median of 50).

    python -m bench.studies.embed_throughput [--old /tmp/embed-old] [--rounds 1] [--repo DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.common import (
    add_comparison_arguments,
    code_env,
    descendants,
    describe_code,
    extract_tldr,
    kb_status,
    machine,
    median,
    scifact_notes,
    scratch_home,
    start_daemon,
    stop_daemon,
    wait,
)
from bench.studies.model_memory import CLOCK_TICKS, KB, LOCAL_VECTORS, Sample, Sampler
from cofferctl.client import Client

SCIFACT_NOTES = 500
TLDR_NOTES = 1000
QUERIES = 50


@dataclass
class Figures:
    documents: int
    chunks: int
    seconds: float
    cpu_seconds: float
    peak: Sample  # while embedding
    settled: Sample

    @property
    def docs_per_s(self) -> float:
        return self.documents / self.seconds

    @property
    def chunks_per_s(self) -> float:
        return self.chunks / self.seconds


def tldr_notes(scratch: Path) -> list[tuple[str, str]]:
    pages = sorted((extract_tldr(scratch) / "pages").glob("*/*.md"))
    random.Random(23).shuffle(pages)
    return [(f"{p.parent.name}-{p.name}", p.read_text()) for p in pages[:TLDR_NOTES]]


def tree_cpu_seconds(pid: int) -> float:
    """CPU time of a process, of its children it has waited for, and of every process below
    it still running, from /proc."""
    total = 0.0
    for index, each in enumerate([pid, *descendants(pid)]):
        try:
            fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        ticks = int(fields[11]) + int(fields[12])
        if index == 0:
            ticks += int(fields[13]) + int(fields[14])
        total += ticks / CLOCK_TICKS
    return total


def embed_all(repo: Path, models: Path, notes: list[tuple[str, str]], settle_s: float) -> Figures:
    """Vectors turned on for `notes` in a new data home, its models folder a copy of
    `models` (assembled already: the one-time assembly is not timed)."""
    home = scratch_home("embed-throughput")
    shutil.copytree(models, home / "models")
    socket = Path(f"/tmp/coffer-bench-embed-{os.getpid()}.sock")
    client = Client(socket, timeout=120)
    docs = home / "knowledge" / KB / "docs"
    docs.mkdir(parents=True)
    for name, text in notes:
        (docs / name).write_text(text)
    daemon = start_daemon(repo, home, socket)

    def status_of_kb() -> dict[str, object]:
        return kb_status(client.get("/api/v1/status"), KB)

    owed = False

    def embedded() -> bool:
        nonlocal owed
        pending = int(status_of_kb()["vectors"]["embed_pending"])  # type: ignore[index]
        owed = owed or pending > 0
        return owed and pending == 0

    try:
        wait(lambda: status_of_kb()["documents"] == len(notes), daemon, 600, 0.2)
        sampler = Sampler(daemon.pid)
        with sampler.watching():
            started, cpu = time.perf_counter(), tree_cpu_seconds(daemon.pid)
            client.request("PATCH", f"/api/v1/knowledge_bases/{KB}", {"config": LOCAL_VECTORS})
            wait(embedded, daemon, 3600, 0.1)
            seconds = time.perf_counter() - started
            cpu_seconds = tree_cpu_seconds(daemon.pid) - cpu
        chunks = int(client.get(f"/api/v1/knowledge_bases/{KB}/metrics")["chunks"])
        time.sleep(settle_s)
        settled = sampler.read()
        return Figures(len(notes), chunks, seconds, cpu_seconds, sampler.peak, settled)
    finally:
        stop_daemon(daemon)
        shutil.rmtree(home, ignore_errors=True)
        socket.unlink(missing_ok=True)


QUERY_LATENCY = """
import asyncio, json, statistics, sys, time
from pathlib import Path
from cofferd.domain.config import EmbeddingConfig
from cofferd.infrastructure.models.embedders import LocalEmbedder

def role(embedder, query):  # bench.common.embed_as, in whichever checkout runs this
    import inspect
    if "lane" not in inspect.signature(embedder.embed).parameters:
        return {"query": query}
    from cofferd.domain.index_records import EmbedLane
    return {"lane": EmbedLane.QUERY if query else EmbedLane.BULK}

async def main():
    config = EmbeddingConfig(provider="local")
    assembling = LocalEmbedder(config, Path(sys.argv[1]))  # the model folder, once
    await assembling.embed(["ready"], **role(assembling, False))
    await assembling.close()
    embedder = LocalEmbedder(config, Path(sys.argv[1]))
    try:
        started = time.perf_counter()
        await embedder.embed(["ready"], **role(embedder, False))
        first = time.perf_counter() - started
        took = []
        for i in range(int(sys.argv[2])):
            started = time.perf_counter()
            await embedder.embed([f"how do I restore a deleted note {i}"], **role(embedder, True))
            took.append(time.perf_counter() - started)
    finally:
        await embedder.close()
    print(json.dumps({"first_s": first, "median_ms": statistics.median(took) * 1000}))

asyncio.run(main())
"""


def query_latency(repo: Path, models: Path) -> dict[str, float]:
    """A one-line query's embedding in `repo`'s code: the first (the model loaded) and the
    median of the next ones; the model folder is assembled in `models` first."""
    done = subprocess.run(
        [sys.executable, "-c", QUERY_LATENCY, str(models), str(QUERIES)],
        env=code_env(repo), capture_output=True, text=True, check=True,
    )  # fmt: skip
    result: dict[str, float] = json.loads(done.stdout)
    return result


def report(
    name: str, repo: Path, runs: dict[str, list[Figures]], query: list[dict[str, float]]
) -> None:
    print(f"{name}: {describe_code(repo)}")
    for corpus, figures in runs.items():
        docs = median([f.docs_per_s for f in figures])
        chunks = median([f.chunks_per_s for f in figures])
        cpu_docs = median([f.documents / f.cpu_seconds for f in figures])
        cpu_chunks = median([f.chunks / f.cpu_seconds for f in figures])
        peak = median([f.peak.total_mb for f in figures])
        peak_daemon = median([f.peak.daemon_mb for f in figures])
        settled = median([f.settled.total_mb for f in figures])
        print(
            f"  {corpus:<8} {figures[0].documents:5d} docs {figures[0].chunks:5d} chunks: "
            f"{docs:6.1f} docs/s {chunks:6.1f} chunks/s; per CPU second {cpu_docs:6.1f} docs "
            f"{cpu_chunks:6.1f} chunks; RSS peak {peak:5.0f} MB (daemon {peak_daemon:.0f}), "
            f"settled {settled:5.0f} MB"
        )
    first = median([q["first_s"] for q in query])
    warm = median([q["median_ms"] for q in query])
    print(f"  one-line query embedding: {warm:.1f} ms warm (median), first {first:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_comparison_arguments(parser)
    parser.add_argument("--sets", default="scifact,tldr", help="which sets, comma-separated")
    args = parser.parse_args()
    checkouts = {"NEW": args.repo, **({"OLD": args.old} if args.old else {})}
    scratch = Path(tempfile.mkdtemp(prefix="coffer-bench-embed-data-"))
    try:
        sets = {
            name: load()
            for name, load in (
                ("scifact", lambda: scifact_notes(SCIFACT_NOTES)),
                ("tldr", lambda: tldr_notes(scratch)),
            )
            if name in args.sets.split(",")
        }
        figures = {who: {corpus: [] for corpus in sets} for who in checkouts}
        queries: dict[str, list[dict[str, float]]] = {who: [] for who in checkouts}
        order = list(checkouts)
        models = {who: scratch / f"models-{who}" for who in checkouts}
        for round_ in range(args.rounds):
            for who in order:
                queries[who].append(query_latency(checkouts[who], models[who]))
            for corpus, notes in sets.items():
                for who in order if round_ % 2 == 0 else order[::-1]:
                    run = embed_all(checkouts[who], models[who], notes, args.settle)
                    figures[who][corpus].append(run)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"machine: {machine()}; median of {args.rounds} round(s), settle {args.settle:g} s")
    for who, repo in checkouts.items():
        report(who, repo, figures[who], queries[who])


if __name__ == "__main__":
    main()
