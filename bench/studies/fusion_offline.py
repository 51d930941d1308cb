"""Hybrid fusion studied offline (issue 36 §2): the two lists hybrid search fuses, dumped
per question by `bench.guards.multilingual_search --dump` (keyword: bm25 as `keyword_search`
scores it; vector: cosine similarity), fused here many ways and scored as the daemon
scores a search (top 10 passages, documents in the order of their best passage, nDCG@10;
a chunk only the model found dropped below the model's similarity floor; a question the
model does not read answered by keywords).

Fusions: reciprocal rank (K per list, candidates per list, the vector list's weight);
convex combination of scores normalised per query (min-max, by the list's best, z-score),
alpha the vector share; the keyword list re-ranked by such a mix (only its candidates);
and gates: a question keyword search is sure of (the bm25 margin of its first over its
second) keeps keyword's order. Every setting is scored on two halves of each set's
questions (by a digest of the question id): the choice is made on half A and reported on
half B too, so that a winner picked among hundreds is not its own proof.

    .venv/bin/python -m bench.studies.fusion_offline /tmp/fusion/dump [--sets a,b] [--floor 0.75]
        [--show N]

Sets whose name starts with `scifact` are scored with MiniLM's floor (0.3), the others
with e5's (0.75), unless --floor says otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import random
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cofferd.application.search import fusion
from cofferd.domain.config import LOCAL_MIN_SIMILARITY, MULTILINGUAL_MIN_SIMILARITY
from cofferd.domain.models import Passage

TOP_K = 10
Key = tuple[str, int]  # (document, chunk position)


@dataclass(frozen=True)
class Question:
    id: str
    rels: dict[str, int]
    reads: bool
    keyword: list[tuple[Key, float]]
    vector: list[tuple[Key, float]]
    half: str  # "A" or "B"


def load(path: Path) -> list[Question]:
    out = []
    for line in path.open(encoding="utf-8"):
        row = json.loads(line)
        half = "A" if hashlib.sha256(row["id"].encode()).digest()[0] % 2 == 0 else "B"
        out.append(
            Question(
                row["id"],
                row["rels"],
                row["reads"],
                [((d, p), s) for d, p, s in row["keyword"]],
                [((d, p), s) for d, p, s in row["vector"]],
                half,
            )
        )
    return out


def ndcg(ranked: Sequence[Key], rels: dict[str, int]) -> float:
    docs = list(dict.fromkeys(d for d, _ in ranked[:TOP_K]))
    dcg = sum(rels.get(d, 0) / math.log2(i + 2) for i, d in enumerate(docs))
    ideal = sorted(rels.values(), reverse=True)[:TOP_K]
    return dcg / sum(r / math.log2(i + 2) for i, r in enumerate(ideal))


# -- normalisation -------------------------------------------------------------------------


def normalised(scores: Sequence[float], how: str) -> list[float]:
    if not scores:
        return []
    if how == "minmax":
        low, high = min(scores), max(scores)
        return [(s - low) / (high - low) if high > low else 1.0 for s in scores]
    if how == "max":  # by the best: a weak list stays weak
        high = max(scores)
        return [s / high if high > 0 else 0.0 for s in scores]
    if how == "z":
        mean = statistics.fmean(scores)
        spread = statistics.pstdev(scores) or 1.0
        return [(s - mean) / spread for s in scores]
    raise ValueError(how)


# -- fusions: each returns the chunks in order (before the floor and the top 10) ----------

Fusion = Callable[[Question], list[Key]]


def keyword_only(q: Question) -> list[Key]:
    return [k for k, _ in q.keyword]


def rrf(k_kw: int, k_vec: int, n_kw: int, n_vec: int, weight: float) -> Fusion:
    def fuse(q: Question) -> list[Key]:
        scores: dict[Key, float] = {}
        own: dict[Key, float] = {}
        for k, w, hits in ((k_kw, 1.0, q.keyword[:n_kw]), (k_vec, weight, q.vector[:n_vec])):
            for rank, (key, score) in enumerate(hits):
                scores[key] = scores.get(key, 0.0) + w / (k + rank + 1)
                own.setdefault(key, score)
        return sorted(scores, key=lambda key: (scores[key], own[key]), reverse=True)

    return fuse


def convex(how: str, alpha: float, n_kw: int, n_vec: int) -> Fusion:
    """alpha * vector + (1 - alpha) * keyword, each normalised over its own candidates; a
    chunk missing from a list gets that list's lowest normalised value."""

    def fuse(q: Question) -> list[Key]:
        kw, vec = q.keyword[:n_kw], q.vector[:n_vec]
        nk = dict(zip((k for k, _ in kw), normalised([s for _, s in kw], how), strict=True))
        nv = dict(zip((k for k, _ in vec), normalised([s for _, s in vec], how), strict=True))
        low_k, low_v = (lowest(z) if how == "z" else 0.0 for z in (nk, nv))
        keys = list(dict.fromkeys([*nk, *nv]))
        mixed = {key: alpha * nv.get(key, low_v) + (1 - alpha) * nk.get(key, low_k) for key in keys}
        return sorted(keys, key=lambda key: mixed[key], reverse=True)

    return fuse


def lowest(z: dict[Key, float]) -> float:
    """What a chunk missing from a z-scored list counts as: its lowest, or one below a list
    whose candidates all scored alike (as fusion.standardised)."""
    return min(z.values()) if any(z.values()) else (-1.0 if z else 0.0)


def rerank(how: str, alpha: float, n_kw: int, n_vec: int) -> Fusion:
    """Keyword's first n_kw candidates only, ordered by the mix (a candidate outside the
    vector list's n_vec counts as its least similar)."""
    mix = convex(how, alpha, n_kw, n_vec)

    def fuse(q: Question) -> list[Key]:
        kept = {k for k, _ in q.keyword[:n_kw]}
        return [k for k in mix(q) if k in kept] + keyword_only(q)[n_kw:]

    return fuse


def daemon(n_kw: int = fusion.KEYWORD_CANDIDATES, n_vec: int = fusion.VECTOR_CANDIDATES) -> Fusion:
    """The daemon's own fusion (`fusion.blend`) on the lists cut as the daemon cuts them."""

    def passages(hits: list[tuple[Key, float]]) -> list[Passage]:
        return [Passage(d, "", "", score, position, d) for (d, position), score in hits]

    def fuse(q: Question) -> list[Key]:
        found = fusion.blend(passages(q.keyword[:n_kw]), passages(q.vector[:n_vec]), n_kw + n_vec)
        return [(p.document_id, p.position) for p in found]

    return fuse


def margin_gate(margin: float, inner: Fusion) -> Fusion:
    """Keyword's order when its first beats its second by `margin` of the first's bm25."""

    def fuse(q: Question) -> list[Key]:
        first = q.keyword[0][1] if q.keyword else 0.0
        if len(q.keyword) >= 2 and first > 0 and (first - q.keyword[1][1]) / first >= margin:
            return keyword_only(q)
        return inner(q)

    return fuse


def answer(q: Question, fusion: Fusion, floor: float) -> list[Key]:
    """What hybrid search returns for `q` with this fusion: the model's floor applied to
    chunks keyword search did not find; keywords alone when the model does not read it."""
    if not q.reads or not q.vector:
        return keyword_only(q)[:TOP_K]
    matched = {k for k, _ in q.keyword}
    weak = {k for k, s in q.vector if s < floor and k not in matched}
    return [k for k in fusion(q) if k not in weak][:TOP_K]


def vector_answer(q: Question, floor: float) -> list[Key]:
    if not q.reads:
        return keyword_only(q)[:TOP_K]
    return [k for k, s in q.vector if s >= floor][:TOP_K]


# -- the grid ------------------------------------------------------------------------------


def grid() -> Iterable[tuple[str, Fusion]]:
    yield "keyword", keyword_only
    yield "rrf K60 10/30 w1 (before)", rrf(60, 60, 10, 30, 1.0)
    yield "daemon (fusion.blend)", daemon()
    for k_kw, k_vec, n_kw, n_vec, w in itertools.product(
        (10, 30, 60), (30, 60, 120), (10, 20, 30), (10, 30), (0.5, 0.75, 1.0)
    ):
        yield f"rrf K{k_kw}/{k_vec} {n_kw}/{n_vec} w{w}", rrf(k_kw, k_vec, n_kw, n_vec, w)
    for how, alpha, n_kw, n_vec in itertools.product(
        ("minmax", "max", "z"),
        (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7),
        (10, 20, 30, 50),
        (10, 30, 50),
    ):
        yield f"convex {how} a{alpha} {n_kw}/{n_vec}", convex(how, alpha, n_kw, n_vec)
    for how, alpha, n_kw, n_vec in itertools.product(
        ("minmax", "max", "z"), (0.2, 0.3, 0.4, 0.5, 0.6, 0.8), (5, 10, 20, 30), (30, 100)
    ):
        yield f"rerank {how} a{alpha} {n_kw}/{n_vec}", rerank(how, alpha, n_kw, n_vec)
    for margin, (label, inner) in itertools.product(
        (0.05, 0.1, 0.2, 0.3),
        (
            ("rrf K60 10/30 w1", rrf(60, 60, 10, 30, 1.0)),
            ("convex minmax a0.3 20/30", convex("minmax", 0.3, 20, 30)),
            ("convex z a0.3 20/30", convex("z", 0.3, 20, 30)),
        ),
    ):
        yield f"gate margin {margin} + {label}", margin_gate(margin, inner)


def floor_of(name: str, given: float | None) -> float:
    if given is not None:
        return given
    return LOCAL_MIN_SIMILARITY if name.startswith("scifact") else MULTILINGUAL_MIN_SIMILARITY


def mean(values: Iterable[float]) -> float:
    values = list(values)
    return sum(values) / len(values) if values else 0.0


def interval(differences: Sequence[float], draws: int = 2000) -> tuple[float, float]:
    """A 95 % bootstrap interval of the mean of paired differences (fixed seed)."""
    pick = random.Random(0).choices
    means = sorted(mean(pick(differences, k=len(differences))) for _ in range(draws))
    return means[int(draws * 0.025)], means[int(draws * 0.975)]


def report(sets: dict[str, list[Question]], chosen: Fusion, given: float | None) -> None:
    """Keyword, vector, hybrid before (RRF) and with `fusion`, on each half and in all; the
    gain over keyword with its 95 % interval."""
    before = rrf(60, 60, 10, 30, 1.0)
    print(
        f"\n{'set':<14} {'half':<5} {'n':>5} {'keyword':>8} {'vector':>8} {'RRF':>8} {'new':>8}"
        "  new - keyword [95 %]      new - RRF [95 %]"
    )
    for name, questions in sets.items():
        floor = floor_of(name, given)
        for half in ("A", "B", "all"):
            qs = [q for q in questions if half in ("all", q.half)]
            k = [ndcg(keyword_only(q)[:TOP_K], q.rels) for q in qs]
            v = [ndcg(vector_answer(q, floor), q.rels) for q in qs]
            r = [ndcg(answer(q, before, floor), q.rels) for q in qs]
            n = [ndcg(answer(q, chosen, floor), q.rels) for q in qs]
            gain = [b - a for a, b in zip(k, n, strict=True)]
            over = [b - a for a, b in zip(r, n, strict=True)]
            low, high = interval(gain)
            low2, high2 = interval(over)
            print(
                f"{name:<14} {half:<5} {len(qs):>5} {mean(k):>8.4f} {mean(v):>8.4f} {mean(r):>8.4f}"
                f" {mean(n):>8.4f}  {mean(gain):+.4f} [{low:+.4f}, {high:+.4f}]"
                f"  {mean(over):+.4f} [{low2:+.4f}, {high2:+.4f}]"
            )


def first_relevant(keys: Sequence[Key], rels: dict[str, int]) -> int | None:
    """The rank (from 1) of the first relevant document among these chunks' documents."""
    docs = list(dict.fromkeys(d for d, _ in keys))
    return next((i + 1 for i, d in enumerate(docs) if rels.get(d)), None)


def where(name: str, questions: list[Question], chosen: Fusion, floor: float) -> None:
    """Where hybrid gains and loses against keyword search on one set: the best either list
    alone could do per question (an oracle choosing), the questions won and lost, and the
    rank of the answer in each list for the lost ones."""
    keyword = [ndcg(keyword_only(q)[:TOP_K], q.rels) for q in questions]
    vector = [ndcg(vector_answer(q, floor), q.rels) for q in questions]
    fused = [ndcg(answer(q, chosen, floor), q.rels) for q in questions]
    oracle = [max(k, v) for k, v in zip(keyword, vector, strict=True)]
    best = mean(oracle)
    print(
        f"\n{name}: keyword {mean(keyword):.4f}, hybrid {mean(fused):.4f}; the better of the"
        f" two lists per question (an oracle) {best:.4f} ({best - mean(keyword):+.4f})"
    )
    kw_first = sum(first_relevant(keyword_only(q), q.rels) == 1 for q in questions)
    vec_first = sum(first_relevant([k for k, _ in q.vector], q.rels) == 1 for q in questions)
    neither = sum(
        first_relevant(keyword_only(q), q.rels) != 1
        and first_relevant([k for k, _ in q.vector], q.rels) != 1
        for q in questions
    )
    only_vec = sum(
        first_relevant(keyword_only(q), q.rels) != 1
        and first_relevant([k for k, _ in q.vector], q.rels) == 1
        for q in questions
    )
    print(
        f"  answer first: keyword {kw_first}, vector {vec_first}, vector only {only_vec},"
        f" neither {neither} (of {len(questions)})"
    )
    won = [(f - k, q) for f, k, q in zip(fused, keyword, questions, strict=True) if f > k]
    lost = [(k - f, q) for f, k, q in zip(fused, keyword, questions, strict=True) if f < k]
    gained, lost_sum = (sum(g for g, _ in x) / len(questions) for x in (won, lost))
    print(
        f"  hybrid above keyword on {len(won)} questions (+{gained:.4f}),"
        f" below on {len(lost)} (-{lost_sum:.4f})"
    )
    for loss, q in sorted(lost, key=lambda x: -x[0])[:8]:
        rk = first_relevant(keyword_only(q), q.rels)
        rv = first_relevant([k for k, _ in q.vector], q.rels)
        rf = first_relevant(answer(q, chosen, floor), q.rels)
        top = q.vector[0][1] if q.vector else float("nan")
        right = next((s for (d, _), s in q.vector if q.rels.get(d)), float("nan"))
        print(
            f"    -{loss:.2f} {q.id}: answer keyword #{rk}, vector #{rv}, hybrid #{rf};"
            f" cosine of the vector first {top:.3f}, of the answer {right:.3f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dump", type=Path)
    parser.add_argument("--sets", default=None, help="default: every .jsonl in the folder")
    parser.add_argument("--floor", type=float, default=None)
    parser.add_argument("--show", type=int, default=25, help="best settings shown")
    parser.add_argument("--only", default=None, help="only settings whose name holds this")
    parser.add_argument(
        "--report", default=None, help="only: this setting against keyword and before, by half"
    )
    parser.add_argument(
        "--where", action="store_true", help="with --report: where it gains and loses, per set"
    )
    args = parser.parse_args()
    names = args.sets.split(",") if args.sets else sorted(p.stem for p in args.dump.glob("*.jsonl"))
    sets = {name: load(args.dump / f"{name}.jsonl") for name in names}
    for name, questions in sets.items():
        floor = floor_of(name, args.floor)
        keyword = [ndcg(keyword_only(q)[:TOP_K], q.rels) for q in questions]
        vector = [ndcg(vector_answer(q, floor), q.rels) for q in questions]
        print(
            f"{name}: {len(questions)} questions ({sum(q.half == 'A' for q in questions)} in A),"
            f" {sum(not q.reads for q in questions)} not read by the model; keyword "
            f"{mean(keyword):.4f}, vector {mean(vector):.4f} (floor {floor})"
        )
    if args.report:
        report(sets, dict(grid())[args.report], args.floor)
        for name, questions in sets.items() if args.where else ():
            where(name, questions, dict(grid())[args.report], floor_of(name, args.floor))
        return
    rows = []
    for label, fused in grid():
        if args.only and args.only not in label and label != "keyword":
            continue
        row: dict[str, float] = {}
        for name, questions in sets.items():
            floor = floor_of(name, args.floor)
            got = [(q.half, ndcg(answer(q, fused, floor), q.rels)) for q in questions]
            for half in "AB":
                row[f"{name} {half}"] = mean(v for h, v in got if h == half)
            row[name] = mean(v for _, v in got)
        rows.append((label, row))
    base = rows[0][1]

    def on_a(row: dict[str, float]) -> tuple[bool, float]:
        """Chosen on half A: no set worse than keyword, then the mean gain over keyword."""
        gains = [row[f"{n} A"] - base[f"{n} A"] for n in sets]
        return min(gains) >= 0, mean(gains)

    ranked = sorted(rows[1:], key=lambda r: on_a(r[1]), reverse=True)
    header = "  ".join(f"{n[:12]:>12} A/B" for n in sets)
    print(f"\n{'setting':<42} {header}   (gain over keyword, half A / half B)")
    for label, row in [rows[0], rows[1], *ranked[: args.show]]:
        cells = "  ".join(
            f"{row[f'{n} A'] - base[f'{n} A']:+.4f}/{row[f'{n} B'] - base[f'{n} B']:+.4f}"
            if label != "keyword"
            else f"{row[f'{n} A']:.4f}/{row[f'{n} B']:.4f}"
            for n in sets
        )
        print(f"{label:<42} {cells}")


if __name__ == "__main__":
    main()
