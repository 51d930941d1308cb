"""Grep with the real ripgrep: located beside the interpreter, bounded, never a 500."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from coffer_kernel.locations import Locations
from cofferd.domain.errors import InvalidPattern
from cofferd.infrastructure.files.document_policy import DocumentPolicy
from cofferd.infrastructure.files.grep import Ripgrep, find_rg
from tests.support.helpers import write


def test_rg_is_found_beside_the_interpreter() -> None:
    assert find_rg() == str(Path(sys.executable).parent / "rg")


@pytest.fixture
def tree(locations: Locations) -> Locations:
    docs = locations.docs_dir("kb")
    for i in range(200):
        write(docs / f"f{i}.md", "needle haystack\n" * 200)
    return locations


async def test_timeout_kills_rg_and_truncates(tree: Locations) -> None:
    _, truncated = await Ripgrep(tree, DocumentPolicy(tree), timeout_s=0.000_1).grep(
        "kb", "(a|b)+needle", 10**6
    )
    assert truncated is True


async def test_max_matches_truncates(tree: Locations) -> None:
    hits, truncated = await Ripgrep(tree, DocumentPolicy(tree)).grep("kb", "needle", 5)
    assert len(hits) == 5 and truncated is True
    hits, truncated = await Ripgrep(tree, DocumentPolicy(tree)).grep("kb", "needle", 40_000)
    assert len(hits) == 40_000 and truncated is False


@pytest.mark.parametrize("pattern", ["(", "[z-a]", "a{2,1}", "\\"])
async def test_invalid_patterns_are_clear_errors(tree: Locations, pattern: str) -> None:
    with pytest.raises(InvalidPattern) as err:
        await Ripgrep(tree, DocumentPolicy(tree)).grep("kb", pattern, 10)
    assert err.value.code == "INVALID_PATTERN" and "regex" in err.value.message


async def test_a_pattern_starting_with_a_dash_is_a_pattern(tree: Locations) -> None:
    write(tree.docs_dir("kb") / "flags.md", "use --files to list\n")
    hits, _ = await Ripgrep(tree, DocumentPolicy(tree)).grep("kb", "--files", 10)
    assert [h.path for h in hits] == ["flags.md"]
