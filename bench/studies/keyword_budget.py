"""Issue 23: what ranking a bounded set of rows costs keyword search in quality.

A query whose words match more than `keyword_search.SCORED_MAX` rows (8,000) in all is
ranked over candidates (the rows holding its rarest words, or all of its words) instead of
every match. At these sets' sizes few queries reach 8,000, so each set is also searched
with the budget scaled to its size as 8,000 is to 250,000 rows: the same share of the
index as at 250k, where the bound is what makes common-word queries fast.

Per set (SciFact, CMRC 2018, JSQuAD; every document a file, searched with
`Retrieval.search`, top 10, keyword mode): nDCG@10 with every match ranked, with 8,000,
and with the scaled budget; the share of queries answered from candidates; and how many of
the exact top 10 the bounded answer holds.

    .venv/bin/python -m bench.studies.keyword_budget
"""

from __future__ import annotations

import asyncio
from typing import Any

from bench.common import machine, scratch_home
from bench.guards.scifact_keyword import load_beir, ndcg_at, ranked_documents, write_beir
from coffer_kernel.locations import Locations
from cofferd.infrastructure.storage import keyword_search
from cofferd.surfaces.core import Coffer

SETS = ("scifact", "cmrc2018-dev", "jsquad-valid")
AT_250K = 8_000 / 250_000
UNBOUNDED = 10**12


async def rankings(coffer: Coffer, kb: str, queries: dict[str, str], budget: int) -> Any:
    """Ranked document ids by query id, and how many queries candidates answered."""
    answered = [0]
    bounded = keyword_search._Search._candidates

    async def counting(*args: Any) -> Any:
        found = await bounded(*args)
        answered[0] += len(found) >= args[3]
        return found

    keyword_search.SCORED_MAX = budget
    keyword_search._Search._candidates = counting  # type: ignore[method-assign]
    try:
        ranked = {}
        for qid, text in queries.items():
            found = await coffer.retrieval.search(kb, text, top_k=10)
            ranked[qid] = ranked_documents(found.passages)
    finally:
        keyword_search._Search._candidates = bounded  # type: ignore[method-assign]
    return ranked, answered[0]


async def measure(name: str) -> None:
    corpus, queries, qrels = load_beir(name)
    asked = {qid: queries[qid] for qid in sorted(qrels)}
    home = scratch_home("budget")
    locations = Locations(home=home, socket=home / "cofferd.sock")
    async with await Coffer.open(locations) as coffer:
        kb = await coffer.kbs.create("set")
        write_beir(locations.docs_dir("set"), corpus)
        await coffer.reindexer.reconcile(kb)
        rows = (await coffer.kbs.counts("set"))["chunks"]
        scaled = max(1, round(rows * AT_250K))
        exact, _ = await rankings(coffer, "set", asked, UNBOUNDED)
        for label, budget in (
            ("every match", UNBOUNDED),
            ("8,000", 8_000),
            (f"{scaled:,}", scaled),
        ):
            ranked, answered = await rankings(coffer, "set", asked, budget)
            ndcg = sum(ndcg_at(ranked[q], qrels[q], 10) for q in asked) / len(asked)
            held = sum(len(set(ranked[q]) & set(exact[q][:10])) for q in asked)
            total = sum(min(10, len(exact[q])) for q in asked)
            print(
                f"{name}: {len(corpus):,} documents, {rows:,} rows, {len(asked):,} queries; "
                f"budget {label:>11}: nDCG@10 {ndcg:.4f}; from candidates "
                f"{answered / len(asked):5.1%} of queries; exact top 10 held {held / total:.4f}",
                flush=True,
            )


async def main() -> None:
    print(f"machine: {machine()}")
    for name in SETS:
        await measure(name)


if __name__ == "__main__":
    asyncio.run(main())
