"""Converting documents to Markdown (the MarkdownConverter port), safely.

markitdown runs in worker processes of a worker pool (infrastructure.workers.pool; the
process is conversion.convert_main, answering what it allows) with a memory cap, a
wall-clock time per document (a PDF has OCR_TIMEOUT_S more when OCR is installed: its
pages without text are read by OCR within a budget that grows with them, scanned_pages;
the process is told the document's time, and stops OCR before it), and HOME, caches and
temp files (and its working directory) in a folder of the data home; zip-based formats
are checked for bombs before they reach it. One pool serves `add` (its express worker, at
full priority) and the conversions in the background (its one bulk worker, at a lower
priority): an `add` never waits behind a backlog. The bulk worker is started ahead of
its first file when a KB that converts begins its first pass (`warm`), and takes the first
file after a wait at full priority (workers.pool: `first_at_full_priority`), so that the
first conversion is not kept waiting by the scan nor by a loaded machine. Both stop after
`IDLE_S` without a conversion (~160 MB each go back to the system) and start again for
the next.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import zipfile
from pathlib import Path
from typing import Any

from cofferd.domain import formats
from cofferd.domain.errors import EngineUnavailable
from cofferd.domain.failures import ConversionFailed
from cofferd.domain.index_records import Converted
from cofferd.infrastructure.conversion import convert_main, ocr_engine
from cofferd.infrastructure.files.confinement import home_folder
from cofferd.infrastructure.workers.pool import WorkerEntry, WorkerPool, WorkFailed

PROCESS = WorkerEntry(convert_main.__name__, convert_main.REPLIES)

log = logging.getLogger(__name__)

CONVERTED_FORMATS = (*formats.CONVERTED_FORMATS, "htm", "jpeg")
ZIP_FORMATS = ("docx", "pptx", "xlsx", "epub")
TIMEOUT_S = 60.0
OCR_TIMEOUT_S = 240.0  # more for a PDF, when OCR is installed (scanned_pages.OCR_CEILING_S)
MEMORY_MB = 2048
IDLE_S = 30.0  # the converter's process ends after this long without a conversion
MAX_UNCOMPRESSED_BYTES = 512 * 1024 * 1024
MAX_COMPRESSION_RATIO = 100
NICE = 10  # conversions in the background yield to the rest


OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # what a password wraps Office files in
OFFICE_FORMATS = ("docx", "pptx", "xlsx")
ENCRYPTED_OFFICE = (
    "encrypted: a password-protected Office file (or an old .doc/.xls/.ppt named as the new format)"
)
ENCRYPTED_PDF = "encrypted: the PDF cannot be read without its password"
# pdfminer's, and PDFium's (pypdfium2's PdfiumError), which reads PDFs since issue 44
PDF_PASSWORD_ERRORS = (
    "PDFPasswordIncorrect",
    "PDFEncryption",
    "Incorrect password",
    "Unsupported security scheme",
)
ENCRYPTED_EPUB = "encrypted: an e-book with DRM"


def check_zip(path: Path, fmt: str = "") -> None:
    """Refuse archives that inflate to far more than they weigh (zip bombs), and say
    what is encrypted: an Office file with a password is no zip but an OLE container; an
    EPUB with DRM lists its encrypted parts."""
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
    except (UnicodeDecodeError, ValueError, EOFError) as exc:  # a directory that lies
        raise ConversionFailed(f"damaged, or not a readable {fmt} file: {exc}") from None
    except (zipfile.BadZipFile, OSError):
        if fmt in OFFICE_FORMATS:
            with contextlib.suppress(OSError), path.open("rb") as fh:
                if fh.read(len(OLE_MAGIC)) == OLE_MAGIC:
                    raise ConversionFailed(ENCRYPTED_OFFICE) from None
        return  # not a zip after all: markitdown decides what it is
    if fmt == "epub" and any(i.filename == "META-INF/encryption.xml" for i in infos):
        raise ConversionFailed(ENCRYPTED_EPUB)
    inflated = sum(i.file_size for i in infos)
    packed = sum(i.compress_size for i in infos)
    if inflated > MAX_UNCOMPRESSED_BYTES:
        raise ConversionFailed(
            f"too large: the archive inflates to {inflated:,} bytes "
            f"(limit {MAX_UNCOMPRESSED_BYTES:,})"
        )
    if packed and inflated / packed > MAX_COMPRESSION_RATIO and inflated > 10 * 1024 * 1024:
        raise ConversionFailed(
            f"too large: the archive's compression ratio {inflated / packed:.0f}:1 is beyond "
            f"{MAX_COMPRESSION_RATIO}:1 (a zip bomb?)"
        )


def is_zip(path: Path) -> bool:
    """Whether the file is a zip archive, whatever its name says (a zip named x.pdf is
    converted as the zip it is)."""
    with contextlib.suppress(OSError), path.open("rb") as fh:
        return fh.read(4) == b"PK\x03\x04"
    return False


def _explained(error: str, fmt: str) -> str:
    """What a converter's exception means to the person whose file it is, as a sentence."""
    if fmt == "pdf" and any(said in error for said in PDF_PASSWORD_ERRORS):
        return ENCRYPTED_PDF
    said = _sentence(error)
    if "memory" in said:
        return said
    return f"damaged, or not a readable {fmt} file: {said}"


# escapes a library's repr leaves in its message (`PSEOF\n`), and control characters
_NOT_PROSE = re.compile(r"\\[nrt]|[\x00-\x1f\x7f-\x9f\u2028\u2029]")
SENTENCE_CHARS = 300


def _sentence(error: str) -> str:
    """An exception's message as one line of prose: no escapes, no control characters,
    its spaces single, at most SENTENCE_CHARS."""
    text = " ".join(_NOT_PROSE.sub(" ", error[: SENTENCE_CHARS * 4]).split())
    return text if len(text) <= SENTENCE_CHARS else text[: SENTENCE_CHARS - 1] + "…"


class ConverterPool:
    """The converter's processes: `interactive` converts for `add` (the express worker),
    `background` for the conversion queue (the bulk worker, at `nice`)."""

    engine = "markitdown"

    def __init__(
        self,
        *,
        timeout_s: float = TIMEOUT_S,
        ocr_timeout_s: float = OCR_TIMEOUT_S,
        memory_mb: int = MEMORY_MB,
        nice: int = NICE,
        home: tuple[Path, Path] | None = None,
        idle_s: float | None = None,
    ) -> None:
        """`home`: (the data home, a folder of it): the process's home, cache and temp
        folder (the libraries markitdown loads write caches there, not in the user's home
        or /tmp), made when missing and refused when it is a link."""
        self.timeout_s = timeout_s
        self.ocr_timeout_s = ocr_timeout_s
        self.home = home
        self.pool = WorkerPool(
            PROCESS,
            1,
            idle_s=IDLE_S if idle_s is None else idle_s,
            keep_express=False,
            nice=nice,
            args=(str(memory_mb),),
            environment=self._environment,
            interactive_on_bulk=False,  # one process for `add`, one for the background
            first_at_full_priority=True,
            cwd=str(home[1]) if home is not None else os.sep,  # (made by _environment)
        )
        self.interactive = PoolConverter(self, interactive=True)
        self.background = PoolConverter(self, interactive=False)

    def formats(self) -> tuple[str, ...]:
        return CONVERTED_FORMATS

    async def convert(self, path: Path, fmt: str, *, interactive: bool = True) -> Converted:
        if fmt in ZIP_FORMATS or await asyncio.to_thread(is_zip, path):
            await asyncio.to_thread(check_zip, path, fmt)
        timeout = self.timeout_s
        if fmt == "pdf" and await asyncio.to_thread(ocr_engine.available):
            timeout += self.ocr_timeout_s  # its pages without text may need OCR
        item = (str(path), fmt, timeout, self.timeout_s)  # (the process keeps to both)
        reply = await self.pool.ask(None, item, interactive=interactive, timeout_s=timeout)
        match reply:
            case Converted():
                return reply
            case ("refused", str(why)):  # a sentence of ours: a scan, a bomb, no text
                raise ConversionFailed(_sentence(why))
            case ("failed", str(error)):
                raise ConversionFailed(_explained(error, fmt))
            case ("slow", _):  # its text alone took longer than any document may
                raise ConversionFailed(
                    f"conversion took longer than {self.timeout_s:g} s and was stopped",
                    transient=True,
                )
            case WorkFailed(cause="time"):
                raise ConversionFailed(
                    f"conversion took longer than {timeout:g} s and was stopped", transient=True
                )
            case WorkFailed(cause="outside", reason=reason):  # no fault of the document's
                raise EngineUnavailable(f"not converted now: {reason}", engine="markitdown")
            case WorkFailed(reason=reason):
                raise ConversionFailed(
                    f"the converter crashed on this document: {reason}", transient=True
                )
        raise ConversionFailed("the converter answered something else", transient=True)

    def _environment(self) -> dict[str, str] | None:
        if self.home is None:
            return None
        data_home, folder = self.home
        try:
            with home_folder(data_home, folder, make=True):
                pass  # a folder of the data home, reached through no link
        except OSError as exc:  # FolderRefused too: a link or a file on the way
            raise EngineUnavailable(f"the converter's folder cannot be used: {exc}") from None
        places = ("HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "TMPDIR")
        return {**os.environ, **dict.fromkeys(places, str(folder))}

    def status(self) -> dict[str, Any]:
        return self.pool.status()

    async def close(self) -> None:
        """Stop every conversion at once: its caller is answered (EngineUnavailable)
        instead of waiting up to the conversion's time. Closing twice is closing once."""
        await self.pool.close()


class PoolConverter:
    """The MarkdownConverter port over the converter's pool, for `add` (interactive) or
    for the background."""

    engine = "markitdown"

    def __init__(self, pool: ConverterPool, *, interactive: bool) -> None:
        self._pool = pool
        self._interactive = interactive

    def formats(self) -> tuple[str, ...]:
        return CONVERTED_FORMATS

    async def convert(self, path: Path, fmt: str) -> Converted:
        return await self._pool.convert(path, fmt, interactive=self._interactive)

    def warm(self) -> None:
        """Start the converter's process now: files to convert are on their way."""
        if not self._interactive:
            self._pool.pool.warm()

    def status(self) -> dict[str, Any]:
        return self._pool.status()

    async def interrupt(self) -> None:
        """Stop the conversions in flight at once (the daemon is stopping)."""
        await self._pool.close()

    async def close(self) -> None:
        await self._pool.close()
