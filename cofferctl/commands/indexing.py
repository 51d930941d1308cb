"""`reindex`: rescan a knowledge base now, with a progress bar on a terminal."""

from __future__ import annotations

import argparse
from typing import Any

from cofferctl import api
from cofferctl.client import ApiError, Client
from cofferctl.output import Output, Progress

POLL_S = 0.25


def cmd_reindex(c: Client, a: argparse.Namespace, out: Output) -> Any:
    progress = out.progress("reindexing")
    r = _watching(c, a.kb, progress) if progress.enabled else api.reindex(c, a.kb)
    if out.as_json:
        return r
    out.line(
        f"{r['scanned']} files: {r['documents_added']} added, {r['documents_updated']} updated, "
        f"{r['documents_removed']} removed, {r['documents_unchanged']} unchanged, "
        f"{r['documents_skipped']} skipped"
        + (f", {r['documents_converting']} converting" if r.get("documents_converting") else "")
    )
    for s in r["skipped"]:
        where = s.get("relative_path") or s["path"]
        out.line(f"  skipped {out.link(where, s['path'])}: {s['reason']}")
    return None


def _watching(c: Client, kb: str, progress: Progress) -> Any:
    """Reindex `kb` while showing the KB's progress from status, polled until it answers."""
    import threading

    outcome: dict[str, Any] = {}

    def request() -> None:
        try:
            outcome["reply"] = api.reindex(c, kb)
        except BaseException as exc:  # noqa: BLE001 - the main thread raises it
            outcome["error"] = exc

    worker = threading.Thread(target=request, daemon=True)
    worker.start()
    while worker.is_alive():
        try:
            entries = api.status(c)["knowledge_bases"]
        except ApiError:
            break  # the bar is a nicety; the reindex goes on
        current = next((e.get("progress") for e in entries if e["name"] == kb), None)
        if current:
            progress.show(
                current["done"],
                current["total"],
                f"{current['phase']} {current.get('unit', '')}".strip(),
                current["rate_per_s"],
                current.get("eta_s"),
            )
        worker.join(POLL_S)
    worker.join()
    progress.close()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["reply"]
