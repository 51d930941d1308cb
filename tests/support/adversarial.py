"""Hostile inputs for every parser of untrusted text, and how long a parser takes on them.

Each case is a parser and a family of inputs that grows with a size in characters: the
openers without closers, runs and long lines that make a backtracking pattern read the
same text again and again. tests/unit/test_linear_time.py asserts that time grows linearly;
bench/guards/parser_growth.py prints the times, for this checkout or another one.

This file is also run as a script, `python tests/support/adversarial.py CASE SIZE...`, which times
one case at each size and prints `SIZE SECONDS` lines: it imports nothing but the standard
library and `cofferd`, so that PYTHONPATH decides which checkout's code is measured.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SMALL, LARGE = 10_000, 160_000
GROWTH_LIMIT = 2.5**4  # 16 times the input: a linear parser stays far below; quadratic is 256


@dataclass(frozen=True)
class Case:
    parser: str
    family: str
    make: Callable[[int], Any]  # size in characters -> the input
    parse: Callable[[], Callable[[Any], object]]  # imports the parser, returns it

    @property
    def name(self) -> str:
        return f"{self.parser}: {self.family}"


def repeat(unit: str, size: int, tail: str = "") -> str:
    return unit * max(1, (size - len(tail)) // len(unit)) + tail


def _links() -> Callable[[str], object]:
    from cofferd.domain.links import links_of

    return lambda body: links_of(body, "notes/here.md")


def _tags() -> Callable[[str], object]:
    from cofferd.domain.tags import tags_of

    return lambda body: tags_of({}, body)


def _prose() -> Callable[[str], object]:
    from coffer_kernel.markdown_grammar import prose_lines

    return lambda body: list(prose_lines(body))


def _grammar_headings() -> Callable[[str], object]:
    from coffer_kernel.markdown_grammar import headings

    return lambda text: list(headings(text))


def _wiki_links() -> Callable[[str], object]:
    from coffer_kernel.markdown_grammar import wiki_links

    return lambda line: list(wiki_links(line))


def _fragment() -> Callable[[str], object]:
    from coffer_kernel.link_targets import span_of

    return lambda text: span_of(text, "nowhere")  # no heading so named: HTML anchors read


def _tag_being_typed() -> Callable[[str], object]:
    from coffer_kernel.markdown_grammar import TAG_BEING_TYPED

    return lambda line: TAG_BEING_TYPED.search(line, 0, len(line))  # once per completion


def _markers() -> Callable[[str], object]:
    from cofferd.domain.conflicts import has_merge_markers

    return has_merge_markers


def _copy_names() -> Callable[[str], object]:
    from cofferd.domain.conflicts import conflict_copy

    return conflict_copy


def _first_heading() -> Callable[[str], object]:
    from coffer_kernel.markdown_grammar import first_h1

    return first_h1


def _frontmatter() -> Callable[[str], object]:
    from cofferd.application.reading.markdown import split_frontmatter

    return split_frontmatter


def _decode() -> Callable[[str], object]:
    from cofferd.application.reading.markdown import decode

    return lambda text: decode(text.encode())


def _chunks() -> Callable[[str], object]:
    from cofferd.application.reading.chunker import chunk_markdown

    return lambda body: chunk_markdown(body, "Title", 512, 64)


def _titles() -> Callable[[str], object]:
    from cofferd.application.reading.converted_titles import converted_title
    from cofferd.infrastructure.conversion.format_titles import usable_title

    return lambda raw: converted_title(usable_title(raw), raw, "file.pdf")


def _index_text() -> Callable[[str], object]:
    from cofferd.infrastructure.storage.fts_text import index_text

    return index_text


def _snippet() -> Callable[[str], object]:
    from cofferd.infrastructure.storage.fts_text import snippet

    return snippet


def _query() -> Callable[[str], object]:
    from cofferd.domain.query_syntax import parse_query
    from cofferd.infrastructure.storage.fts_text import match

    return lambda text: match(parse_query(text))


def _phrase(query: str) -> Callable[[], Callable[[str], object]]:
    def parse() -> Callable[[str], object]:
        from cofferd.domain.query_syntax import parse_query

        return parse_query(query).holds_phrases

    return parse


def _ignored(pattern: str) -> Callable[[], Callable[[str], object]]:
    """Whether a name is excluded by a .gitignore holding `pattern` (read once, as the
    daemon reads it once per folder: the time is the matching)."""

    def parse() -> Callable[[str], object]:
        from cofferd.infrastructure.files.ignore_rules import IgnoreRules

        folder = tempfile.TemporaryDirectory(prefix="coffer-ignore-")  # removed with `rules`
        (Path(folder.name) / ".gitignore").write_text(pattern + "\n")
        rules = IgnoreRules(lambda: Path(folder.name))
        rules.spec("")
        return rules.excluded

    return parse


def _text_cleanup() -> Callable[[list[str]], object]:
    from cofferd.infrastructure.conversion.text_cleanup import clean_pdf_pages

    return clean_pdf_pages


def _page_marks() -> Callable[[str], object]:
    from cofferd.domain.pages import escaped, page_starts

    return lambda text: (escaped(text), page_starts(text))


def _converted(fmt: str) -> Callable[[], Callable[[str], object]]:
    def parse() -> Callable[[str], object]:
        from cofferd.infrastructure.conversion.derived_markdown import from_markitdown

        return lambda text: from_markitdown(text, fmt, None, "markitdown")

    return parse


def _model_words() -> Callable[[str], object]:
    from cofferd.domain.model_coverage import ENGLISH

    return ENGLISH.words


def _renumbered() -> Callable[[str], object]:
    from cofferd.infrastructure.conversion.format_titles import renumbered

    return lambda text: renumbered(text, text + " 2")


def _note_page() -> Callable[[str], object]:
    """The web page's note view (markdown-it, its wiki link, tag and table rules, nh3)."""
    from cofferd.surfaces.http.web_markdown import Rendering, Target, render

    class Links:  # every link leads to a note: the daemon's resolution is not measured here
        text_first = False

        def wiki(self, target: str, embed: bool) -> Target:
            return Target("/note/kb/x.md", "note")

        def markdown(self, target: str, embed: bool) -> Target:
            return Target(target, "external")

        def tag(self, name: str) -> str:
            return "/?q=" + name

    return lambda text: render(text, Rendering(Links(), {}, remote=False))


CJK = "東京大学"
PRIVATE_USE = "\ue000"  # icon fonts put their glyphs here; a token character to FTS5

CASES = [
    Case("links", "unclosed [a](b", lambda n: repeat("[a](b", n), _links),
    Case("links", "unclosed <target", lambda n: repeat("[a](<b", n), _links),
    Case("links", "unclosed title", lambda n: repeat('[a](b "t', n), _links),
    Case("links", "run of [", lambda n: repeat("[", n, "](x.md"), _links),
    Case("links", "run of ](", lambda n: "[" + repeat("](", n), _links),
    Case("links", "unclosed [[wiki", lambda n: repeat("[[a", n), _links),
    Case("links", "links that are not documents", lambda n: repeat("[a](b.png) ", n), _links),
    Case("links", "definitions", lambda n: repeat("[a]: b.md 't'\n", n), _links),
    Case("links", "definition: escaped label", lambda n: "[" + repeat("\\]", n, "]: x"), _links),
    Case("links", "definition: unclosed <target", lambda n: repeat("[a]: <b", n), _links),
    Case("links", "definition: run of (", lambda n: "[a]: " + repeat("(", n), _links),
    Case("links", "definition: unclosed title", lambda n: '[a]: b "' + repeat('\\"', n), _links),
    Case("links", "definition: run of ]:", lambda n: "[" + repeat("]:", n), _links),
    Case("tags", "run of #", lambda n: repeat("#", n), _tags),
    Case("tags", "many tags", lambda n: repeat(" #a", n), _tags),
    Case("tags", "one long tag", lambda n: "#" + repeat("a/", n), _tags),
    Case("prose", "run of backticks", lambda n: "a" + repeat("`", n), _prose),
    Case(
        "prose",
        "long opener, short closers",
        lambda n: "a" + "`" * (n // 2) + repeat("a`", n // 2),
        _prose,
    ),
    Case(
        "prose",
        "shrinking runs",
        lambda n: "a" + "a".join("`" * k for k in range(int((2 * n) ** 0.5), 0, -1)),
        _prose,
    ),
    Case("prose", "spans", lambda n: repeat("``a` b``", n), _prose),
    Case("prose", "fences", lambda n: repeat("```\n", n), _prose),
    Case(
        "grammar", "fences opened and closed", lambda n: repeat("```\n~~~~\n", n), _grammar_headings
    ),
    Case(
        "grammar",
        "backtick fence, backticks after",
        lambda n: "```" + repeat("`a", n),
        _grammar_headings,
    ),
    Case(
        "grammar",
        "headings between fences",
        lambda n: repeat("# h\n````\n```\n", n),
        _grammar_headings,
    ),
    Case(
        "grammar",
        "closing fence with text",
        lambda n: "~~~\n" + repeat("~~~ a\n", n),
        _grammar_headings,
    ),
    Case("grammar", "unclosed [[wiki", lambda n: repeat("[[a", n), _wiki_links),
    Case("grammar", "run of [[ and ]]", lambda n: repeat("[[]]", n), _wiki_links),
    Case("fragments", "one tag, no >", lambda n: "<a " + repeat("x", n), _fragment),
    Case("fragments", "run of <a", lambda n: repeat("<a ", n), _fragment),
    Case("fragments", "run of names", lambda n: "<a " + repeat("name=x ", n), _fragment),
    Case("grammar", "tag typed, run of #", lambda n: repeat("#", n), _tag_being_typed),
    Case("grammar", "tag typed, many words", lambda n: repeat(" #a", n), _tag_being_typed),
    Case(
        "merge markers",
        "unbalanced <<< and ===",
        lambda n: repeat("<<<<<<<\n=======\n", n),
        _markers,
    ),
    Case("merge markers", "run of <<< lines", lambda n: repeat("<<<<<<< x\n", n), _markers),
    Case("headings", "line of #", lambda n: "# " + repeat("#", n, "x"), _first_heading),
    Case("headings", "line of ' #'", lambda n: "# " + repeat(" #", n, "x"), _first_heading),
    Case("headings", "line of blanks", lambda n: "#" + repeat(" \t", n, "x"), _first_heading),
    Case("frontmatter", "no closing ---", lambda n: "---\n" + repeat("a: b\n", n), _frontmatter),
    Case(
        "frontmatter",
        "--- lines with text",
        lambda n: "---\n" + repeat("---" + " " * 20 + "x\n", n),
        _frontmatter,
    ),
    Case("decode", "control characters", lambda n: repeat("a" * 25 + "\x01", n), _decode),
    Case("chunking", "one long line of words", lambda n: repeat("word ", n), _chunks),
    Case("chunking", "one long word", lambda n: repeat("w", n), _chunks),
    Case("chunking", "one long block of lines", lambda n: repeat("a b\n", n), _chunks),
    Case("chunking", "headings", lambda n: repeat("# h\n", n), _chunks),
    Case("chunking", "line of #", lambda n: "# " + repeat("#", n, "x"), _chunks),
    Case("chunking", "CJK run", lambda n: repeat(CJK, n), _chunks),
    Case("titles", "repeated program name", lambda n: repeat("Microsoft Word - ", n), _titles),
    Case(
        "titles", "placeholder and separators", lambda n: "untitled" + repeat("-", n, "x"), _titles
    ),
    Case("titles", "dotted name", lambda n: repeat("a.", n, "docx x"), _titles),
    Case(
        "conflict names",
        "Syncthing markers",
        lambda n: repeat(".sync-conflict-20261130-101500", n, "x"),
        _copy_names,
    ),
    Case(
        "conflict names",
        "Dropbox phrases",
        lambda n: "a (" + repeat("'s conflicted copy", n, ")x"),
        _copy_names,
    ),
    Case(
        "conflict names",
        "unclosed Dropbox copies",
        lambda n: repeat("a (b's conflicted copy", n),
        _copy_names,
    ),
    Case(
        "conflict names",
        "Nextcloud copies",
        lambda n: repeat(" (conflicted copy)", n, "x"),
        _copy_names,
    ),
    Case("FTS text", "CJK run", lambda n: repeat(CJK, n), _index_text),
    Case("FTS text", "CJK and Latin", lambda n: repeat("a東", n), _index_text),
    Case("snippet", "many matches", lambda n: repeat("\x02a\x03 b ", n), _snippet),
    Case("snippet", "CJK and Latin", lambda n: repeat("a東", n), _snippet),
    Case("snippet", "one long word", lambda n: repeat("w", n, " \x02x\x03"), _snippet),
    Case(
        "FTS query",
        "CJK run",
        lambda n: "".join(chr(0x4E00 + i % 20_000) for i in range(n)),
        _query,
    ),
    Case(
        "FTS query", "many phrases", lambda n: " ".join(f'"{i} x"' for i in range(n // 8)), _query
    ),
    Case("FTS query", "many words", lambda n: " ".join(map(str, range(n // 6))), _query),
    Case("FTS query", "run of quotes", lambda n: repeat(' "', n), _query),
    Case(
        "FTS phrase",
        "private-use words",
        lambda n: repeat(PRIVATE_USE, n),
        _phrase('"' + " ".join([PRIVATE_USE] * 8) + ' b"'),
    ),
    Case(
        "FTS phrase",
        "near matches",
        lambda n: repeat("a ", n, "_b"),
        _phrase('"' + "a " * 300 + 'b"'),
    ),
    Case(
        "FTS phrase",
        "long first word",
        lambda n: repeat("a" * 999 + " ", n),
        _phrase('"' + "a" * 1000 + ' b"'),
    ),
    Case(
        "FTS phrase",
        "prose",
        lambda n: repeat("the socket is activated by systemd. ", n),
        _phrase('"socket activation"'),
    ),
    Case(
        "ignore rules",
        "wildcards against a long name",
        lambda n: repeat("a", n),
        _ignored("*a*a*a*a*a*a*b"),
    ),
    Case(
        "ignore rules",
        "**/ against a long name",
        lambda n: repeat("a", n),
        _ignored("**/a**/a**/b"),
    ),
    Case("text cleanup", "one long word", lambda n: ["a" * n], _text_cleanup),
    Case("text cleanup", "hyphens at line ends", lambda n: [repeat("ab-\n", n)], _text_cleanup),
    Case(
        "text cleanup",
        "letters then hyphen runs",
        lambda n: [repeat("a" * 60 + "-\n", n)],
        _text_cleanup,
    ),
    Case("text cleanup", "hyphen chains", lambda n: [repeat("a-", n)], _text_cleanup),
    Case("text cleanup", "space runs", lambda n: ["a" + " " * n + "b"], _text_cleanup),
    Case(
        "text cleanup", "many pages of one line", lambda n: ["same line"] * (n // 10), _text_cleanup
    ),
    Case(
        "text cleanup",
        "pages of many lines",
        lambda n: ["\n".join(["x"] * (n // 8))] * 4,
        _text_cleanup,
    ),
    Case("page marks", "one long mark", lambda n: "## Page " + "x" * n + "\n", _page_marks),
    Case(
        "page marks",
        "many near-marks",
        lambda n: repeat("## Sheet " + "y" * 70 + "\n", n),
        _page_marks,
    ),
    Case(
        "converted slides",
        "slide marks",
        lambda n: repeat("<!-- Slide number: 1 -->\nx\n", n),
        _converted("pptx"),
    ),
    Case(
        "converted sheets",
        "sheet headings",
        lambda n: repeat("## S\n| a |\n", n),
        _converted("xlsx"),
    ),
    Case(
        "converted e-books", "bold fields", lambda n: repeat("**Title:** ", n), _converted("epub")
    ),
    Case("model coverage", "one long word", lambda n: repeat("a", n), _model_words),
    Case("model coverage", "CJK and Latin", lambda n: repeat("a東1", n), _model_words),
    Case("titles", "renumbered: many words", lambda n: repeat("Lecture 11 ", n), _renumbered),
    Case("note page", "run of #", lambda n: repeat("#", n), _note_page),
    Case("note page", "many tags", lambda n: repeat(" #a", n), _note_page),
    Case("note page", "one long tag", lambda n: " #" + repeat("a/", n), _note_page),
    Case("note page", "wiki openers", lambda n: repeat("[[a", n), _note_page),
    Case("note page", "remote images", lambda n: repeat("![x](https://e.x/a.png) ", n), _note_page),
    Case(
        "note page",
        "aligned table",
        lambda n: "|" + repeat(" a |", n // 2) + "\n|" + repeat(":-:|", n // 2) + "\n",
        _note_page,
    ),
]


def best_time(parse: Callable[[Any], object], given: Any, at_least: float = 0.01) -> float:
    """Seconds for one call: the best of three batches of calls (two when a call takes
    over 50 ms, one over a second), each batch at least `at_least` seconds long (a fast
    call is repeated), so that neither the timer nor a moment of load decides."""
    start = time.perf_counter()
    parse(given)
    best = time.perf_counter() - start
    calls = max(1, int(at_least / max(best, 1e-9)))
    for _ in range(0 if best > 1 else 1 if best > 0.05 else 2):
        start = time.perf_counter()
        for _ in range(calls):
            parse(given)
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def by_name(name: str) -> Case:
    return next(c for c in CASES if c.name == name)


if __name__ == "__main__":
    case = by_name(sys.argv[1])
    parse = case.parse()
    for size in map(int, sys.argv[2:]):
        print(size, best_time(parse, case.make(size)), flush=True)
