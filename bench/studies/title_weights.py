"""How much a match in a document's title, aliases or tags should count: nDCG@10 of
keyword search for several bm25 weights of the FTS5 columns (text, heading, meta), with
each document's title written as a `# heading` and as frontmatter `title:`.

    .venv/bin/python -m bench.studies.title_weights [--sets scifact,cmrc2018-dev,jsquad-valid]
                                            [--limit 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil

from bench.common import machine, scratch_home
from bench.guards.scifact_keyword import load_beir, ndcg_at, ranked_documents, write_beir
from coffer_kernel.locations import Locations
from cofferd.infrastructure.storage import fts_text
from cofferd.surfaces.core import Coffer

RANKS = (
    "bm25(1.0, 0.5, 0.0)", "bm25(1.0, 0.5, 1.0)", "bm25(1.0, 0.5, 2.0)",
    "bm25(1.0, 0.0, 1.0)", "bm25(1.0, 0.25, 1.0)", "bm25(1.0, 1.0, 1.0)",
)  # fmt: skip


async def evaluate(name: str, layout: str, limit: int | None) -> None:
    corpus, queries, qrels = load_beir(name)
    home = scratch_home("title-weights")
    try:
        locations = Locations(home=home, socket=home / "cofferd.sock")
        async with await Coffer.open(locations) as coffer:
            kb = await coffer.kbs.create("q")
            docs = locations.docs_dir("q")
            write_beir(docs, corpus, layout)
            await coffer.reindexer.reconcile(kb)
            chosen = fts_text.RANK
            for rank in RANKS:
                fts_text.RANK = rank
                scores = []
                for qid, rels in sorted(qrels.items())[:limit]:
                    found = await coffer.retrieval.search("q", queries[qid], top_k=10)
                    scores.append(ndcg_at(ranked_documents(found.passages), rels, 10))
                mark = "  <- fts_text.RANK" if rank == chosen else ""
                print(f"{name:14} {layout:11} {rank:22} {sum(scores) / len(scores):.4f}{mark}")
            fts_text.RANK = chosen
    finally:
        shutil.rmtree(home, ignore_errors=True)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sets", default="scifact,cmrc2018-dev,jsquad-valid")
    parser.add_argument("--limit", type=int, default=1000, help="questions per set")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    for name in args.sets.split(","):
        for layout in ("heading", "frontmatter"):
            await evaluate(name, layout, args.limit)


if __name__ == "__main__":
    asyncio.run(main())
