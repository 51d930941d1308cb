"""The line under a page of a list: which of how many it showed, and the command line that
shows the next page when more remain (runs as printed)."""

from __future__ import annotations

from coffer_kernel.bounds import LIST_LIMIT_DEFAULT


def page_line(data: dict[str, object], shown: int, noun: str, words: list[str], limit: int) -> str:
    """`1-50 of 120 tags; the next: cofferctl tags notes --offset 50` (`words`: the
    command's own, without its --limit and --offset)."""
    import shlex

    first, total = int(str(data["offset"])), int(str(data["total"]))
    said = f"{first + 1 if shown else 0}-{first + shown} of {total} {noun}"
    if first + shown >= total or not shown:
        return said
    more = ["--limit", str(limit)] if limit != LIST_LIMIT_DEFAULT else []
    following = shlex.join(["cofferctl", *words, *more, "--offset", str(first + shown)])
    return f"{said}; the next: {following}"
