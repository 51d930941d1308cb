"""Keyword search with questions written as people write them, in Chinese, Japanese and
Korean.

CMRC 2018 (dev) and JSQuAD (valid), BEIR layout: each paragraph is a document, each
question a query whose one relevant document is its own paragraph; questions have no
spaces and rarely repeat the paragraph's wording. `tldr-cjk`: tldr-pages in Chinese,
Japanese and Korean (8,671 pages, plus 1,000 English pages of the same commands), each of
300 queries a page's own description line (bench.studies.cjk_guard's queries, keyword search
only): the Korean and Chinese check. Every query goes through `Retrieval.search` (what the
API calls); documents are ranked by their best passage.

    python -m bench.guards.cjk_questions [--limit N] [--sets cmrc2018-dev,...] [--repo PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import time
from pathlib import Path

from bench.common import (
    add_repo_argument,
    describe_code,
    exit_by_targets,
    extract_tldr,
    machine,
    median,
    percentile,
    run_in_repo,
    scratch_home,
    verdict,
)
from bench.guards.scifact_keyword import load_beir, ndcg_at, ranked_documents, write_beir
from bench.studies.cjk_guard import LANGUAGES, QUERIES_PER_LANGUAGE, description
from coffer_kernel.locations import Locations
from cofferd.surfaces.core import Coffer

SETS = ("cmrc2018-dev", "jsquad-valid", "tldr-cjk")
Questions = list[tuple[str, dict[str, int]]]  # (query, relevant documents)
TARGET_NDCG = {"cmrc2018-dev": 0.95, "jsquad-valid": 0.90}  # issue 12's; tldr-cjk has none


def tldr_cjk(docs: Path, scratch: Path) -> Questions:
    """The pages into `docs`, and bench.studies.cjk_guard's queries (its seed, its order)."""
    corpus = extract_tldr(scratch)
    random.seed(11)
    questions: Questions = []
    for lang in LANGUAGES:
        (docs / f"pages.{lang}").parent.mkdir(parents=True, exist_ok=True)
        (corpus / f"pages.{lang}").rename(docs / f"pages.{lang}")
        pages = sorted((docs / f"pages.{lang}").rglob("*.md"))
        candidates = [(p, d) for p in pages if (d := description(p))]
        for page, text in random.sample(candidates, QUERIES_PER_LANGUAGE):
            questions.append((text, {page.relative_to(docs).as_posix(): 1}))
    (docs / "pages.en").mkdir()
    for page in sorted((corpus / "pages" / "common").glob("*.md"))[:1000]:
        page.rename(docs / "pages.en" / page.name)
    return questions


def beir(name: str, docs: Path) -> Questions:
    corpus, queries, qrels = load_beir(name)
    write_beir(docs, corpus)
    return [(queries[qid], rels) for qid, rels in sorted(qrels.items())]


async def evaluate(name: str, limit: int | None) -> None:
    home = scratch_home("cjkq")
    try:
        locations = Locations(home=home / "data", socket=home / "cofferd.sock")
        async with await Coffer.open(locations) as coffer:
            kb = await coffer.kbs.create("q")
            docs = locations.docs_dir("q")
            if name == "tldr-cjk":
                questions = tldr_cjk(docs, home / "src")
                paths = True
            else:
                questions = beir(name, docs)
                paths = False
            await coffer.reindexer.reconcile(kb)
            documents = (await coffer.stores.index.metrics("q"))["documents"]
            ndcgs, latencies = [], []
            for query, rels in questions[:limit]:
                started = time.perf_counter()
                found = await coffer.retrieval.search("q", query, top_k=10)
                latencies.append((time.perf_counter() - started) * 1000)
                if paths:
                    ranked = list(dict.fromkeys(p.path for p in found.passages))
                else:
                    ranked = ranked_documents(found.passages)
                ndcgs.append(ndcg_at(ranked, rels, 10))
        ndcg = sum(ndcgs) / len(ndcgs)
        target = TARGET_NDCG.get(name)
        said = (
            f" [target >= {target}: {verdict(ndcg >= target, name)}]" if target is not None else ""
        )
        print(
            f"{name}: {documents} documents, {len(ndcgs)} questions: "
            f"nDCG@10 {ndcg:.4f}{said}; query p50 {median(latencies):.1f} ms, "
            f"p95 {percentile(latencies, 95):.1f} ms",
            flush=True,
        )
    finally:
        shutil.rmtree(home, ignore_errors=True)


async def run(args: argparse.Namespace) -> None:
    print(f"machine: {machine()}")
    print(f"code: {describe_code(args.repo)}")
    for name in args.sets.split(","):
        await evaluate(name, args.limit)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=None, help="questions per set")
    parser.add_argument("--sets", default=",".join(SETS), help="comma-separated, of " + str(SETS))
    add_repo_argument(parser)
    args = parser.parse_args()
    run_in_repo(args.repo)
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
    exit_by_targets()
