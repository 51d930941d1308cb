from __future__ import annotations

import pytest

from cofferd.application.reading.markdown import NotText, document_id, parse


def test_title_from_frontmatter_then_top_heading_then_filename() -> None:
    assert parse(b"---\ntitle: Plan\n---\n# Heading\n", "a.md").title == "Plan"
    assert parse(b"intro\n\n## Second level\n", "a.md").title == "a"  # a section
    assert parse(b"## Second level\n\n# Top\n", "a.md").title == "Top"
    assert parse(b"```\n# not a heading\n```\nplain", "dir/meeting notes.md").title == (
        "meeting notes"
    )


def test_frontmatter_is_read_safely_and_kept_out_of_the_body() -> None:
    p = parse(b"---\ntitle: T\ndescription: d\nsource_mode: converted\n---\nBody\n", "a.md")
    assert p.body == "Body\n" and p.description == "d" and p.source_mode == "converted"
    evil = b"---\n!!python/object/apply:os.system ['echo hi']\n---\ntext"
    assert "malformed_frontmatter" in parse(evil, "a.md").metadata["problems"]


@pytest.mark.parametrize(
    "data",
    [
        b"---\ntitle: [unclosed\n---\nbody words",  # malformed YAML
        b"---\nbody words\n\nno closing marker",  # a letterhead rule, never closed
        b"---\n- a list\n---\nbody words",  # frontmatter that is not a mapping
    ],
)
def test_bad_frontmatter_keeps_the_text(data: bytes) -> None:
    p = parse(data, "a.md")
    assert "body words" in p.body
    assert "malformed_frontmatter" in p.metadata["problems"]


def test_bom_crlf_nul_and_invalid_utf8_are_repaired() -> None:
    p = parse(b"\xef\xbb\xbf# Title\r\nline one\r\nbad \xff byte and a nul\x00 here\r\n", "a.md")
    assert p.title == "Title"
    assert "\r" not in p.body and "\0" not in p.body and "\ufeff" not in p.body
    assert "bad \xff byte" in p.body
    assert set(p.metadata["problems"]) == {"not_utf8", "nul_bytes"}


def test_binary_content_is_not_text() -> None:
    with pytest.raises(NotText):
        parse(bytes(range(256)) * 20, "image.md")


def test_document_ids_are_stable_and_never_collide_with_ulids() -> None:
    ulid = "01JDQ3V6N4Z8T5Y2X7W9R1K0MB"
    assert document_id(f"{ulid}.md") == ulid
    assert document_id(f"sub/{ulid}.md") != ulid  # only Coffer's own top-level files
    assert document_id("meeting notes.md") == document_id("meeting notes.md")
    assert document_id("a.md") != document_id("b.md")
    assert document_id("a.md").islower() and len(document_id("a.md")) == 26


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be", "utf-8"])
def test_text_with_a_byte_order_mark_is_text(encoding: str) -> None:
    """As Windows' editors save it: UTF-16 (or UTF-32) with its mark is text, not binary."""
    data = "\ufeff# 東京\r\n\r\nwidetoken".encode(encoding)
    parsed = parse(data, "wide.md")
    assert parsed.title == "東京" and "widetoken" in parsed.body
