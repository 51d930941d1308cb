"""The source rules (coffer_kernel.sources) as the daemon's errors, for a caller by its actor."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from coffer_kernel.sources import SourceRefused, checked_source
from cofferd.domain.errors import PathRefused, ValidationFailed

AGENT_ACTORS = "agent"  # actors of MCP calls are `agent` or `agent:<client name>`


def check_source(
    given: str, *, actor: str | None, agent_roots: Sequence[Path], data_home: Path
) -> Path:
    """The real path of a file the caller may add (actor None: a tracked source read
    again), or PathRefused / ValidationFailed saying why not."""
    is_agent = actor is not None and actor.split(":", 1)[0] == AGENT_ACTORS
    try:
        return checked_source(
            given, data_home=data_home, agent_roots=agent_roots if is_agent else None
        )
    except SourceRefused as exc:
        if exc.not_a_file:
            raise ValidationFailed(exc.message, field="source_path") from None
        raise PathRefused(exc.message, path=given) from None
