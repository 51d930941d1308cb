"""Documents in other formats indexed where they lie (issue 25): PDF, Word, slides, sheets,
web pages, e-books and plain text in a KB's folder, searched, grepped and shown through the
real daemon, converted by the real markitdown; their text kept in the data home by the
content hash of each file, the folder never written."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from fpdf import FPDF
from PIL import Image

from cofferctl.client import ApiError
from cofferd.domain.config import InPlaceFormat, KnowledgeBaseConfig
from cofferd.domain.formats import IN_PLACE_FORMATS, format_of, suffixes
from cofferd.domain.pages import page_starts
from cofferd.surfaces.http.error_envelope import status_of
from tests.support.daemon import Daemon, wait_for
from tests.support.helpers import found_in, new_kb, search, skipped, write
from tests.support.pdf_layouts import many_pages
from tests.support.samples import MAKERS, make_docx, make_pdf
from tests.support.timing import fastest

EVERY = ["pdf", "docx", "pptx", "xlsx", "html", "epub", "csv", "json", "xml", "txt"]


def kb_status(d: Daemon, kb: str) -> dict[str, Any]:
    (entry,) = [k for k in d.client.get("/api/v1/status")["knowledge_bases"] if k["name"] == kb]
    return entry


def listing(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def scanned_pdf() -> bytes:
    pdf = FPDF()
    for _ in range(2):
        pdf.add_page()
        pdf.image(Image.new("RGB", (300, 200), "white"), x=10, y=10, w=120)
    return bytes(pdf.output())


def encrypted_pdf() -> bytes:
    pdf = FPDF()
    pdf.set_encryption(owner_password="owner", user_password="secret")
    pdf.set_font("helvetica", size=12)
    pdf.add_page()
    pdf.multi_cell(0, 10, "zqsecret text nobody may read")
    return bytes(pdf.output())


def lying_docx() -> bytes:
    """A docx whose zip directory says a name is UTF-8 and it is not (zipfile raises
    UnicodeDecodeError, no zip error)."""
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(make_docx("x"))) as src, zipfile.ZipFile(out, "w") as z:
        for info in src.infolist():
            z.writestr(info, src.read(info))
        z.writestr("a\u00e9.xml", "<x/>")
    return out.getvalue().replace("a\u00e9.xml".encode(), b"a\xff\xfe.xml")


def drm_epub() -> bytes:
    import zipfile

    out = io.BytesIO(MAKERS["epub"]("zqdrmtoken"))
    with zipfile.ZipFile(out, "a") as book:
        book.writestr("META-INF/encryption.xml", "<encryption/>")
    return out.getvalue()


def test_every_format_is_searchable_where_it_lies_and_the_folder_is_not_written(
    shared_daemon: Daemon,
) -> None:
    d = shared_daemon
    kb = new_kb(d, EVERY)
    docs = d.docs(kb)
    written = {}
    for n, fmt in enumerate(EVERY):
        relpath = f"deep/{'nested/' * (n % 3)}report {n}.{fmt}"
        written[relpath] = write(docs / relpath, MAKERS[fmt](f"zq{fmt}token in {fmt}"))
    write(docs / "notes/a note.md", "# A note\n\nzqnotetoken\n")
    before = listing(docs)
    for relpath in written:
        fmt = format_of(relpath)
        wait_for(lambda f=fmt: found_in(d, kb, f"zq{f}token"), timeout=60)
        assert found_in(d, kb, f"zq{fmt}token") == [relpath]
    assert listing(docs) == before  # nothing written beside, over or into the originals
    passage = search(d, kb, "zqpdftoken")[0]
    assert passage["path"] == str(docs / "deep/report 0.pdf")  # opens the original
    assert passage["page"] == 1
    entry = kb_status(d, kb)
    assert entry["formats"] == {**dict.fromkeys(EVERY, 1), "md": 1}
    assert entry["converting"] == 0
    derived = d.home / "derived" / kb
    assert len([p for p in derived.rglob("*.md")]) == len(EVERY) - 1  # text is read as it is
    assert d.client.get(d.client.kb(kb, "/skipped"))["items"] == []


def test_a_pdf_passage_says_its_page_and_a_deck_its_slide(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d, ["pdf", "pptx"])
    pages = ["zqintro " * 40, "zqmiddle " * 40, "zqclosing words " * 40]
    pdf = FPDF()
    pdf.set_font("helvetica", size=11)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 6, text)
    write(d.docs(kb) / "book.pdf", bytes(pdf.output()))
    write(d.docs(kb) / "deck.pptx", MAKERS["pptx"]("zqslidetoken"))
    wait_for(lambda: found_in(d, kb, "zqclosing") and found_in(d, kb, "zqslidetoken"), 60)
    assert [p["page"] for p in search(d, kb, "zqclosing")] == [3]
    assert [p["page"] for p in search(d, kb, "zqmiddle")] == [2]
    assert [p["page"] for p in search(d, kb, "zqslidetoken")] == [1]


def test_unchanged_bytes_are_never_converted_again_and_a_rename_keeps_its_text(
    shared_daemon: Daemon,
) -> None:
    d = shared_daemon
    kb = new_kb(d, ["pdf", "docx"])
    docs = d.docs(kb)
    write(docs / "a.pdf", make_pdf("zqfirstversion of a", pages=2))
    write(docs / "b.docx", make_docx("zqwordtoken"))
    wait_for(lambda: found_in(d, kb, "zqfirstversion") and found_in(d, kb, "zqwordtoken"), 60)
    converted = d.client.get("/api/v1/status")["conversions"]["converted"]
    os.utime(docs / "a.pdf", ns=(time.time_ns(), time.time_ns() + 10**9))  # touched only
    (docs / "moved").mkdir()
    (docs / "b.docx").rename(docs / "moved" / "b.docx")
    wait_for(lambda: found_in(d, kb, "zqwordtoken") == ["moved/b.docx"])
    d.client.post(d.client.kb(kb, "/reindex"))
    assert found_in(d, kb, "zqfirstversion") == ["a.pdf"]
    assert d.client.get("/api/v1/status")["conversions"]["converted"] == converted
    # new bytes: converted again, the old text leaves the index
    write(docs / "a.pdf", make_pdf("zqsecondversion of a"))
    wait_for(lambda: found_in(d, kb, "zqsecondversion") == ["a.pdf"], 60)
    assert found_in(d, kb, "zqfirstversion") == []
    assert d.client.get("/api/v1/status")["conversions"]["converted"] == converted + 1
    # a full pass forgets the text no file has any more, once it is an hour old (a text
    # younger than that may belong to a document on its way into the index)
    texts = list((d.home / "derived" / kb).rglob("*.md"))
    assert len(texts) == 3
    d.client.post(d.client.kb(kb, "/reindex"))
    assert len(list((d.home / "derived" / kb).rglob("*.md"))) == 3
    hour_ago = time.time() - 3700
    for text in texts:
        os.utime(text, (hour_ago, hour_ago))
    d.client.post(d.client.kb(kb, "/reindex"))
    assert len(list((d.home / "derived" / kb).rglob("*.md"))) == 2


def test_a_deleted_original_leaves_the_index(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d, ["pdf"])
    write(d.docs(kb) / "gone.pdf", make_pdf("zqgonetoken"))
    wait_for(lambda: found_in(d, kb, "zqgonetoken"), 60)
    (d.docs(kb) / "gone.pdf").unlink()
    wait_for(lambda: not found_in(d, kb, "zqgonetoken"))
    assert kb_status(d, kb)["formats"] == {}


def test_what_cannot_be_converted_is_listed_with_its_reason_and_not_tried_again(
    daemon: Daemon,
) -> None:
    d = daemon
    kb = new_kb(d, ["pdf", "docx", "epub", "txt"], max_document_bytes=64 * 1024)
    docs = d.docs(kb)
    write(docs / "damaged.pdf", b"%PDF-1.4\n" + os.urandom(3000))
    write(docs / "scan.pdf", scanned_pdf())
    write(docs / "locked.pdf", encrypted_pdf())
    write(docs / "locked.docx", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 4000)
    write(docs / "drm.epub", drm_epub())
    write(docs / "lying.docx", lying_docx())
    write(docs / "huge.pdf", make_pdf("zqhuge " * 2000, pages=60))
    write(docs / "binary.txt", os.urandom(2000) + b"\0" * 2000)
    write(docs / "fine.pdf", make_pdf("zqfinetoken"))
    expected = {
        "damaged.pdf", "scan.pdf", "locked.pdf", "locked.docx", "drm.epub", "huge.pdf",
        "binary.txt", "lying.docx",
    }  # fmt: skip
    reasons = wait_for(lambda: (s := skipped(d, kb)) and set(s) == expected and s, 60)
    assert reasons["damaged.pdf"].startswith("damaged")
    assert "scanned" in reasons["scan.pdf"] and "no text layer" in reasons["scan.pdf"]
    assert reasons["locked.pdf"].startswith("encrypted")
    assert reasons["locked.docx"].startswith("encrypted")
    assert reasons["drm.epub"].startswith("encrypted")
    assert reasons["lying.docx"].startswith("damaged")
    assert reasons["huge.pdf"] == "too_large"
    assert reasons["binary.txt"] == "binary content"
    wait_for(lambda: found_in(d, kb, "zqfinetoken") == ["fine.pdf"], 60)
    assert found_in(d, kb, "zqsecret") == []
    failed = d.client.get("/api/v1/status")["conversions"]["failed"]
    assert failed == 6  # the one too large was never converted, the text never is
    d.stop()
    d.start()
    wait_for(lambda: set(skipped(d, kb)) == expected, 60)
    conversions = d.client.get("/api/v1/status")["conversions"]
    counts = {key: conversions[key] for key in ("queued", "converting", "converted", "failed")}
    assert counts == {"queued": 0, "converting": None, "converted": 0, "failed": 0}
    assert conversions["converter"]["busy"] == 0  # a pass may warm it; nothing is converted
    assert found_in(d, kb, "zqfinetoken") == ["fine.pdf"]


def test_same_rules_as_markdown_for_what_is_a_document(shared_daemon: Daemon) -> None:
    """Hidden folders, ignore files, conflict copies and links are what they are for
    notes; a format the KB does not list is no document."""
    d = shared_daemon
    kb = new_kb(d, ["pdf"])
    docs = d.docs(kb)
    write(docs / ".hidden/h.pdf", make_pdf("zqhiddentoken"))
    write(docs / ".cofferignore", "drafts/\n*.tmp.pdf\n")
    write(docs / "drafts/d.pdf", make_pdf("zqdrafttoken"))
    write(docs / "x.tmp.pdf", make_pdf("zqtmptoken"))
    write(docs / "report.sync-conflict-20261201-101010-ABCDEFG.pdf", make_pdf("zqcopytoken"))
    write(docs / "sheet.xlsx", MAKERS["xlsx"]("zqsheettoken"))  # not listed by this KB
    outside = write(d.home.parent / f"outside-{kb}.pdf", make_pdf("zqoutsidetoken"))
    (docs / "linked.pdf").symlink_to(outside)
    write(docs / "real.pdf", make_pdf("zqrealtoken"))
    wait_for(lambda: found_in(d, kb, "zqrealtoken"), 60)
    d.client.post(d.client.kb(kb, "/reindex"))
    for token in ("hidden", "draft", "tmp", "copy", "sheet", "outside"):
        assert found_in(d, kb, f"zq{token}token") == [], token
    conflicts = d.client.get(d.client.kb(kb, "/conflicts"))["conflicts"]
    assert [c["relative_path"] for c in conflicts] == [
        "report.sync-conflict-20261201-101010-ABCDEFG.pdf"
    ]
    assert kb_status(d, kb)["formats"] == {"pdf": 1}


def test_the_formats_setting_adds_and_removes_documents(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d)  # the default: prose formats, not sheets or web pages
    assert d.client.get(d.client.kb(kb))["config"]["index_formats"] == [
        "docx", "epub", "pdf", "pptx", "txt",
    ]  # fmt: skip
    write(d.docs(kb) / "sheet.xlsx", MAKERS["xlsx"]("zqsheettoken"))
    write(d.docs(kb) / "page.pdf", make_pdf("zqpagetoken"))
    wait_for(lambda: found_in(d, kb, "zqpagetoken"), 60)
    assert found_in(d, kb, "zqsheettoken") == []
    d.client.request("PATCH", d.client.kb(kb), {"config": {"index_formats": "xlsx,pdf"}})
    wait_for(lambda: found_in(d, kb, "zqsheettoken") == ["sheet.xlsx"], 60)
    changed = d.client.request("PATCH", d.client.kb(kb), {"config": {"index_formats": []}})
    assert changed["reindexing"] == "formats changed"  # in the background
    wait_for(lambda: found_in(d, kb, "zqsheettoken") == found_in(d, kb, "zqpagetoken") == [])
    with pytest.raises(ApiError) as refused:
        d.client.request("PATCH", d.client.kb(kb), {"config": {"index_formats": ["exe"]}})
    assert refused.value.code == "VALIDATION_ERROR"


def test_show_grep_filters_and_edits_of_a_converted_document(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d, ["docx", "pdf", "txt"])
    docs = d.docs(kb)
    write(docs / "memo.docx", make_docx("zqmemotoken and the budget"))
    write(docs / "copy/memo.docx", make_docx("zqmemotoken and the budget"))  # the same bytes
    write(docs / "plain.txt", "zqplaintoken budget\nsecond line\n")
    write(docs / "note.md", "# Note\n\nthe budget zqnotetoken\n")
    wait_for(lambda: len(found_in(d, kb, "zqmemotoken")) == 2 and found_in(d, kb, "zqplain"), 60)
    doc = d.client.get(d.client.document(kb, "memo.docx"), file_text="true")
    assert doc["derived"] is True and "zqmemotoken" in doc["content"]
    assert doc["path"] == str(docs / "memo.docx")
    assert doc["frontmatter"]["source_format"] == "docx"
    assert "zqplaintoken" in d.client.get(d.client.document(kb, "plain.txt"))["content"]
    hits = d.client.post(d.client.kb(kb, "/grep"), {"pattern": "budget"})["hits"]
    assert sorted(h["relative_path"] for h in hits) == [
        "copy/memo.docx", "memo.docx", "note.md", "plain.txt",
    ]  # fmt: skip
    assert {h["path"] for h in hits} >= {str(docs / "memo.docx"), str(docs / "plain.txt")}
    assert not d.client.post(d.client.kb(kb, "/grep"), {"pattern": "source_format"})["hits"]
    assert found_in(d, kb, "budget") == ["copy/memo.docx", "memo.docx", "note.md", "plain.txt"]
    assert {p["relative_path"] for p in search(d, kb, "budget", format=["docx"])} == {
        "memo.docx", "copy/memo.docx",
    }  # fmt: skip
    assert {p["relative_path"] for p in search(d, kb, "budget", format=["md", "txt"])} == {
        "note.md", "plain.txt",
    }  # fmt: skip
    with pytest.raises(ApiError) as bad:
        search(d, kb, "budget", format=["exe"])
    assert bad.value.code == "VALIDATION_ERROR"
    for ref in ("memo.docx", "plain.txt"):
        with pytest.raises(ApiError) as refused:
            d.client.request("PUT", d.client.document(kb, ref), {"content": "overwritten"})
        assert (status_of(refused.value), refused.value.code) == (409, "DOCUMENT_READ_ONLY")
    assert (docs / "plain.txt").read_text() == "zqplaintoken budget\nsecond line\n"


def test_a_note_is_searchable_at_once_while_a_backlog_converts(daemon: Daemon) -> None:
    d = daemon
    kb = new_kb(d, ["pdf"])
    for n in range(40):  # ~0.3 s each to read (8 pages took ~0.4 s before PDFium: ~0.02 s now)
        write(d.docs(kb) / f"pdfs/{n}.pdf", many_pages(1500, f"zqbulk{n} filler words"))
    wait_for(lambda: kb_status(d, kb)["converting"] > 10, 60)
    started = time.monotonic()
    write(d.docs(kb) / "note.md", "# Note\n\nzqsavedtoken\n")
    wait_for(lambda: found_in(d, kb, "zqsavedtoken"), 10, interval=0.005)
    took = time.monotonic() - started
    backlog = kb_status(d, kb)
    assert backlog["converting"] > 0, "the backlog ended first: the test proves nothing"
    # converting, or indexing a converted text as it comes in
    assert backlog["progress"]["phase"] in ("converting", "indexing"), backlog["progress"]
    assert took < 5, f"a note waited {took:.1f} s behind the conversions"


def test_formats_and_their_suffixes() -> None:
    assert tuple(InPlaceFormat.__args__) == IN_PLACE_FORMATS  # type: ignore[attr-defined]
    assert KnowledgeBaseConfig(index_formats=" PDF, .htm,text").index_formats == [
        "html", "pdf", "txt",
    ]  # fmt: skip
    assert ".htm" in suffixes(("html",)) and ".md" in suffixes(())
    assert [format_of(p) for p in ("a.MD", "b.markdown", "c.Pdf", "d.htm", "e")] == [
        "md", "md", "pdf", "html", "",
    ]  # fmt: skip


def test_page_starts_are_read_in_linear_time() -> None:
    assert page_starts("## Page " + "9" * 5000 + "\n") == []  # no page, and no int() of it
    text = "## Page 1\n\nintro\n\n## Page 2\n\nmore\n<!-- Slide number: 3 -->\n"
    assert [(s.line, s.ordinal, s.location) for s in page_starts(text)] == [
        (1, 1, "page 1"), (5, 2, "page 2"), (8, 3, "slide 3"),
    ]  # fmt: skip
    took = []
    for n in (20_000, 80_000):
        big = "".join(f"## Page {i}\n\nline\n" for i in range(n))
        assert len(page_starts(big)) == n
        took.append(fastest(lambda big=big: page_starts(big)))
    assert took[1] < 8 * took[0] + 0.05


def test_a_converted_text_is_never_read_through_a_link(tmp_path: Path) -> None:
    from cofferd.infrastructure.conversion import derived_texts

    digest = "ab" * 32
    outside = write(tmp_path / "secret.md", "secret")
    (tmp_path / "store" / "ab").mkdir(parents=True)
    (tmp_path / "store" / "ab" / f"{digest}.md").symlink_to(outside)
    mark = f"{hashlib.sha256(b'secret').hexdigest()} {derived_texts.CONVERTED_BY}"
    write(tmp_path / "store" / "ab" / f"{digest}.sha256", mark)
    store = tmp_path / "store"
    assert derived_texts.read(tmp_path, store, digest, derived_texts.TEXT, 100) is None
    write(tmp_path / "elsewhere" / "ab" / f"{digest}.md", "secret")
    shutil.rmtree(store)
    store.symlink_to(tmp_path / "elsewhere")  # a folder on the way: refused, not followed
    with pytest.raises(OSError):
        derived_texts.read(tmp_path, store, digest, derived_texts.TEXT, 100)
    with pytest.raises(ValueError):
        derived_texts.entry(tmp_path / "store", "../../etc/passwd", derived_texts.TEXT)


def test_a_text_an_earlier_conversion_made_is_converted_again(tmp_path: Path) -> None:
    """Texts kept before the conversion changed (their `.sha256` without CONVERTED_BY, or
    another) are not used: the original is converted again, once."""
    from cofferd.infrastructure.conversion import derived_texts

    digest = "cd" * 32
    store = derived_texts.DerivedTexts(tmp_path, lambda kb: tmp_path / "derived" / kb)
    store.put("notes", digest, "## Page 1\n\nAll of it\n")
    assert store.text("notes", digest, 100) == "## Page 1\n\nAll of it\n"
    sums = tmp_path / "derived" / "notes" / "cd" / f"{digest}.sha256"
    own = sums.read_text().split()[0]
    for earlier in (own, f"{own} before-pages"):
        sums.write_text(earlier)
        assert store.text("notes", digest, 100) is None


def test_a_trashed_pdf_comes_back_with_its_text(shared_daemon: Daemon) -> None:
    """Its converted text is kept while it is in the trash (a full pass in between drops
    only what nothing has): restored, it is searchable at once, not converted again."""
    d = shared_daemon
    kb = new_kb(d, ["pdf"])
    write(d.docs(kb) / "keep.pdf", make_pdf("zqtrashtoken"))
    wait_for(lambda: found_in(d, kb, "zqtrashtoken"), 60)
    converted = d.client.get("/api/v1/status")["conversions"]["converted"]
    gone = d.client.request("DELETE", d.client.document(kb, "keep.pdf"))
    assert not (d.docs(kb) / "keep.pdf").exists()
    d.client.post(d.client.kb(kb, "/reindex"))  # prunes what no document has
    restored = d.client.post(d.client.kb(kb, f"/trash/{gone['trash']['id']}/restore"))["restored"]
    assert restored["relative_path"] == "keep.pdf" and restored["derived"] is True
    assert found_in(d, kb, "zqtrashtoken") == ["keep.pdf"]
    assert d.client.get("/api/v1/status")["conversions"]["converted"] == converted


def test_converted_texts_deleted_by_hand_are_made_again(shared_daemon: Daemon) -> None:
    """`derived/` is derived data: deleted, a full pass converts what the index has."""
    d = shared_daemon
    kb = new_kb(d, ["pdf", "docx"])
    write(d.docs(kb) / "a.pdf", make_pdf("zqagaintoken", 2))
    write(d.docs(kb) / "b.docx", make_docx("zqagaintoken"))
    wait_for(lambda: len(found_in(d, kb, "zqagaintoken")) == 2, 60)
    shutil.rmtree(d.home / "derived" / kb)
    d.client.post(d.client.kb(kb, "/reindex"))
    wait_for(lambda: "zqagaintoken" in d.client.get(d.client.document(kb, "a.pdf"))["content"], 60)
    wait_for(
        lambda: len(d.client.post(d.client.kb(kb, "/grep"), {"pattern": "zqagain"})["hits"]) == 3,
        60,
    )
    assert [p["page"] for p in search(d, kb, "zqagaintoken") if p["relative_path"] == "a.pdf"]


def test_grep_counts_only_the_converted_text_itself(shared_daemon: Daemon) -> None:
    """The frontmatter Coffer writes above a converted text (`source_format: pdf`) is no
    match, and does not use up `max_matches`."""
    d = shared_daemon
    kb = new_kb(d, ["pdf"])
    for n in range(5):
        write(d.docs(kb) / f"{n}.pdf", make_pdf(f"plain words {n}"))
    write(d.docs(kb) / "real.pdf", make_pdf("the pdf format itself"))
    wait_for(lambda: kb_status(d, kb)["formats"] == {"pdf": 6}, 60)
    wait_for(lambda: kb_status(d, kb)["converting"] == 0, 60)
    found = d.client.post(d.client.kb(kb, "/grep"), {"pattern": "pdf", "max_matches": 1})
    assert [h["relative_path"] for h in found["hits"]] == ["real.pdf"]
    assert found["truncated"] is False


def test_an_ebook_keeps_its_authors_not_markitdowns_bookkeeping() -> None:
    from cofferd.infrastructure.conversion.derived_markdown import from_markitdown

    made = from_markitdown(
        "**Title:** T\n**Authors:** Ada, Bo\n**Identifier:** x1\n\n# T\n\nText.", "epub", "T", "m"
    ).markdown
    assert "**Authors:** Ada, Bo\n\n# T\n\nText." in made and "Identifier" not in made
    plain = from_markitdown("# T\n\n**Title:** in the text\n", "epub", None, "m").markdown
    assert "**Title:** in the text" in plain


def test_adding_a_file_already_indexed_in_its_folder_is_refused(
    shared_daemon: Daemon, tmp_path: Path
) -> None:
    """`add` of a PDF (or a note) that lies in the KB's own folder and is indexed there
    would make a second copy, found twice: it is refused, saying so."""
    d = shared_daemon
    folder = tmp_path / "attached"
    write(folder / "paper.pdf", make_pdf("zqaddedtoken"))
    write(folder / "note.md", "# Note\n\nzqaddedtoken\n")
    write(folder / "sheet.xlsx", MAKERS["xlsx"]("zqsheetadded"))  # not indexed here: added
    kb = f"add-{uuid.uuid4().hex[:8]}"
    d.client.post("/api/v1/knowledge_bases", {"name": kb, "path": str(folder)})
    wait_for(lambda: len(found_in(d, kb, "zqaddedtoken")) == 2, 60)
    for name in ("paper.pdf", "note.md"):
        with pytest.raises(ApiError) as refused:
            d.client.post(d.client.kb(kb, "/documents"), {"source_path": str(folder / name)})
        assert refused.value.code == "INGEST_REJECTED"
        assert refused.value.details["reason"] == "already_indexed"
    added = d.client.post(
        d.client.kb(kb, "/documents"), {"source_path": str(folder / "sheet.xlsx")}
    )
    assert added["status"] == "added"
    assert found_in(d, kb, "zqaddedtoken") == ["note.md", "paper.pdf"]


@pytest.mark.parametrize(
    "line",
    [
        "## Page " + "9" * 4000,  # digits past the mark's six, over and over
        "<!-- Slide number: " + "1" * 4000 + " --",  # a closer that never comes
        "## Page 1 " + "-" * 4000,
    ],
)
def test_hostile_page_marks_take_linear_time(line: str) -> None:
    took = []
    for n in (200, 400, 800):
        text = (line + "\n") * n
        assert page_starts(text) == []
        took.append(fastest(lambda text=text: page_starts(text)))
    assert took[2] < 6 * took[0] + 0.05


def test_hostile_ebook_fields_take_linear_time() -> None:
    from cofferd.infrastructure.conversion.derived_markdown import from_markitdown

    took = []
    for n in (50_000, 100_000, 200_000):
        head = "**Title:** T\n" + "**A" + "a" * n + "\n" + "**Bb:** x\n" * (n // 10)
        made = from_markitdown(head + "\nText.", "epub", None, "m").markdown
        assert "**Title:** T" in made  # not a block of fields only: kept as it is
        took.append(fastest(lambda h=head: from_markitdown(h + "\nText.", "epub", None, "m")))
    assert took[2] < 6 * took[0] + 0.05


def titled_pdf(title: str, text: str) -> bytes:
    pdf = FPDF()
    pdf.set_title(title)
    pdf.set_font("helvetica", size=12)
    pdf.add_page()
    pdf.multi_cell(0, 10, text)
    return bytes(pdf.output())


def titled_docx(title: str, text: str) -> bytes:
    import docx

    document = docx.Document()
    document.core_properties.title = title
    document.add_heading("Harvest schedule", level=1)
    document.add_paragraph(text)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def test_a_placeholder_is_never_shown_as_a_title(shared_daemon: Daemon) -> None:
    """A format's own title is shown only when someone chose it: a placeholder a program
    wrote ("untitled", "(anonymous)", "Microsoft Word - x.doc", "Document1", a path) gives
    way to the text's first heading, else the file's name."""
    d = shared_daemon
    kb = new_kb(d, ["pdf", "docx"])
    files = {
        "anon.pdf": titled_pdf("(anonymous)", "zqtitles anon"),
        "untitled.pdf": titled_pdf("untitled", "zqtitles untitled"),
        "printed.pdf": titled_pdf("Microsoft Word - budget.doc", "zqtitles printed"),
        "path.pdf": titled_pdf("C:\\Users\\ana\\Desktop\\draft.docx", "zqtitles path"),
        "real.pdf": titled_pdf("Migration of the Arctic Tern", "zqtitles real"),
        "doc1.docx": titled_docx("Document1", "zqtitles docx"),
    }
    for name, data in files.items():
        write(d.docs(kb) / name, data)
    wait_for(lambda: len(found_in(d, kb, "zqtitles")) == len(files), 60)
    titles = {
        doc["relative_path"]: doc["title"]
        for doc in d.client.get(d.client.kb(kb, "/documents"))["documents"]
    }
    assert titles == {
        "anon.pdf": "anon",
        "untitled.pdf": "untitled",  # the file's name, said by the user
        "printed.pdf": "printed",
        "path.pdf": "path",
        "real.pdf": "Migration of the Arctic Tern",
        "doc1.docx": "Harvest schedule",
    }


def test_a_utf16_text_file_is_text(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d, ["txt"])
    write(d.docs(kb) / "wide.txt", "\ufeffzqwidetoken saved by Notepad\r\n".encode("utf-16-le"))
    wait_for(lambda: found_in(d, kb, "zqwidetoken") == ["wide.txt"])
