from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from cofferd.application.chunker import chunk_markdown, count_words


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
