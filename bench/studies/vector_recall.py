"""Issue 23: what int8 vectors cost in quality, on real embeddings.

Vectors are stored as int8 and searched by L1, then the candidates re-ordered by cosine
(cofferd/infrastructure/storage/vec_index.py). This measures that search, through vec_index's own
write and read paths on real SQLite with sqlite-vec, against exact float32 cosine search
(numpy, brute force) of the same vectors:

* recall@10 and recall@30 (the hybrid reads 30 vector candidates): the share of the exact
  top k that the int8 search returns;
* SciFact vector-only nDCG@10 (300 test claims), exact against int8;
* the vector index's size on disk against float32.

Corpora: SciFact (5,183 abstracts; its 1,109 claims as queries) and a tldr-pages slice
(2,000 English pages, a seeded sample; queries are the descriptions of 300 other pages).
Everything is embedded with the bundled all-MiniLM-L6-v2 (the `local` extra) through the
project's LocalEmbedder, once: vectors are cached under `--cache` (~15 min on 2 cores the
first time).

    .venv/bin/python -m bench.studies.vector_recall [--cache /tmp/coffer-vector-recall]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import DATA, embed_as, machine
from cofferd.domain.config import EmbeddingConfig
from cofferd.infrastructure.models.embedders import LocalEmbedder
from cofferd.infrastructure.storage import schema, sqlite, vec_index

BLOCK = 64
TLDR_PAGES = 2000
TLDR_QUERIES = 300
Matrix = np.ndarray[Any, np.dtype[np.float32]]


async def embedded(cache: Path, name: str, texts: list[str], embedder: LocalEmbedder) -> Matrix:
    """Vectors of `texts`, embedded a block at a time and cached (a run can be resumed)."""
    folder = cache / name
    folder.mkdir(parents=True, exist_ok=True)
    blocks = []
    for start in range(0, len(texts), BLOCK):
        path = folder / f"{start:06d}.npy"
        if not path.is_file():
            vectors = np.asarray(
                await embedder.embed(texts[start : start + BLOCK], **embed_as(embedder, False)),
                np.float32,
            )
            np.save(path.with_suffix(".tmp.npy"), vectors)
            path.with_suffix(".tmp.npy").rename(path)
            print(f"  {name}: {start + len(vectors)}/{len(texts)}", flush=True)
        blocks.append(np.load(path))
    return np.concatenate(blocks)


def scifact() -> tuple[list[str], list[str], list[str], list[str], dict[str, set[str]]]:
    """(document ids, texts, query ids, texts, relevant documents of each test query)."""
    folder = DATA / "scifact"
    corpus = [json.loads(line) for line in (folder / "corpus.jsonl").read_text().splitlines()]
    queries = [json.loads(line) for line in (folder / "queries.jsonl").read_text().splitlines()]
    relevant: dict[str, set[str]] = {}
    for line in (folder / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        query, doc, score = line.split()
        if int(score) > 0:
            relevant.setdefault(query, set()).add(doc)
    return (
        [c["_id"] for c in corpus],
        [c["title"] + "\n\n" + c["text"] for c in corpus],
        [q["_id"] for q in queries],
        [q["text"] for q in queries],
        relevant,
    )


def tldr() -> tuple[list[str], list[str]]:
    """(pages, queries): a seeded sample of English pages, and other pages' descriptions."""
    pages = []
    with tarfile.open(DATA / "tldr-pages.tar.gz") as tar:
        for member in tar:
            if member.isfile() and "/pages/" in member.name and member.name.endswith(".md"):
                file = tar.extractfile(member)
                assert file is not None
                pages.append(file.read().decode())
    random.Random(5).shuffle(pages)
    queries = []
    for page in pages[TLDR_PAGES : TLDR_PAGES + 2 * TLDR_QUERIES]:
        line = next((line[2:] for line in page.splitlines() if line.startswith("> ")), None)
        if line:
            queries.append(line)
    return pages[:TLDR_PAGES], queries[:TLDR_QUERIES]


def exact_top(queries: Matrix, docs: Matrix, k: int) -> list[list[int]]:
    unit = docs / np.linalg.norm(docs, axis=1, keepdims=True)
    scores = queries @ unit.T
    return [list(map(int, np.argsort(-row, kind="stable")[:k])) for row in scores]


class Int8Index:
    """One KB's vectors in a scratch database, through vec_index as the daemon uses it."""

    def __init__(self, folder: Path, docs: Matrix) -> None:
        self.path = folder / "recall.db"
        self.conn = sqlite.connect(self.path)
        assert vec_index.load(self.conn), vec_index.load_error
        schema.migrate(self.conn)
        vec_index.ensure(self.conn, "kb", "model", docs.shape[1])
        vec_index.insert(self.conn, "kb", [(f"{i:07d}", v.tolist()) for i, v in enumerate(docs)])
        self.conn.commit()

    def top(self, query: Matrix, k: int) -> list[int]:
        return [int(c) for c, _ in vec_index.search(self.conn, "kb", query.tolist(), k)]

    def vector_bytes(self) -> int:
        rows = self.conn.execute(
            "SELECT sum(pgsize) FROM dbstat WHERE name LIKE ?",
            (vec_index.table_name("kb") + "%",),
        ).fetchone()
        return int(rows[0])


def recall(found: list[list[int]], exact: list[list[int]], k: int) -> float:
    return sum(len(set(f[:k]) & set(e[:k])) / k for f, e in zip(found, exact, strict=True)) / len(
        exact
    )


def ndcg10(ranked: list[list[str]], query_ids: list[str], relevant: dict[str, set[str]]) -> float:
    total = 0.0
    for qid, docs in zip(query_ids, ranked, strict=True):
        gains = relevant[qid]
        dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(docs[:10]) if d in gains)
        ideal = sum(1 / math.log2(i + 2) for i in range(min(10, len(gains))))
        total += dcg / ideal
    return total / len(query_ids)


def measure(name: str, docs: Matrix, queries: Matrix) -> dict[str, dict[int, list[list[int]]]]:
    folder = Path(tempfile.mkdtemp(prefix="coffer-bench-recall-"))
    index = Int8Index(folder, docs)
    found = {k: [index.top(q, k) for q in queries] for k in (10, 30)}
    exact = {k: exact_top(queries, docs, k) for k in (10, 30)}
    float_bytes = docs.shape[0] * docs.shape[1] * 4
    print(
        f"{name}: {docs.shape[0]:,} documents, {queries.shape[0]:,} queries: "
        f"recall@10 {recall(found[10], exact[10], 10):.4f}, "
        f"recall@30 {recall(found[30], exact[30], 30):.4f}; "
        f"int8 index {index.vector_bytes() / 1e6:.2f} MB = "
        f"{index.vector_bytes() / float_bytes:.0%} of the float32 vectors "
        f"({float_bytes / 1e6:.2f} MB)",
        flush=True,
    )
    return {"found": found, "exact": exact}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cache", type=Path, default=Path("/tmp/coffer-vector-recall"))
    args = parser.parse_args()
    print(f"machine: {machine()}")
    config = EmbeddingConfig(provider="local", threads=1, batch_size=32)
    embedder = LocalEmbedder(config, args.cache / "models")
    try:
        pages, descriptions = tldr()
        tldr_queries = await embedded(args.cache, "tldr_queries", descriptions, embedder)
        tldr_docs = await embedded(args.cache, "tldr_docs", pages, embedder)
        doc_ids, doc_texts, query_ids, query_texts, relevant = scifact()
        sci_queries = await embedded(args.cache, "scifact_queries", query_texts, embedder)
        sci_docs = await embedded(args.cache, "scifact_docs", doc_texts, embedder)
    finally:
        await embedder.close()

    measure("tldr-pages", tldr_docs, tldr_queries)
    lists = measure("SciFact", sci_docs, sci_queries)
    tested = [i for i, q in enumerate(query_ids) if q in relevant]
    as_ids = [
        [[doc_ids[d] for d in ranked] for ranked in lists[kind][10]] for kind in ("exact", "found")
    ]
    ids = [query_ids[i] for i in tested]
    exact, int8 = (ndcg10([ranked[i] for i in tested], ids, relevant) for ranked in as_ids)
    print(
        f"SciFact vector-only nDCG@10 over {len(tested)} test claims: exact float32 "
        f"{exact:.4f}, int8 {int8:.4f} ({int8 - exact:+.4f})"
    )


if __name__ == "__main__":
    asyncio.run(main())
