"""The converter's processes are a blast wall: hangs, memory exhaustion and crashes become
clear failures, and the next document converts normally. They run on the one worker pool:
`add` and the background share it, and it lets them go when idle."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

import pytest

from cofferd.domain.errors import EngineUnavailable
from cofferd.domain.failures import ConversionFailed
from cofferd.domain.index_records import Converted
from cofferd.infrastructure.conversion import converter as converter_module
from cofferd.infrastructure.conversion.converter import ConverterPool, check_zip
from cofferd.surfaces.core import Coffer
from tests.support.helpers import skipped_in
from tests.support.pdf_layouts import many_pages
from tests.support.samples import make_docx, make_pdf, make_xlsx, zip_bomb_docx
from tests.support.scans import scanned_pdf


def pids(converter: ConverterPool) -> list[int]:
    return list(converter.pool.status()["pids"])


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name, data in {
        "ok.docx": make_docx("healthy document text"),
        "big.pdf": make_pdf("many pages " * 40, pages=60),
        # read for ~2 s (PDFium reads 60 pages in ~0.05 s: no time to stop or kill it in)
        "many.pdf": many_pages(10_000),
        "sheet.xlsx": make_xlsx("cell text"),
        "bomb.docx": zip_bomb_docx(200),
    }.items():
        (tmp_path / name).write_bytes(data)
        out[name] = tmp_path / name
    return out


async def test_converts_and_reuses_one_worker(files: dict[str, Path]) -> None:
    converter = ConverterPool()
    try:
        first = await converter.convert(files["ok.docx"], "docx")
        pid = pids(converter)
        second = await converter.convert(files["sheet.xlsx"], "xlsx")
        assert "healthy document text" in first.markdown and "cell text" in second.markdown
        assert len(pid) == 1 and pids(converter) == pid
    finally:
        await converter.close()


async def test_the_converter_process_ends_when_idle(
    files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One `add` must not leave ~160 MB resident for the daemon's life."""
    monkeypatch.setattr(converter_module, "IDLE_S", 0.2)
    converter = ConverterPool()
    try:
        await converter.convert(files["ok.docx"], "docx")
        (pid,) = pids(converter)
        for _ in range(100):  # polled: the process ends on its own
            if not Path(f"/proc/{pid}").exists():
                break
            await asyncio.sleep(0.05)
        assert not Path(f"/proc/{pid}").exists() and not pids(converter)
        again = await converter.convert(files["sheet.xlsx"], "xlsx")  # starts again
        assert "cell text" in again.markdown
    finally:
        await converter.close()


async def test_a_hang_is_stopped_and_the_next_document_converts(files: dict[str, Path]) -> None:
    converter = ConverterPool(timeout_s=0.05)  # what OCR may add is not the text's time
    try:
        with pytest.raises(ConversionFailed, match=r"longer than 0\.05 s"):
            await converter.convert(files["many.pdf"], "pdf")
        converter.timeout_s = 60
        assert "healthy" in (await converter.convert(files["ok.docx"], "docx")).markdown
    finally:
        await converter.close()


def test_the_time_up_is_said_even_when_a_reader_wrapped_it() -> None:
    """The alarm may fire inside a ctypes call into PDFium: ctypes wraps TextTooSlow in an
    ArgumentError and the reader calls the file damaged. Once the time is up, whatever
    leaves the block is TextTooSlow."""
    import time

    from cofferd.infrastructure.conversion.markitdown_run import TextTooSlow, _time_limit

    with pytest.raises(TextTooSlow), _time_limit(0.01):
        try:
            while True:
                time.sleep(0.001)
        except TextTooSlow as exc:
            raise ValueError(f"damaged, or not a readable pdf file: {exc}") from None
    with pytest.raises(ValueError), _time_limit(5):
        raise ValueError("a damaged file, in time: as it is")


async def test_memory_is_capped_and_exhaustion_is_a_clear_failure(
    files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # let the bomb through the zip check: the cap is the last line of defence
    monkeypatch.setattr(converter_module, "check_zip", lambda path, fmt="": None)
    converter = ConverterPool(memory_mb=1024)
    try:
        with pytest.raises(ConversionFailed):
            await converter.convert(files["bomb.docx"], "docx")
        for pid in pids(converter):
            status = Path(f"/proc/{pid}/status").read_text()
            peak_kb = int(status.split("VmPeak:")[1].split()[0])
            assert peak_kb <= 1024 * 1024
        assert "healthy" in (await converter.convert(files["ok.docx"], "docx")).markdown
    finally:
        await converter.close()


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGSEGV])
async def test_a_converter_that_dies_mid_conversion_blames_not_the_document(
    files: dict[str, Path], how: signal.Signals
) -> None:
    """Killed from outside (kill -9, the OOM killer) or crashed once in a process that
    had converted before: no evidence against the document, converted by a new process
    (one kill -9 once marked an ordinary file "the converter crashed on this document")."""
    converter = ConverterPool()
    try:
        await converter.convert(files["ok.docx"], "docx")  # the worker is up
        (pid,) = pids(converter)
        asyncio.get_running_loop().call_later(0.3, os.kill, pid, how)
        assert (await converter.convert(files["many.pdf"], "pdf")).markdown
        assert pids(converter) != [pid]
        assert "healthy" in (await converter.convert(files["ok.docx"], "docx")).markdown
    finally:
        await converter.close()


def test_zip_bombs_are_refused_before_conversion(files: dict[str, Path]) -> None:
    with pytest.raises(ConversionFailed, match=r"zip bomb|inflates"):
        check_zip(files["bomb.docx"])
    check_zip(files["ok.docx"])  # an ordinary docx passes


@pytest.mark.parametrize(
    "error",
    [
        "PSEOF: Unexpected EOF\\n at b'%%EO\\r'",
        "line one\nline two\r\n\x07bell\u2028sep",
        "x" * 5000,
    ],
)
def test_a_failure_reason_reads_as_one_sentence(error: str) -> None:
    reason = converter_module._explained(error, "pdf")
    assert "\\n" not in reason and "\\r" not in reason
    assert reason.isprintable() and len(reason) < 400
    assert reason.startswith("damaged, or not a readable pdf file: ")


async def test_a_conversion_stopped_for_its_time_is_listed_at_once(
    coffer: Coffer, tmp_path: Path
) -> None:
    """Stopped for its time (or a crash, or a kill): the document is in `skipped` with its
    reason at once, not only after the next full pass (it is tried again a day later)."""
    kb = await coffer.kbs.create("timed", {"index_formats": ["pdf"]})
    (coffer.locations.docs_dir("timed") / "big.pdf").write_bytes(many_pages(10_000, "words"))
    coffer.converters.timeout_s = 0.05
    assert await coffer.conversions._convert("timed", "big.pdf")  # settled: listed now
    await coffer.reindexer.sync_paths(kb, ["big.pdf"])
    skipped = {s["relative_path"]: s["reason"] for s in await skipped_in(coffer, "timed")}
    assert "longer than" in skipped["big.pdf"]
    big = await coffer.retrieval.search("timed", "words")
    assert not big.passages


async def test_a_pdf_whose_title_refers_to_itself_converts_at_once(tmp_path: Path) -> None:
    """Its /Title a reference to itself: pdfminer's resolve1 followed it for ever, holding
    the converter for its whole time."""
    from tests.support.hostile_documents import self_titled_pdf

    path = tmp_path / "loop.pdf"
    path.write_bytes(self_titled_pdf())
    converter = ConverterPool(timeout_s=20)
    try:  # answered at once, its text read (PDFium reads its short stream; pdfminer did not)
        made = await asyncio.wait_for(converter.convert(path, "pdf"), 25)
        assert "loop words" in made.markdown
    finally:
        await converter.close()


async def test_a_pdf_has_more_time_for_ocr(tmp_path: Path) -> None:
    """A scanned page takes OCR longer than the converter's time for other documents (here
    0.5 s, less than loading OCR's models): a PDF is given OCR's time on top, and its
    process is told how long it has."""
    path = tmp_path / "scan.pdf"
    path.write_bytes(scanned_pdf(["zqscanned words"]))  # a page only OCR reads
    converter = ConverterPool(timeout_s=0.5, ocr_timeout_s=120)
    try:
        assert "## Page 1 (OCR)" in (await converter.convert(path, "pdf")).markdown
    finally:
        await converter.close()


async def test_the_converter_writes_only_in_its_own_home(
    files: dict[str, Path], tmp_path: Path
) -> None:
    """The libraries markitdown loads (onnxruntime, magika) keep caches: in the folder the
    converter is given, never the user's home or /tmp."""
    home = tmp_path / "converter-home"
    converter = ConverterPool(home=(tmp_path, home))
    try:
        await converter.convert(files["ok.docx"], "docx")
        (pid,) = pids(converter)
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        for name in (b"HOME", b"XDG_CACHE_HOME", b"TMPDIR"):
            assert name + b"=" + str(home).encode() in environ
    finally:
        await converter.close()


async def test_a_bomb_named_otherwise_is_too_large(tmp_path: Path) -> None:
    """A zip is checked as the zip it is whatever its name says (x.pdf); a bomb is "too
    large", not "damaged"."""
    path = tmp_path / "x.pdf"
    path.write_bytes(zip_bomb_docx(200))
    converter = ConverterPool()
    try:
        with pytest.raises(ConversionFailed, match=r"^too large: "):
            await converter.convert(path, "pdf")
        assert converter.pool.state.started == 0  # refused before any conversion
    finally:
        await converter.close()


async def test_add_and_the_background_share_one_pool_and_both_go_when_idle(
    files: dict[str, Path],
) -> None:
    """`add` converts at full priority and the background at a lower one (past the first
    file its process takes after starting), in the same pool; neither process stays once
    there is nothing to convert (each once stayed ~160 MB for the daemon's life, the
    background's in a pool of its own)."""
    converter = ConverterPool(idle_s=0.2)

    async def backlog() -> Converted:
        await converter.background.convert(files["ok.docx"], "docx")  # its first: full priority
        return await converter.background.convert(files["big.pdf"], "pdf")

    try:
        add = asyncio.ensure_future(converter.interactive.convert(files["big.pdf"], "pdf"))
        background = asyncio.ensure_future(backlog())
        niceness: set[int] = set()
        while not (add.done() and background.done()):  # polled while they convert
            for pid in pids(converter):
                with contextlib.suppress(ProcessLookupError):
                    niceness.add(os.getpriority(os.PRIO_PROCESS, pid))
            await asyncio.sleep(0.01)
        assert "many pages" in (await add).markdown and "many pages" in (await background).markdown
        base = os.getpriority(os.PRIO_PROCESS, 0)
        assert niceness == {base, min(base + converter_module.NICE, 19)}
        for _ in range(200):
            if not pids(converter):
                break
            await asyncio.sleep(0.05)
        assert not pids(converter)
    finally:
        await converter.close()


async def test_closing_answers_the_conversion_in_flight(files: dict[str, Path]) -> None:
    """The daemon stopping answers an upload being converted at once."""
    converter = ConverterPool()
    try:
        converting = asyncio.ensure_future(converter.interactive.convert(files["many.pdf"], "pdf"))
        for _ in range(200):
            if pids(converter):
                break
            await asyncio.sleep(0.02)
        await converter.interactive.interrupt()
        with pytest.raises(EngineUnavailable, match="stopping"):
            await asyncio.wait_for(converting, 10)
        with pytest.raises(EngineUnavailable):
            await converter.background.convert(files["ok.docx"], "docx")
    finally:
        await converter.close()
    assert not pids(converter)


async def test_a_converted_text_over_its_cap_is_refused_in_the_worker(tmp_path: Path) -> None:
    """The cap applies where the text is made: the daemon never reads a text past it."""
    from cofferd.infrastructure.conversion import derived_markdown, markitdown_run

    page = tmp_path / "long.html"
    page.write_text("<html><body><p>" + "word " * 300_000 + "</p></body></html>")
    markitdown = markitdown_run.load()
    reply = markitdown_run.convert(markitdown, str(page), "html")
    assert not isinstance(reply, tuple)
    original = derived_markdown.MAX_CHARS
    derived_markdown.MAX_CHARS = 1_000_000
    try:
        assert markitdown_run.convert(markitdown, str(page), "html") == (
            "refused",
            "too large: its text is over 1 million characters",
        )
    finally:
        derived_markdown.MAX_CHARS = original


def test_the_converter_imports_only_what_a_format_needs(tmp_path: Path) -> None:
    """The converter's process starts without the libraries a file may never need (magika
    and onnxruntime, pandas, ...: most of `import markitdown`'s time, issue 35 §6), and
    each format imports its own when its first file comes. In a fresh process: what a
    test process imported already would hide it."""
    import subprocess
    import sys

    (tmp_path / "a.docx").write_bytes(make_docx("zqword"))
    (tmp_path / "b.xlsx").write_bytes(make_xlsx("zqcell"))
    script = f"""
import sys
from cofferd.infrastructure.conversion import markitdown_run
from cofferd.infrastructure.conversion.deferred_imports import is_deferred
engine = markitdown_run.load()
print(sorted(n for n in markitdown_run.DEFERRED if n in sys.modules and not is_deferred(n)))
assert "zqword" in markitdown_run.convert(engine, {str(tmp_path / "a.docx")!r}, "docx").markdown
print(sorted(n for n in markitdown_run.DEFERRED if n in sys.modules and not is_deferred(n)))
assert "zqcell" in markitdown_run.convert(engine, {str(tmp_path / "b.xlsx")!r}, "xlsx").markdown
print(sorted(n for n in markitdown_run.DEFERRED if n in sys.modules and not is_deferred(n)))
"""
    ran = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    assert ran.stdout.splitlines() == [
        "[]",  # nothing of them at the start
        "['mammoth']",  # a Word file: mammoth
        "['mammoth', 'openpyxl', 'pandas']",  # a workbook: pandas and openpyxl
    ]


def test_a_library_not_installed_is_not_deferred() -> None:
    """Its import fails where the library wrote it (markitdown expects that of optional
    ones, such as xlrd), not later at some other module's look at it (hypothesis's did)."""
    import sys

    from cofferd.infrastructure.conversion.deferred_imports import defer, is_deferred

    defer(["coffer_surely_not_installed"])
    assert "coffer_surely_not_installed" not in sys.modules
    assert not is_deferred("coffer_surely_not_installed")
