"""`cofferctl lsp` reads through the same confinement as the daemon (issue 33 §2): nothing
outside a knowledge base's root is read, shown or offered, whatever a link in the tree or
the editor's path says. A real `cofferctl lsp` over pipes, a real daemon, real links."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.daemon import Daemon
from tests.support.helpers import new_vault, write
from tests.support.lsp_pipe import RawClient, at, open_note, shown

SECRET = "# Secret heading\n\nSECRET-PASSWORD-1234\n"


@pytest.fixture
def client(daemon: Daemon) -> Iterator[RawClient]:
    started = RawClient(daemon.env()).start()
    try:
        yield started
    finally:
        started.kill()


def test_a_note_swapped_for_a_link_to_a_secret_shows_nothing_of_it(
    daemon: Daemon, client: RawClient, tmp_path: Path
) -> None:
    d = daemon
    kb = new_vault(d, "conf", {"b.md": "# B\n\n## Plan\n\nplain words\n"})
    secret = write(tmp_path / "outside" / "secret.md", SECRET)
    uri = (d.docs(kb) / "a.md").as_uri()
    note = "# A\n\nsee [[b]] and [[b#Secret heading]]\n[[b#\n"
    found = open_note(client, uri, note)  # [[b#... is being typed: no link yet
    assert [x["code"] for x in found] == ["missing-heading"]  # b.md has no such heading
    assert "plain words" in shown(client.ask("textDocument/hover", at(uri, 2, 7)))
    assert d.proc is not None
    os.kill(d.proc.pid, signal.SIGSTOP)  # the last inspection holds: b.md is a note
    try:
        (d.docs(kb) / "b.md").unlink()
        (d.docs(kb) / "b.md").symlink_to(secret)
        hover = shown(client.ask("textDocument/hover", at(uri, 2, 7)))
        assert "SECRET" not in hover
        definition = client.ask("textDocument/definition", at(uri, 2, 20))["result"]
        assert definition["range"]["start"]["line"] == 0  # the secret's heading is not read
        heads = client.ask("textDocument/completion", at(uri, 3, 4))["result"]
        assert [i["label"] for i in (heads or {}).get("items", [])] == []
    finally:
        os.kill(d.proc.pid, signal.SIGCONT)


def test_a_note_opened_through_a_link_reads_only_inside_its_kb(
    daemon: Daemon, client: RawClient, tmp_path: Path
) -> None:
    d = daemon
    notes = {"sub/n.md": "# N\n", "other.md": "# Other\n\nthe real other note\n"}
    kb = new_vault(d, "conf", notes)
    editor = tmp_path / "editor"
    editor.mkdir()
    (editor / "sub").symlink_to(d.docs(kb) / "sub")  # the editor reaches sub/ by a link
    write(editor / "other.md", "# Other\n\nSECRET-OUTSIDE-THE-KB\n")  # beside that link
    uri = (editor / "sub" / "n.md").as_uri()
    assert open_note(client, uri, "# N\n\nsee [[other]]\n") == []
    hover = shown(client.ask("textDocument/hover", at(uri, 2, 7)))
    assert "the real other note" in hover and "SECRET" not in hover
    jump = client.ask("textDocument/definition", at(uri, 2, 7))["result"]
    jumped = Path(jump["uri"].removeprefix("file://"))
    assert os.path.realpath(jumped) == str((d.docs(kb) / "other.md").resolve())


def test_a_note_is_offered_only_where_it_would_be_inside_the_kb(
    daemon: Daemon, client: RawClient, tmp_path: Path
) -> None:
    d = daemon
    kb = new_vault(d, "conf", {"plan.md": "# Plan\n"})
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (d.docs(kb) / "out").symlink_to(outside)  # a linked folder: not the KB's
    (d.docs(kb) / "ghost.md").symlink_to(tmp_path / "nothing.md")  # a dangling link
    uri = (d.docs(kb) / "today.md").as_uri()
    note = "# Today\n\n[[out/new]] [x](out/made.md) [[ghost]] [[fresh]]\n"
    found = open_note(client, uri, note)
    assert len([x for x in found if x["code"] == "broken-link"]) == 4
    span = {"start": {"line": 0, "character": 0}, "end": {"line": 3, "character": 0}}
    params = {"textDocument": {"uri": uri}, "range": span, "context": {"diagnostics": []}}
    actions = client.ask("textDocument/codeAction", params)["result"]
    assert [a["title"] for a in actions] == ["Create the note fresh.md"]
    assert list(outside.iterdir()) == []
