"""Issue 5 check: an English-only model must not drag hybrid results below keyword search
on a language it cannot read. tldr-pages in Chinese, Japanese and Korean (8,675 pages,
plus the 1,000 English pages with the same commands as distractors), the bundled MiniLM;
each query is a page's own description line (its first `>` line, in that language), and
the page it came from is the one relevant answer. nDCG@10 for keyword search, hybrid with
the language guard (the default) and hybrid without it.

    .venv/bin/python -m bench.studies.cjk_guard
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from pathlib import Path

from bench.common import extract_tldr, machine, scratch_home
from bench.guards.scifact_keyword import ndcg_at
from coffer_kernel.locations import Locations
from cofferd.surfaces.core import Coffer

LANGUAGES = ("zh", "ja", "ko")
QUERIES_PER_LANGUAGE = 100
LINK = re.compile(r"[（(]?(更多信息|詳しくはこちら|더 많은 정보)[:：].*$")


def description(page: Path) -> str | None:
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith(">"):
            text = LINK.sub("", line.lstrip("> ").strip()).strip("。.：: ")
            return text if len(text) >= 4 else None
    return None


async def main() -> None:
    home = scratch_home("cjk")
    corpus = extract_tldr(home / "src")
    locations = Locations(home=home / "data", socket=home / "s.sock")
    random.seed(11)
    async with await Coffer.open(locations) as coffer:
        config = {
            "enabled_modes": ["keyword", "grep", "vector"],
            "embedding": {"provider": "local", "model": "all-MiniLM-L6-v2", "threads": 1},
        }
        kb = await coffer.kbs.create("cjk", config)
        docs = locations.docs_dir("cjk")
        queries: list[tuple[str, str]] = []
        for lang in LANGUAGES:
            src = corpus / f"pages.{lang}"
            (docs / f"pages.{lang}").parent.mkdir(parents=True, exist_ok=True)
            src.rename(docs / f"pages.{lang}")
            pages = sorted((docs / f"pages.{lang}").rglob("*.md"))
            candidates = [(p, d) for p in pages if (d := description(p))]
            for page, text in random.sample(candidates, QUERIES_PER_LANGUAGE):
                queries.append((text, page.relative_to(docs).as_posix()))
        english = sorted((corpus / "pages" / "common").glob("*.md"))[:1000]
        (docs / "pages.en").mkdir()
        for page in english:
            page.rename(docs / "pages.en" / page.name)
        await coffer.reindexer.reconcile(kb)
        started = time.perf_counter()
        await coffer.embeddings.drain("cjk")
        embed_s = time.perf_counter() - started
        documents = (await coffer.stores.index.metrics("cjk"))["documents"]

        async def score(mode: str, multilingual: bool | None) -> float:
            embedding = {**config["embedding"], "multilingual": multilingual}  # type: ignore[dict-item]
            await coffer.kbs.update_config("cjk", {"default_mode": mode, "embedding": embedding})
            total = 0.0
            for text, relevant in queries:
                found = await coffer.retrieval.search("cjk", text, top_k=10)
                ranked = list(dict.fromkeys(p.path for p in found.passages))
                total += ndcg_at(ranked, {relevant: 1}, 10)
            return total / len(queries)

        keyword = await score("keyword", None)
        guarded = await score("hybrid", None)
        unguarded = await score("hybrid", True)
    print(f"machine: {machine()}")
    print(f"{documents} pages, embedded in {embed_s:.0f} s; {len(queries)} queries")
    print(f"keyword              nDCG@10 {keyword:.4f}")
    print(f"hybrid, guarded      nDCG@10 {guarded:.4f}   (the default)")
    print(f"hybrid, no guard     nDCG@10 {unguarded:.4f}")


if __name__ == "__main__":
    asyncio.run(main())
