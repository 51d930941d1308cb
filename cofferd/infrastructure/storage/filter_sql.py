"""Search filters as SQL: the one place that turns SearchFilters into a WHERE clause.

Keyword and vector search both narrow their candidates with `chunks_within`: FTS5 and
vec0 each accept the subquery as a constraint, so a filter never drops hits after the
top k were chosen (a narrow filter still gets its k best).
"""

from __future__ import annotations

from typing import Any, Literal

from cofferd.domain.filters import SearchFilters
from cofferd.domain.models import KB_KIND


def documents_where(filters: SearchFilters) -> tuple[str, list[Any]]:
    """Conditions on documents `d`, joined with AND (`1` when there are none)."""
    parts: list[str] = []
    args: list[Any] = []
    if filters.folder:
        prefix = filters.folder + "/"
        parts.append("substr(d.path, 1, ?) = ?")
        args += [len(prefix), prefix]
    for tag in filters.tags:
        nested = tag + "/"
        parts.append(
            "EXISTS (SELECT 1 FROM document_tags t WHERE t.kind = d.kind"
            " AND t.resource_name = d.resource_name AND t.document_id = d.id"
            " AND (t.tag = ? OR substr(t.tag, 1, ?) = ?))"
        )
        args += [tag, len(nested), nested]
    if filters.updated_after:
        parts.append("d.updated_at >= ?")
        args.append(filters.updated_after)
    if filters.updated_before:
        parts.append("d.updated_at < ?")
        args.append(filters.updated_before)
    if filters.source_mode:
        parts.append("d.source_mode = ?")
        args.append(filters.source_mode)
    if filters.format:
        parts.append(f"d.format IN ({', '.join('?' * len(filters.format))})")
        args += filters.format
    return (" AND ".join(parts) or "1"), args


def chunks_within(
    kb: str, filters: SearchFilters, key: Literal["seq", "id"]
) -> tuple[str, list[Any]]:
    """A subquery selecting the `key` of every chunk in `kb` the filters allow."""
    where, args = documents_where(filters)
    return (
        f"SELECT c.{key} FROM chunks c JOIN documents d ON d.kind = c.kind"
        " AND d.resource_name = c.resource_name AND d.id = c.document_id"
        f" WHERE c.kind = ? AND c.resource_name = ? AND {where}",
        [KB_KIND, kb, *args],
    )
