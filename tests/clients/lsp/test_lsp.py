"""`cofferctl lsp` driven by a real LSP client (pytest-lsp's, on pygls and lsprotocol: a
maintained client that speaks the protocol's types), against the real daemon: diagnostics
of a note's unsaved text and go to definition, in a vault with nested folders, CJK names,
wiki and Markdown links."""

from __future__ import annotations

import asyncio
import subprocess
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient, make_test_lsp_client

from cofferctl.lsp import text
from tests.support.daemon import BIN, Daemon
from tests.support.helpers import add_note, new_vault, write
from tests.support.lsp_client import complete_at, diagnostics_of, opened

NOTE = (
    "# Today\n\n見て [[計画#予算|the plan]], [[plan]] and [[nowhere]].\n[ana](../people/ana.md)\n"
)


@pytest.fixture
def vault(shared_daemon: Daemon) -> tuple[Daemon, str]:
    notes = {"projects/計画.md": "# 計画\n\nintro\n\n## 予算\n\nnumbers\n"}
    for relpath in ["projects/plan.md", "archive/plan.md", "people/ana.md"]:
        notes[relpath] = f"# {relpath}\n"
    return shared_daemon, new_vault(shared_daemon, "lsp", notes)


@pytest.fixture
async def lsp(vault: tuple[Daemon, str]) -> AsyncIterator[LanguageClient]:
    d, _ = vault
    client = make_test_lsp_client()
    await client.start_io(str(BIN / "cofferctl"), "lsp", env=d.env())
    await client.initialize_session(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(),
            root_uri=d.docs(vault[1]).as_uri(),
        )
    )
    yield client
    await asyncio.wait_for(client.shutdown_session(), 10)


async def test_diagnostics_name_broken_and_ambiguous_links(
    vault: tuple[Daemon, str], lsp: LanguageClient
) -> None:
    d, kb = vault
    found = await opened(lsp, d.docs(kb) / "projects" / "today.md", NOTE)
    by_code = {(x.code, x.range.start.line, x.range.start.character): x for x in found}
    line = NOTE.split("\n")[2]
    start = len(line[: line.index("[[nowhere]]")].encode("utf-16-le")) // 2  # UTF-16 units
    broken = by_code[("broken-link", 2, start)]
    assert broken.severity == types.DiagnosticSeverity.Warning and "nowhere" in broken.message
    assert broken.range.end.character == start + len("[[nowhere]]")
    ambiguous = next(x for x in found if x.code == "ambiguous-link")
    # the note's own folder first, as Obsidian takes it
    assert "projects/plan.md (taken), archive/plan.md" in ambiguous.message
    assert len(found) == 2  # the CJK link and the Markdown link resolve


async def test_diagnostics_follow_the_unsaved_text(
    vault: tuple[Daemon, str], lsp: LanguageClient
) -> None:
    d, kb = vault
    path = d.docs(kb) / "draft.md"
    uri = path.as_uri()
    assert await opened(lsp, path, "# Draft\n") == []
    lsp.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(2, uri),
            [
                types.TextDocumentContentChangeWholeDocument(
                    "<<<<<<< HEAD\na\n=======\nb\n>>>>>>> x\n"
                )
            ],
        )
    )
    markers = await diagnostics_of(lsp, uri)
    assert [(x.code, x.range.start.line) for x in markers] == [
        ("merge-marker", 0),
        ("merge-marker", 2),
        ("merge-marker", 4),
    ]
    assert not path.exists()  # nothing is written: the editor owns the file


async def test_definition_goes_to_the_note_and_its_heading(
    vault: tuple[Daemon, str], lsp: LanguageClient
) -> None:
    d, kb = vault
    path = d.docs(kb) / "projects" / "today.md"
    await opened(lsp, path, NOTE)
    line = NOTE.split("\n")[2]
    column = len(line[: line.index("予算")].encode("utf-16-le")) // 2

    async def definition(line_no: int, character: int) -> Any:
        params = types.DefinitionParams(
            types.TextDocumentIdentifier(path.as_uri()), types.Position(line_no, character)
        )
        return await asyncio.wait_for(lsp.text_document_definition_async(params), 10)

    target = await definition(2, column)
    assert target.uri == (d.docs(kb) / "projects" / "計画.md").as_uri()
    assert target.range.start.line == 4  # `## 予算`
    ana = await definition(3, 2)
    assert ana.uri == (d.docs(kb) / "people" / "ana.md").as_uri()
    assert await definition(2, line.index("[[nowhere]]") + 3) is None
    assert await definition(0, 0) is None


def test_the_server_survives_garbage_and_ends_as_the_protocol_asks() -> None:
    def frame(body: bytes) -> bytes:
        return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)

    messages = [
        frame(b"{nope"),
        b"X-Other: 1\r\n\r\n",
        b"Content-Length: 99999999999999\r\n\r\n",
        frame(b'{"jsonrpc":"2.0","id":7,"method":"shutdown"}'),
        frame(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}'),
    ]
    done = subprocess.run(
        [str(BIN / "cofferctl"), "lsp"], input=b"".join(messages), capture_output=True, timeout=20
    )
    out = done.stdout.decode()
    assert out.count('"code":-32700') == 3  # not JSON, no length, a length too long
    assert '"id":7,"error":{"code":-32002' in out  # shutdown before initialize
    assert '"id":1,"result":{"capabilities"' in out
    assert done.returncode != 0  # stdin ended without `shutdown` and `exit`


async def test_completion_after_brackets_offers_notes_best_first(
    vault: tuple[Daemon, str], lsp: LanguageClient
) -> None:
    d, kb = vault
    path = d.docs(kb) / "projects" / "today.md"
    text = "# Today\n\nsee [[計\nand [[pla]] here\nnot [[x]] after\n"
    await opened(lsp, path, text)

    async def complete(line_no: int, character: int) -> Any:
        params = types.CompletionParams(
            types.TextDocumentIdentifier(path.as_uri()), types.Position(line_no, character)
        )
        return await asyncio.wait_for(lsp.text_document_completion_async(params), 10)

    cjk = await complete(2, len("see [[計"))
    (item,) = cjk.items
    assert item.label == "計画" and item.text_edit.new_text == "計画]]"
    assert (item.text_edit.range.start.character, item.text_edit.range.end.character) == (6, 7)
    plans = await complete(3, len("and [[pla"))
    assert [i.detail for i in plans.items][:2] == ["archive/plan.md", "projects/plan.md"]
    assert [i.text_edit.new_text for i in plans.items][:2] == ["archive/plan", "projects/plan"]
    assert [i.detail for i in plans.items][2:] == ["people/ana.md"]  # p-l-a, in order
    assert await complete(4, len("not [[x]] af")) is None  # the link is closed


async def test_hover_references_and_symbols(vault: tuple[Daemon, str], lsp: LanguageClient) -> None:
    d, kb = vault
    docs = d.docs(kb)
    add_note(d, kb, "log/monday.md", "# Monday\n\nread\n\nsee [[計画]] again\n")
    today = docs / "projects" / "today.md"
    await opened(lsp, today, NOTE)
    line = NOTE.split("\n")[2]
    column = len(line[: line.index("計画")].encode("utf-16-le")) // 2
    hover = await asyncio.wait_for(
        lsp.text_document_hover_async(
            types.HoverParams(
                types.TextDocumentIdentifier(today.as_uri()), types.Position(2, column)
            )
        ),
        10,
    )
    shown = hover.contents.value  # the section the link names (issue 34 §3)
    assert "projects/計画.md" in shown and "numbers" in shown and "intro" not in shown

    plan = docs / "projects" / "計画.md"
    await opened(lsp, plan, plan.read_text())
    back = await asyncio.wait_for(
        lsp.text_document_references_async(
            types.ReferenceParams(
                context=types.ReferenceContext(include_declaration=False),
                text_document=types.TextDocumentIdentifier(plan.as_uri()),
                position=types.Position(0, 0),
            )
        ),
        10,
    )
    assert [(x.uri, x.range.start.line) for x in back] == [
        ((docs / "log" / "monday.md").as_uri(), 4)
    ]
    symbols = await asyncio.wait_for(
        lsp.text_document_document_symbol_async(
            types.DocumentSymbolParams(types.TextDocumentIdentifier(plan.as_uri()))
        ),
        10,
    )
    assert [(s.name, [c.name for c in s.children]) for s in symbols] == [("計画", ["予算"])]


async def test_workspace_symbols_are_a_coffer_search(
    vault: tuple[Daemon, str], lsp: LanguageClient
) -> None:
    d, kb = vault
    docs = d.docs(kb)
    add_note(
        d, kb, "log/boiler.md", "# Boiler\n\n## Service\n\nthe technician replaced the valve\n"
    )
    found = await asyncio.wait_for(
        lsp.workspace_symbol_async(types.WorkspaceSymbolParams(query="technician valve")), 10
    )
    assert [s.location.uri for s in found][:1] == [(docs / "log" / "boiler.md").as_uri()]
    assert "technician" in found[0].name and found[0].container_name == "log/boiler.md"
    assert found[0].name.startswith("Boiler")  # its heading path or title, then the snippet


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("see [[pla", ("note", 6, "pla", "")),
        ("see [[計画#予", ("heading", 9, "予", "計画")),
        ("see [[#Intro", ("heading", 7, "Intro", "")),
        ("see [[計画#予算|the", ("alias", 12, "the", "計画")),
        ("done [[x]] and #pro", ("tag", 16, "pro", "")),
        ("#draft", ("tag", 1, "draft", "")),
        ("see [x](../pro", ("path", 8, "../pro", "")),
        ("[a](b.md) and", None),
        ("# Heading", None),
        ("a#b", None),
        ("[[a]] after", None),
        ("plain text", None),
    ],
)
def test_what_is_being_typed(line: str, expected: tuple[str, int, str, str] | None) -> None:
    assert text.completion_context(line, len(line)) == expected


def test_what_is_being_typed_in_a_hostile_line_takes_linear_time() -> None:
    line = "#a " * 100_000 + "[[" * 50_000 + "#" * 100_000
    started = time.perf_counter()
    text.completion_context(line, len(line))
    assert time.perf_counter() - started < 1.0


async def test_completion_of_headings_aliases_and_tags(
    vault: tuple[Daemon, str], lsp: LanguageClient
) -> None:
    d, kb = vault
    docs = d.docs(kb)
    add_note(
        d,
        kb,
        "people/bo.md",
        "---\naliases: [Robert, Bobby]\ntags: [team]\n---\n# Bo\n#team #travel\n",
    )
    path = docs / "projects" / "today.md"
    typed = "[[計画#予\n[[bo|Rob\n#te\n[[#To\n# Today\n"
    await opened(lsp, path, typed)

    async def labels(line_no: int) -> list[str]:
        line = typed.split("\n")[line_no]
        params = types.CompletionParams(
            types.TextDocumentIdentifier(path.as_uri()), types.Position(line_no, len(line))
        )
        found = await asyncio.wait_for(lsp.text_document_completion_async(params), 10)
        return [item.label for item in found.items] if found else []

    assert await labels(0) == ["予算"]
    assert await labels(1) == ["Robert"]
    assert await labels(2) == ["team"]
    assert await labels(3) == ["Today"]  # this note's own headings

    await opened(lsp, path, "see [a](an\n", version=2)
    params = types.CompletionParams(
        types.TextDocumentIdentifier(path.as_uri()), types.Position(0, 10)
    )
    found = await asyncio.wait_for(lsp.text_document_completion_async(params), 10)
    assert found.items[0].text_edit.new_text == "../people/ana.md)"

    # a path typed with its suffix, in any case: the grammar's Markdown suffixes
    for version, typed_path in enumerate(("ana.MD", "ana.markdown"), 3):
        await opened(lsp, path, f"see [a]({typed_path}\n", version=version)
        params = types.CompletionParams(
            types.TextDocumentIdentifier(path.as_uri()), types.Position(0, 8 + len(typed_path))
        )
        found = await asyncio.wait_for(lsp.text_document_completion_async(params), 10)
        assert found.items[0].text_edit.new_text == "../people/ana.md)", typed_path


@pytest.mark.parametrize(
    ("kind", "target", "expected"),
    [
        ("wiki", "nowhere", "projects/nowhere.md"),
        ("wiki", "ideas/新しい#top", "ideas/新しい.md"),
        ("wiki", "Plan.md", "projects/Plan.md"),
        ("markdown", "../people/bo%20b.md", "people/bo b.md"),
        ("markdown", "/top.md", "top.md"),
        ("wiki", "../../out", None),
        ("markdown", "../../out.md", None),
        ("wiki", "#only-a-heading", None),
        # what a Markdown link leads to is link_targets.markdown_path's: no note for these
        ("markdown", "https://example.com/x.md", None),
        ("markdown", "sub/ #top", None),
    ],
)
def test_where_a_missing_note_would_be_made(kind: str, target: str, expected: str | None) -> None:
    assert text.new_note_path(kind, target, "projects/today.md") == expected


async def test_a_code_action_creates_the_note_a_broken_link_names(
    vault: tuple[Daemon, str], lsp: LanguageClient
) -> None:
    d, kb = vault
    path = d.docs(kb) / "projects" / "today.md"
    await opened(lsp, path, NOTE)
    actions = await asyncio.wait_for(
        lsp.text_document_code_action_async(
            types.CodeActionParams(
                types.TextDocumentIdentifier(path.as_uri()),
                types.Range(types.Position(0, 0), types.Position(3, 0)),
                types.CodeActionContext(diagnostics=[]),
            )
        ),
        10,
    )
    (action,) = actions
    assert action.title == "Create the note projects/nowhere.md"
    create, heading = action.edit.document_changes
    made = (d.docs(kb) / "projects" / "nowhere.md").as_uri()
    assert create.uri == made and heading.text_document.uri == made
    assert heading.edits[0].new_text == "# nowhere\n"
    assert not (d.docs(kb) / "projects" / "nowhere.md").exists()  # the editor makes it


@pytest.mark.parametrize(
    ("written", "kind", "target", "expected"),
    [
        ("[[計画#予算|the plan]]", "wiki", "計画#予算", "[[新計画#予算|the plan]]"),
        ("![[ projects/計画 ]]", "wiki", "projects/計画", "![[ archive/新計画 ]]"),
        ("[[計画.md]]", "wiki", "計画.md", "[[新計画.md]]"),
        ("[p](../projects/計画.md#予算)", "markdown", "../projects/計画.md#予算",
         "[p](../archive/新計画.md#予算)"),
        ("[p](<../projects/計画.md> 't')", "markdown", "../projects/計画.md",
         "[p](<../archive/新計画.md> 't')"),
        ("[p](/projects/計画.md)", "markdown", "/projects/計画.md", "[p](/archive/新計画.md)"),
    ],
)  # fmt: skip
def test_a_link_is_rewritten_to_a_moved_note(
    written: str, kind: str, target: str, expected: str
) -> None:
    link = {"type": kind, "target": target}
    assert text.relinked(written, link, "log/monday.md", "archive/新計画.md") == expected


async def test_renaming_a_note_rewrites_every_link_to_it(
    vault: tuple[Daemon, str], lsp: LanguageClient
) -> None:
    d, kb = vault
    docs = d.docs(kb)
    monday = "# Monday\n\nsee [[計画#予算|the plan]]\nand [p](../projects/計画.md) and [[plan]]\n"
    add_note(d, kb, "log/monday.md", monday)
    old, new = docs / "projects" / "計画.md", docs / "projects" / "budget 2027.md"
    edit = await asyncio.wait_for(
        lsp.workspace_will_rename_files_async(
            types.RenameFilesParams([types.FileRename(old.as_uri(), new.as_uri())])
        ),
        10,
    )
    (uri,) = edit.changes
    assert uri == (docs / "log" / "monday.md").as_uri()
    lines = monday.split("\n")
    rewritten = []
    for change in sorted(edit.changes[uri], key=lambda c: c.range.start.character, reverse=True):
        line = lines[change.range.start.line]
        start = len(
            line.encode("utf-16-le")[: change.range.start.character * 2].decode("utf-16-le")
        )
        end = len(line.encode("utf-16-le")[: change.range.end.character * 2].decode("utf-16-le"))
        lines[change.range.start.line] = line[:start] + change.new_text + line[end:]
        rewritten.append(change.new_text)
    assert "\n".join(lines) == (
        "# Monday\n\nsee [[budget 2027#予算|the plan]]\n"
        "and [p](<../projects/budget 2027.md>) and [[plan]]\n"
    )
    assert old.exists()  # the editor renames the file; Coffer writes nothing


async def test_diagnostics_follow_notes_made_elsewhere(
    vault: tuple[Daemon, str], lsp: LanguageClient
) -> None:
    d, kb = vault
    path = d.docs(kb) / "projects" / "today.md"
    found = await opened(lsp, path, NOTE)
    assert "broken-link" in [x.code for x in found]
    write(d.docs(kb) / "elsewhere" / "nowhere.md", "# Nowhere\n")  # by another program
    deadline = time.monotonic() + 15
    while "broken-link" in [x.code for x in lsp.diagnostics[path.as_uri()]]:
        assert time.monotonic() < deadline, "the diagnostics were not refreshed"
        await asyncio.sleep(0.05)


async def test_a_code_action_links_a_plain_mention_of_a_note(
    vault: tuple[Daemon, str], lsp: LanguageClient
) -> None:
    d, kb = vault
    path = d.docs(kb) / "projects" / "today.md"
    await opened(lsp, path, "# Today\n\nask ana about the 計画 today\n")

    async def actions(first: int, last: int) -> list[Any]:
        params = types.CodeActionParams(
            types.TextDocumentIdentifier(path.as_uri()),
            types.Range(types.Position(2, first), types.Position(2, last)),
            types.CodeActionContext(diagnostics=[]),
        )
        return list(await asyncio.wait_for(lsp.text_document_code_action_async(params), 10) or [])

    (ana,) = await actions(5, 5)  # the cursor in `ana`
    assert ana.title == "Link to people/ana.md"
    (edit,) = ana.edit.changes[path.as_uri()]
    assert edit.new_text == "[[ana]]" and (
        edit.range.start.character,
        edit.range.end.character,
    ) == (4, 7)
    (plan,) = await actions(18, 20)  # `計画` selected
    assert plan.edit.changes[path.as_uri()][0].new_text == "[[計画]]"
    assert await actions(0, 0) == []  # `ask`: no note is called so


def test_the_word_under_the_cursor_is_found_in_linear_time() -> None:
    line = "a" * 1_000_000
    started = time.perf_counter()
    assert text.mention(line, 500_000, 500_000) == (
        500_000 - text.WORD_MAX,
        500_000 + text.WORD_MAX,
    )
    assert time.perf_counter() - started < 0.5


async def test_renaming_a_heading_rewrites_the_links_to_it(
    vault: tuple[Daemon, str], lsp: LanguageClient
) -> None:
    d, kb = vault
    docs = d.docs(kb)
    monday = "see [[計画#予算|money]] and [[計画#intro]]\n[b](../projects/計画.md#予算)\n"
    add_note(d, kb, "log/monday.md", monday)
    plan = docs / "projects" / "計画.md"
    await opened(lsp, plan, plan.read_text())
    edit = await asyncio.wait_for(
        lsp.text_document_rename_async(
            types.RenameParams(
                types.TextDocumentIdentifier(plan.as_uri()), types.Position(4, 4), "Budget 2027"
            )
        ),
        10,
    )
    (heading,) = edit.changes[plan.as_uri()]
    assert heading.new_text == "Budget 2027" and heading.range.start.character == 3
    others = edit.changes[(docs / "log" / "monday.md").as_uri()]
    assert sorted(e.new_text for e in others) == [
        "[[計画#Budget 2027|money]]",
        "[b](../projects/計画.md#Budget%202027)",
    ]


async def test_completion_writes_a_markdown_link_where_the_kb_links_so(
    shared_daemon: Daemon,
) -> None:
    """Typing `[[` in a vault of Markdown links writes one, as Obsidian does with wiki
    links off: the brackets typed and those the editor closed become `[title](path)`."""
    d = shared_daemon
    notes = {
        "daily/today.md": "[plan](../projects/plan.md), [ana](../people/ana.md)\n",
        "projects/plan.md": "# Budget plan\n",
        "people/ana.md": "# Ana\n",
    }
    kb = new_vault(d, "mdstyle", notes)
    client = make_test_lsp_client()
    await client.start_io(str(BIN / "cofferctl"), "lsp", env=d.env())
    await client.initialize_session(types.InitializeParams(capabilities=types.ClientCapabilities()))
    try:
        path = d.docs(kb) / "daily" / "today.md"
        await opened(client, path, "# Today\n\nsee [[pla]] now\n")
        found = await complete_at(client, path, 2, len("see [[pla"))
        item = found.items[0]
        assert item.detail == "projects/plan.md"
        assert item.text_edit.new_text == "[Budget plan](../projects/plan.md)"
        edit = item.text_edit.range
        assert (edit.start.character, edit.end.character) == (4, len("see [[pla]]"))
        assert item.filter_text == "[[pla"
    finally:
        await asyncio.wait_for(client.shutdown_session(), 10)


async def test_a_note_is_placed_when_its_kb_comes_and_let_go_when_it_goes(
    shared_daemon: Daemon, tmp_path: Path
) -> None:
    """A note opened in a folder that is no KB yet gets its diagnostics once the folder
    is attached; when the KB is deleted, they are withdrawn."""
    d = shared_daemon
    folder = tmp_path / "later-vault"
    write(folder / "a.md", "# A\n")
    client = make_test_lsp_client()
    await client.start_io(str(BIN / "cofferctl"), "lsp", env=d.env())
    await client.initialize_session(types.InitializeParams(capabilities=types.ClientCapabilities()))
    try:
        path = folder / "today.md"
        uri = path.as_uri()
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                types.TextDocumentItem(uri, "markdown", 1, "[[a]] and [[nowhere]]\n")
            )
        )
        kb = f"later-{uuid.uuid4().hex[:8]}"
        d.client.post("/api/v1/knowledge_bases", {"name": kb, "path": str(folder)})

        async def codes() -> list[Any]:
            deadline = time.monotonic() + 15
            while True:
                found = [x.code for x in client.diagnostics.get(uri, [])]
                if found or time.monotonic() > deadline:
                    return found
                await asyncio.sleep(0.05)

        assert await codes() == ["broken-link"]  # `a` resolves, `nowhere` does not
        d.client.request("DELETE", d.client.kb(kb))
        deadline = time.monotonic() + 15
        while client.diagnostics.get(uri):
            assert time.monotonic() < deadline, "the diagnostics of a deleted KB stayed"
            await asyncio.sleep(0.05)
    finally:
        await asyncio.wait_for(client.shutdown_session(), 10)
