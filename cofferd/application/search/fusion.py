"""Hybrid search's fusion: the keyword list and the vector list of one query combined by
their scores, not their ranks.

Each list's scores (bm25; cosine similarity) are standardised over the list's own
candidates (z-scores: the list's mean and spread, so bm25's scale and a model's narrow band
of similarities, e5's first 30 within a few hundredths, weigh alike), then mixed:
VECTOR_SHARE of the vector score, the rest of the keyword score. A chunk missing from a
list counts as that list's lowest candidate (one spread below a list whose candidates all
scored alike: a single keyword hit still counts). Unlike rank fusion, a vector hit barely
more similar than the next does not outvote keyword search's clear first, and a clear
vector first does count.

Chosen offline on half the questions of each set and confirmed on the other half
(bench.studies.fusion_offline; docs/benchmarks.md, issue 36): against rank fusion (K = 60, 10/30
candidates) nDCG@10 +0.011 on JSQuAD (which rank fusion lost to keyword search), +0.005 on
CMRC 2018 and on its hard questions, +0.013 on SciFact and +0.008 on English tldr pages
with MiniLM; one setting for both bundled models.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import replace

from cofferd.domain.models import Passage

KEYWORD_CANDIDATES = 30
VECTOR_CANDIDATES = 30
VECTOR_SHARE = 0.4

Key = tuple[str, str, int]  # (knowledge base, document, position)


def _key(passage: Passage) -> Key:
    return (passage.knowledge_base, passage.document_id, passage.position)


def standardised(passages: Sequence[Passage]) -> tuple[dict[Key, float], float]:
    """Each passage's score as a z-score over the list, and what a chunk missing from the
    list counts as: the list's lowest; when every candidate scored alike (one hit), they
    all count 0 and a missing chunk one spread below them."""
    scores = [p.score for p in passages]
    if not scores:
        return {}, 0.0
    mean = statistics.fmean(scores)
    spread = statistics.pstdev(scores)
    z: dict[Key, float] = {}
    for passage in passages:
        z.setdefault(_key(passage), (passage.score - mean) / spread if spread else 0.0)
    return z, min(z.values()) if spread else -1.0


def blend(
    keyword: Sequence[Passage],
    semantic: Sequence[Passage],
    top_k: int,
    share: float | None = None,
) -> list[Passage]:
    """The best `top_k` of both lists by share * vector z + (1 - share) * keyword z (share:
    VECTOR_SHARE unless given), one entry per (document, position), scored so; equal
    scores keep keyword's order first."""
    share = VECTOR_SHARE if share is None else share
    by_keyword, missing_k = standardised(keyword)
    by_vector, missing_v = standardised(semantic)
    first: dict[Key, Passage] = {}
    for passage in (*keyword, *semantic):
        first.setdefault(_key(passage), passage)
    mixed = {
        key: share * by_vector.get(key, missing_v) + (1 - share) * by_keyword.get(key, missing_k)
        for key in first
    }
    ranked = sorted(first, key=mixed.__getitem__, reverse=True)[:top_k]
    return [replace(first[key], score=mixed[key]) for key in ranked]
