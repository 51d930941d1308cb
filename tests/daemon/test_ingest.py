"""Any-format ingest against a real daemon, with real markitdown on real generated files."""

from __future__ import annotations

import io
import os
import re
from pathlib import Path
from typing import Any

import docx
import openpyxl
import pptx
import pytest
import yaml
from fpdf import FPDF

from cofferctl.client import ApiError
from cofferd.domain.errors import ReconversionBlocked
from cofferd.surfaces.core import Coffer
from cofferd.surfaces.http.error_envelope import status_of
from tests.support.daemon import Daemon, upload, wait_for
from tests.support.helpers import new_kb, search, write
from tests.support.samples import MAKERS, make_docx, make_pdf, zip_bomb_docx


def add_path(d: Daemon, kb: str, path: Path, replace: bool = False) -> dict[str, Any]:
    body = {"source_path": str(path), "replace": replace}
    result: dict[str, Any] = d.client.post(d.client.kb(kb, "/documents"), body)
    return result


def rejected(call: Any) -> ApiError:
    with pytest.raises(ApiError) as err:
        call()
    assert err.value.code == "INGEST_REJECTED" and status_of(err.value) == 422
    return err.value


@pytest.fixture(scope="module")
def kb(shared_daemon: Daemon) -> str:
    return new_kb(shared_daemon)


@pytest.mark.parametrize("fmt", sorted(MAKERS))
def test_every_format_becomes_searchable_markdown(shared_daemon: Daemon, kb: str, fmt: str) -> None:
    d = shared_daemon
    token = f"zebra{fmt}quartz"
    data = MAKERS[fmt](f"The {token} appears here.")
    status, reply = upload(d, kb, f"sample.{fmt}", data)
    assert status == 201 and reply["status"] == "added"
    doc = reply["document"]
    assert token in doc["content"]
    assert [p["document_id"] for p in search(d, kb, token)] == [doc["id"]]  # searchable at once
    # named after its title (`sample 2.md` when `sample.md` is taken)
    assert re.fullmatch(re.escape(doc["title"]) + r"( \d+)?", Path(doc["path"]).stem)
    raw = d.home / "knowledge" / kb / "raw" / f"{doc['id']}.{fmt}"
    assert raw.read_bytes() == data
    meta = doc["metadata"]
    assert meta["original_filename"] == f"sample.{fmt}" and meta["original_format"] == fmt
    assert "source_path" not in meta  # an upload of bytes is never path-tracked
    front = doc["frontmatter"]
    assert front["source_mode"] == "converted" and front["source_filename"] == f"sample.{fmt}"
    assert front["converter"] == ("passthrough" if fmt in ("md", "txt") else "markitdown")
    assert doc["source_mode"] == "converted"


def test_markdown_passes_through_unchanged(shared_daemon: Daemon, kb: str) -> None:
    body = "# Kept as is\n\n* a list\n\n```\ncode\n```\n"
    _, reply = upload(shared_daemon, kb, "as-is.md", body.encode())
    assert reply["document"]["content"] == body
    assert reply["document"]["title"] == "Kept as is"


def test_path_ingest_tracks_the_source(shared_daemon: Daemon, kb: str, tmp_path: Path) -> None:
    source = tmp_path / "tracked.docx"
    source.write_bytes(make_docx("tracked walrus text"))
    reply = add_path(shared_daemon, kb, source)
    assert reply["document"]["metadata"]["source_path"] == str(source)
    assert search(shared_daemon, kb, "walrus")


def test_reupload_rules(shared_daemon: Daemon, tmp_path: Path) -> None:
    d = shared_daemon
    kb = new_kb(d)
    draft, second = make_docx("first draft otter"), make_docx("second draft heron")
    first = upload(d, kb, "plan.docx", draft)[1]["document"]
    # byte-identical re-upload: a no-op that says so
    status, again = upload(d, kb, "plan.docx", draft)
    assert status == 200 and again["status"] == "unchanged"
    assert again["document"]["id"] == first["id"]
    # the same bytes under another name: a duplicate, naming the existing document
    err = rejected(lambda: upload_or_raise(d, kb, "copy.docx", draft))
    assert err.details["reason"] == "duplicate" and err.details["document_id"] == first["id"]
    # the same name with new bytes: refused without replace, updated in place with it
    err = rejected(lambda: upload_or_raise(d, kb, "plan.docx", second))
    assert err.details["reason"] == "duplicate"
    status, updated = upload(d, kb, "plan.docx", second, replace=True)
    assert status == 200 and updated["status"] == "updated"
    assert updated["document"]["id"] == first["id"]
    assert search(d, kb, "heron") and not search(d, kb, "otter")
    raw = list((d.home / "knowledge" / kb / "raw").glob(f"{first['id']}.*"))
    assert [p.read_bytes() for p in raw] == [second]
    assert d.client.get(d.client.kb(kb, "/documents"))["total"] == 1


def upload_or_raise(d: Daemon, kb: str, name: str, data: bytes) -> Any:
    status, reply = upload(d, kb, name, data)
    if status >= 400:
        e = reply["error"]
        raise ApiError(status, e["code"], e["message"], e["details"])
    return reply


@pytest.mark.parametrize(
    ("name", "data", "reason"),
    [
        ("empty.pdf", b"", "empty"),
        ("program.exe", b"MZ\x90\x00", "unsupported_type"),
        ("noext", b"just bytes", "unsupported_type"),
        ("truncated.pdf", make_pdf("cut short", pages=3)[:700], "conversion_failed"),
        ("random.pdf", os.urandom(4096), "conversion_failed"),
        ("bomb.docx", zip_bomb_docx(300), "conversion_failed"),
    ],
)
def test_hostile_input_is_rejected_and_loses_nothing(
    shared_daemon: Daemon, kb: str, name: str, data: bytes, reason: str
) -> None:
    d = shared_daemon
    before = d.client.get(d.client.kb(kb, "/documents"))["total"]
    err = rejected(lambda: upload_or_raise(d, kb, name, data))
    assert err.details["reason"] == reason and err.message
    if reason == "unsupported_type":
        assert "pdf" in err.details["supported"] and "docx" in err.details["supported"]
    assert d.healthy()
    assert d.client.get(d.client.kb(kb, "/documents"))["total"] == before
    assert search(d, kb, "zebradocxquartz")  # what was there is still there


def test_text_named_docx_converts_as_text(shared_daemon: Daemon, kb: str) -> None:
    status, reply = upload(shared_daemon, kb, "pretend.docx", b"only plain text pelican inside\n")
    assert status == 201 and "pelican" in reply["document"]["content"]


def test_size_limit_is_enforced_while_streaming(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d, max_document_bytes=1024)
    assert upload(d, kb, "fits.txt", b"x" * 1024)[0] == 201
    status, reply = upload(d, kb, "over.txt", b"y" * 1025)
    assert status == 422 and reply["error"]["details"]["reason"] == "too_large"
    assert not list((d.home / "incoming").glob("*"))  # nothing left behind


def test_delete_cascades(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d)
    doc = upload(d, kb, "gone.pdf", make_pdf("ephemeral mayfly"))[1]["document"]
    d.client.request("DELETE", d.client.kb(kb, f"/documents/{doc['id']}"))
    assert not Path(doc["path"]).exists()
    assert not list((d.home / "knowledge" / kb / "raw").glob(f"{doc['id']}.*"))
    assert not search(d, kb, "mayfly")
    upload(d, kb, "kept.pdf", make_pdf("kept bison"))
    d.client.request("DELETE", d.client.kb(kb))
    assert not (d.home / "knowledge" / kb).exists()


def test_reconvert_and_its_blocking(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d)
    doc = upload(d, kb, "r.html", b"<h1>Title</h1><p>reconvert ibis</p>")[1]["document"]
    path = f"/documents/{doc['id']}/reconvert"
    again = d.client.post(d.client.kb(kb, path))
    assert again["status"] == "updated" and again["document"]["id"] == doc["id"]
    # edited through the API: blocked
    d.client.request(
        "PUT", d.client.kb(kb, f"/documents/{doc['id']}"), {"content": "# Mine now\n\nmy words"}
    )
    with pytest.raises(ApiError) as err:
        d.client.post(d.client.kb(kb, path))
    assert err.value.code == "RECONVERSION_BLOCKED"
    # edited in an editor (the frontmatter still says converted): blocked too
    other = upload(d, kb, "s.html", b"<p>second egret</p>")[1]["document"]
    text = Path(other["path"]).read_text()
    Path(other["path"]).write_text(text + "\nA line I added by hand.\n")
    wait_for(lambda: search(d, kb, "hand"))
    with pytest.raises(ApiError) as err:
        d.client.post(d.client.kb(kb, f"/documents/{other['id']}/reconvert"))
    assert err.value.code == "RECONVERSION_BLOCKED"
    assert "A line I added by hand." in Path(other["path"]).read_text()


def test_update_source_and_check_sources(shared_daemon: Daemon, tmp_path: Path) -> None:
    d = shared_daemon
    kb = new_kb(d)
    a, b, c = (tmp_path / f"{n}.docx" for n in "abc")
    a.write_bytes(make_docx("alpha version one"))
    b.write_bytes(make_docx("bravo version one"))
    c.write_bytes(make_docx("charlie version one"))
    ids = {p.name: add_path(d, kb, p)["document"]["id"] for p in (a, b, c)}

    def check() -> dict[str, list[str]]:
        report = d.client.post(d.client.kb(kb, "/check-sources"))
        return {k: sorted(Path(e["source_path"]).name for e in v) for k, v in report.items()}

    assert check() == {
        "unchanged": ["a.docx", "b.docx", "c.docx"],
        "changed": [],
        "missing": [],
        "updated": [],
        "unreachable": [],
    }
    b.write_bytes(make_docx("bravo version two"))
    moved = c.rename(tmp_path / "c.moved")
    assert check() == {
        "unchanged": ["a.docx"],
        "changed": ["b.docx"],
        "missing": ["c.docx"],
        "updated": [],
        "unreachable": [],
    }
    assert not search(d, kb, "two")  # only reported, not updated

    upd = d.client.post(d.client.kb(kb, f"/documents/{ids['b.docx']}/update-source"))
    assert upd["status"] == "updated" and search(d, kb, "two")
    with pytest.raises(ApiError) as err:
        d.client.post(d.client.kb(kb, f"/documents/{ids['c.docx']}/update-source"))
    assert err.value.code == "SOURCE_MISSING"
    moved.rename(c)  # restored
    assert check()["missing"] == []

    # auto-update refreshes changed sources, but never a document edited in Coffer
    d.client.request("PATCH", d.client.kb(kb), {"config": {"auto_update_sources": True}})
    d.client.request(
        "PUT", d.client.kb(kb, f"/documents/{ids['a.docx']}"), {"content": "# A\n\nhand edit"}
    )
    a.write_bytes(make_docx("alpha version three"))
    c.write_bytes(make_docx("charlie version three"))
    report = check()
    assert report["updated"] == ["c.docx"] and report["changed"] == ["a.docx"]
    assert search(d, kb, "charlie") and search(d, kb, "hand")
    with pytest.raises(ApiError) as err:
        d.client.post(d.client.kb(kb, f"/documents/{ids['a.docx']}/update-source"))
    assert err.value.code == "RECONVERSION_BLOCKED"
    front = yaml.safe_load(
        Path(d.client.get(d.client.kb(kb, f"/documents/{ids['c.docx']}"))["path"])
        .read_text()
        .split("---")[1]
    )
    assert front["source_mode"] == "converted"


def test_markdown_content_from_agents(shared_daemon: Daemon, kb: str) -> None:
    reply = shared_daemon.client.post(
        shared_daemon.client.kb(kb, "/documents"),
        {"content": "Findings about the kestrel.", "title": "Bird notes"},
    )
    assert reply["status"] == "added" and reply["document"]["title"] == "Bird notes"
    assert search(shared_daemon, kb, "kestrel")[0]["title"] == "Bird notes"


def test_same_name_from_different_folders_are_different_documents(
    shared_daemon: Daemon, tmp_path: Path
) -> None:
    d = shared_daemon
    kb = new_kb(d)
    for project in ("alpha", "beta"):
        (tmp_path / project).mkdir()
        (tmp_path / project / "README.md").write_text(f"# {project}\n\nabout {project}")
        reply = add_path(d, kb, tmp_path / project / "README.md", replace=True)
        assert reply["status"] == "added"
    assert d.client.get(d.client.kb(kb, "/documents"))["total"] == 2


async def test_an_unindexed_editor_save_still_blocks_reconversion(
    coffer: Coffer, tmp_path: Path
) -> None:
    # in-process, with no watcher: the save below is on disk but not in the index
    await coffer.kbs.create("race")
    source = tmp_path / "x.html"
    source.write_bytes(b"<p>original wren</p>")
    result = await coffer.ingest.add_file("race", source, "x.html", actor="test")
    path = Path(result.document.path)
    path.write_text(path.read_text() + "\nmy own words\n")
    assert (
        await coffer.stores.catalog.get_document("race", result.document.document.id)
    ).source_mode == ("converted")  # the index has not seen the edit
    with pytest.raises(ReconversionBlocked):
        await coffer.originals.reconvert("race", result.document.document.id, actor="test")
    assert "my own words" in path.read_text()


def test_a_synced_source_path_is_never_read(shared_daemon: Daemon, tmp_path: Path) -> None:
    d = shared_daemon
    kb = new_kb(d, auto_update_sources=True)
    secret = tmp_path / "id_ed25519"
    secret.write_text("-----BEGIN OPENSSH PRIVATE KEY-----")
    planted = (
        "---\ntitle: Innocent\nsource_filename: x.txt\nsource_format: txt\n"
        f"source_sha256: {'0' * 64}\nconverter: passthrough\nsource_mode: converted\n"
        f"source_path: {secret}\n---\nharmless\n"
    )
    write(d.docs(kb) / "01JDQ3V6N4Z8T5Y2X7W9R1K0MB.md", planted)  # as if synced in
    wait_for(lambda: d.client.get(d.client.kb(kb, "/documents"))["total"] == 1)
    report = d.client.post(d.client.kb(kb, "/check-sources"))
    assert not any(report.values())  # nothing read, nothing reported
    assert "OPENSSH" not in (d.docs(kb) / "01JDQ3V6N4Z8T5Y2X7W9R1K0MB.md").read_text()
    with pytest.raises(ApiError) as err:
        d.client.post(d.client.kb(kb, "/documents/01JDQ3V6N4Z8T5Y2X7W9R1K0MB/update-source"))
    assert err.value.code == "VALIDATION_ERROR"


def titled_docx(title: str) -> bytes:
    document = docx.Document()
    document.core_properties.title = title
    document.add_heading("Introduction", level=1)
    document.add_paragraph("The first section.")
    return _saved(document)


def titled_pptx(title: str) -> bytes:
    deck = pptx.Presentation()
    deck.core_properties.title = title
    deck.slides.add_slide(deck.slide_layouts[1]).shapes.title.text = "First slide"
    return _saved(deck)


def titled_xlsx(title: str) -> bytes:
    book = openpyxl.Workbook()
    book.properties.title = title
    book.active.append(["item", "note"])
    return _saved(book)


def titled_pdf(title: str) -> bytes:
    pdf = FPDF()
    pdf.set_title(title)
    pdf.add_page()
    pdf.set_font("helvetica", size=12)
    pdf.multi_cell(0, 10, "Chapter one.")
    return bytes(pdf.output())


def titled_html(title: str) -> bytes:
    head = f"<head><title>{title}</title></head>"
    return f"<html>{head}<body><h1>Introduction</h1></body></html>".encode()


def _saved(document: Any) -> bytes:
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


TITLED = {"docx": titled_docx, "pptx": titled_pptx, "xlsx": titled_xlsx, "pdf": titled_pdf,
          "html": titled_html}  # fmt: skip


@pytest.mark.parametrize("fmt", sorted(TITLED))
def test_a_documents_own_title_comes_before_its_first_heading(
    shared_daemon: Daemon, kb: str, fmt: str
) -> None:
    d = shared_daemon
    status, reply = upload(d, kb, f"q3-{fmt}.{fmt}", TITLED[fmt](f"Quarterly Review Q3 {fmt}"))
    assert status == 201
    doc = reply["document"]
    assert doc["title"] == f"Quarterly Review Q3 {fmt}"
    # what `add` prints: each new document's title, id and where it is
    assert doc["relative_path"] == f"Quarterly Review Q3 {fmt}.md"
    assert doc["path"] == str(d.docs(kb) / f"Quarterly Review Q3 {fmt}.md")
    found = d.client.get(d.client.kb(kb, f"/documents/{doc['id']}"))
    assert found["title"] == doc["title"] == found["frontmatter"]["title"]


@pytest.mark.parametrize(
    ("fmt", "junk", "title"),
    [
        ("docx", "Untitled", "Introduction"),
        ("docx", "   ", "Introduction"),
        ("pptx", "PowerPoint Presentation", "First slide"),
        ("html", "Document", "Introduction"),
        ("pdf", "Microsoft Word - draft.docx", "junk-pdf"),  # no heading: the file's name
        ("xlsx", "Book1", "junk-xlsx"),  # a sheet's name is no heading of the text
    ],
)
def test_placeholder_titles_are_ignored(
    shared_daemon: Daemon, fmt: str, junk: str, title: str
) -> None:
    d = shared_daemon
    status, reply = upload(d, new_kb(d), f"junk-{fmt}.{fmt}", TITLED[fmt](junk))
    assert status == 201 and reply["document"]["title"] == title
