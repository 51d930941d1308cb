from __future__ import annotations

import random
from typing import Any

import pytest

from coffer_kernel.markdown_grammar import INLINE_TAG, MAYBE_TAG
from cofferd.domain.errors import ValidationFailed
from cofferd.domain.filters import parse_filters
from cofferd.domain.tags import aliases_of, inline_tags, tags_of


@pytest.mark.parametrize(
    ("frontmatter", "tags"),
    [
        ({"tags": ["Project/Coffer", "#urgent"]}, ("Project/Coffer", "urgent")),
        ({"tags": "one, two three"}, ("one", "two", "three")),  # Obsidian's string forms
        ({"tag": "solo"}, ("solo",)),
        ({"tags": [2024, "2024", "q3"]}, ("q3",)),  # digits alone are not tags
        ({"tags": [{"nested": "map"}, None, True, "ok"]}, ("ok",)),  # odd YAML: skipped
        ({"tags": "Dup, dup, DUP"}, ("Dup",)),  # tags compare without case
        ({"tags": None}, ()),
    ],
)
def test_frontmatter_tags(frontmatter: dict[str, Any], tags: tuple[str, ...]) -> None:
    assert tags_of(frontmatter, "") == tags


@pytest.mark.parametrize(
    ("body", "tags"),
    [
        ("#idea at the start, and a #second-one.", ["idea", "second-one"]),
        ("nested #area/sub/leaf tag", ["area/sub/leaf"]),
        ("unicode #日本語 and #café", ["日本語", "café"]),
        ("# A heading\n## Another", []),
        ("issue #1 and #2024 are numbers, #3d is a tag", ["3d"]),
        ("a link http://x.org/page#anchor and a&#39;s entity, mid#word", []),
        ("`#not-in-code` but #after-code", ["after-code"]),
        ("```\n#in-fence\n```\n#outside", ["outside"]),
        ("~~~python\n#comment\n~~~", []),
        ("    #indented-code\n\t#tabbed", []),
        ("#trailing/ slash", ["trailing"]),
    ],
)
def test_inline_tags(body: str, tags: list[str]) -> None:
    assert inline_tags(body) == tags


def test_the_quick_look_for_tags_misses_none() -> None:
    """`MAYBE_TAG` (whether to read a body's lines for tags) finds one exactly where the
    reading would: a `#` at the start or after a space, then a tag's character."""
    rng = random.Random(34)
    pieces = ["#", "##", "a", "1", " ", "\n", "\t", "中", "x#y", "&#39;", "/", "-", "\u3000", "é"]
    for _ in range(50_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        lines = text.split("\n")
        assert (MAYBE_TAG.search(text) is None) == (not any(map(INLINE_TAG.search, lines)))


def test_frontmatter_tags_come_first_and_each_tag_once() -> None:
    assert tags_of({"tags": ["Alpha"]}, "body #alpha #beta") == ("Alpha", "beta")


def test_aliases() -> None:
    assert aliases_of({"aliases": ["Coffer", " KB ", ""], "alias": "coffer"}) == ("Coffer", "KB")
    assert aliases_of({"aliases": "One Name"}) == ("One Name",)


def test_filters_are_normalised() -> None:
    f = parse_filters(
        {
            "folder": "./projects/coffer/",
            "tags": ["#Project", "project", "Area/Sub"],
            "updated_after": "2026-11-01",
            "updated_before": "2026-11-30T18:00:00+01:00",
            "source_mode": "converted",
        }
    )
    assert f.folder == "projects/coffer"
    assert f.tags == ("project", "area/sub")
    assert f.updated_after == "2026-11-01T00:00:00.000Z"
    assert f.updated_before == "2026-11-30T17:00:00.000Z"
    assert f.source_mode == "converted"
    assert not parse_filters({}) and not parse_filters(None) and not parse_filters({"folder": "."})


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"folders": "x"}, "filters.folders"),
        ({"folder": "/home/me/notes"}, "filters.folder"),
        ({"folder": "a/../../b"}, "filters.folder"),
        ({"folder": "a\0b"}, "filters.folder"),
        ({"folder": 3}, "filters.folder"),
        ({"tags": "#"}, "filters.tags"),
        ({"tags": ["ok", 3]}, "filters.tags"),
        ({"tags": [f"t{i}" for i in range(21)]}, "filters.tags"),
        ({"updated_after": "yesterday"}, "filters.updated_after"),
        ({"updated_before": "2026-13-01"}, "filters.updated_before"),
        ({"updated_after": "2026-12-01", "updated_before": "2026-11-01"}, "filters.updated_after"),
        ({"source_mode": "typed"}, "filters.source_mode"),
    ],
)
def test_bad_filters_name_their_field(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationFailed) as caught:
        parse_filters(raw)
    assert caught.value.details["field"] == field
