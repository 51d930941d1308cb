"""Issue 5 figures on SciFact with the bundled local model (all-MiniLM-L6-v2 int8, one
ONNX thread): nDCG@10 for keyword, vector-only and hybrid search through the real search
path (top 10, as people and agents ask); embedding throughput while ingesting; query
latency of each mode (query embedding included).

    .venv/bin/python -m bench.guards.scifact_vectors
"""

from __future__ import annotations

import argparse
import asyncio
import time

from bench.common import exit_by_targets, machine, median, percentile, scratch_home, verdict
from bench.guards.scifact_keyword import load_scifact, ndcg_at, ranked_documents, write_beir
from coffer_kernel.locations import Locations
from cofferd.surfaces.core import Coffer

CONFIG = {
    "enabled_modes": ["keyword", "grep", "vector"],
    "embedding": {"provider": "local", "threads": 1, "batch_size": 32},
}
# issue 5's targets: nDCG@10 of vector-only and hybrid search, hybrid's p50 latency
VECTOR_NDCG, HYBRID_NDCG, HYBRID_P50_MS = 0.64, 0.72, 30


async def evaluate(
    coffer: Coffer, queries: dict[str, str], qrels: dict[str, dict[str, int]]
) -> tuple[float, list[float]]:
    scores, latencies = [], []
    for qid, rels in sorted(qrels.items()):
        started = time.perf_counter()
        found = await coffer.retrieval.search("scifact", queries[qid], top_k=10)
        latencies.append((time.perf_counter() - started) * 1000)
        ranked = ranked_documents(found.passages)
        scores.append(ndcg_at(ranked, rels, 10))
    return sum(scores) / len(scores), latencies


def targets(mode: str, ndcg: float, p50: float) -> str:
    """The mode's targets, each met or MISSED (nothing for keyword search)."""
    if mode == "vector":
        return (
            f" [target nDCG@10 >= {VECTOR_NDCG}: {verdict(ndcg >= VECTOR_NDCG, 'vector nDCG@10')}]"
        )
    if mode == "hybrid":
        return (
            f" [targets nDCG@10 >= {HYBRID_NDCG}: {verdict(ndcg >= HYBRID_NDCG, 'hybrid nDCG@10')}"
            f", p50 <= {HYBRID_P50_MS} ms: {verdict(p50 <= HYBRID_P50_MS, 'hybrid p50')}]"
        )
    return ""


async def run() -> None:
    corpus, queries, qrels = load_scifact()
    home = scratch_home("scifact-vec")
    locations = Locations(home=home, socket=home / "cofferd.sock")
    async with await Coffer.open(locations) as coffer:
        kb = await coffer.kbs.create("scifact", CONFIG)
        docs = locations.docs_dir("scifact")
        write_beir(docs, corpus)
        started = time.perf_counter()
        await coffer.reindexer.reconcile(kb)
        keyword_s = time.perf_counter() - started
        embed_started = time.perf_counter()
        await coffer.embeddings.drain("scifact")
        embed_s = time.perf_counter() - embed_started
        chunks = (await coffer.stores.index.metrics("scifact"))["chunks"]

        results = {}
        for mode in ("keyword", "vector", "hybrid"):
            await coffer.kbs.update_config("scifact", {"default_mode": mode})
            results[mode] = await evaluate(coffer, queries, qrels)

    print(f"machine: {machine()}")
    print(f"keyword index of {len(corpus)} abstracts: {keyword_s:.1f} s (searchable then)")
    print(
        f"embedding {chunks} chunks: {embed_s:.0f} s = {chunks / embed_s:.1f} chunks/s; "
        f"every document has vectors {keyword_s + embed_s:.0f} s after the start"
    )
    for mode, (ndcg, latencies) in results.items():
        print(
            f"{mode:<8} nDCG@10 {ndcg:.4f}   query latency p50 {median(latencies):.1f} ms,"
            f" p95 {percentile(latencies, 95):.1f} ms{targets(mode, ndcg, median(latencies))}"
        )


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    asyncio.run(run())


if __name__ == "__main__":
    main()
    exit_by_targets()
