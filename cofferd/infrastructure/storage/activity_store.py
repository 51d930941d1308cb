"""What happened, kept for people to read: the audit trail and the MCP tool-call log.

Both are windows, not archives: each keeps its newest `keep` rows (a trigger trims the
oldest every `TRIM_EVERY` inserts), so a KB that is reindexed daily for years does not
grow the database without bound.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from cofferd.domain.models import KB_KIND, utc_now
from cofferd.infrastructure.storage.database import Database
from cofferd.infrastructure.storage.sqlite import Connection

KEEP_DEFAULT = 100_000
TRIM_EVERY = 1000
WINDOWED_TABLES = ("audit", "mcp_invocations")


Event = tuple[str, str, str | None, str | None, dict[str, Any]]  # event, actor, kb, doc, details


def record(conn: Connection, events: Sequence[Event]) -> None:
    """Audit events, inside the caller's transaction."""
    at = utc_now()
    conn.executemany(
        "INSERT INTO audit (at, actor, event, kind, resource_name, document_id, details)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(at, actor, event, KB_KIND if kb else None, kb, doc_id, json.dumps(details))
         for event, actor, kb, doc_id, details in events],
    )  # fmt: skip


def _keep_window(conn: Connection, keep: int) -> None:
    for table in WINDOWED_TABLES:
        conn.execute(f"DROP TRIGGER IF EXISTS {table}_window")
        conn.execute(
            f"CREATE TRIGGER {table}_window AFTER INSERT ON {table}"
            f" WHEN new.id % {TRIM_EVERY} = 0"
            f" BEGIN DELETE FROM {table} WHERE id <= new.id - {int(keep)}; END"
        )
        (last,) = conn.execute(f"SELECT coalesce(max(id), 0) FROM {table}").fetchone()
        conn.execute(f"DELETE FROM {table} WHERE id <= ?", (last - keep,))


def _where(equal: dict[str, str | None]) -> tuple[str, list[str]]:
    """A WHERE clause keeping the rows whose columns (names of ours, never a caller's)
    equal the values given; those that are None are not filtered on."""
    given = {column: value for column, value in equal.items() if value}
    clause = " AND ".join(f"{column} = ?" for column in given)
    return (f"WHERE {clause}" if clause else ""), list(given.values())


class SqliteActivity:
    """The ActivityLog port over SQLite."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def keep(self, rows: int) -> None:
        """Keep the newest `rows` of each log (trimmed now, and as they grow)."""
        await self.db.transact(lambda conn: _keep_window(conn, rows))

    async def audit(
        self, event: str, actor: str, kb: str | None, doc_id: str | None, details: dict[str, Any]
    ) -> None:
        await self.db.transact(lambda conn: record(conn, [(event, actor, kb, doc_id, details)]))

    async def audit_log(
        self, kb: str | None, limit: int, *, event: str | None = None, actor: str | None = None
    ) -> list[dict[str, Any]]:
        where, args = _where({"resource_name": kb, "event": event, "actor": actor})

        def run(conn: Connection) -> list[dict[str, Any]]:
            rows = conn.execute(
                f"SELECT * FROM audit {where} ORDER BY id DESC LIMIT ?", [*args, limit]
            ).fetchall()
            return [{**dict(r), "details": json.loads(r["details"])} for r in rows]

        return await self.db.read(run)

    async def record_invocation(
        self, client: str, tool: str, duration_ms: float, outcome: str
    ) -> None:
        def run(conn: Connection) -> None:
            conn.execute(
                "INSERT INTO mcp_invocations (at, client, tool, duration_ms, outcome)"
                " VALUES (?, ?, ?, ?, ?)",
                (utc_now(), client[:100], tool[:100], duration_ms, outcome[:100]),
            )

        await self.db.transact(run)

    async def invocations(
        self, limit: int, *, client: str | None = None, tool: str | None = None
    ) -> list[dict[str, Any]]:
        where, args = _where({"client": client, "tool": tool})

        def run(conn: Connection) -> list[dict[str, Any]]:
            rows = conn.execute(
                f"SELECT * FROM mcp_invocations {where} ORDER BY id DESC LIMIT ?", [*args, limit]
            ).fetchall()
            return [dict(r) for r in rows]

        return await self.db.read(run)
