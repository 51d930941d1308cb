"""Keyword search ranks a bounded set of rows when a query's words are common
(keyword_search.SCORED_MAX, lowered here): every score it answers is the row's exact bm25
for the whole query, and where the words left out cannot change the order, the answer is
the one ranking every match gives."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from cofferd.domain.models import KnowledgeBase, Passage
from cofferd.infrastructure.storage import fts_index, keyword_search
from cofferd.surfaces.core import Coffer
from tests.support.helpers import write

NOTES = 60
BOUND = 30  # rows a query may rank here


@pytest.fixture
async def notes(coffer: Coffer, kb: KnowledgeBase, docs: Path) -> KnowledgeBase:
    """`every` and `most` in nearly every note (bm25 gives them no weight), `some` in a
    third, `rare` and `scarce` in three each, and filler words."""
    rng = random.Random(11)
    for i in range(NOTES):
        words = [f"filler{rng.randrange(40)}" for _ in range(rng.randrange(5, 40))]
        words += ["every"] * rng.randrange(1, 4) + ["most"] * (i % 7 != 0)
        words += ["some"] * (i % 3 == 0) + ["rare"] * (i in (5, 17, 33))
        words += ["scarce"] * (i in (8, 17, 40))
        rng.shuffle(words)
        write(docs / f"n{i:02}.md", " ".join(words))
    await coffer.reindexer.reconcile(kb)
    return kb


async def ranked(coffer: Coffer, query: str, scored_max: int, top_k: int) -> list[Passage]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(keyword_search, "SCORED_MAX", scored_max)
        return (await coffer.retrieval.search("notes", query, top_k=top_k)).passages


def key(p: Passage) -> tuple[str, float]:
    return (p.document_id, round(p.score, 9))


@pytest.mark.parametrize(
    "query",
    ["rare every", "every most rare scarce", "scarce most", "every most", "rare some every"],
)
async def test_bounded_ranking_answers_exact_scores(
    coffer: Coffer, notes: KnowledgeBase, query: str
) -> None:
    bounded = await ranked(coffer, query, BOUND, 5)
    every_match = {p.document_id: p.score for p in await ranked(coffer, query, 10**9, 100)}
    assert bounded
    assert all(p.score == pytest.approx(every_match[p.document_id], abs=1e-9) for p in bounded)
    assert [p.score for p in bounded] == sorted((p.score for p in bounded), reverse=True)


@pytest.mark.parametrize("query", ["rare every", "every most rare scarce", "every most"])
async def test_words_without_weight_change_nothing(
    coffer: Coffer, notes: KnowledgeBase, query: str
) -> None:
    """`every` and `most` are in over half the notes: bm25 weighs them ~0, so leaving
    their rows out of the ranking cannot change it."""
    bounded = await ranked(coffer, query, BOUND, 5)
    exact = await ranked(coffer, query, 10**9, 5)
    assert [key(p) for p in bounded] == [key(p) for p in exact]


async def test_what_is_ranked_when_words_are_common(
    coffer: Coffer, notes: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []
    rank = fts_index.ranked

    def spy(conn, kb, match, top_k, within=None, part=(0, 1)):  # type: ignore[no-untyped-def]
        asked.append(match)
        return rank(conn, kb, match, top_k, within, part)

    monkeypatch.setattr(fts_index, "ranked", spy)
    await ranked(coffer, "every most", BOUND, 5)
    assert asked == ['"every" AND "most"']
    asked.clear()
    await ranked(coffer, "rare every", BOUND, 3)  # the three notes holding `rare`
    assert sorted(asked) == ['"rare"', '("rare") AND ("every")']
    asked.clear()
    await ranked(coffer, "rare every", BOUND, 5)  # too few: every match is ranked
    assert asked[-1] == '"rare" OR "every"'
    asked.clear()
    await ranked(coffer, "rare scarce", BOUND, 5)  # few rows: ranked as they are
    assert asked == ['"rare" OR "scarce"']


@pytest.mark.parametrize("query", ["every", "every most", "rare every", "some -rare", "filler1*"])
async def test_a_ranking_split_between_readers_answers_the_same(
    coffer: Coffer, notes: KnowledgeBase, query: str
) -> None:
    """SPLIT_MIN (lowered here) splits a ranking by rowid between the readers: each
    scores its rows as the whole would, so the merged answer is the same."""
    whole = await ranked(coffer, query, 10**9, 7)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(keyword_search, "SPLIT_MIN", 0)
        split = await ranked(coffer, query, 10**9, 7)
    assert whole
    assert [key(p) for p in split] == [key(p) for p in whole]
