"""What cofferctl prints: lines, JSON, tables, colour and links on a terminal, progress bars.

Colour and progress only on a terminal, never when NO_COLOR is set (colour) or when the
output is JSON or piped (progress).

Names and text come from files anyone can name (a sync brings them): none of them may
drive the terminal. Every line is printed through `visible()`, which shows each control
character escaped as Python and git write them (`\\x1b`, `\\n`, `\\u202e`): C0 and C1
controls, DEL, the bidi controls that reorder what is shown, the line and paragraph
separators, and lone surrogates (names that are not UTF-8). Only cofferctl's own sequences,
made by style() and link(), reach the terminal: they travel in a line as a mark no data can
hold, turned into ESC once the rest is escaped. JSON escapes the same characters as
`\\u007f`, keeping other text readable. `show` prints a document's own text into a pipe as
it is (what `cat` does and scripts expect), on a terminal with its controls escaped but the
newline and the tab.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
import unicodedata
import urllib.parse
from collections.abc import Sequence

from coffer_kernel.durations import rate as per_second
from coffer_kernel.durations import time_left

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: ~3 ms of each start
if TYPE_CHECKING:
    from typing import Any, TextIO

_UNSAFE = r"\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_CONTROLS = re.compile(rf"[\x00-\x1f{_UNSAFE}]")
# Used by some commands only: compiled when first used (re caches them), not at every start.
_TEXT_CONTROLS = rf"[\x00-\x08\x0b-\x1f{_UNSAFE}]"  # the newline and tab kept
_JSON_UNSAFE = rf"[{_UNSAFE}]"  # json.dumps escapes C0 itself
_SURROGATES = r"[\ud800-\udfff]"  # no UTF-8 for them: escaped even in a pipe
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# stands for ESC in our own sequences: random for each run, so no name can forge one
_ESC = f"\ufdd0{os.urandom(8).hex()}\ufdd1"


def _escaped(match: re.Match[str]) -> str:
    char = match[0]
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def visible(text: str) -> str:
    """`text` with every character that could drive a terminal shown escaped."""
    return _CONTROLS.sub(_escaped, text)


def width(text: str) -> int:
    """The columns `text` takes on a terminal: East Asian Wide and Fullwidth characters
    (CJK, most emoji) two, combining marks and invisible format characters none."""
    if text.isascii():
        return len(text)
    return sum(_columns(char) for char in text)


def _columns(char: str) -> int:
    if unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def json_text(data: Any) -> str:
    """`data` as JSON: readable non-ASCII text, but DEL, C1 and bidi controls and lone
    surrogates as `\\u` escapes (json.dumps leaves them raw) and C0 as json.dumps escapes it."""
    text = json.dumps(data, indent=2, ensure_ascii=False)
    return re.sub(_JSON_UNSAFE, lambda m: f"\\u{ord(m[0]):04x}", text)


def complain(message: str) -> None:
    """`cofferctl: message` on stderr, escaped: messages echo names and paths."""
    print(f"cofferctl: {visible(message)}", file=sys.stderr)


def colour_wanted(stream: TextIO) -> bool:
    return stream.isatty() and not os.environ.get("NO_COLOR")


class Output:
    def __init__(self, stream: TextIO, as_json: bool) -> None:
        self.stream = stream
        self.as_json = as_json
        self.color = colour_wanted(stream)

    def line(self, text: str = "") -> None:
        """`text` on a line of its own, escaped but for the sequences we made."""
        print("\x1b".join(visible(part) for part in text.split(_ESC)), file=self.stream)

    def json(self, data: Any) -> None:
        print(json_text(data), file=self.stream)

    def document(self, text: str) -> None:
        """A document's own text: as it is into a pipe, its controls escaped on a terminal."""
        controls = _TEXT_CONTROLS if self.stream.isatty() else _SURROGATES
        self.stream.write(re.sub(controls, _escaped, text))

    def style(self, text: str, code: str) -> str:
        return f"{_ESC}[{code}m{text}{_ESC}[0m" if self.color else text

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        cells = [[visible(str(c)) for c in row] for row in rows]  # measured as shown
        widths = [max([width(h), *(width(r[i]) for r in cells)]) for i, h in enumerate(headers)]
        self.line(self.style(_aligned(headers, widths), "1"))
        for row in cells:
            self.line(_aligned(row, widths))

    def link(self, text: str, path: str) -> str:
        """`text` as a terminal hyperlink to the file (OSC 8) on a terminal."""
        if not self.color:
            return text
        try:  # percent-encoded: printable ASCII; a name that was not UTF-8 as its bytes
            target = urllib.parse.quote(path, errors="surrogateescape")
        except UnicodeEncodeError:  # a surrogate no file name holds
            return text
        return f"{_ESC}]8;;file://{target}{_ESC}\\{text}{_ESC}]8;;{_ESC}\\"

    def highlight(self, text: str, spans: Sequence[Sequence[int]], code: str = "1;33") -> str:
        if not self.color or not spans:
            return text
        out, last = [], 0
        for start, end in spans:
            out += [text[last:start], self.style(text[start:end], code)]
            last = end
        out.append(text[last:])
        return "".join(out)

    def highlight_pattern(self, text: str, pattern: re.Pattern[str] | None) -> str:
        """Every match of `pattern` in bold red, as ripgrep shows them."""
        if pattern is None or not self.color:
            return text
        spans = [m.span() for m in pattern.finditer(text) if m.end() > m.start()]
        return self.highlight(text, spans, "1;31")

    def progress(self, what: str) -> Progress:
        """A progress bar on stderr when it is a terminal and the output is not JSON."""
        return Progress(what, sys.stderr, enabled=sys.stderr.isatty() and not self.as_json)


def _aligned(cells: Sequence[str], widths: Sequence[int]) -> str:
    """A table's row: each cell padded to its column's width, two spaces between."""
    padded = (c + " " * (w - width(c)) for c, w in zip(cells, widths, strict=True))
    return "  ".join(padded).rstrip()


class Progress:
    """`[#####     ] 12/40 3.1/s 8 s left name`, redrawn in place; nothing when not
    enabled."""

    WIDTH = 30

    def __init__(self, what: str, stream: TextIO, *, enabled: bool) -> None:
        self.what = what
        self.stream = stream
        self.enabled = enabled
        self.started = time.monotonic()
        self.drawn = False

    def show(
        self,
        done: int,
        total: int,
        note: str = "",
        rate: float | None = None,
        eta_s: float | None = None,
    ) -> None:
        if not self.enabled or total <= 0:
            return
        if rate is None:
            elapsed = time.monotonic() - self.started
            rate = done / elapsed if elapsed > 0 else 0.0
        if eta_s is None and rate > 0:
            eta_s = (total - done) / rate
        left = f" {time_left(eta_s)} left" if eta_s is not None and done < total else ""
        filled = min(self.WIDTH, int(self.WIDTH * done / total))
        bar = "#" * filled + " " * (self.WIDTH - filled)
        speed = per_second(rate)
        text = f"\r{self.what} [{bar}] {done:,}/{total:,} {speed}/s{left} {visible(note)[:40]:<40}"
        print(text, end="", file=self.stream, flush=True)
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            print(file=self.stream, flush=True)
            self.drawn = False
