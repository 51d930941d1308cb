"""Every file is a link target (issue 34 §2): wiki links, embeds and Markdown links lead to
images, PDFs, canvases and any other file of the knowledge base, by Obsidian's rules (any
case, the shortest path when several fit, an extension always written), through the API,
`cofferctl links`, MCP and the language server; hidden, ignored and linked files are not
targets; the watcher keeps the files current. Links to a heading or block a note does not
have are broken too, with the nearest heading (one rule for the CLI, API and editor). Real
daemons, a real `cofferctl lsp` over pipes, files with real bytes."""

from __future__ import annotations

import io
import os
import struct
import uuid
import zlib
from typing import Any

import pytest
from mcp import Client as McpClient

from coffer_kernel.link_targets import DocumentIndexOfPaths
from cofferctl import cli
from cofferd.domain.links import links_of
from tests.support.daemon import Daemon, wait_for
from tests.support.helpers import applied, write
from tests.support.lsp_pipe import RawClient, at, open_note, relpath_of, shown
from tests.support.mcp_client import call as mcp_call
from tests.support.mcp_client import params as mcp_params


def png(width: int = 3, height: int = 2) -> bytes:
    """A real PNG: signature, IHDR, IDAT of grey pixels, IEND."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\0" + b"\x80" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def pdf() -> bytes:
    """A real one-page PDF (its cross-reference table's offsets counted)."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] >>",
    ]
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    trailer = f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n"
    return out + trailer.encode()


HELP = "# Help\n\n## Questions\n\nask us\n\nA block. ^cite\n"
NOTE = (
    "# Today\n\n"  # 0, 1
    "![[internal-links-header.png#interface]] and [[manual.pdf]]\n"  # 2
    "[[Boards/plan.canvas]] ![[photo.png]] ![[diagram.png]]\n"  # 3
    "![a pic](../attachments/internal-links-header.png) [m](<../Docs/manual.pdf#page=2>)\n"  # 4
    "[[missing.png]] [[Help#Questons]] [[Help#^nope]] [[Help#Questions]]\n"  # 5
    "[[hidden.png]] [[secret.png]] [[linked.png]] [[diagram]]\n"  # 6
)
BINARY = {
    "attachments/internal-links-header.png": png(),
    "Images/Photo.PNG": png(5, 5),  # named in another case
    "a/diagram.png": png(),  # the shorter path of two: taken, the link ambiguous
    "b/deep/diagram.png": png(),
    "Docs/manual.pdf": pdf(),
    "Boards/plan.canvas": b'{"nodes": [], "edges": []}',
    ".obsidian/hidden.png": png(),  # a hidden folder: not a target
    "private/secret.png": png(),  # ignored by .gitignore: not a target
}


def make_vault(d: Daemon) -> str:
    kb = f"files-{uuid.uuid4().hex[:8]}"
    # PDFs are not indexed in this KB: the PDF is a file like an image
    d.client.post("/api/v1/knowledge_bases", {"name": kb, "config": {"index_formats": []}})
    docs = d.docs(kb)
    for relpath, data in BINARY.items():
        (docs / relpath).parent.mkdir(parents=True, exist_ok=True)
        (docs / relpath).write_bytes(data)
    write(docs / ".gitignore", "private/\n")
    os.symlink(docs / "attachments/internal-links-header.png", docs / "linked.png")
    write(docs / "Help.md", HELP)
    write(docs / "notes/today.md", NOTE)
    wait_for(lambda: d.client.get(d.client.kb(kb, "/metrics"))["documents"] == 2)
    return kb


def broken_of(d: Daemon, kb: str) -> list[tuple[str, str, str | None]]:
    found = d.client.get(d.client.kb(kb, "/links/broken"))["links"]
    return sorted((b["target"], b["problem"], b.get("suggestion")) for b in found)


EXPECTED_BROKEN = [
    ("Help#Questons", "missing-heading", "Questions"),
    ("Help#^nope", "missing-block", None),
    ("diagram", "missing-file", None),  # a file answers only with its extension
    ("hidden.png", "missing-file", None),  # in a hidden folder
    ("linked.png", "missing-file", None),  # a symbolic link
    ("missing.png", "missing-file", None),
    ("secret.png", "missing-file", None),  # ignored
]


def test_files_are_link_targets_through_the_api_the_cli_and_mcp(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = make_vault(d)
    wait_for(lambda: broken_of(d, kb) == EXPECTED_BROKEN)

    links = d.client.get(d.client.kb(kb, "/documents/notes%2Ftoday.md/links"))["outgoing"]
    led = {(o["target"], o["relative_path"], o["kind"], o["ambiguous"]) for o in links}
    assert {
        ("internal-links-header.png#interface", "attachments/internal-links-header.png",
         "file", False),
        ("manual.pdf", "Docs/manual.pdf", "file", False),
        ("Boards/plan.canvas", "Boards/plan.canvas", "file", False),
        ("photo.png", "Images/Photo.PNG", "file", False),
        ("diagram.png", "a/diagram.png", "file", True),
        ("../attachments/internal-links-header.png", "attachments/internal-links-header.png",
         "file", False),
        ("../Docs/manual.pdf#page=2", "Docs/manual.pdf", "file", False),
        ("Help#Questions", "Help.md", "document", False),
    } <= led  # fmt: skip
    assert all(o["document_id"] is None for o in links if o["kind"] == "file")

    out = io.StringIO()
    assert cli.main(["--socket", str(d.socket), "links", kb, "--broken"], stdout=out) == 0
    printed = out.getvalue()
    assert "notes/today.md:6: missing.png  (broken)" in printed
    assert (
        "notes/today.md:6: Help#Questons  (Help.md has no heading 'Questons': "
        "did you mean 'Questions'?)"
    ) in printed
    assert "7 broken links" in printed and ".png#interface" not in printed

    async def through_mcp() -> list[Any]:
        async with McpClient(mcp_params(d.socket)) as client:
            found = await mcp_call(client, "get_broken_links", kb=kb)
            return sorted((b["target"], b["problem"], b["suggestion"]) for b in found["links"])

    import asyncio

    assert asyncio.run(through_mcp()) == EXPECTED_BROKEN


def test_the_watcher_keeps_the_files_current(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = make_vault(d)
    docs = d.docs(kb)
    wait_for(lambda: broken_of(d, kb) == EXPECTED_BROKEN)
    (docs / "new folder").mkdir()
    (docs / "new folder/missing.png").write_bytes(png())  # made: the link leads there
    wait_for(lambda: broken_of(d, kb) == [b for b in EXPECTED_BROKEN if b[0] != "missing.png"])
    (docs / "a/diagram.png").unlink()  # gone: the other diagram is the only one left

    def diagram() -> tuple[str, bool]:
        links = d.client.get(d.client.kb(kb, "/documents/notes%2Ftoday.md/links"))["outgoing"]
        (found,) = [o for o in links if o["target"] == "diagram.png"]
        return found["relative_path"], found["ambiguous"]

    wait_for(lambda: diagram() == ("b/deep/diagram.png", False))
    os.rename(docs / "new folder", docs / "elsewhere")  # a folder moved: its files with it
    wait_for(
        lambda: d.client.get(d.client.kb(kb, "/paths"))["files"].count("elsewhere/missing.png") == 1
    )
    assert "new folder/missing.png" not in d.client.get(d.client.kb(kb, "/paths"))["files"]


def test_the_editor_goes_to_files_and_says_what_they_are(
    shared_daemon: Daemon, lsp_client: RawClient
) -> None:
    d = shared_daemon
    kb = make_vault(d)
    docs = d.docs(kb)
    uri = (docs / "notes/today.md").as_uri()
    found = open_note(lsp_client, uri, NOTE)
    said = sorted((x["range"]["start"]["line"], x["code"]) for x in found)
    assert said == [
        (3, "ambiguous-link"),  # [[diagram.png]]: a/ and b/deep/
        (5, "broken-link"),
        (5, "missing-block"),
        (5, "missing-heading"),
        (6, "broken-link"),
        (6, "broken-link"),
        (6, "broken-link"),
        (6, "broken-link"),
    ]

    def definition(line: int, character: int) -> tuple[str, int]:
        answer = lsp_client.ask("textDocument/definition", at(uri, line, character))["result"]
        return answer["uri"], answer["range"]["start"]["line"]

    header = (docs / "attachments/internal-links-header.png").as_uri()
    assert definition(2, 5) == (header, 0)  # an embed with a #fragment: the image itself
    assert definition(2, 45) == ((docs / "Docs/manual.pdf").as_uri(), 0)
    assert definition(3, 5) == ((docs / "Boards/plan.canvas").as_uri(), 0)
    assert definition(3, 25) == ((docs / "Images/Photo.PNG").as_uri(), 0)
    assert definition(4, 3) == (header, 0)  # a Markdown image
    hover = shown(lsp_client.ask("textDocument/hover", at(uri, 2, 5)))
    size = len(BINARY["attachments/internal-links-header.png"])
    assert f"PNG image, {size} bytes" in hover and header in hover
    assert "Obsidian canvas" in shown(lsp_client.ask("textDocument/hover", at(uri, 3, 5)))
    assert "PDF document" in shown(lsp_client.ask("textDocument/hover", at(uri, 2, 45)))


def test_a_file_made_later_clears_the_editors_diagnostic(
    shared_daemon: Daemon, lsp_client: RawClient
) -> None:
    d = shared_daemon
    kb = make_vault(d)
    docs = d.docs(kb)
    uri = (docs / "notes/other.md").as_uri()
    assert [x["code"] for x in open_note(lsp_client, uri, "# Other\n\n![[later.png]]\n")] == [
        "broken-link"
    ]
    (docs / "later.png").write_bytes(png())
    assert lsp_client.diagnostics(uri) == []  # the KB's count of changes counts its files


def targets(notes: dict[str, str], files: list[str]) -> dict[str, list[str | None]]:
    """Where each link of each note leads, by the daemon's own rules."""
    index = DocumentIndexOfPaths(notes, files)
    return {
        path: [index.resolve(k).path for k in links_of(body, path)] for path, body in notes.items()
    }


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("notes/today.md", "elsewhere/deeper/today.md"),  # its Markdown images' paths change
        ("attachments/internal-links-header.png", "img/header.png"),  # an image renamed
        ("Images/Photo.PNG", "a/diagram.png.png"),  # onto a name of its own
        ("b/deep/diagram.png", "diagram.png"),  # takes `[[diagram.png]]` over
    ],
)
def test_a_rename_of_a_note_or_a_file_keeps_every_link_on_its_target(
    shared_daemon: Daemon, lsp_client: RawClient, old: str, new: str
) -> None:
    d = shared_daemon
    kb = make_vault(d)
    docs = d.docs(kb)
    files = d.client.get(d.client.kb(kb, "/paths"))["files"]
    notes = {"Help.md": HELP, "notes/today.md": NOTE}
    moved = [{"oldUri": (docs / old).as_uri(), "newUri": (docs / new).as_uri()}]
    answer = lsp_client.ask("workspace/willRenameFiles", {"files": moved})
    assert "error" not in answer, answer
    after = dict(notes)
    for uri, edits in ((answer["result"] or {}).get("changes") or {}).items():
        path = relpath_of(uri, docs)
        after[path] = applied(after[path], edits)
    files_after = [new if f == old else f for f in files]
    if old in after:
        after[new] = after.pop(old)
    before, now = targets(notes, files), targets(after, files_after)
    for path, led in before.items():
        assert now[new if path == old else path] == [new if t == old else t for t in led], path


def test_other_files_are_bounded_and_kept_by_folder() -> None:
    from cofferd.application.indexing.other_files import OtherFiles

    held = OtherFiles(limit=3)
    held.replace("kb", ["a/x.png", "a/b/y.png", "c.pdf"], left_out=2)
    first = held.of("kb")
    assert first.left_out == 2 and first.changes == 1
    held.update("kb", ["a"], ["a/z.png", "a/w.png"])  # the folder scanned again
    assert held.of("kb").paths == {"c.pdf", "a/z.png", "a/w.png"}
    held.update("kb", ["d.svg"], ["d.svg"])  # one more than the bound: counted, not held
    assert held.of("kb").paths == {"c.pdf", "a/z.png", "a/w.png"}
    assert held.of("kb").left_out == 3
    changes = held.of("kb").changes
    held.update("kb", ["c.pdf"], ["c.pdf"])  # nothing changed: the count stays
    assert held.of("kb").changes == changes
    held.update("kb", ["c.pdf"], [])  # gone
    assert "c.pdf" not in held.of("kb").paths and held.of("kb").changes == changes + 1
