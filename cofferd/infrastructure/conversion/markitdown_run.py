"""Converting one file with markitdown, inside the converter's process (its entry point is
surfaces/processes/convert_main; the daemon's side is conversion.converter).

Documents are untrusted input: every failure of a conversion is its reply, a sentence
saying why, and a text past its caps (characters, then bytes) is refused here, in the
worker, so that the daemon never holds or reads more than the caps allow.
"""

from __future__ import annotations

import contextlib
import resource
from pathlib import Path
from typing import Any

from cofferd.domain.index_records import Converted

MiB = 1024 * 1024
MAX_CHARS = 32_000_000  # a longer converted text is a bomb, not a document
MAX_BYTES = 96 * MiB  # its UTF-8 (32 million CJK characters fit)
TOO_MUCH_MEMORY = "too large: the document needs more memory than allowed"


def limit_memory(megabytes: int) -> None:
    """Cap this process's address space: a conversion past it fails with MemoryError."""
    with contextlib.suppress(ValueError, OSError):  # not every OS has RLIMIT_AS
        limit = megabytes * MiB
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def load() -> Any:
    from markitdown import MarkItDown  # heavy (~0.75 s): once per process

    return MarkItDown(enable_plugins=False)


def convert(markitdown: Any, path: str, fmt: str) -> Converted | tuple[str, str]:
    """The file's Markdown and title (its format's own title property where it has one,
    else what markitdown found: HTML <title>), or ("failed", why)."""
    from cofferd.infrastructure.conversion.format_titles import own_title

    try:
        result = markitdown.convert_local(path, file_extension="." + fmt)
        markdown = _plain(result.markdown) or ""
        if len(markdown) > MAX_CHARS:
            return (
                "failed",
                f"too large: its text is over {MAX_CHARS // 1_000_000} million characters",
            )
        if len(markdown.encode("utf-8", "surrogatepass")) > MAX_BYTES:
            return ("failed", f"too large: its text is over {MAX_BYTES // MiB} MiB")
        title = _plain(own_title(Path(path), fmt) or result.title)
        return Converted(markdown=markdown, title=title)
    except MemoryError:
        return ("failed", TOO_MUCH_MEMORY)
    except Exception as exc:  # noqa: BLE001 - any converter failure is the document's
        return ("failed", f"{type(exc).__name__}: {exc}"[:500])


def _plain(text: object) -> str | None:
    """A library's text as a str itself: a subclass (bs4's NavigableString, a title) is
    no class a reply may hold."""
    return str.__str__(text) if isinstance(text, str) else None
