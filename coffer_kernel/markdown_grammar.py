"""The one Markdown grammar of Coffer: what the daemon indexes and what the editor shows
are read by these rules, so that the two always agree on where a heading, a fence, a link
or a tag is (cofferctl's language server imports this module; it is standard library only
and imports nothing else of cofferd).

* **Fences** (CommonMark): a line of three or more backticks or tildes, indented by at
  most three spaces, opens fenced code (a backtick fence's info string holds no backtick);
  the fence closes at a line of the same character, at least as many, indented by at most
  three spaces, with nothing but blanks after. An unclosed fence runs to the end. A line
  indented by four spaces (or a tab) is indented code, never a fence or a heading.
* **Headings** (ATX): `#` to `######` after at most three spaces, then a blank; the text
  without its closing `#`s, cut to `HEADING_CHARS`. A line over `HEADING_LINE_CHARS` is
  text. Headings in fenced code are not headings.
* **Prose**: the lines outside fenced and indented code, with inline code spans blanked:
  where links and tags are read.
* **Links**: `[[target|alias]]` (and `![[...]]`) and `[text](target "title")`; the target
  of a Markdown link as written (`<...>` included). A link reference definition
  (`[label]: target "title"`, CommonMark's, one line, indented by at most three spaces, not
  continuing a paragraph; its target may be on the next line, its title too: `Definitions`)
  is a link too: Foam writes one for each wiki link of a note.
* **Rendered text** of a heading (what GitHub makes its anchor of): code spans' text,
  links' text, no emphasis marks or HTML tags.
* **Tags**: `#` at the start of a line or after a blank, then `TAG_CHARS`.
* **Suffixes**: a note is a `.md` or `.markdown` file (any case).

Long on purpose: one grammar, in one place. Every function reads its text once (no
pattern here backtracks over content):
tests/unit/test_linear_time.py and bench/guards/parser_growth.py hold them to it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple

HEADING_CHARS = 300  # a heading's text as kept (in heading paths, titles, symbols)
HEADING_LINE_CHARS = 1_000  # a longer line is text, never a heading
MAX_TARGET_CHARS = 500  # a link's target as kept

MARKDOWN_SUFFIXES = (".md", ".markdown")  # a note's, in any case
MARKDOWN_SUFFIX = re.compile(
    "(?:" + "|".join(re.escape(s) for s in MARKDOWN_SUFFIXES) + ")$", re.IGNORECASE
)
WIKI_LINK = re.compile(r"!?\[\[([^\[\]\n]+?)\]\]")  # linear: a match cannot reach past a bracket
TAG_CHARS = r"[\w/-]"
INLINE_TAG = re.compile(rf"(?:^|(?<=\s))#({TAG_CHARS}+)")
# whether a text may hold a tag: `#` first, so the search looks for it alone (as fast as a
# `find`), then what stands before it
MAYBE_TAG = re.compile(rf"#(?<!\S#){TAG_CHARS}")
TAG_BEING_TYPED = re.compile(rf"(?:^|(?<=\s))#({TAG_CHARS}*)$")  # `#` starts a word
BARE_TARGET_END = re.compile(r"[)\s]")  # where a Markdown link's bare target ends

_FENCE_OPENING = re.compile(r" {0,3}(`{3,}|~{3,})")
_HEADING_OPENING = re.compile(r" {0,3}(#{1,6})[ \t]+")
_BACKTICKS = re.compile(r"`+")
_NOT_SPACE = re.compile(r"\S")
_ANGLE_CLOSE = re.compile(">")
_PAREN_CLOSE = re.compile(r"\)")


def fence_opening(line: str) -> str | None:
    """The run of backticks or tildes that opens fenced code on `line`, or None."""
    m = _FENCE_OPENING.match(line)
    if m is None:
        return None
    run = m.group(1)
    if run[0] == "`" and "`" in line[m.end() :]:
        return None  # a backtick fence's info string holds no backtick: inline code
    return run


def fence_closes(line: str, opening: str) -> bool:
    """Whether `line` closes the fenced code that `opening` opened."""
    m = _FENCE_OPENING.match(line)
    if m is None:
        return False
    run = m.group(1)
    return run[0] == opening[0] and len(run) >= len(opening) and not line[m.end() :].strip()


def is_indented_code(line: str) -> bool:
    return line.startswith(("    ", "\t"))


def heading(line: str) -> tuple[int, str] | None:
    r"""(level, text) of an ATX heading line (`## Plan ##`), or None for any other line;
    the text as ``^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$`` captures it, stripped and cut to
    its budget, found without that pattern's search of the closing sequence from every
    character. A line too long to be a heading is text."""
    if len(line) > HEADING_LINE_CHARS:
        return None
    m = _HEADING_OPENING.match(line)
    if m is None:
        return None
    start = m.end()
    if start == len(line):  # only blanks after the #s: the text is the last blank
        if start - m.end(1) < 2:
            return None
        start -= 1
    end = max(start + 1, len(line.rstrip(" \t#")))
    return len(m.group(1)), line[start:end].strip()[:HEADING_CHARS]


OPENS, CODE, CLOSES = "opens", "code", "closes"  # a line's part in fenced code


def code_lines(lines: list[str]) -> Iterator[tuple[int, str, str]]:
    """(index, line, its part in fenced code) for each line: `OPENS` for the line that
    opens a fence, `CLOSES` for the one that closes it, `CODE` between, '' outside."""
    fence: str | None = None
    for number, line in enumerate(lines):
        if fence is not None:
            if fence_closes(line, fence):
                fence = None
                yield number, line, CLOSES
            else:
                yield number, line, CODE
            continue
        fence = fence_opening(line)
        yield number, line, OPENS if fence is not None else ""


def headings(text: str) -> Iterator[tuple[int, int, str]]:
    """(line from 0, level, text) of each heading outside fenced code, in order (a heading
    whose text is empty once stripped is left out)."""
    for number, line, code in code_lines(text.split("\n")):
        if not code and "#" in line and (found := heading(line)) and found[1]:
            yield number, found[0], found[1]


def first_heading(text: str) -> str | None:
    return next((name for _, _, name in headings(text)), None)


def first_h1(text: str) -> str | None:
    """The first top-level heading: a note's title when its frontmatter gives none (as
    Obsidian reads a note, headings below the first level are sections, never the title)."""
    return next((name for _, level, name in headings(text) if level == 1), None)


def prose_lines(body: str) -> Iterator[tuple[int, str]]:
    """(index of the line in the body, the line with inline code blanked) for each line
    of prose: outside fenced and indented code; what is left is where it was in the line."""
    for number, line, code in code_lines(body.split("\n")):
        if code or is_indented_code(line):
            continue
        yield number, blank_code_spans(line) if "`" in line else line


def blank_code_spans(line: str) -> str:
    """The line with each code span replaced by as many spaces, where ``(`+).+?\\1``
    finds them, in one pass over the line's runs of backticks.

    A span opens with a run of backticks and closes at the first later place that has as
    many in a row; the opener is the longest that can be closed (a longer run closes it
    with its first backticks; a run of 5 or more alone holds a short span, as in `` ` ``).
    """
    runs = [(m.start(), m.end()) for m in _BACKTICKS.finditer(line)]
    longest_after = [0] * (len(runs) + 1)  # the longest of runs[r:]
    for r in range(len(runs) - 1, -1, -1):
        longest_after[r] = max(longest_after[r + 1], runs[r][1] - runs[r][0])
    pieces: list[str] = []
    kept = 0  # line[kept:] is not replaced
    r = 0
    while r < len(runs):
        start = max(runs[r][0], kept)
        opener = runs[r][1] - start
        size = max(min(opener, longest_after[r + 1]), (opener - 1) // 2)
        if size <= 0:
            r += 1
            continue
        if 2 * size + 1 <= opener:  # closed inside its own run
            close = start + size + 1
        else:
            r += 1
            while runs[r][1] - runs[r][0] < size:
                r += 1
            close = runs[r][0]
        pieces += [line[kept:start], " " * (close + size - start)]
        kept = close + size
    pieces.append(line[kept:])
    return "".join(pieces)


def wiki_links(line: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, target without its alias, stripped) of the wiki links of one line."""
    for start, end, target, _ in aliased_wiki_links(line):
        yield start, end, target


def aliased_wiki_links(line: str) -> Iterator[tuple[int, int, str, str | None]]:
    """(start, end, target, alias or None), stripped, of the wiki links of one line; in a
    table the alias's bar is escaped (`[[Note#Part\\|alias]]`), its `\\` is not the target's."""
    for m in WIKI_LINK.finditer(line):
        target, bar, alias = m.group(1).partition("|")
        if bar and target.endswith("\\"):
            target = target[:-1]
        yield m.start(), m.end(), target.strip(), alias.strip() if bar else None


def markdown_links(line: str) -> Iterator[tuple[int, int, str]]:
    r"""(start, end, target) of the `[text](target "title")` links and `![alt](target)`
    embeds of one line (an embed from its `!`), the target as written (`<...>` included), as
    ``!?\[[^\]\n]*\]\(\s*(<[^>\n]+>|[^)\s]+)(?:\s+["'(][^)\n]*)?\s*\)``
    finds them, in one pass over the line (that pattern reads the rest of the line again
    from every `[`).

    Every `[` before the same `]` leads to the same match or to none, so each `]` is
    looked at once; after it, every search moves forward only."""
    end = len(line)
    skip_spaces = _Ahead(line, _NOT_SPACE)
    angle_close = _Ahead(line, _ANGLE_CLOSE)
    bare_end = _Ahead(line, BARE_TARGET_END)
    rest_after_angle, rest_after_bare = _LinkRest(line), _LinkRest(line)
    at = 0
    while (opening := line.find("[", at)) >= 0:
        at = opening + 1
        begin = opening - 1 if opening and line[opening - 1] == "!" else opening  # an embed
        closing = line.find("]", at)
        if closing < 0:
            return
        at = closing + 1
        if not line.startswith("(", at):
            continue
        start = skip_spaces(at + 1)
        if start == end:
            return
        if line[start] == "<" and start + 1 < (close := angle_close(start + 1)) < end:
            link_end = rest_after_angle(close + 1)
            if link_end >= 0:
                yield begin, link_end, line[start : close + 1]
                at = link_end
                continue
        if line[start] != ")":
            stop = bare_end(start)
            link_end = rest_after_bare(stop)
            if link_end >= 0:
                yield begin, link_end, line[start:stop]
                at = link_end


_HTML_TAG = re.compile(r"</?[A-Za-z][^<>\n]*>")  # linear: cannot read past a `<`


def rendered_text(heading: str) -> str:
    """A heading's text as a page shows it, what GitHub makes its anchor of: code spans
    without their backticks, a link's text for the link (an image: nothing), HTML tags
    and `_`/`*` emphasis marks left out (`_emphasis_` -> `emphasis`; `snake_case` kept).
    One pass over the heading for each kind of mark."""
    if "`" in heading:
        blanked = blank_code_spans(heading)  # where the spans are; their text is kept
        pieces, kept, at = [], 0, 0
        while at < len(heading):
            if blanked[at] == " " and heading[at] == "`":
                end = _code_span_end(heading, blanked, at)
                pieces += [_marks_dropped(heading[kept:at]), heading[at:end].strip("`")]
                kept = at = end
            else:
                at += 1
        return "".join(pieces) + _marks_dropped(heading[kept:])
    return _marks_dropped(heading)


def _code_span_end(text: str, blanked: str, start: int) -> int:
    """Where the code span opening at `start` ends: after the first later run of as many
    backticks, inside what `blank_code_spans` blanked (else the end of that blank)."""
    opener = _BACKTICKS.match(text, start)
    assert opener is not None
    size, at = opener.end() - start, opener.end()
    while at < len(text) and blanked[at] == " ":
        run = _BACKTICKS.match(text, at)
        if run is None:
            at += 1
        elif run.end() - at == size:
            return run.end()
        else:
            at = run.end()
    return at


def _marks_dropped(text: str) -> str:
    if "](" in text:
        pieces, kept = [], 0
        for start, end, _ in markdown_links(text):
            shown = "" if text[start] == "!" else text[start + 1 : text.index("](", start)]
            pieces += [text[kept:start], shown]
            kept = end
        text = "".join(pieces) + text[kept:]
    if "<" in text:
        text = _HTML_TAG.sub("", text)
    return _emphasis_dropped(text) if "_" in text or "*" in text else text


def _emphasis_dropped(text: str) -> str:
    """`text` without the `_` and `*` runs that open or close emphasis (a run with a blank
    or a word's edge on one side), paired as they nest; a `_` inside a word is kept."""
    runs: list[tuple[int, int, bool, bool]] = []  # start, end, can open, can close
    at = 0
    while at < len(text):
        if text[at] not in "_*":
            at += 1
            continue
        end = at
        while end < len(text) and text[end] == text[at]:
            end += 1
        before = text[at - 1] if at else " "
        after = text[end] if end < len(text) else " "
        opens, closes = not after.isspace(), not before.isspace()
        if text[at] == "_" and before.isalnum() and after.isalnum():
            opens = closes = False  # inside a word: snake_case
        runs.append((at, end, opens, closes))
        at = end
    dropped = [False] * len(runs)
    waiting: list[int] = []
    for n, (start, _, opens, closes) in enumerate(runs):
        mark = text[start]
        if closes and waiting and text[runs[waiting[-1]][0]] == mark:
            dropped[waiting.pop()] = dropped[n] = True
        elif opens:
            waiting.append(n)
    pieces, kept = [], 0
    for n, (start, end, _, _) in enumerate(runs):
        if dropped[n]:
            pieces.append(text[kept:start])
            kept = end
    return "".join(pieces) + text[kept:]


class _Ahead:
    """Where a one-character pattern next occurs in a line, at or after a position (the
    line's length when nowhere). Asked for positions that never move back, it reads each
    character once."""

    def __init__(self, line: str, pattern: re.Pattern[str]) -> None:
        self._line, self._pattern = line, pattern
        self._asked, self._found = 1, 0  # nothing known yet

    def __call__(self, start: int) -> int:
        if not self._asked <= start <= self._found:
            m = self._pattern.search(self._line, start)
            self._asked, self._found = start, m.start() if m else len(self._line)
        return self._found


class _LinkRest:
    r"""What may follow a link's target, ``(?:\s+["'(][^)\n]*)?\s*\)``: where it ends
    when it starts at a position, or -1."""

    def __init__(self, line: str) -> None:
        self._line = line
        self._skip_spaces = _Ahead(line, _NOT_SPACE)
        self._paren_close = _Ahead(line, _PAREN_CLOSE)

    def __call__(self, at: int) -> int:
        line = self._line
        start = self._skip_spaces(at)
        if start == len(line):
            return -1
        if line[start] == ")":
            return start + 1
        if start > at and line[start] in "\"'(":  # a title
            close = self._paren_close(start + 1)
            return close + 1 if close < len(line) else -1
        return -1


class Definition(NamedTuple):
    """A link reference definition on a line: where it is (from its `[` to its last
    character but blanks), its label, and where its target is (`<...>` included)."""

    start: int
    end: int
    label: str
    target_start: int
    target_end: int


LABEL_CHARS = 999  # CommonMark's longest label
_TITLE_CLOSER = {'"': '"', "'": "'", "(": ")"}


def reference_definition(line: str) -> Definition | None:
    r"""The link reference definition `line` is (`[label]: target "title"`, `[x]: <a b.md>`),
    or None; read in one pass over the line, as CommonMark reads one on a single line: a
    label of at most `LABEL_CHARS` without unescaped brackets, a colon, a target (in `<>`
    without `<`, or bare with balanced parentheses), then a title in `"`, `'` or `()` after
    a blank, and nothing else. Whether it continues a paragraph is the caller's to see
    (`Definitions` reads them over lines, the target or the title on the next line too)."""
    label = _label(line)
    if label is None:
        return None
    indent, colon = label
    return _target(line, colon + 1, line[indent + 1 : colon - 1], indent)


def definition_rest(line: str) -> Definition | None:
    """`line` as the rest of a definition whose `[label]:` ends the line before: a target
    and an optional title, nothing else (its label left empty)."""
    return _target(line, 0, "", len(line) - len(line.lstrip(" \t")))


def _label(line: str) -> tuple[int, int] | None:
    """(where its `[` is, where its `:` is) when `line` starts with a definition's label."""
    indent = len(line) - len(line.lstrip(" "))
    if indent > 3 or not line.startswith("[", indent):
        return None
    at, limit = indent + 1, min(len(line), indent + 2 + LABEL_CHARS)
    while at < limit and line[at] != "]":
        if line[at] == "[":
            return None
        at += 2 if line[at] == "\\" else 1
    if at >= limit or not line[indent + 1 : at].strip() or not line.startswith(":", at + 1):
        return None
    return indent, at + 1


def _target(line: str, after: int, label: str, start_of: int) -> Definition | None:
    start = after
    while start < len(line) and line[start] in " \t":
        start += 1
    if start == len(line):
        return None
    if line[start] == "<":
        close = line.find(">", start + 1)
        if close < 0 or "<" in line[start + 1 : close]:
            return None
        stop = close + 1
    else:
        stop = _bare_target_end(line, start)
        if stop <= start:
            return None
    end = len(line.rstrip())
    if end > stop and not (line[stop] in " \t" and _is_title(line[stop:end].lstrip(" \t"))):
        return None
    return Definition(start_of, end, label, start, stop)


class Definitions:
    """The link reference definitions of a note, its prose lines given in order (`read`
    each, with its index): as CommonMark reads them, one does not continue a paragraph, its
    target may be on the line after its `[label]:` and its title on the line after its
    target (that line is then no paragraph). A definition whose target is on the next line
    is that line's (its label empty). Linear: each line is read once or twice."""

    def __init__(self) -> None:
        self.paragraph = -2  # the index of the last line of a paragraph read
        self.label_line, self.label = -2, ""  # a `[label]:` alone, its target to come
        self.untitled = -2  # a definition with no title: one may be on the next line

    def read(self, index: int, line: str) -> Definition | None:
        if self.label_line == index - 1:
            self.label_line = -2
            found = definition_rest(line)
            if found is not None:
                self.paragraph = -2
                self.untitled = index if found.end == found.target_end else -2
                return found._replace(label=self.label)
            self.paragraph = index - 1  # the `[label]:` line was a paragraph's
        if self.untitled == index - 1 and _is_title(line.strip(" \t")):
            self.untitled = self.paragraph = -2
            return None
        continues = self.paragraph == index - 1
        found = None if continues or "[" not in line else reference_definition(line)
        if found is not None:
            self.paragraph = -2
            self.untitled = index if found.end == found.target_end else -2
            return found
        if (
            not continues
            and "[" in line
            and (label := _label(line))
            and not line[label[1] + 1 :].strip()
        ):
            self.label_line, self.label = index, line[label[0] + 1 : label[1] - 1]
            self.paragraph = -2
            return None
        self.paragraph = index if line.strip() and not heading(line) else -2
        return None


def _bare_target_end(line: str, start: int) -> int:
    """Where a definition's bare target starting at `start` ends (at a blank), or -1 when
    its parentheses are not balanced or it holds a control character."""
    depth, at = 0, start
    while at < len(line) and line[at] not in " \t":
        ch = line[at]
        if ch == "\\":
            at += 2
            continue
        if ch < " ":
            return -1
        depth += 1 if ch == "(" else -1 if ch == ")" else 0
        if depth < 0:
            return -1
        at += 1
    return min(at, len(line)) if depth == 0 else -1


def _is_title(text: str) -> bool:
    """Whether `text` is one title: in `"`, `'` or `()`, its closer escaped inside."""
    closer = _TITLE_CLOSER.get(text[:1])
    if closer is None or len(text) < 2 or text[-1] != closer:
        return False
    at = 1
    while at < len(text) - 1:
        if text[at] == "\\":
            at += 2
            continue
        if text[at] == closer or (closer == ")" and text[at] == "("):
            return False
        at += 1
    return at == len(text) - 1
