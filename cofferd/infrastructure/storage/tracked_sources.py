"""Originals this machine tracks for check-sources: the `tracked_sources` rows (the
TrackedSources port) and their copy in the data home (local/<kb>.sources.json). They are
not derived from files, so that copy is what restores them when the index is rebuilt."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from functools import partial

from coffer_kernel.locations import Locations
from cofferd.infrastructure.files.confinement import (
    ControlFileRefused,
    read_control_file,
    write_home_file,
)
from cofferd.infrastructure.storage.database import Database
from cofferd.infrastructure.storage.sqlite import Connection

log = logging.getLogger(__name__)

SOURCES_MAX = 256 * 1024 * 1024  # far beyond what a million tracked originals take


def forget(conn: Connection, kb: str, doc_id: str) -> None:
    conn.execute(
        "DELETE FROM tracked_sources WHERE resource_name = ? AND document_id = ?", (kb, doc_id)
    )


def drop_kb(conn: Connection, kb: str) -> None:
    conn.execute("DELETE FROM tracked_sources WHERE resource_name = ?", (kb,))


def _put(conn: Connection, rows: Sequence[tuple[str, str, str]]) -> None:
    conn.executemany(
        "INSERT OR REPLACE INTO tracked_sources (resource_name, document_id, source_path)"
        " VALUES (?, ?, ?)",
        rows,
    )


def _tracked(conn: Connection, kb: str) -> dict[str, str]:
    rows = conn.execute(
        "SELECT document_id, source_path FROM tracked_sources WHERE resource_name = ?", (kb,)
    ).fetchall()
    return {r[0]: r[1] for r in rows}


class SqliteTrackedSources:
    def __init__(self, db: Database, locations: Locations) -> None:
        self.db = db
        self.locations = locations

    async def track_source(self, kb: str, doc_id: str, source_path: str) -> None:
        await self.db.transact(lambda conn: _put(conn, [(kb, doc_id, source_path)]))
        await self.save(kb)

    async def tracked_sources(self, kb: str) -> dict[str, str]:
        return await self.db.read(lambda conn: _tracked(conn, kb))

    async def save(self, kb: str) -> None:
        """The KB's tracked sources into the data home (after they changed)."""
        tracked = await self.tracked_sources(kb)
        path = self.locations.tracked_sources_path(kb)
        data = json.dumps(tracked, indent=1, sort_keys=True).encode()
        await asyncio.to_thread(write_home_file, self.locations.home, path, data)

    async def restore(self, kbs: Sequence[str]) -> None:
        """Tracked sources from the data home into the index (after it was rebuilt)."""
        for kb in kbs:
            path = self.locations.tracked_sources_path(kb)
            try:
                found = await asyncio.to_thread(
                    partial(read_control_file, path, SOURCES_MAX, home=self.locations.home)
                )
                if found is None:
                    continue
                saved = json.loads(found.data)
                if found.cut or not isinstance(saved, dict):
                    raise ValueError("it is not the mapping Coffer writes")
            except (OSError, ValueError, ControlFileRefused) as exc:
                log.error("%s cannot be read (%s); tracked sources not restored", path, exc)
                continue
            rows = [(kb, d, p) for d, p in saved.items() if isinstance(p, str)]
            await self.db.transact(lambda conn, rows=rows: _put(conn, rows))  # type: ignore[misc]
