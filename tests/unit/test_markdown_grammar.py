"""The daemon and the editor read one Markdown grammar (`coffer_kernel.markdown_grammar`), so on
the same text they agree: the headings the chunker files passages under and the title
are the headings the editor lists and jumps to; the links and tags the daemon reads are
where the editor completes them, and none is read or completed in code. Fences follow
CommonMark: up to three spaces before one (four make indented code), backticks or
tildes, closed by a run of the same at least as long with nothing after it."""

from __future__ import annotations

import re

import pytest

from coffer_kernel.markdown_grammar import code_lines, fence_closes, fence_opening
from cofferctl.lsp import text as editor_text
from cofferctl.lsp.completion import _in_code
from cofferctl.lsp.symbols import heading_symbols
from cofferd.application.reading.chunker import _blocks, chunk_markdown
from cofferd.application.reading.markdown import parse
from cofferd.domain.links import links_of
from cofferd.domain.tags import inline_tags

TEXTS = {
    "fence at 0 spaces": "```\n# in code\n```\n# After\n",
    "fence at 3 spaces": "   ```\n# in code\n   ```\n# After\n",
    "fence at 4 spaces is indented code": "    ```\n# Heading\ntext\n",
    "tilde fence holds backticks": "~~~\n```\n# in code\n~~~\n# After\n",
    "closing run shorter": "````\n```\n# in code\n````\n# After\n",
    "closing fence with text after": "```\n``` x\n# in code\n```\n# After\n",
    "closing fence indented 4": "```\n    ```\n# in code\n```\n# After\n",
    "unclosed fence": "# Top\n```\n# in code\n## still code\n",
    "backtick in a backtick info string": "``` a`b\n# Heading\n",
    "tilde info string may hold backticks": "~~~ a`b\n# in code\n~~~\n# After\n",
    "nested levels": "# A\n## B\n### C\n## D\n# E\n",
    "closing #s and blanks": "#   Plan ##  \n## Budget #\n#\n#no\n",
    "links and tags in code": (
        "## Section\n# Links\n`[[a]]` [[b]] [c](c.md) `[d](d.md)`\n```\n[[e]] #fenced\n```\n"
        "    [[f]] #indented\n[[g]] #tag `#no` and #yes\n~~~~\n[[h]]\n~~~\n[[i]]\n"
    ),
}


def daemon_headings(body: str) -> list[tuple[int, int, str]]:
    """(line, level, text) of the headings the chunker files passages under."""
    return [(line, level, name) for level, name, _, line in _blocks(body) if level and name]


def editor_headings(body: str) -> list[tuple[int, int, str]]:
    """(line, level, text) of the editor's document symbols, in order."""
    out: list[tuple[int, int, str]] = []

    def walk(symbols: list[dict[str, object]], level: int) -> None:
        for s in symbols:
            start = s["range"]["start"]["line"]  # type: ignore[index]
            out.append((start, level, str(s["name"])))
            walk(s["children"], level + 1)  # type: ignore[arg-type]

    walk(heading_symbols(body, editor_text.UTF16), 1)
    return sorted(out)


@pytest.mark.parametrize("name", list(TEXTS))
def test_the_daemon_and_the_editor_agree_on_headings(name: str) -> None:
    body = TEXTS[name]
    daemon = daemon_headings(body)
    assert [(line, name) for line, _, name in daemon] == [
        (line, name) for line, _, name in editor_headings(body)
    ]
    assert all("in code" not in found and "still" not in found for _, _, found in daemon)
    title = parse(body.encode(), "note.md").title
    top = [found for _, level, found in daemon if level == 1]
    assert title == (top[0] if top else "note")  # the first top-level heading
    for line, _, found in daemon:
        assert editor_text.heading_line(body, found) == line
    chunks = chunk_markdown(body, "T", 100, 0)
    filed = {name for chunk in chunks for name in chunk.heading[1:]}
    assert filed <= {found for _, _, found in daemon}


@pytest.mark.parametrize("name", list(TEXTS))
def test_the_editor_completes_links_and_tags_where_the_daemon_reads_them(name: str) -> None:
    body = TEXTS[name]
    read = {(link.line - 1, link.start) for link in links_of(body, "n.md")}
    lines = body.split("\n")
    for number, line in enumerate(lines):
        for m in re.finditer(r"\[\[", line):
            at = m.end() + 1
            completes = not _in_code(body, number, line, at, "note", m.end())
            assert completes == ((number, m.start()) in read), (number, line)
    tags = set()
    for number, line in enumerate(lines):
        for m in re.finditer(r"(?:^|(?<=\s))#([a-z]+)", line):
            if not _in_code(body, number, line, m.end(), "tag", m.start() + 1):
                tags.add(m.group(1))
    assert tags == set(inline_tags(body))


def test_links_in_code_are_neither_read_nor_completed() -> None:
    body = TEXTS["links and tags in code"]
    found = sorted(link.target for link in links_of(body, "n.md"))
    assert found == ["b", "c.md", "g"]  # `~~~` closes no `~~~~`: [[i]] is still code
    assert set(inline_tags(body)) == {"tag", "yes"}


@pytest.mark.parametrize(
    ("line", "opening"),
    [("```", "```"), ("   ~~~~ py", "~~~~"), ("    ```", None), ("``", None), ("``` a`", None)],
)
def test_fence_openings(line: str, opening: str | None) -> None:
    assert fence_opening(line) == opening


@pytest.mark.parametrize(
    ("line", "opening", "closes"),
    [
        ("```", "```", True),
        ("   ````  ", "```", True),
        ("``", "```", False),
        ("~~~", "```", False),
        ("``` x", "```", False),
        ("    ```", "```", False),
    ],
)
def test_fence_closings(line: str, opening: str, closes: bool) -> None:
    assert fence_closes(line, opening) is closes


def test_code_lines_mark_the_fences() -> None:
    lines = ["a", "```", "b", "```", "~~~", "c"]
    assert [part for _, _, part in code_lines(lines)] == [
        "", "opens", "code", "closes", "opens", "code"
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("line", "label", "target"),
    [
        ('[templates]: templates.md "Note Templates"', "templates", "templates.md"),
        ("[t#Metadata]: templates.md#Metadata", "t#Metadata", "templates.md#Metadata"),
        ("[daily-notes]: daily-notes.md 'Daily Notes'", "daily-notes", "daily-notes.md"),
        ("   [a]: <my plan.md#x> (the plan)", "a", "<my plan.md#x>"),
        ("[a]:b.md", "a", "b.md"),
        ("[a\\]b]: f(1).md", "a\\]b", "f(1).md"),
        ("    [a]: b.md", None, None),  # indented code
        ("[a]: b.md c", None, None),  # not a title
        ('[a]: b.md "t" x', None, None),
        ("[a]: f(1.md", None, None),  # unbalanced
        ("[]: b.md", None, None),
        ("[a]: ", None, None),
        ("[a] : b.md", None, None),
        ("[a[b]: c.md", None, None),
        ("- [a]: b.md", None, None),
    ],
)  # fmt: skip
def test_link_reference_definitions(line: str, label: str | None, target: str | None) -> None:
    from coffer_kernel.markdown_grammar import reference_definition

    found = reference_definition(line)
    if label is None:
        assert found is None
        return
    assert found is not None
    assert (found.label, line[found.target_start : found.target_end]) == (label, target)
    assert line[found.start : found.end] == line.strip()


def test_definitions_over_lines_as_commonmark_reads_them() -> None:
    """A definition's target may be on the line after its `[label]:`, its title on the line
    after its target (then no paragraph: a definition may follow it); one never continues a
    paragraph."""
    from coffer_kernel.markdown_grammar import Definitions

    lines = [
        "[a]: a.md",
        '   "Title of a"',
        "[b]:",
        "  <b c.md#x> 'T'",
        "[c]:",
        "c.md",
        "text",
        "[d]: d.md",
        "",
        "[e]:",
        "not a (target",
        "[f]: f.md",
        "",
        "[g]:",
        "",
        "g.md",
    ]
    reader = Definitions()
    found = {
        n: (d.label, line[d.target_start : d.target_end], line[d.start : d.end])
        for n, line in enumerate(lines)
        if (d := reader.read(n, line)) is not None
    }
    assert found == {
        0: ("a", "a.md", "[a]: a.md"),
        3: ("b", "<b c.md#x>", "<b c.md#x> 'T'"),
        5: ("c", "c.md", "c.md"),
    }


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        ("Use _emphasis_ here", "use-emphasis-here"),
        ("**Bold** and *it*", "bold-and-it"),
        ("snake_case_word", "snake_case_word"),
        ("__init__ method", "init-method"),
        ("a _ b", "a-_-b"),
        ("The `hasTag()` call", "the-hastag-call"),
        ("`a_b_` code", "a_b_-code"),  # a code span's text as it is
        ("``x ` y`` z", "x--y-z"),
        ("See [the docs](a.md) _now_", "see-the-docs-now"),
        ("<kbd>Ctrl</kbd> key", "ctrl-key"),
        ("C++ & Ünï: 見て_x!", "c--ünï-見て_x"),
    ],
)
def test_a_github_anchor_is_made_of_the_headings_rendered_text(heading: str, slug: str) -> None:
    from coffer_kernel.link_targets import github_slug

    assert github_slug(heading) == slug
