"""What cofferctl prints: lines, JSON, tables, colour and links on a terminal, progress bars.

Colour and progress only on a terminal, never when NO_COLOR is set (colour) or when the
output is JSON or piped (progress).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
import urllib.parse
from collections.abc import Sequence
from typing import Any, TextIO


def colour_wanted(stream: TextIO) -> bool:
    return stream.isatty() and not os.environ.get("NO_COLOR")


class Output:
    def __init__(self, stream: TextIO, as_json: bool) -> None:
        self.stream = stream
        self.as_json = as_json
        self.color = colour_wanted(stream)

    def line(self, text: str = "") -> None:
        print(text, file=self.stream)

    def json(self, data: Any) -> None:
        print(json.dumps(data, indent=2, ensure_ascii=False), file=self.stream)

    def style(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        cells = [[str(c) for c in row] for row in rows]
        widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
        heading = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
        self.line(self.style(heading.rstrip(), "1"))
        for row in cells:
            self.line("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())

    def link(self, text: str, path: str) -> str:
        """`text` as a terminal hyperlink to the file (OSC 8) on a terminal."""
        if not self.color:
            return text
        return f"\x1b]8;;file://{urllib.parse.quote(path)}\x1b\\{text}\x1b]8;;\x1b\\"

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


class Progress:
    """`[#####     ] 12/40 3.1/s name`, redrawn in place; nothing when not enabled."""

    WIDTH = 30

    def __init__(self, what: str, stream: TextIO, *, enabled: bool) -> None:
        self.what = what
        self.stream = stream
        self.enabled = enabled
        self.started = time.monotonic()
        self.drawn = False

    def show(self, done: int, total: int, note: str = "", rate: float | None = None) -> None:
        if not self.enabled or total <= 0:
            return
        if rate is None:
            elapsed = time.monotonic() - self.started
            rate = done / elapsed if elapsed > 0 else 0.0
        filled = min(self.WIDTH, int(self.WIDTH * done / total))
        bar = "#" * filled + " " * (self.WIDTH - filled)
        text = f"\r{self.what} [{bar}] {done}/{total} {rate:.1f}/s {note[:40]:<40}"
        print(text, end="", file=self.stream, flush=True)
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            print(file=self.stream, flush=True)
            self.drawn = False
