"""Scans and images read by OCR (issue 44 §4): an image in a KB that lists its format, and
a PDF page with no text layer, are searchable and their passages say "page N (OCR)";
images are not indexed unless a KB asks; a decompression bomb and a huge image are
bounded with their reason and cost nothing else. Images drawn here with a real font,
converted by the real converter process (RapidOCR's bundled models), through the real
daemon."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from PIL import Image

from cofferd.infrastructure.conversion import markitdown_run, ocr_engine, scanned_pages
from tests.support.daemon import Daemon, cleanup, new_daemon, wait_for
from tests.support.helpers import found_in, new_kb, search, skipped, write
from tests.support.hostile_documents import png_bomb
from tests.support.scans import drawn, scan_and_text_pdf, scanned_pdf

OCR_WAIT_S = 180  # OCR takes seconds a page on a loaded two-core machine


def front(markdown: str) -> dict[str, str]:
    """A converted text's frontmatter."""
    head: dict[str, str] = yaml.safe_load(markdown.split("---\n")[1])
    return head


def locations(d: Daemon, kb: str, query: str) -> list[tuple[str, int, str]]:
    return [(p["relative_path"], p["page"], p["location"]) for p in search(d, kb, query)]


def test_an_image_is_searchable_by_its_text_and_says_ocr(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d, ["png", "jpg", "webp"])
    write(d.docs(kb) / "board.png", drawn(["Meeting about zqheron budget", "Owner Alice 2026"]))
    write(d.docs(kb) / "photo.jpeg", drawn(["The zqkestrel report is due"], fmt="JPEG"))
    wait_for(lambda: found_in(d, kb, "zqheron") and found_in(d, kb, "zqkestrel"), OCR_WAIT_S)
    assert locations(d, kb, "zqheron budget") == [("board.png", 1, "page 1 (OCR)")]
    assert locations(d, kb, "zqkestrel") == [("photo.jpeg", 1, "page 1 (OCR)")]
    (hit,) = d.client.post(d.client.kb(kb, "/grep"), {"pattern": "zqheron"})["hits"]
    assert hit["location"] == "page 1 (OCR)"
    shown = d.client.get(d.client.document(kb, "board.png"))["content"]
    assert shown == "## Page 1 (OCR)\n\nMeeting about zqheron budget\nOwner Alice 2026\n"


def test_images_are_not_indexed_unless_the_kb_lists_them(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d)  # the default formats
    write(d.docs(kb) / "shot.png", drawn(["zqosprey never indexed"]))
    write(d.docs(kb) / "note.md", "# Note\n\nzqwren is here\n")
    write(d.docs(kb) / "paper.pdf", scan_and_text_pdf(["unused"], "zqplover typed"))
    wait_for(lambda: found_in(d, kb, "zqwren") and found_in(d, kb, "zqplover"), OCR_WAIT_S)
    assert found_in(d, kb, "zqosprey") == []
    assert "shot.png" not in skipped(d, kb)
    listed = d.client.get(d.client.kb(kb, "/documents"))
    assert "shot.png" not in str(listed)


def test_a_pdf_page_with_no_text_layer_is_read_by_ocr(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d, ["pdf"])
    made = scan_and_text_pdf(["Scanned zqpelican minutes", "signed by the board"], "zqtyped page")
    write(d.docs(kb) / "minutes.pdf", made)
    wait_for(lambda: found_in(d, kb, "zqpelican"), OCR_WAIT_S)
    assert locations(d, kb, "zqpelican minutes") == [("minutes.pdf", 1, "page 1 (OCR)")]
    assert locations(d, kb, "zqtyped") == [("minutes.pdf", 2, "page 2")]


def test_a_bomb_and_a_huge_image_are_bounded_and_nothing_is_lost(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d, ["png", "jpg"])
    docs = d.docs(kb)
    write(docs / "bomb.png", png_bomb(40_000))  # 1.6 billion pixels from ~200 KB
    header = Image.new("1", (1, 1))
    header.save(out := io.BytesIO(), "PNG")
    write(docs / "broken.png", out.getvalue()[:40])  # cut inside its first chunk
    # past the working size (4800 x 2400 = 11.5 million pixels): read scaled down
    big = Image.open(io.BytesIO(drawn(["zqalbatross wide poster"], size=(1200, 600))))
    big.resize((4800, 2400)).save(out := io.BytesIO(), "PNG")
    write(docs / "poster.png", out.getvalue())
    write(docs / "fine.png", drawn(["zqcormorant stays findable"]))
    reasons = wait_for(
        lambda: (s := skipped(d, kb)) and {"bomb.png", "broken.png"} <= set(s) and s, 90
    )
    assert reasons["bomb.png"].startswith("too large") and "pixels" in reasons["bomb.png"]
    assert reasons["broken.png"].startswith("damaged")
    wait_for(lambda: found_in(d, kb, "zqcormorant") and found_in(d, kb, "zqalbatross"), OCR_WAIT_S)
    assert set(skipped(d, kb)) == {"bomb.png", "broken.png"}


@pytest.mark.parametrize("fmt", ["png", "webp"])
def test_ocr_reads_with_no_network(tmp_path: Path, fmt: str) -> None:
    """The converter's OCR with every way out to the network refused: the models are the
    wheel's own files, named by path, and nothing is fetched."""
    image = write(tmp_path / f"note.{fmt}", drawn(["Offline zqgannet reading"], fmt=fmt.upper()))
    home = tmp_path / "home"
    home.mkdir()
    script = f"""
import socket
def refused(*args, **kwargs):
    raise OSError("the network was used")
socket.socket.connect = refused
socket.socket.connect_ex = refused
socket.create_connection = refused
socket.getaddrinfo = refused
from cofferd.infrastructure.conversion import markitdown_run
reply = markitdown_run.convert(markitdown_run.load(), {str(image)!r}, {fmt!r})
print(reply.markdown if hasattr(reply, "markdown") else reply)
"""
    env = {**os.environ, "HOME": str(home), "XDG_CACHE_HOME": str(home)}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=240
    )
    assert done.returncode == 0, done.stderr
    assert "zqgannet" in done.stdout and "## Page 1 (OCR)" in done.stdout
    assert not list(home.rglob("*.onnx")) and not list(home.rglob("*.txt"))  # no model fetched


def test_ocr_time_grows_with_the_pages_up_to_a_ceiling() -> None:
    base, page, ceiling = (
        scanned_pages.OCR_BASE_S,
        scanned_pages.OCR_PAGE_S,
        scanned_pages.OCR_CEILING_S,
    )
    assert scanned_pages.budget_s(1) == base + page
    assert scanned_pages.budget_s(20) == base + 20 * page
    assert scanned_pages.budget_s(10_000) == ceiling
    assert scanned_pages.numbered([40, 41, 99]) == "pages 41-42, 100"
    assert scanned_pages.numbered([2]) == "page 3"


def test_a_scan_past_its_time_says_which_pages_ocr_did_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The PDF's own time (what the converter's pool tells its process) cut short: the first
    page is read, the pages past the time are said in the text's frontmatter."""
    path = write(tmp_path / "scan.pdf", scanned_pdf(["zqfirst page", "zqsecond", "zqthird"]))
    engine = markitdown_run.load()
    converted = markitdown_run.convert(engine, str(path), "pdf", scanned_pages.SPARE_S)
    assert not isinstance(converted, tuple), converted
    assert "## Page 1 (OCR)\n\nzqfirst page" in converted.markdown
    assert "zqsecond" not in converted.markdown and "zqthird" not in converted.markdown
    assert front(converted.markdown)["unread"] == "pages 2-3 not read: OCR time budget"
    monkeypatch.setattr(scanned_pages, "OCR_CEILING_S", 0.0)  # the budget of its pages, too
    converted = markitdown_run.convert(engine, str(path), "pdf", 600)
    assert not isinstance(converted, tuple), converted
    assert front(converted.markdown)["unread"] == "pages 2-3 not read: OCR time budget"


def test_a_file_skipped_for_want_of_ocr_is_read_once_ocr_is_installed(tmp_path: Path) -> None:
    """Skipped for good while OCR is missing (a rapidocr without its models shadows the
    real one), then converted again at the next start, OCR installed."""
    shadow = tmp_path / "shadow"
    (shadow / "rapidocr").mkdir(parents=True)
    (shadow / "rapidocr" / "__init__.py").write_text("")
    path = os.pathsep.join([str(shadow), os.environ.get("PYTHONPATH", "")])
    d = new_daemon(tmp_path)
    try:
        d.start(PYTHONPATH=path)
        kb = new_kb(d, ["png"])
        write(d.docs(kb) / "board.png", drawn(["Meeting about zqlapwing budget"]))
        reasons = wait_for(lambda: skipped(d, kb), 90)
        assert ocr_engine.MISSING in reasons["board.png"]
        d.stop()
        d.start()
        wait_for(lambda: found_in(d, kb, "zqlapwing"), OCR_WAIT_S)
        assert "board.png" not in skipped(d, kb)
    finally:
        cleanup(d)
