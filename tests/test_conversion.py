"""The conversion worker is a blast wall: hangs, memory exhaustion and crashes become clear
failures, and the next document converts normally."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from cofferd.domain.failures import ConversionFailed
from cofferd.infrastructure.conversion import converter as converter_module
from cofferd.infrastructure.conversion.converter import WorkerConverter, check_zip
from cofferd.surfaces.core import Coffer
from tests.samples import make_docx, make_pdf, make_xlsx, zip_bomb_docx


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name, data in {
        "ok.docx": make_docx("healthy document text"),
        "big.pdf": make_pdf("many pages " * 40, pages=60),
        "sheet.xlsx": make_xlsx("cell text"),
        "bomb.docx": zip_bomb_docx(200),
    }.items():
        (tmp_path / name).write_bytes(data)
        out[name] = tmp_path / name
    return out


async def test_converts_and_reuses_one_worker(files: dict[str, Path]) -> None:
    converter = WorkerConverter()
    try:
        first = await converter.convert(files["ok.docx"], "docx")
        pid = converter._proc.pid if converter._proc else None
        second = await converter.convert(files["sheet.xlsx"], "xlsx")
        assert "healthy document text" in first.markdown and "cell text" in second.markdown
        assert converter._proc is not None and converter._proc.pid == pid
    finally:
        await converter.close()


async def test_the_converter_process_ends_when_idle(
    files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One `add` must not leave ~160 MB resident for the daemon's life."""
    monkeypatch.setattr(converter_module, "IDLE_S", 0.2)
    converter = WorkerConverter()
    try:
        await converter.convert(files["ok.docx"], "docx")
        proc = converter._proc
        assert proc is not None and proc.returncode is None
        for _ in range(100):  # polled: the process ends on its own
            if proc.returncode is not None:
                break
            await asyncio.sleep(0.05)
        assert proc.returncode is not None and converter._proc is None
        again = await converter.convert(files["sheet.xlsx"], "xlsx")  # starts again
        assert "cell text" in again.markdown
    finally:
        await converter.close()


async def test_a_hang_is_stopped_and_the_next_document_converts(files: dict[str, Path]) -> None:
    converter = WorkerConverter(timeout_s=0.05)
    try:
        with pytest.raises(ConversionFailed, match="longer than"):
            await converter.convert(files["big.pdf"], "pdf")
        converter.timeout_s = 60
        assert "healthy" in (await converter.convert(files["ok.docx"], "docx")).markdown
    finally:
        await converter.close()


async def test_memory_is_capped_and_exhaustion_is_a_clear_failure(
    files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # let the bomb through the zip check: the cap is the last line of defence
    monkeypatch.setattr(converter_module, "check_zip", lambda path, fmt="": None)
    converter = WorkerConverter(memory_mb=1024)
    try:
        with pytest.raises(ConversionFailed):
            await converter.convert(files["bomb.docx"], "docx")
        if converter._proc is not None and converter._proc.returncode is None:
            status = Path(f"/proc/{converter._proc.pid}/status").read_text()
            peak_kb = int(status.split("VmPeak:")[1].split()[0])
            assert peak_kb <= 1024 * 1024
        assert "healthy" in (await converter.convert(files["ok.docx"], "docx")).markdown
    finally:
        await converter.close()


async def test_a_worker_that_dies_mid_conversion_is_a_clear_failure(
    files: dict[str, Path],
) -> None:
    converter = WorkerConverter()
    try:
        await converter.convert(files["ok.docx"], "docx")  # the worker is up
        assert converter._proc is not None
        pid = converter._proc.pid
        asyncio.get_running_loop().call_later(0.3, os.kill, pid, signal.SIGKILL)
        with pytest.raises(ConversionFailed, match="crashed"):
            await converter.convert(files["big.pdf"], "pdf")
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
    (coffer.locations.docs_dir("timed") / "big.pdf").write_bytes(make_pdf("words " * 50, 200))
    coffer.conversions.converter.timeout_s = 0.05  # type: ignore[attr-defined]
    assert await coffer.conversions._convert("timed", "big.pdf")  # settled: listed now
    await coffer.reindexer.sync_paths(kb, ["big.pdf"])
    skipped = {s["relative_path"]: s["reason"] for s in await coffer.reindexer.skipped("timed")}
    assert "longer than" in skipped["big.pdf"]
    big = await coffer.retrieval.search("timed", "words")
    assert not big.passages


async def test_a_pdf_whose_title_refers_to_itself_converts_at_once(tmp_path: Path) -> None:
    """Its /Title a reference to itself: pdfminer's resolve1 followed it for ever, holding
    the converter for its whole time."""
    from bench.hostile_seams import self_titled_pdf

    path = tmp_path / "loop.pdf"
    path.write_bytes(self_titled_pdf())
    converter = WorkerConverter(timeout_s=20)
    try:
        converted = await asyncio.wait_for(converter.convert(path, "pdf"), 25)
        assert converted.title is None
    finally:
        await converter.close()


async def test_the_converter_writes_only_in_its_own_home(
    files: dict[str, Path], tmp_path: Path
) -> None:
    """The libraries markitdown loads (onnxruntime, magika) keep caches: in the folder the
    converter is given, never the user's home or /tmp."""
    home = tmp_path / "converter-home"
    converter = WorkerConverter(home=(tmp_path, home))
    try:
        await converter.convert(files["ok.docx"], "docx")
        proc = converter._proc
        assert proc is not None
        environ = Path(f"/proc/{proc.pid}/environ").read_bytes().split(b"\0")
        for name in (b"HOME", b"XDG_CACHE_HOME", b"TMPDIR"):
            assert name + b"=" + str(home).encode() in environ
    finally:
        await converter.close()


async def test_a_bomb_named_otherwise_is_too_large(tmp_path: Path) -> None:
    """A zip is checked as the zip it is whatever its name says (x.pdf); a bomb is "too
    large", not "damaged"."""
    path = tmp_path / "x.pdf"
    path.write_bytes(zip_bomb_docx(200))
    converter = WorkerConverter()
    try:
        with pytest.raises(ConversionFailed, match=r"^too large: "):
            await converter.convert(path, "pdf")
        assert converter._proc is None  # refused before any conversion
    finally:
        await converter.close()
