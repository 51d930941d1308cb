"""The conversion worker: a separate process that imports markitdown once and converts
files on request, under a memory cap. Documents are untrusted input; if one crashes or
exhausts this process, the daemon only sees a failed conversion and starts a new worker.

Protocol: one JSON object per line on stdin ({"path", "format"}), one per line on stdout
({"ok": true, "markdown", "title"} or {"ok": false, "error"}); the title is the document's
own title property where its format has one, else what markitdown found (HTML <title>).
"""

from __future__ import annotations

import json
import os
import resource
import sys
from pathlib import Path
from typing import Any


def limit_memory(megabytes: int) -> None:
    limit = megabytes * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def serve(memory_mb: int) -> None:
    from markitdown import MarkItDown  # heavy (~0.75 s): once per worker

    from cofferd.infrastructure.conversion.format_titles import own_title

    # Replies get a private copy of stdout; anything a library prints goes to stderr,
    # so it can never be taken for (or shift) a reply.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    converter = MarkItDown(enable_plugins=False)
    limit_memory(memory_mb)
    for line in sys.stdin:
        request = json.loads(line)
        reply: dict[str, Any]
        try:
            result = converter.convert_local(
                request["path"], file_extension="." + request["format"]
            )
            title = own_title(Path(request["path"]), request["format"]) or result.title
            reply = {"ok": True, "markdown": result.markdown, "title": title}
        except MemoryError:
            reply = {"ok": False, "error": "too large: the document needs more memory than allowed"}
        except Exception as exc:  # noqa: BLE001 - any converter failure is the document's
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]}
        reply["id"] = request["id"]
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    if len(sys.argv) > 2 and int(sys.argv[2]):
        os.nice(int(sys.argv[2]))  # background work: whatever else runs goes first
    serve(int(sys.argv[1]) if len(sys.argv) > 1 else 2048)
