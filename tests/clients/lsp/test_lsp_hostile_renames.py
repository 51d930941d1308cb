"""A rewritten link always names what it meant (issue 33 §2, issue 45 §2): renaming a note
to a name holding `]]`, `|`, `#`, `^`, `[[` or a line break writes links that the daemon's
own reading takes to the renamed note (a wiki link that cannot hold the name becomes a
percent-encoded Markdown link); renaming a heading to text holding one writes them too, or
is refused with an error saying why. A real `cofferctl lsp` over pipes, a real daemon."""

from __future__ import annotations

from urllib.parse import unquote

import pytest

from coffer_kernel.link_targets import key_of
from cofferd.domain.links import links_of
from tests.support.daemon import Daemon
from tests.support.helpers import applied, new_vault
from tests.support.lsp_pipe import RawClient, open_note

REQUEST_FAILED = -32803
HOSTILE_NAMES = ["a]]b", "a|b", "a#b", "a^b", "a[[b", "a\nb", "a\rb", "a\u2028b", "a%20b"]
HOSTILE_HEADINGS = ["A\rB", "A\u2028B", "A]]B", "A|B", "A) B", "A [[B", "x (y)", "C# at 100%25"]
WIKI_REFUSED = "[]|#^\n\r\u2028"
HEADING_LINKS = (
    "see [[plan#Budget]] and [[plan#budget|money]]\n[b](plan.md#Budget) [c](<plan.md#Budget>)\n"
)
MARKDOWN_LINKS = "[p](plan.md) [q](<plan.md#Budget>) [r](./plan.md#Budget 'title')\n"


def names_of(body: str, relpath: str) -> list[tuple[str, str | None]]:
    """(key, heading) of each link of `body`, as the daemon reads them."""
    out = []
    for link in links_of(body, relpath):
        _, hash_, heading = link.target.partition("#")
        if link.type == "markdown":
            heading = unquote(heading)
        out.append((link.key, heading if hash_ else None))
    return out


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_note_renamed_to_a_hostile_name_keeps_every_link_on_it(
    shared_daemon: Daemon, lsp_client: RawClient, name: str
) -> None:
    d = shared_daemon
    kb = new_vault(d, "hr", {"plan.md": "# Plan\n\n## Budget\n", "log.md": MARKDOWN_LINKS})
    docs = d.docs(kb)
    moved = f"{name}.md"
    files = [{"oldUri": (docs / "plan.md").as_uri(), "newUri": (docs / moved).as_uri()}]
    answer = lsp_client.ask("workspace/willRenameFiles", {"files": files})
    edits = answer["result"]["changes"][(docs / "log.md").as_uri()]
    after = applied(MARKDOWN_LINKS, edits)
    assert names_of(after, "log.md") == [
        (key_of(moved), None),
        (key_of(moved), "Budget"),
        (key_of(moved), "Budget"),
    ], after
    wiki = new_vault(d, "hr", {"plan.md": "# Plan\n", "log.md": "see [[plan]]\n"})
    files = [
        {"oldUri": (d.docs(wiki) / "plan.md").as_uri(), "newUri": (d.docs(wiki) / moved).as_uri()}
    ]
    answer = lsp_client.ask("workspace/willRenameFiles", {"files": files})
    edits = answer["result"]["changes"][(d.docs(wiki) / "log.md").as_uri()]
    after = applied("see [[plan]]\n", edits)
    assert names_of(after, "log.md") == [(key_of(moved), None)], after
    if any(ch in name for ch in WIKI_REFUSED):  # no wiki link can hold it: a Markdown one
        assert [link.type for link in links_of(after, "log.md")] == ["markdown"], after


@pytest.mark.parametrize("new", HOSTILE_HEADINGS)
def test_a_heading_renamed_to_hostile_text_keeps_every_link_on_it(
    shared_daemon: Daemon, lsp_client: RawClient, new: str
) -> None:
    d = shared_daemon
    plan = "# Plan\n\n## Budget\n\nnumbers\n"
    kb = new_vault(d, "hr", {"plan.md": plan, "log.md": HEADING_LINKS})
    uri = (d.docs(kb) / "plan.md").as_uri()
    open_note(lsp_client, uri, plan)
    params = {"textDocument": {"uri": uri}, "position": {"line": 2, "character": 4}}
    answer = lsp_client.ask("textDocument/rename", {**params, "newName": new})
    if any(ch in new for ch in "\r\u2028]|["):
        assert answer["error"]["code"] == REQUEST_FAILED, answer
        return
    changes = answer["result"]["changes"]
    renamed = applied(plan, changes[uri])
    assert renamed.split("\n")[2] == f"## {new}"
    after = applied(HEADING_LINKS, changes[(d.docs(kb) / "log.md").as_uri()])
    assert names_of(after, "log.md") == [("plan", new)] * 4, after
