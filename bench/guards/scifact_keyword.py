"""(a) SciFact keyword retrieval quality through the real code path.

Each abstract becomes a Markdown file `# title` + text in a fresh KB; the 300 test claims
are searched with `Retrieval.search` (the function the API calls). Prints nDCG@10 and
Recall@100 (documents ranked by their best passage).

    .venv/bin/python -m bench.guards.scifact_keyword
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from bench.common import DATA, exit_by_targets, machine, scratch_home, verdict
from coffer_kernel.locations import Locations
from cofferd.domain.models import Passage
from cofferd.surfaces.core import Coffer


def load_scifact() -> tuple[list[dict[str, str]], dict[str, str], dict[str, dict[str, int]]]:
    return load_beir("scifact")


def load_beir(name: str) -> tuple[list[dict[str, str]], dict[str, str], dict[str, dict[str, int]]]:
    """(corpus, queries by id, relevance by query id) of a BEIR-layout set in the data."""
    root = DATA / name
    corpus = [json.loads(line) for line in (root / "corpus.jsonl").open(encoding="utf-8")]
    queries = {q["_id"]: q["text"] for q in map(json.loads, (root / "queries.jsonl").open())}
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    for line in list((root / "qrels" / "test.tsv").open())[1:]:
        qid, cid, score = line.split()
        qrels[qid][cid] = int(score)
    return corpus, queries, qrels


def write_beir(folder: Path, corpus: Sequence[dict[str, str]], layout: str = "heading") -> None:
    """Each document as `<id>.md`, its title a `# heading` (or frontmatter `title:`)."""
    for doc in corpus:
        title, text = doc.get("title"), doc["text"]
        if not title:
            body = text + "\n"
        elif layout == "heading":
            body = f"# {title}\n\n{text}\n"
        else:
            body = '---\ntitle: "{}"\n---\n{}\n'.format(title.replace('"', "'"), text)
        (folder / f"{doc['_id']}.md").write_text(body, encoding="utf-8")


def ranked_documents(passages: Sequence[Passage]) -> list[str]:
    """Document ids (file stems) in the order of their best passage."""
    return list(dict.fromkeys(p.path.rsplit("/", 1)[-1].removesuffix(".md") for p in passages))


def ndcg_at(ranked: list[str], rels: dict[str, int], k: int) -> float:
    dcg = sum(rels.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(rels.values(), reverse=True)[:k]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


async def main() -> None:
    corpus, queries, qrels = load_scifact()
    home = scratch_home("scifact")
    locations = Locations(home=home, socket=home / "cofferd.sock")
    async with await Coffer.open(locations) as coffer:
        kb = await coffer.kbs.create("scifact")
        docs = locations.docs_dir("scifact")
        write_beir(docs, corpus)
        started = time.perf_counter()
        result = await coffer.reindexer.reconcile(kb)
        print(
            f"indexed {result.documents_added} abstracts in {time.perf_counter() - started:.1f} s"
        )

        ndcgs, recalls = [], []
        for qid, rels in sorted(qrels.items()):
            found = await coffer.retrieval.search("scifact", queries[qid], top_k=100)
            ranked = ranked_documents(found.passages)
            ndcgs.append(ndcg_at(ranked, rels, 10))
            relevant = {d for d, r in rels.items() if r > 0}
            recalls.append(len(relevant & set(ranked[:100])) / len(relevant))
    print(f"machine: {machine()}")
    print(f"SciFact test queries: {len(ndcgs)}")
    ndcg = sum(ndcgs) / len(ndcgs)
    print(f"nDCG@10    {ndcg:.4f} [target >= 0.68 (issue 2): {verdict(ndcg >= 0.68)}]")
    print(f"Recall@100 {sum(recalls) / len(recalls):.4f}")


if __name__ == "__main__":
    asyncio.run(main())
    exit_by_targets()
