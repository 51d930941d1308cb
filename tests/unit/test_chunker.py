from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cofferd.application.reading.chunker import chunk_markdown, count_words
from cofferd.domain.models import KnowledgeBase
from cofferd.domain.scripts import CJK_RANGES
from cofferd.surfaces.core import Coffer
from tests.support.helpers import write


def test_headings_split_first_and_carry_their_path() -> None:
    body = "# Guide\n\nintro\n\n## Install\n\nsteps\n\n### Linux\n\napt\n\n## Use\n\nrun it\n"
    chunks = chunk_markdown(body, "Guide", 512, 64)
    assert [c.heading for c in chunks] == [
        ("Guide",),
        ("Guide", "Install"),
        ("Guide", "Install", "Linux"),
        ("Guide", "Use"),
    ]
    assert [c.position for c in chunks] == [0, 1, 2, 3]
    assert chunks[1].text.startswith("## Install")


def test_title_leads_the_path_when_there_is_no_h1() -> None:
    chunks = chunk_markdown("## Sub\n\ntext", "notes", 512, 0)
    assert chunks[0].heading == ("notes", "Sub")


def test_code_fences_and_tables_stay_whole() -> None:
    fence = "```python\n" + "\n\n".join(f"x{i} = {i}" for i in range(20)) + "\n```"
    table = "| a | b |\n|---|---|\n" + "\n".join(f"| {i} | {i} |" for i in range(20))
    body = "para one\n\n" + fence + "\n\n" + table + "\n\npara two"
    chunks = chunk_markdown(body, "t", 150, 0)
    assert len(chunks) > 1
    assert any(fence in c.text for c in chunks)
    assert any(table in c.text for c in chunks)


def test_cjk_characters_count_as_words() -> None:
    assert count_words("东京都 hello world") == 5


@settings(max_examples=400, deadline=None)
@given(
    st.text(alphabet=st.sampled_from("中文ｱ한 \t\n\u3000\u00a0\x1c\x85\u2028ab。,"), max_size=40)
)
def test_words_are_counted_as_they_are_defined(text: str) -> None:
    """A word: one CJK character, or a run of other characters that are not whitespace."""
    assert count_words(text) == len(re.findall(f"[{CJK_RANGES}]|[^\\s{CJK_RANGES}]+", text))


def test_overlap_repeats_the_tail_of_the_previous_chunk() -> None:
    body = "\n\n".join(f"p{i} " + " ".join(f"w{i}x{j}" for j in range(40)) for i in range(10))
    chunks = chunk_markdown(body, "t", 100, 20)
    assert len(chunks) > 2
    for prev, cur in itertools.pairwise(chunks):
        assert cur.text.startswith(" ".join(prev.text.split()[-20:]))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.sampled_from(["# H", "## Sub", "word " * 30, "```\ncode\n```", "东京 " * 40, "", "-"]),
        max_size=40,
    ),
    st.integers(64, 300),
)
def test_chunks_are_bounded_and_lose_no_words(blocks: list[str], size: int) -> None:
    body = "\n\n".join(blocks)
    chunks = chunk_markdown(body, "t", size, 0)
    for c in chunks:
        assert count_words(c.text) <= size
    assert sum(count_words(c.text) for c in chunks) == count_words(body)


def only_headings(text: str) -> bool:
    return all(line.lstrip().startswith("#") for line in text.split("\n") if line.strip())


def test_a_heading_with_nothing_under_it_leads_what_follows() -> None:
    body = "# Sourdough\n\n## Starter\n\nFeed it flour and water.\n\n## Bake\n\n### Oven\n\nHot."
    chunks = chunk_markdown(body, "Sourdough", 512, 64)
    assert [c.text for c in chunks] == [
        "# Sourdough\n\n## Starter\n\nFeed it flour and water.",
        "## Bake\n\n### Oven\n\nHot.",
    ]
    assert [c.heading for c in chunks] == [
        ("Sourdough", "Starter"),
        ("Sourdough", "Bake", "Oven"),
    ]
    assert [(c.line_start, c.line_end) for c in chunks] == [(1, 5), (7, 11)]


def test_a_heading_before_a_block_too_large_leads_its_first_piece() -> None:
    words = " ".join(f"w{i}" for i in range(300))
    for body in (f"# Sourdough\n\n{words}", f"intro\n\n# Sourdough\n\n{words}"):
        chunks = chunk_markdown(body, "t", 100, 20)
        assert not any(only_headings(c.text) for c in chunks)
        led = next(c for c in chunks if "# Sourdough" in c.text)
        assert led.text.startswith("# Sourdough\n\nw0 ")
        assert body.split("\n")[led.line_start - 1] == "# Sourdough"
        assert all(count_words(c.text) <= 100 for c in chunks)


def test_a_heading_that_does_not_fit_beside_its_paragraph_still_leads_it() -> None:
    paragraph = " ".join(f"w{i}" for i in range(99))  # fits alone, not with the heading
    chunks = chunk_markdown(f"# Sourdough starter\n\n{paragraph}", "t", 100, 0)
    assert chunks[0].text.startswith("# Sourdough starter\n\nw0 ")
    assert all(count_words(c.text) <= 100 for c in chunks)


def test_a_document_that_is_only_a_heading_keeps_it() -> None:
    (chunk,) = chunk_markdown("# Sourdough", "Sourdough", 512, 64)
    assert chunk.text == "# Sourdough"


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.sampled_from(["# H", "## Sub", "word " * 30, "```\ncode\n```", "东京 " * 40, "", "-"]),
        max_size=40,
    ),
    st.integers(100, 300),
    st.floats(0, 0.5),
)
def test_chunks_with_overlap_are_bounded_and_never_a_heading_alone(
    blocks: list[str], size: int, overlap: float
) -> None:
    body = "\n\n".join(blocks)
    chunks = chunk_markdown(body, "t", size, int(size * overlap))
    for c in chunks:
        assert count_words(c.text) <= size
    # only the headings that end the document, with nothing under them, stay by themselves
    lead = [c for c in chunks[:-1] if only_headings(c.text)]
    assert not lead, lead


async def test_an_index_chunked_before_headings_led_is_chunked_again(
    coffer: Coffer, kb: KnowledgeBase, docs: Path
) -> None:
    write(docs / "bread.md", "# Sourdough\n\n## Starter\n\nFeed it flour and water.")
    await coffer.reindexer.reconcile(kb)

    def chunked_as_format_5(conn: Any) -> None:  # as the previous version left it
        conn.execute("UPDATE documents SET chunking = 'v5:words:512:64'")

    await coffer.stores.db.transact(chunked_as_format_5)
    result = await coffer.reindexer.reconcile(kb)
    assert (result.documents_updated, result.documents_unchanged) == (1, 0)


def test_pages_and_slides_flow_into_passages_and_sheets_do_not() -> None:
    deck = "## Slide 1\n\n# Plan\n\nfirst\n\n## Slide 2\n\n# Plan (2)\n\nsecond"
    (slides,) = chunk_markdown(deck, "Talk", 512, 64, paged="slide")  # titles flow too
    assert slides.text == deck and slides.heading == ("Talk",)
    # a page's mark leads the heading after it, never a passage of its own
    sections = chunk_markdown(deck, "Talk", 512, 64, paged="page")
    assert [c.text for c in sections] == deck.replace("\n\n## Slide 2", "\n\n\0## Slide 2").split(
        "\n\n\0"
    )
    body = "## Page 1\n\nfirst words\n\n## Page 2\n\nsecond words"
    (flowing,) = chunk_markdown(body, "Doc", 512, 64, paged="page")
    assert flowing.text == body and flowing.heading == ("Doc",)
    assert (flowing.line_start, flowing.line_end) == (1, 7)
    # a note's own `## Page 2` is a heading like any other
    assert len(chunk_markdown(body, "Doc", 512, 64)) == 2
    book = "## Sheet One\n\nrows\n\n## Sheet Two\n\nmore rows"
    sheets = chunk_markdown(book, "Book", 512, 64, paged="sheet")
    assert [c.heading for c in sheets] == [("Book", "Sheet One"), ("Book", "Sheet Two")]
    # a page's text past a passage's size is cut as Markdown's is
    long = "## Page 1\n\n" + "word " * 300 + "\n\n## Page 2\n\n" + "more " * 300
    cut = chunk_markdown(long, "Doc", 512, 64, paged="page")
    assert len(cut) == 2 and cut[1].text.split()[:2] == ["word", "word"]  # the overlap
