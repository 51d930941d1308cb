"""Every kind of fragment (issue 34 §3): go to definition and hover follow nested headings
(`#A#B`), block references (`#^id`) and percent-encoded Markdown links; a heading or block
that does not exist is a diagnostic naming the nearest heading. A real `cofferctl lsp` over
pipes, a real daemon; and the reading of fragments in linear time on hostile text."""

from __future__ import annotations

import time

from coffer_kernel.link_targets import span_of
from tests.support.daemon import Daemon
from tests.support.helpers import new_vault
from tests.support.lsp_pipe import RawClient, at, open_note, shown

HELP = (
    "# Help\n\n## Questions\n\nask us\n\n### Report bugs\n\nfile an issue\n\n"
    "## Other\n\n### Report bugs\n\nnot here\n\nA block worth citing. ^cite-1\n\nafter\n"
)
NOTE = (
    "# Today\n\n"
    "[[Help#Questions#Report bugs]] [[Help#^cite-1]]\n"
    "[x](Linking%20notes/Aliases.md#Add%20an%20alias)\n"
    "[[Help#Questoins]] [[Help#^nowhere]]\n"
)


def test_definition_hover_and_diagnostics_follow_every_fragment(
    shared_daemon: Daemon, lsp_client: RawClient
) -> None:
    d = shared_daemon
    aliases = "# Aliases\n\nintro\n\n## Add an alias\n\nwrite aliases\n"
    kb = new_vault(d, "fr", {"Help.md": HELP, "Linking notes/Aliases.md": aliases})
    uri = (d.docs(kb) / "today.md").as_uri()
    found = open_note(lsp_client, uri, NOTE)
    assert sorted((x["code"], x["message"]) for x in found) == [
        ("missing-block", "Help.md has no block '^nowhere'"),
        ("missing-heading", "Help.md has no heading 'Questoins': did you mean 'Questions'?"),
    ]

    def line_of(line: int, character: int) -> int:
        answer = lsp_client.ask("textDocument/definition", at(uri, line, character))["result"]
        return int(answer["range"]["start"]["line"])

    assert line_of(2, 3) == 6  # the Report bugs under Questions, not the one under Other
    assert line_of(2, 35) == 16  # the block's line
    assert line_of(3, 2) == 4  # `## Add an alias`, its link percent-encoded
    nested = shown(lsp_client.ask("textDocument/hover", at(uri, 2, 3)))
    assert "file an issue" in nested and "not here" not in nested and "ask us" not in nested
    assert "A block worth citing" in shown(lsp_client.ask("textDocument/hover", at(uri, 2, 35)))
    assert "write aliases" in shown(lsp_client.ask("textDocument/hover", at(uri, 3, 2)))


def test_fragments_are_read_in_linear_time() -> None:
    for size in (20_000, 80_000):
        content = "# a\n" * size + "x ^" + "b" * size + "\n"
        fragment = "#".join(["a"] * 250)  # as long as a link's target is kept
        started = time.perf_counter()
        span_of(content, fragment)
        span_of(content, "^" + "b" * size)
        span_of(content, "^zz")
        elapsed = time.perf_counter() - started
        if size == 20_000:
            small = elapsed
    assert elapsed < max(small * 8, 0.5), (small, elapsed)
