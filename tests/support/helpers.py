"""What many tests share: files written, a test daemon's knowledge bases, the index's dump and
its rebuild (the oracle), an editor's edits applied."""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

from coffer_kernel.locations import Locations
from cofferd.domain.models import KnowledgeBase
from cofferd.infrastructure.storage.index_dump import dump_index
from cofferd.surfaces.core import Coffer
from tests.support.daemon import Daemon, wait_for


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def new_vault(d: Daemon, prefix: str, notes: dict[str, str]) -> str:
    """A new KB of the daemon holding `notes` (path -> text), once they are indexed."""
    kb = f"{prefix}-{uuid.uuid4().hex[:8]}"
    d.client.post("/api/v1/knowledge_bases", {"name": kb})
    for relpath, text in notes.items():
        write(d.docs(kb) / relpath, text)
    wait_for(lambda: d.client.get(d.client.kb(kb, "/metrics"))["documents"] == len(notes))
    return kb


def add_note(d: Daemon, kb: str, relpath: str, text: str) -> Path:
    """A note written into the KB, returned once the KB has one document more."""
    count = lambda: d.client.get(d.client.kb(kb, "/metrics"))["documents"]  # noqa: E731
    before = count()
    path = write(d.docs(kb) / relpath, text)
    wait_for(lambda: count() == before + 1)
    return path


def new_kb(d: Daemon, formats: list[str] | None = None, **config: Any) -> str:
    """A new KB of the daemon with `config`; `formats`, the formats it indexes in place."""
    kb = f"kb-{uuid.uuid4().hex[:8]}"
    if formats is not None:
        config["index_formats"] = formats
    d.client.post("/api/v1/knowledge_bases", {"name": kb, "config": config})
    return kb


def search(d: Daemon, kb: str, query: str, **filters: Any) -> list[dict[str, Any]]:
    """The KB's first 20 passages for `query`, through the API."""
    body: dict[str, Any] = {"query": query, "top_k": 20}
    if filters:
        body["filters"] = filters
    found: list[dict[str, Any]] = d.client.post(d.client.kb(kb, "/search"), body)["passages"]
    return found


def found_in(d: Daemon, kb: str, query: str) -> list[str]:
    return sorted({p["relative_path"] for p in search(d, kb, query)})


def skipped(d: Daemon, kb: str) -> dict[str, str]:
    """What the KB skipped: path -> reason."""
    items = d.client.get(d.client.kb(kb, "/skipped"))["items"]
    return {i["relative_path"]: i["reason"] for i in items}


def status_entry(d: Daemon, kb: str) -> dict[str, object]:
    """The KB's entry in the daemon's status."""
    kbs = d.client.get("/api/v1/status")["knowledge_bases"]
    return next(k for k in kbs if k["name"] == kb)


def bump_mtime(path: Path) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


async def index_dump(coffer: Coffer, kb: str) -> dict[str, Any]:
    """The oracle's picture of what `coffer` has indexed of `kb`."""
    return await coffer.stores.db.read(lambda conn: dump_index(conn, kb))


async def total_changes(coffer: Coffer) -> int:
    """Rows changed through the writer connection since it was opened."""
    return await coffer.stores.db.write(lambda conn: int(conn.total_changes))


async def rebuild_dump(coffer: Coffer, kb: KnowledgeBase) -> dict[str, Any]:
    return await rebuild_dump_of(coffer.locations.kb_dir(kb.name), coffer.locations.home.parent)


async def rebuild_dump_of(kb_dir: Path, scratch: Path) -> dict[str, Any]:
    """The dump of a fresh index built from the same files in a second data home."""
    home = scratch / f"rebuild-{os.urandom(4).hex()}"
    other = await Coffer.open(Locations(home=home, socket=home / "s.sock"))
    try:
        copy = home / "knowledge" / kb_dir.name
        copy.mkdir(parents=True, exist_ok=True)
        if (copy / "docs").is_dir():
            (copy / "docs").rmdir()  # the default KB's empty folder, made at start
        if (kb_dir / "kb.yaml").exists():
            shutil.copy(kb_dir / "kb.yaml", copy / "kb.yaml")
        other.registry.repo.attach(kb_dir.name, (kb_dir / "docs").resolve())  # the same files
        kb = await other.kbs.adopt(kb_dir.name)  # as the watcher would on a new folder
        assert kb is not None
        await other.reindexer.reconcile(kb)
        return await index_dump(other, kb_dir.name)
    finally:
        await other.close()


def assert_matches_rebuild(d: Daemon, kb: str, scratch: Path) -> None:
    """The oracle: once the daemon settles, its index equals a rebuild from the files."""
    expected = asyncio.run(rebuild_dump_of(d.home / "knowledge" / kb, scratch))

    def same() -> bool:
        return d.settled(kb) and d.dump(kb) == expected

    wait_for(same, timeout=30)


# The daemon's modules cofferctl imports: standard library only (an import contract).
SHARED_WITH_CLI = (
    "cofferd",
    "coffer_kernel.locations",
    "coffer_kernel.sources",
    "coffer_kernel.durations",
)


def applied(body: str, edits: list[dict[str, Any]]) -> str:
    """`body` with the editor's edits applied (positions in UTF-16 units)."""
    lines = body.split("\n")
    for edit in sorted(
        edits,
        key=lambda e: (e["range"]["start"]["line"], e["range"]["start"]["character"]),
        reverse=True,
    ):
        start, end = edit["range"]["start"], edit["range"]["end"]
        assert start["line"] == end["line"]
        line = lines[start["line"]].encode("utf-16-le")
        head = line[: start["character"] * 2].decode("utf-16-le")
        tail = line[end["character"] * 2 :].decode("utf-16-le")
        lines[start["line"]] = head + edit["newText"] + tail
    return "\n".join(lines)


async def skipped_in(coffer: Any, kb: str) -> list[dict[str, Any]]:
    """Every file an in-process Coffer lists as not indexed in `kb` (one page: tests hold
    fewer than a page)."""
    from coffer_kernel.bounds import LIST_LIMIT_MAX

    items, _ = await coffer.reindexer.skipped(kb, LIST_LIMIT_MAX, 0)
    return list(items)
