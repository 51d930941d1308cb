"""Symbols: a note's headings, nested by level (document symbols), and a Coffer search of
the workspace's knowledge bases, its passages as symbols (workspace symbols)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from coffer_kernel.markdown_grammar import headings
from cofferctl import api
from cofferctl.lsp import text
from cofferctl.lsp.daemon import Daemon
from cofferctl.lsp.workspace import Workspace, param, uri_param

WORKSPACE_SYMBOLS = 20  # passages a symbol search shows
SNIPPET_CHARS = 120
STRING = 15  # SymbolKind: a heading, or a passage of text


class Symbols:
    def __init__(self, workspace: Workspace, daemon: Daemon) -> None:
        self.workspace, self.daemon = workspace, daemon

    def document_symbols(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        """The note's headings, nested by level."""
        note = self.workspace.get(uri_param(params))
        return heading_symbols(note.text, self.workspace.encoding) if note is not None else []

    def workspace_symbols(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        """A Coffer search of the workspace's knowledge bases (each searched as it is set:
        keyword or hybrid), its passages as symbols: a question typed in the editor's
        symbol picker finds the passage."""
        query = param(params, "query", str).strip()
        kbs = self.workspace.workspace_kbs()
        if not query or not kbs:
            return []
        body = {"query": query, "top_k": WORKSPACE_SYMBOLS, "knowledge_bases": kbs}
        found = self.daemon.ask(lambda c: api.search_all(c, body))
        if not isinstance(found, dict):
            return []
        out = []
        for passage in found.get("passages", []):
            start = {"line": max(passage["line_start"] - 1, 0), "character": 0}
            name = " > ".join(passage["heading"]) or passage["title"]
            out.append(
                {
                    "name": f"{name}: {passage['snippet'][:SNIPPET_CHARS]}",
                    "kind": STRING,
                    "location": {
                        "uri": text.uri_of(Path(passage["path"])),
                        "range": {"start": start, "end": start},
                    },
                    "containerName": passage["relative_path"],
                }
            )
        return out


def heading_symbols(note_text: str, encoding: str) -> list[dict[str, Any]]:
    """The headings of `note_text` as document symbols, each holding those under it."""
    lines = note_text.split("\n")
    top: list[dict[str, Any]] = []
    open_: list[tuple[int, dict[str, Any]]] = []  # (level, symbol) of the headings above
    for line_no, level, name in headings(note_text):
        end = text.columns(lines[line_no], len(lines[line_no]), encoding)
        span = {
            "start": {"line": line_no, "character": 0},
            "end": {"line": line_no, "character": end},
        }
        symbol = {
            "name": name,
            "kind": STRING,
            "range": span,
            "selectionRange": span,
            "children": [],
        }
        while open_ and open_[-1][0] >= level:
            open_.pop()
        (open_[-1][1]["children"] if open_ else top).append(symbol)
        open_.append((level, symbol))
    return top
