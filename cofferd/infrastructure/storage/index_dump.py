"""The oracle's picture of a KB's index: everything derived from its files, in a canonical
order (index times left out). Tests compare it with the dump of a fresh rebuild from the
same files."""

from __future__ import annotations

from typing import Any

from cofferd.infrastructure.storage import chunk_rows, document_rows, graph_store
from cofferd.infrastructure.storage.sqlite import Connection


def dump_index(conn: Connection, kb: str) -> dict[str, Any]:
    return {
        "documents": document_rows.dump(conn, kb),
        **chunk_rows.dump(conn, kb),
        **graph_store.dump(conn, kb),
    }
