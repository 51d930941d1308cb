"""The converter's process: markitdown loaded once, then files converted on request under
a memory cap (`python -m cofferd.infrastructure.conversion.convert_main <memory MB>`).

Requests are (None, [(path, format, seconds, text seconds)]): `seconds` the document's
time (OCR stops within it), `text seconds` what its text may take without OCR. Each is
answered by a Converted, the final Markdown kept of the file (its pages marked, its
frontmatter written), or ("refused", "failed" or "slow", why)
(infrastructure.conversion.markitdown_run). A document that crashes or exhausts this
process costs the daemon one failed conversion: the pool starts another process.
"""

from __future__ import annotations

import sys
from typing import Any

from cofferd.domain.index_records import Converted
from cofferd.infrastructure.conversion import markitdown_run
from cofferd.infrastructure.workers.frames import Replies, serve_items

DEFAULT_MEMORY_MB = 2048
REPLIES = Replies(frozenset({Converted}))  # (and ("refused" | "failed", why): builtins)


def main() -> None:
    memory_mb = int(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_MEMORY_MB
    engine = markitdown_run.load()
    markitdown_run.limit_memory(memory_mb)  # after loading: the cap is for documents

    def handle(_head: Any, item: tuple[str, str, float, float]) -> Any:
        path, fmt, seconds, text_seconds = item
        return markitdown_run.convert(engine, path, fmt, seconds, text_seconds)

    serve_items(handle)


if __name__ == "__main__":
    main()
