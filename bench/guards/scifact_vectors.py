"""Issue 5 figures on SciFact with the bundled local model (all-MiniLM-L6-v2 int8, one
ONNX thread): nDCG@10 for keyword, vector-only and hybrid search through the real search
path (top 10, as people and agents ask); embedding throughput while ingesting; query
latency of each mode (query embedding included).

    .venv/bin/python -m bench.guards.scifact_vectors
"""

from __future__ import annotations

import asyncio
import time

from bench.common import machine, median, percentile, scratch_home
from bench.guards.scifact_keyword import load_scifact, ndcg_at, ranked_documents, write_beir
from coffer_kernel.locations import Locations
from cofferd.surfaces.core import Coffer

CONFIG = {
    "enabled_modes": ["keyword", "grep", "vector"],
    "embedding": {"provider": "local", "threads": 1, "batch_size": 32},
}


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


async def main() -> None:
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
            f" p95 {percentile(latencies, 95):.1f} ms"
        )


if __name__ == "__main__":
    asyncio.run(main())
