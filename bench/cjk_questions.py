"""Keyword search with questions written as people write them, in Chinese and Japanese.

CMRC 2018 (dev) and JSQuAD (valid), BEIR layout: each paragraph is a document, each
question a query whose one relevant document is its own paragraph; questions have no
spaces and rarely repeat the paragraph's wording. Every query goes through
`Retrieval.search` (what the API calls); documents are ranked by their best passage.

    .venv/bin/python -m bench.cjk_questions [--limit N]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import time

from bench.common import machine, median, percentile, scratch_home
from bench.scifact_keyword import load_beir, ndcg_at, ranked_documents, write_beir
from cofferd.locations import Locations
from cofferd.surfaces.core import Coffer

SETS = ("cmrc2018-dev", "jsquad-valid")


async def evaluate(name: str, limit: int | None) -> None:
    corpus, queries, qrels = load_beir(name)
    home = scratch_home("cjkq")
    try:
        locations = Locations(home=home, socket=home / "cofferd.sock")
        async with await Coffer.open(locations) as coffer:
            kb = await coffer.kbs.create("q")
            docs = locations.docs_dir("q")
            write_beir(docs, corpus)
            await coffer.reindexer.reconcile(kb)
            ndcgs, latencies = [], []
            for qid, rels in sorted(qrels.items())[:limit]:
                started = time.perf_counter()
                found = await coffer.retrieval.search("q", queries[qid], top_k=10)
                latencies.append((time.perf_counter() - started) * 1000)
                ndcgs.append(ndcg_at(ranked_documents(found.passages), rels, 10))
        print(
            f"{name}: {len(corpus)} documents, {len(ndcgs)} questions: "
            f"nDCG@10 {sum(ndcgs) / len(ndcgs):.4f}; query p50 {median(latencies):.1f} ms, "
            f"p95 {percentile(latencies, 95):.1f} ms",
            flush=True,
        )
    finally:
        shutil.rmtree(home, ignore_errors=True)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=None, help="questions per set")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    for name in SETS:
        await evaluate(name, args.limit)


if __name__ == "__main__":
    asyncio.run(main())
