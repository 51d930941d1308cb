"""What happened: the audit trail and the log of agents' tool calls, for people to read."""

from __future__ import annotations

from typing import Any

from cofferd.application.indexing.knowledge_bases import KnowledgeBases
from cofferd.domain.ports import ActivityLog


class Activity:
    def __init__(self, kbs: KnowledgeBases, log: ActivityLog) -> None:
        self.kbs = kbs
        self.log = log

    async def events(
        self, kb: str | None, limit: int, *, event: str | None = None, actor: str | None = None
    ) -> list[dict[str, Any]]:
        if kb is not None:
            self.kbs.get(kb)
        return await self.log.audit_log(kb, limit, event=event, actor=actor)

    async def record_invocation(
        self, client: str, tool: str, duration_ms: float, outcome: str
    ) -> None:
        await self.log.record_invocation(client, tool, duration_ms, outcome)

    async def invocations(
        self, limit: int, *, client: str | None = None, tool: str | None = None
    ) -> list[dict[str, Any]]:
        return await self.log.invocations(limit, client=client, tool=tool)
