"""Completion as issue 34 §5 asks, through a real `cofferctl lsp` over pipes against the real
daemon: an alias picked writes `[[note|alias]]` (or `[alias](path.md)`, or the note's path,
as the vault links); what matches nothing offers nothing; block ids after `[[note#^`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient, make_test_lsp_client

from cofferd.application.reading.note_names import FUZZY_FEW, LinkStyle, NameIndex
from tests.support.daemon import BIN, Daemon
from tests.support.helpers import new_vault, wait_for, write
from tests.support.lsp_client import complete_at, opened

ALIASED = "---\naliases: [File formats, Formats]\n---\n# Accepted file formats\n\ntext\n"
# names holding `z` thrice, far apart: no match for `zzz`, however the letters are counted
FAR_APART = [f"Zebra {n} crossing at the plaza of Zurich.md" for n in range(30)]


async def started(d: Daemon) -> LanguageClient:
    client = make_test_lsp_client()
    await client.start_io(str(BIN / "cofferctl"), "lsp", env=d.env())
    await client.initialize_session(types.InitializeParams(capabilities=types.ClientCapabilities()))
    return client


@pytest.fixture
async def lsp(shared_daemon: Daemon) -> AsyncIterator[LanguageClient]:
    client = await started(shared_daemon)
    yield client
    await asyncio.wait_for(client.shutdown_session(), 10)


def indexed(d: Daemon, kb: str, count: int) -> None:
    """Once the daemon's names of the KB are current and hold `count` notes."""

    def ready() -> bool:
        answer = d.client.get(d.client.kb(kb, "/names"), q="", limit=200)
        return bool(answer["fresh"]) and len(answer["names"]) == count

    wait_for(ready)


def edits(found: Any) -> list[tuple[str, str]]:
    return [(i.label, i.text_edit.new_text) for i in found.items] if found else []


async def test_an_alias_picked_writes_the_note_and_the_alias(
    shared_daemon: Daemon, lsp: LanguageClient
) -> None:
    d = shared_daemon
    notes = {
        "Accepted file formats.md": ALIASED,
        "Files.md": "# Files\n",
        "daily/today.md": "[[Files]]\n",
    }
    kb = new_vault(d, "alias", notes)
    indexed(d, kb, 3)
    path = d.docs(kb) / "daily" / "today.md"
    await opened(lsp, path, "see [[File form\n")
    found = edits(await complete_at(lsp, path, 0, len("see [[File form")))
    assert found[0] == ("File formats", "Accepted file formats|File formats]]")
    assert ("Accepted file formats", "Accepted file formats]]") in found
    assert ("Formats", "Accepted file formats|Formats]]") not in found  # `file form`: no
    item = (await complete_at(lsp, path, 0, len("see [[File form"))).items[0]
    assert item.kind == types.CompletionItemKind.Reference and item.detail == (
        "Accepted file formats.md"
    )
    # the note's own name matches best: the note first, then its alias that also matches
    await opened(lsp, path, "see [[Accepted\nand [[format\n", version=2)
    assert edits(await complete_at(lsp, path, 0, len("see [[Accepted")))[0] == (
        "Accepted file formats",
        "Accepted file formats]]",
    )
    formats = edits(await complete_at(lsp, path, 1, len("and [[format")))
    assert formats[0] == ("Formats", "Accepted file formats|Formats]]")


async def test_an_alias_is_written_as_the_vault_links(
    shared_daemon: Daemon, lsp: LanguageClient
) -> None:
    """A vault naming notes by their paths gets the path; one of Markdown links gets
    `[alias](path.md)` in place of the `[[` typed."""
    d = shared_daemon
    paths = {
        "ref/Accepted file formats.md": ALIASED,
        "ref/other.md": "# Other\n",
        "daily/today.md": "[[ref/other]] and [[ref/Accepted file formats]]\n",
    }
    kb = new_vault(d, "aliaspath", paths)
    indexed(d, kb, 3)
    path = d.docs(kb) / "daily" / "today.md"
    await opened(lsp, path, "see [[file forma\n")
    found = edits(await complete_at(lsp, path, 0, len("see [[file forma")))
    assert found[0] == ("File formats", "ref/Accepted file formats|File formats]]")

    markdown = {
        "ref/Accepted file formats.md": ALIASED,
        "ref/other.md": "# Other\n",
        "daily/today.md": "[o](../ref/other.md), [a](<../ref/Accepted file formats.md>)\n",
    }
    kb = new_vault(d, "aliasmd", markdown)
    indexed(d, kb, 3)
    path = d.docs(kb) / "daily" / "today.md"
    await opened(lsp, path, "see [[file forma]] now\n")
    item = (await complete_at(lsp, path, 0, len("see [[file forma"))).items[0]
    assert item.label == "File formats"
    assert item.text_edit.new_text == "[File formats](<../ref/Accepted file formats.md>)"
    edit = item.text_edit.range
    assert (edit.start.character, edit.end.character) == (4, len("see [[file forma]]"))


async def test_what_matches_nothing_offers_nothing(
    shared_daemon: Daemon, lsp: LanguageClient
) -> None:
    d = shared_daemon
    notes = {name: "# x\n" for name in FAR_APART}
    notes["explanations.md"] = "# Notes\n"
    notes["today.md"] = "# Today\n"
    kb = new_vault(d, "nomatch", notes)
    indexed(d, kb, len(notes))
    path = d.docs(kb) / "today.md"
    await opened(lsp, path, "see [[zzz\nsee [[xpns\n")
    assert edits(await complete_at(lsp, path, 0, len("see [[zzz"))) == []
    # letters in order close together still find their note
    assert [label for label, _ in edits(await complete_at(lsp, path, 1, 9))] == ["explanations"]


def test_letters_far_apart_are_no_match_and_close_ones_are_a_ranked_few() -> None:
    rows = [(name, name[:-3], "[]", "2026-12-04") for name in FAR_APART]
    rows += [(f"a{n}-b-c.md", f"a{n}", "[]", "2026-12-04") for n in range(40)]
    rows.append(("abc.md", "abc", json.dumps(["x"]), "2026-12-04"))
    index = NameIndex(rows, LinkStyle())
    assert index.complete("zzz", 50) == []
    found = [n.path for n in index.complete("abc", 50)]
    assert found[0] == "abc.md" and len(found) == 1 + FUZZY_FEW  # then the tightest few
    tight = [n.path for n in index.complete("a1bc", 50)]
    assert tight[0] == "a1-b-c.md"  # a1-b-c: 6 characters; a10-b-c, a11-b-c…: 7


async def test_block_ids_after_a_caret(shared_daemon: Daemon, lsp: LanguageClient) -> None:
    d = shared_daemon
    plan = (
        "# Plan\n\nFirst we measure. ^intro\n\n- buy paint\n- paint the wall ^item-one\n\n"
        "## Budget\n\ntext ^budget-2027\n"
    )
    kb = new_vault(d, "blocks", {"Plan.md": plan, "today.md": "# Today\n"})
    indexed(d, kb, 2)
    path = d.docs(kb) / "today.md"
    typed = "[[Plan#^\n[[Plan#^IT\n[[Plan#Bud\nquote ^mine\n[[#^\n"
    await opened(lsp, path, typed)
    lines = typed.split("\n")

    async def at_end(line_no: int) -> list[tuple[str, str]]:
        return edits(await complete_at(lsp, path, line_no, len(lines[line_no])))

    assert await at_end(0) == [
        ("^intro", "^intro]]"),
        ("^item-one", "^item-one]]"),
        ("^budget-2027", "^budget-2027]]"),
    ]
    assert await at_end(1) == [("^item-one", "^item-one]]")]
    assert await at_end(2) == [("Budget", "Budget]]")]  # headings, as before
    assert await at_end(4) == [("^mine", "^mine]]")]  # this note's own
    found = await complete_at(lsp, path, 0, len(lines[0]))
    assert found.items[1].label_details.description == "- paint the wall"


def test_block_ids_are_offered_as_the_daemon_finds_them() -> None:
    """Completion reads block ids by the rule links resolve by (link_targets.BLOCK_MARKER):
    `^id` right after an embed is one, `2^10` is not."""
    from cofferctl.lsp.completion import _blocks

    content = "First. ^intro\n![[x.png]]^pic\n2^10\nwide\u3000^w-2\n"
    assert [label for label, _, _ in _blocks(content, "Plan", "")] == ["^intro", "^pic", "^w-2"]


async def test_attachments_are_offered_after_an_embed_as_the_vault_embeds(
    shared_daemon: Daemon, lsp: LanguageClient
) -> None:
    """Issue 45 §3: after `![[` or `![...](` the vault's files that are not notes (an
    image, a PDF, any file) come first, written as the vault writes embeds: `![[name]]`
    (its path when two share the name), or a Markdown embed with its path percent-encoded."""
    d = shared_daemon
    wiki = {"today.md": "![[old.png]] [[plan]]\n", "plan.md": "# Plan\n"}
    kb = new_vault(d, "embedw", wiki)
    for name in ("img/my pic.png", "a/chart.png", "b/chart.png", "scan.jpg", "data.bin"):
        write(d.docs(kb) / name, b"\x89PNG\r\n\x1a\n" + b"\0" * 16)
    wait_for(lambda: len(d.client.get(d.client.kb(kb, "/paths"))["files"]) >= 4)
    indexed(d, kb, 2)
    path = d.docs(kb) / "today.md"
    await opened(lsp, path, "see ![[my\nsee ![[char\nsee ![[\nsee [[pic\n")
    found = edits(await complete_at(lsp, path, 0, len("see ![[my")))
    assert found[0] == ("my pic.png", "my pic.png]]")
    charts = edits(await complete_at(lsp, path, 1, len("see ![[char")))
    assert charts[:2] == [("chart.png", "a/chart.png]]"), ("chart.png", "b/chart.png]]")]
    every = [label for label, _ in edits(await complete_at(lsp, path, 2, len("see ![[")))]
    assert {"scan.jpg", "data.bin", "my pic.png", "plan"} <= set(every)
    assert every.index("scan.jpg") < every.index("plan")  # attachments first
    plain = edits(await complete_at(lsp, path, 3, len("see [[pic")))
    assert all(label != "my pic.png" for label, _ in plain)  # a link, not an embed

    markdown = {"notes/today.md": "[p](plan.md) ![i](../old.png)\n", "notes/plan.md": "# P\n"}
    kb = new_vault(d, "embedm", markdown)
    write(d.docs(kb) / "img" / "my pic (1).png", b"\x89PNG\r\n\x1a\n" + b"\0" * 16)
    wait_for(lambda: d.client.get(d.client.kb(kb, "/paths"))["files"])
    indexed(d, kb, 2)
    path = d.docs(kb) / "notes" / "today.md"
    await opened(lsp, path, "see ![[my pi]] now\nsee ![alt](my\n")
    item = (await complete_at(lsp, path, 0, len("see ![[my pi"))).items[0]
    assert item.text_edit.new_text == "[my pic (1).png](../img/my%20pic%20%281%29.png)"
    edit = item.text_edit.range
    assert (edit.start.character, edit.end.character) == (5, len("see ![[my pi]]"))
    found = edits(await complete_at(lsp, path, 1, len("see ![alt](my")))
    assert found[0] == ("../img/my%20pic%20%281%29.png", "../img/my%20pic%20%281%29.png)")
