"""Converting one file with markitdown, inside the converter's process (its entry point is
conversion/convert_main; the daemon's side is conversion.converter).

Documents are untrusted input: every failure of a conversion is its reply, a sentence
saying why. The text is made final here (derived_markdown: pages marked, frontmatter
written, caps in characters and bytes), so that the daemon only stores and indexes it and
never holds or reads more than the caps allow.
"""

from __future__ import annotations

import contextlib
import re
import resource
import signal
import time
import zipfile
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import Any

from coffer_kernel.sources import IMAGE_SUFFIXES
from cofferd.domain.index_records import Converted

MiB = 1024 * 1024
ENGINE = "markitdown"
TOO_MUCH_MEMORY = "too large: the document needs more memory than allowed"
# Office containers go straight to markitdown's converter of their format: what
# convert_local would choose for them, without magika's guess at every file (~40 ms of a
# Word file's ~100). Text formats keep convert_local, which guesses their charset.
OWN_CONVERTER = {
    "docx": "DocxConverter",
    "pptx": "PptxConverter",
    "xlsx": "XlsxConverter",
    "epub": "EpubConverter",
}
_BLANK_LINES = re.compile(r"\n{3,}")
# what `import markitdown` would import for every format (deferred_imports): each is
# imported by the first file that needs it (soupsieve: bs4's CSS selectors, ~40 ms, which
# no converter of ours selects with)
DEFERRED = ("magika", "pandas", "openpyxl", "pptx", "pdfplumber", "mammoth", "soupsieve")


def limit_memory(megabytes: int) -> None:
    """Cap this process's address space: a conversion past it fails with MemoryError."""
    with contextlib.suppress(ValueError, OSError):  # not every OS has RLIMIT_AS
        limit = megabytes * MiB
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


class Engine:
    """markitdown in this process: its converters, and the whole MarkItDown (with magika's
    model, which guesses what a file is) made only for a format that needs it."""

    @cached_property
    def markitdown(self) -> Any:
        from markitdown import MarkItDown

        return MarkItDown(enable_plugins=False)


def load() -> Engine:
    from cofferd.infrastructure.conversion import deferred_imports

    deferred_imports.defer(DEFERRED)
    import markitdown  # noqa: F401 - its modules once, their heavy libraries deferred

    # what every conversion uses, imported while the process starts (a warm one waits)
    from cofferd.infrastructure.conversion import derived_markdown, format_titles  # noqa: F401

    return Engine()


def convert(
    engine: Engine,
    path: str,
    fmt: str,
    seconds: float | None = None,
    text_seconds: float | None = None,
) -> Converted | tuple[str, str]:
    """The Markdown kept of the file (derived_markdown: its pages marked, its frontmatter
    written), or ("refused", why) for a document with nothing to index or too much, or
    ("failed", the library's exception) for one that cannot be read. A PDF is read page
    by page (pdf_pages) within `text_seconds` (else ("slow", why)), its pages without text
    by OCR (scanned_pages) within `seconds`, the document's time; an image by OCR
    (image_text); any other format by markitdown."""
    began = time.monotonic()
    from cofferd.infrastructure.conversion import derived_markdown, image_text
    from cofferd.infrastructure.conversion.format_titles import own_title

    if fmt in IMAGE_SUFFIXES:
        return image_text.convert(Path(path), fmt)
    try:
        title = _plain(own_title(Path(path), fmt))
        if fmt == "pdf":
            ends = None if seconds is None else began + seconds
            return _pdf(Path(path), title, ends, text_seconds)
        result = _by_own_converter(path, fmt) if fmt in OWN_CONVERTER else None
        if result is None:
            result = engine.markitdown.convert_local(path, file_extension="." + fmt)
        markdown = _plain(result.markdown) or ""
        return derived_markdown.from_markitdown(
            markdown, fmt, title or _plain(result.title), ENGINE
        )
    except derived_markdown.Refused as refused:
        return ("refused", str(refused))
    except TextTooSlow as slow:
        return ("slow", str(slow))
    except MemoryError:
        return ("refused", TOO_MUCH_MEMORY)
    except Exception as exc:  # noqa: BLE001 - any converter failure is the document's
        return ("failed", f"{type(exc).__name__}: {exc}"[:500])


def _pdf(
    path: Path, title: str | None, ends: float | None, text_seconds: float | None
) -> Converted:
    """A PDF's pages read within `text_seconds` (the time of any document: what OCR may add
    is for pages without text, not for a PDF whose text never ends), those without text read
    by OCR before `ends` (time.monotonic(), less scanned_pages.SPARE_S); the pages OCR had
    no time for are said in its frontmatter (`unread`), or in the reason when no page was
    read."""
    from cofferd.infrastructure.conversion import derived_markdown, ocr_engine, pdf_pages
    from cofferd.infrastructure.conversion.scanned_pages import SPARE_S, with_ocr

    until = None if ends is None else ends - SPARE_S
    with _time_limit(text_seconds):
        pages = pdf_pages.read_pages(path)
    read = with_ocr(path, pages, until)
    if read.unread:
        scanned = f"{derived_markdown.SCANNED}: {read.unread}"
    elif ocr_engine.available():
        scanned = derived_markdown.SCANNED + ", and OCR read none"
    else:
        scanned = f"{derived_markdown.SCANNED} ({ocr_engine.MISSING})"
    return derived_markdown.from_pdf(read.pages, title, ENGINE, scanned, read.unread)


class TextTooSlow(BaseException):
    """A document's text took longer than its time (the OCR it may need aside). Not an
    Exception, as KeyboardInterrupt is not: no reader's `except Exception` may take it."""


@contextlib.contextmanager
def _time_limit(seconds: float | None) -> Iterator[None]:
    """Raise TextTooSlow in this (the converter's, single-threaded) process when the block
    runs past `seconds`: checked between Python steps, as every page is read in them. Once
    the time is up, whatever the block raises is TextTooSlow: a reader may have wrapped it
    (ctypes, in the middle of a PDFium call, makes it an ArgumentError, which the reader
    then calls a damaged file)."""
    if seconds is None:
        yield
        return
    up = False

    def stop(_signal: int, _frame: object) -> None:
        nonlocal up
        up = True
        raise TextTooSlow(f"{seconds:g}")

    before = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except BaseException:
        if up:
            raise TextTooSlow(f"{seconds:g}") from None
        raise
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)


def _by_own_converter(path: str, fmt: str) -> Any:
    """markitdown's converter of this format on the file, its text made as convert_local
    makes it (each line's trailing blanks out, at most one blank line in a row); None when
    that converter cannot read it (a text named x.docx, a damaged container): then
    convert_local tries every converter, as it always did."""
    from markitdown import StreamInfo, converters

    if not zipfile.is_zipfile(path):
        return None
    if fmt == "docx":
        from cofferd.infrastructure.conversion import word_xml

        word_xml.use_in_mammoth()
    converter = getattr(converters, OWN_CONVERTER[fmt])()
    where = StreamInfo(extension="." + fmt, local_path=path, filename=Path(path).name)
    try:
        with open(path, "rb") as stream:
            result = converter.convert(stream, where, file_extension="." + fmt)
    except MemoryError:
        raise
    except Exception:  # noqa: BLE001 - convert_local tries again, and says why it fails
        return None
    lines = (line.rstrip() for line in result.text_content.replace("\r\n", "\n").split("\n"))
    result.text_content = _BLANK_LINES.sub("\n\n", "\n".join(lines))
    return result


def _plain(text: object) -> str | None:
    """A library's text as a str itself: a subclass (bs4's NavigableString, a title) is
    no class a reply may hold."""
    return str.__str__(text) if isinstance(text, str) else None
