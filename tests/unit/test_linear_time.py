"""Every parser of untrusted text runs in time linear in its input, and reads ordinary text
exactly as the patterns it replaced did.

Growth: each hostile family (tests/support/adversarial.py) at 10k and 160k characters; 16 times the
input may take at most 2.5^4 (~39) times as long (a quadratic parser takes ~256 times).
Equivalence: the replaced patterns are kept here as the reference, run on short inputs only.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pathspec
import pytest
from hypothesis import example, given, reject, settings
from hypothesis import strategies as st

from coffer_kernel.markdown_grammar import blank_code_spans, heading, markdown_links
from cofferd.domain.conflicts import conflict_copy, has_merge_markers
from cofferd.domain.query_syntax import _case_keys, _Phrase, is_cjk, tokenize
from cofferd.infrastructure.files.ignore_patterns import linear_spec
from cofferd.infrastructure.files.ignore_rules import IgnoreRules
from tests.support.adversarial import CASES, GROWTH_LIMIT, LARGE, SMALL, Case, best_time

OLD_MARKDOWN_LINK = re.compile(r"!?\[[^\]\n]*\]\(\s*(<[^>\n]+>|[^)\s]+)(?:\s+[\"'(][^)\n]*)?\s*\)")
OLD_CODE_SPAN = re.compile(r"(`+).+?\1")
OLD_MARKERS = re.compile(r"^<{7}(?: .*)?\n(?:.*\n)*?={7}\n(?:.*\n)*?>{7}(?: .*)?$", re.MULTILINE)
OLD_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$")
OLD_DROPBOX = re.compile(r"^(?P<stem>.+?) \([^()]*'s conflicted copy[^()]*\)(?P<ext>\.[^./]+)?$")


def old_phrase(tokens: list[str]) -> re.Pattern[str]:
    parts = [re.escape(t) if is_cjk(t) else rf"(?<![^\W_]){re.escape(t)}(?![^\W_])" for t in tokens]
    return re.compile(r"\W*".join(parts), re.IGNORECASE)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_time_grows_linearly(case: Case) -> None:
    parse = case.parse()
    small, large = case.make(SMALL), case.make(LARGE)
    ratios = []
    for _ in range(3):  # load can slow one measurement; a quadratic parser fails all three
        ratios.append(best_time(parse, large) / best_time(parse, small))
        if ratios[-1] < GROWTH_LIMIT:
            return
    pytest.fail(f"160k characters took {min(ratios):.0f} times as long as 10k")


def test_the_growth_test_catches_a_quadratic_parser() -> None:
    def quadratic(text: str) -> int:
        return sum(text.count("a", i, i + len(text) // 2) for i in range(0, len(text), 64))

    ratio = best_time(quadratic, "ab" * (LARGE // 2)) / best_time(quadratic, "ab" * (SMALL // 2))
    assert ratio > GROWTH_LIMIT


examples = settings(max_examples=300, deadline=None)


def text_of(alphabet: str, max_size: int = 24) -> st.SearchStrategy[str]:
    return st.text(st.sampled_from(alphabet), max_size=max_size)


ORDINARY_LINKS = [
    "see [the plan](plans/plan.md) and [x](<my plan.md#budget> 'title') ![img](p.md)",
    '[a](b.md "t") [b]( c.md ) [c](d.md (t)) [[wiki]] [e](f.md',
    "[outer [inner](in.md)](out.md) [](empty.md) [x](<a>b.md)",
]


@examples
@given(text_of("[]()<>!\"' \t\u00a0ab.m", 30) | st.sampled_from(ORDINARY_LINKS))
def test_markdown_links_as_the_pattern_found_them(line: str) -> None:
    expected = [(m.start(), m.end(), m.group(1)) for m in OLD_MARKDOWN_LINK.finditer(line)]
    assert list(markdown_links(line)) == expected


@examples
@given(text_of("`` `ab ~") | st.sampled_from(["`code` and ``a ` b`` and ```x```", "`` ` `` `a"]))
def test_code_spans_as_the_pattern_blanked_them(line: str) -> None:
    assert blank_code_spans(line) == OLD_CODE_SPAN.sub(lambda m: " " * len(m[0]), line)


MARKER_LINES = ["<<<<<<<", "<<<<<<< HEAD", "<<<<<<<<", "=======", "======= ", "=======x",
                ">>>>>>>", ">>>>>>> branch", ">>>>>>>x", " >>>>>>>", "text", ""]  # fmt: skip


@examples
@given(st.lists(st.sampled_from(MARKER_LINES), max_size=8), st.sampled_from(["", "\n"]))
def test_merge_markers_as_the_pattern_found_them(lines: list[str], end: str) -> None:
    text = "\n".join(lines) + end
    assert has_merge_markers(text) == ("<<<<<<<" in text and bool(OLD_MARKERS.search(text)))


@examples
@given(text_of("#  \tab\r", 16) | st.sampled_from(["# Title", "## Plan ##", "   ### x #", "#5"]))
def test_headings_as_the_pattern_read_them(line: str) -> None:
    m = OLD_HEADING.match(line)  # the text stripped, as every caller used it
    assert heading(line) == (m and (len(m.group(1)), m.group(2).strip()))


@examples
@given(st.lists(st.sampled_from([" (", "'s conflicted copy", ")", ".", "md", "a", "(", "\n"]),
                max_size=8))  # fmt: skip
def test_dropbox_copies_as_the_pattern_named_them(parts: list[str]) -> None:
    name = "".join(parts)
    m = OLD_DROPBOX.match(name)
    found = conflict_copy(name)
    expected = m and m.group("stem") + (m.group("ext") or "")
    assert (found and found.tool == "dropbox" and found.original) == expected


PHRASE_ALPHABET = "aAbB _-.,'\ue000東京ſSsKkİıi1"


@examples
@given(text_of(PHRASE_ALPHABET, 16), text_of(PHRASE_ALPHABET, 8))
def test_phrases_found_as_the_pattern_found_them(text: str, phrase: str) -> None:
    tokens = tokenize(phrase)
    if tokens:
        assert _Phrase(tokens).found_in(text) == bool(old_phrase(tokens).search(text))


@pytest.mark.parametrize(
    ("text", "phrase", "found"),
    [
        ("Socket activation, on demand", "socket activation", True),
        ("sockets activate", "socket activation", False),
        ("socket_activation", "socket activation", False),
        ("東京大学の学生", "京大", True),
        ("Python ファイル", "python ファ", True),
        ("Pythonファイル", "python ファ", False),  # no word ends before ファ
    ],
)
def test_ordinary_phrases(text: str, phrase: str, found: bool) -> None:
    tokens = tokenize(phrase)
    assert _Phrase(tokens).found_in(text) is found is bool(old_phrase(tokens).search(text))


def test_case_keys_meet_for_every_pair_that_re_matches() -> None:
    cased = "".join(
        ch for ch in map(chr, range(sys.maxunicode + 1))
        if not 0xD800 <= ord(ch) < 0xE000 and (ch.lower() != ch or ch.upper() != ch)
    )  # fmt: skip
    for ch in cased:
        keys = _case_keys(ch)
        for other in re.findall(re.escape(ch), cased, re.IGNORECASE):
            assert keys & _case_keys(other), (ch, other)


@pytest.mark.filterwarnings("ignore:Possible nested set:FutureWarning")  # pathspec on `[[`
@settings(max_examples=300, deadline=None)
@given(
    st.lists(text_of("ab*?/![]\\", 6), min_size=1, max_size=4),
    st.lists(st.sampled_from(["a", "b", "ab", "ba", "*", "[a]", "!"]), min_size=1, max_size=4),
    st.booleans(),
)
@example(["!*", "??"], ["ab"], True)  # a name's own `!*` outranks `??` matching it as a folder
def test_re2_matches_ignore_patterns_as_python_re_did(
    lines: list[str], parts: list[str], trailing_slash: bool
) -> None:
    path = "/".join(parts) + ("/" if trailing_slash else "")
    try:
        simple = pathspec.GitIgnoreSpec.from_lines(lines, backend="simple")
    except ValueError:  # not a pattern (`!`, a lone `\`): refused whatever the backend
        reject()
    expected = simple.check_file(path).include
    assert linear_spec(lines).include(path) == expected  # literals and loose patterns by RE2 sets


def test_patterns_too_many_for_one_re2_set_still_match(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("*a" * 10_000 + "*b\ndrafts*\n")  # too big for a set
    rules = IgnoreRules(lambda: tmp_path)
    assert rules.excluded("drafts.md") and not rules.excluded("ab")
