"""The names Coffer gives the files it adds: the title, as every system can hold it."""

from __future__ import annotations

import unicodedata

import pytest

from cofferd.domain.file_names import (
    NAME_MAX_BYTES,
    file_stem,
    folder_in_kb,
    numbered,
    same_name,
)


@pytest.mark.parametrize(
    ("title", "stem"),
    [
        ("Ramen", "Ramen"),
        ("Q3 report: draft/final?", "Q3 report draft final"),
        ('a<b>c"d\\e|f*g', "a b c d e f g"),
        ("[[Plan]] #budget ^block", "Plan budget block"),  # wiki links would break on them
        ("ラーメンの作り方", "ラーメンの作り方"),
        ("Crème brûlée", "Crème brûlée"),
        (".hidden", "hidden"),  # a leading dot would hide it (and make it noise)
        ("~$lock", "$lock"),
        ("Ends with dots...", "Ends with dots"),  # Windows drops trailing dots and spaces
        ("tab\there\nnew line", "tab here new line"),
        ("bidi\u202eevil\u200b", "bidievil"),  # invisible controls go
        ("escape\x1b[31m", "escape 31m"),
        ("CON", "CON_"),
        ("nul.notes", "nul_.notes"),  # reserved whatever follows the first dot
        ("Com1", "Com1_"),
        ("console", "console"),
        ("", "Untitled"),
        ("???", "Untitled"),
        ("...", "Untitled"),
    ],
)
def test_a_title_becomes_a_name_every_system_holds(title: str, stem: str) -> None:
    assert file_stem(title) == stem


def test_names_are_nfc_and_bounded_in_bytes() -> None:
    assert file_stem(unicodedata.normalize("NFD", "Café")) == "Café"
    long = file_stem("語" * 100)  # 300 bytes
    assert long == "語" * 40 and len(long.encode()) == NAME_MAX_BYTES
    cut = file_stem("a" * 119 + "é")  # never half a character
    assert cut == "a" * 119
    assert file_stem("a" * 117 + "q\u0301x") == "a" * 117 + "q\u0301"  # q́ has no NFC form
    assert file_stem("a" * 118 + "q\u0301x") == "a" * 118  # no letter without its mark


def test_numbered_names_stay_bounded() -> None:
    stem = file_stem("x" * 500)
    assert numbered(stem, 1) == f"{stem}.md"
    second = numbered(stem, 2)
    assert second.endswith(" 2.md") and len(second.encode()) <= NAME_MAX_BYTES + len(".md")
    assert numbered("Plan", 12) == "Plan 12.md"


def test_the_same_name_in_any_case_or_form() -> None:
    assert same_name("Ramen.md") == same_name("ramen.MD")
    assert same_name(unicodedata.normalize("NFD", "Café.md")) == same_name("café.md")


@pytest.mark.parametrize(("given", "folder"), [("", ""), ("Inbox/", "Inbox"), ("a/b", "a/b")])
def test_folders_inside_the_knowledge_base(given: str, folder: str) -> None:
    assert folder_in_kb(given) == folder


@pytest.mark.parametrize("given", ["/etc", "../out", "a/../b", "a//b", "./a", "a\0b", "x" * 256])
def test_folders_outside_or_odd_are_refused(given: str) -> None:
    with pytest.raises(ValueError, match="inside the knowledge base"):
        folder_in_kb(given)
