"""The query syntax holds in every mode: `-word` excludes and `"a phrase"` must be there
word for word in vector and hybrid search too, with the bundled local model for real (its
vectors alone would bring passages with the excluded word or without the phrase)."""

from __future__ import annotations

import re

import pytest

from cofferd.domain.models import KnowledgeBase
from cofferd.surfaces.core import Coffer
from tests.support.helpers import write

NOTES = {
    "garden-plan.md": "# Garden plan 2027\n\nRaised beds for tomatoes and beans; plan the "
    "compost corner by March.",
    "garden-tools.md": "# Tools\n\nPlan to buy a new garden hose and sharpen the shears.",
    "gardening.md": "# Weekend\n\nGardening plans: weed the beds, plant bulbs in October.",
    "trip.md": "# Trip plan\n\nThe plan for the Lisbon trip: flights in May, a hotel near "
    "the river.",
    "budget.md": "# Budget\n\nThe yearly budget plan: rent, food, savings.",
    "boiler.md": "# Boiler\n\nThe pressure gauge on the boiler should read 1.5 bar.",
    "tyres.md": "# Tyres\n\nCheck the tyre pressure monthly; the gauge at the petrol station "
    "works.",
    "blood.md": "# Health\n\nBlood pressure was measured at the clinic; the gauges agree.",
    "tokyo.md": "# 東京の計画\n\n東京大学の近くで庭の計画を立てる。a garden plan in Tokyo.",
    "campus.md": "# 大学\n\n大学の図書館で勉強する計画。a study plan at the university.",
}


@pytest.fixture
async def local(coffer: Coffer) -> KnowledgeBase:
    kb = await coffer.kbs.create(
        "local",
        {"enabled_modes": ["keyword", "grep", "vector"], "embedding": {"provider": "local"}},
    )
    for name, text in NOTES.items():
        write(coffer.locations.docs_dir("local") / name, text)
    await coffer.reindexer.reconcile(kb)
    await coffer.embeddings.drain("local")
    assert (await coffer.stores.index.metrics("local"))["embed_pending"] == 0
    return kb


async def found(coffer: Coffer, mode: str, query: str) -> list[str]:
    await coffer.kbs.update_config("local", {"default_mode": mode})
    result = await coffer.retrieval.search("local", query)
    assert (result.mode, result.fallback) == (mode, None), query
    return [p.path for p in result.passages]


def texts_of(*paths: str) -> str:
    return "\n".join(NOTES[p] for p in paths)


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
async def test_a_minus_excludes_in_every_mode(
    coffer: Coffer, local: KnowledgeBase, mode: str
) -> None:
    assert "garden-plan.md" in await found(coffer, mode, "plan")
    without = await found(coffer, mode, "plan -garden")
    assert without and not re.search("garden", texts_of(*without), re.IGNORECASE)
    assert "trip.md" in without
    # an excluded phrase, and a CJK word, as in keyword mode
    assert "garden-plan.md" not in await found(coffer, mode, 'plan -"compost corner"')
    assert "tokyo.md" not in await found(coffer, mode, "plan -東京")


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
async def test_a_quoted_phrase_holds_in_every_mode(
    coffer: Coffer, local: KnowledgeBase, mode: str
) -> None:
    assert {"tyres.md", "blood.md"} <= set(await found(coffer, mode, "pressure gauge"))
    assert await found(coffer, mode, '"pressure gauge"') == ["boiler.md"]
    assert await found(coffer, mode, '"pressure gauge" boiler reading') == ["boiler.md"]


async def test_a_cjk_phrase_and_exclusion_mean_the_whole_run(
    coffer: Coffer, local: KnowledgeBase
) -> None:
    assert await found(coffer, "keyword", '"東京大学"') == ["tokyo.md"]
    # excluding 東京大学 leaves a passage that has 大学 alone
    without = await found(coffer, "keyword", "study plan at the university -東京大学")
    assert "campus.md" in without and "tokyo.md" not in without
    # MiniLM does not read Japanese: those notes (mostly Japanese) have no vector to find
    assert await found(coffer, "vector", '"東京大学"') == []
    without = await found(coffer, "vector", "study plan at the university -東京大学")
    assert without and not {"campus.md", "tokyo.md"} & set(without)


async def test_the_model_reads_the_query_without_its_operators(
    coffer: Coffer, local: KnowledgeBase
) -> None:
    # what is left once the exclusion is taken out is plain English: the model answers it
    result = await coffer.retrieval.search("local", "trip plan -東京")
    assert (result.mode, result.fallback) == ("hybrid", None)
    assert result.passages[0].path == "trip.md"
