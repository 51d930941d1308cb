"""Snippets are as wide on screen in every script: about 150 columns, where a Chinese,
Japanese or Korean character takes two (FTS5's snippet() counts tokens, and each CJK
character is a token: its CJK snippets were 28 characters, its English ones 150)."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

from cofferd.domain.models import KnowledgeBase, Passage
from cofferd.infrastructure.storage.fts_text import HIGHLIGHT_END, HIGHLIGHT_START, snippet
from cofferd.surfaces.core import Coffer
from tests.support.fake_embeddings import FakeEmbeddings
from tests.support.helpers import write

ENGLISH = (
    "The boiler in the basement needs its pressure checked every autumn before the heating "
    "season starts. Bleed the radiators upstairs first, then top up the system until the "
    "gauge reads one and a half bar. If the pressure drops again within a week, call the "
    "plumber about the expansion vessel and the relief valve."
)
JAPANESE = (
    "大阪は日本の西部にある大きな都市で、古くから商業の中心地として栄えてきました。"
    "食べ物がおいしいことで有名で、たこ焼きやお好み焼きは全国に知られています。"
    "また、大阪城や道頓堀などの観光地も多く、毎年たくさんの観光客が訪れます。"
    "人々は明るく親しみやすいと言われ、お笑いの文化も盛んです。"
)
CHINESE = (
    "北京是中华人民共和国的首都，也是全国的政治和文化中心。这座城市有三千多年的历史，"
    "故宫、天坛和长城等名胜古迹吸引了大量游客。北京的交通十分便利，地铁线路覆盖了城市的"
    "大部分地区，每天有数百万人乘坐地铁上下班。"
)
NOTES = {
    "boiler.md": f"# Boiler\n\n{ENGLISH}",
    "osaka.md": f"# 大阪\n\n{JAPANESE}",
    "beijing.md": f"# 北京\n\n{CHINESE}",
}


def columns(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def plain(marked: str) -> str:
    return marked.replace(HIGHLIGHT_START, "").replace(HIGHLIGHT_END, "")


@pytest.fixture
async def notes(coffer: Coffer, kb: KnowledgeBase, docs: Path) -> KnowledgeBase:
    for name, text in NOTES.items():
        write(docs / name, text)
    await coffer.reindexer.reconcile(kb)
    return kb


async def first(coffer: Coffer, query: str, kb: str = "notes") -> Passage:
    return (await coffer.retrieval.search(kb, query)).passages[0]


@pytest.mark.parametrize(
    ("query", "path", "matched"),
    [
        ("expansion vessel", "boiler.md", "expansion"),
        ("観光客", "osaka.md", "観光客"),
        ("お笑い", "osaka.md", "お笑い"),
        ("故宫", "beijing.md", "故宫"),
    ],
)
async def test_snippets_are_as_wide_on_screen_in_every_script(
    coffer: Coffer, notes: KnowledgeBase, query: str, path: str, matched: str
) -> None:
    hit = await first(coffer, query)
    assert hit.path == path
    assert 130 <= columns(plain(hit.snippet)) <= 155, hit.snippet
    assert f"{HIGHLIGHT_START}{matched}{HIGHLIGHT_END}" in hit.snippet
    assert plain(hit.snippet).strip("…") in hit.text


async def test_an_english_snippet_is_cut_between_words(
    coffer: Coffer, notes: KnowledgeBase
) -> None:
    hit = await first(coffer, "relief valve")
    words = set(re.findall(r"\w+", ENGLISH))
    assert hit.snippet.startswith("…")
    assert set(re.findall(r"\w+", plain(hit.snippet))) <= words  # no word cut in two


def test_the_snippet_holds_the_most_different_matches() -> None:
    filler = " ".join(["word"] * 60)
    marked = f"\x02boiler\x03 {filler} \x02boiler\x03 \x02pressure\x03 {filler} end"
    cut, at = snippet(marked)
    assert "\x02boiler\x03 \x02pressure\x03" in cut and cut.startswith("…")
    text = marked.replace("\x02", "").replace("\x03", "")
    assert text[at:].startswith("boiler pressure")  # where its first match is in the text
    assert snippet("short \x02text\x03") == ("short \x02text\x03", 6)


async def test_vector_passages_have_snippets_as_wide(
    coffer: Coffer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COFFER_TEST_EMBED_KEY", "sk-test")
    server = await FakeEmbeddings().start()
    try:
        kb = await coffer.kbs.create("vec", {**server.config(), "default_mode": "vector"})
        for name, text in NOTES.items():
            write(coffer.locations.docs_dir("vec") / name, text)
        await coffer.reindexer.reconcile(kb)
        await coffer.embeddings.drain("vec")
        passages = (await coffer.retrieval.search("vec", "boiler pressure")).passages
    finally:
        await server.stop()
    assert {p.path for p in passages} == set(NOTES)
    for p in passages:
        assert 130 <= columns(p.snippet.strip("…")) <= 155, p.snippet
        assert p.text.startswith(p.snippet.rstrip("…"))
