"""A floor for multilingual-e5-small's vector hits (issue 36): the cosine similarity of the
best hit for questions a knowledge base answers, and for questions it does not.

As bench.studies.hybrid_sweep calibrated MiniLM's floor (0.3): each CJK set's KB (JSQuAD, CMRC 2018)
is asked its own questions and off-topic ones — tldr-pages descriptions in the KB's
language (command-line tools against Wikipedia paragraphs), the other set's questions
(another language, other articles), and everyday questions in English — through Coffer's
own search in vector mode with no floor (`min_similarity: -1`). Printed: the share of best
hits below each candidate floor for each kind of question, and for the relevant documents
the model finds in its first ten (and those keyword search misses), which a floor would lose.
Then known pairs across languages, which no CJK set holds: 80 tldr-pages commands (seed 0)
in English, Korean and Chinese, each English description against its own page in each
language (the page as a note, `# name` and its examples), embedded directly by the model
process: the share of those similarities below each floor.

Coffer runs in-process with bench.guards.multilingual_search's cached embedder (the real model
process behind a disk cache by text digest), so the paragraphs embedded by that bench are
not embedded again.

    nice -n 10 .venv/bin/python -m bench.studies.e5_floor [--limit 1000] [--cache DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import tarfile
from pathlib import Path

from bench.common import DATA, embed_as, machine, scratch_home
from bench.guards.multilingual_search import CachedEmbedder, load
from bench.guards.scifact_keyword import ranked_documents, write_beir
from bench.studies.hybrid_sweep import EVERYDAY
from bench.studies.multilingual_models import load_tldr
from coffer_kernel.locations import Locations
from cofferd.domain.config import LOCAL_MULTILINGUAL_MODEL, EmbeddingConfig
from cofferd.infrastructure.models.embedders import LocalEmbedder
from cofferd.surfaces.core import Coffer

FLOORS = (0.75, 0.78, 0.80, 0.82, 0.84, 0.86)
KNOWN_PAIRS, PAIR_LANGUAGES = 80, ("en", "ko", "zh")
SETS = {"jsquad-valid": ("ja", "cmrc2018-dev"), "cmrc2018-dev": ("zh", "jsquad-valid")}
# where bench.guards.multilingual_search's reproduce commands keep each set's vectors
CACHES = {
    "jsquad-valid": Path("/tmp/coffer-bench-e5cache"),
    "cmrc2018-dev": Path("/tmp/coffer-bench-e5cache-cmrc"),
}


def below(scores: list[float], floor: float) -> str:
    return f"{100 * sum(s < floor for s in scores) / len(scores):.1f} %" if scores else "-"


async def best_scores(coffer: Coffer, kb: str, questions: list[str]) -> list[float]:
    found = []
    for question in questions:
        passages = (await coffer.retrieval.search(kb, question, top_k=1)).passages
        if passages:
            found.append(passages[0].score)
    return found


async def calibrate(name: str, args: argparse.Namespace) -> dict[str, list[float]]:
    language, other = SETS[name]
    corpus, queries, qrels = load(name, args.limit)
    embedding = {"provider": "local", "model": LOCAL_MULTILINGUAL_MODEL, "batch_size": 16}
    home = scratch_home("e5floor")
    try:
        locations = Locations(home=home, socket=home / "cofferd.sock")
        async with await Coffer.open(locations) as coffer:
            real = LocalEmbedder(EmbeddingConfig(**embedding), locations.models_dir)
            cached = CachedEmbedder(real, args.cache or CACHES[name], LOCAL_MULTILINGUAL_MODEL)
            coffer.embeddings.make_embedder = lambda _config: cached
            config = {
                "enabled_modes": ["keyword", "grep", "vector"],
                "default_mode": "vector",
                "embedding": {**embedding, "min_similarity": -1.0},
            }
            await coffer.kbs.create("q", config)
            kb = coffer.kbs.get_enabled("q")
            write_beir(locations.docs_dir("q"), corpus)
            await coffer.reindexer.reconcile(kb)
            while (await coffer.kbs.counts("q"))["embed_pending"]:
                await coffer.embeddings.retry_now("q")
                await coffer.embeddings.drain("q")
            relevant, missed_by_keywords = [], []
            for qid, rels in sorted(qrels.items()):
                vector = (await coffer.retrieval.search("q", queries[qid], top_k=10)).passages
                await coffer.kbs.update_config("q", {"default_mode": "keyword"})
                words = (await coffer.retrieval.search("q", queries[qid], top_k=30)).passages
                await coffer.kbs.update_config("q", {"default_mode": "vector"})
                keyword_docs = set(ranked_documents(words))
                for passage in vector:
                    doc = ranked_documents([passage])[0]
                    if doc in rels:
                        relevant.append(passage.score)
                        if doc not in keyword_docs:
                            missed_by_keywords.append(passage.score)
                        break
            tldr = list(load_tldr(language).queries.values())
            _, other_queries, other_qrels = load(other, args.limit)
            out = {
                f"{name}: tldr-{language} descriptions (off-topic)": await best_scores(
                    coffer, "q", tldr
                ),
                f"{name}: {other} questions (off-topic)": await best_scores(
                    coffer, "q", [other_queries[q] for q in sorted(other_qrels)][:300]
                ),
                f"{name}: everyday questions, English (off-topic)": await best_scores(
                    coffer, "q", list(EVERYDAY)
                ),
                f"{name}: relevant documents in vector's first 10": relevant,
                f"{name}: ... of them, those keyword's first 30 miss": missed_by_keywords,
            }
            await real.close()
            return out
    finally:
        shutil.rmtree(home, ignore_errors=True)


def tldr_common(language: str) -> dict[str, str]:
    folder = "/pages/common/" if language == "en" else f"/pages.{language}/common/"
    pages = {}
    with tarfile.open(DATA / "tldr-pages.tar.gz") as tar:
        for member in tar:
            if member.isfile() and folder in member.name and member.name.endswith(".md"):
                page = tar.extractfile(member)
                assert page is not None
                pages[member.name.rsplit("/", 1)[1]] = page.read().decode("utf-8")
    return pages


def description_and_note(page: str, name: str) -> tuple[str, str]:
    lines = page.splitlines()
    said = [line[2:].strip() for line in lines if line.startswith("> ")]
    body = "\n".join(line for line in lines if not line.startswith(("> ", "# "))).strip()
    return (said[0] if said else ""), f"# {name.removesuffix('.md')}\n\n{body}"


async def known_pairs() -> dict[str, list[float]]:
    english = tldr_common("en")
    embedder = LocalEmbedder(
        EmbeddingConfig(provider="local", model=LOCAL_MULTILINGUAL_MODEL),
        scratch_home("e5pairs"),
    )
    out = {}
    try:
        for language in PAIR_LANGUAGES:
            pages = tldr_common(language)
            names = sorted(n for n in pages if n in english)
            random.Random(0).shuffle(names)
            names = [n for n in names if "://" not in description_and_note(english[n], n)[0]][
                :KNOWN_PAIRS
            ]
            questions = [description_and_note(english[n], n)[0] for n in names]
            notes = [description_and_note(pages[n], n)[1] for n in names]
            asked = await embedder.embed(questions, **embed_as(embedder, True))
            read = await embedder.embed(notes, **embed_as(embedder, False))
            out[f"tldr: an English description against its own page in {language}"] = [
                sum(a * b for a, b in zip(q, d, strict=True))
                for q, d in zip(asked, read, strict=True)
            ]
    finally:
        await embedder.close()
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, default=1000, help="questions per set (seed 0)")
    parser.add_argument("--cache", type=Path, default=None, help="else each set's own")
    args = parser.parse_args()
    print(machine(), flush=True)
    rows: dict[str, list[float]] = {}
    for name in SETS:
        rows.update(await calibrate(name, args))
    rows.update(await known_pairs())
    print("| best hit below | " + " | ".join(f"{f:.2f}" for f in FLOORS) + " | n |")
    print("|---" * (len(FLOORS) + 2) + "|")
    for label, scores in rows.items():
        cells = " | ".join(below(scores, f) for f in FLOORS)
        print(f"| {label} | {cells} | {len(scores)} |")


if __name__ == "__main__":
    asyncio.run(main())
