"""Each table has one module that writes it, read from the daemon's source. schema.py is
left out: its migrations create and reshape every table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

SOURCES = Path(__file__).resolve().parents[2] / "cofferd"
WRITE = re.compile(r"\b(?:INSERT (?:OR \w+ )?INTO|DELETE FROM|(?<!DO )UPDATE) (\w+)")
WRITERS = {
    "documents": "document_rows",
    "chunks": "chunk_rows",
    "tracked_sources": "tracked_sources",
    "document_tags": "graph_store",
    "links": "graph_store",
    "audit": "activity_store",
    "mcp_invocations": "activity_store",
    "fts_tables": "fts_index",
    "vec_tables": "vec_index",
}
# What names a KB's FTS or vector table, or the table recording them.
NAMES = {
    "fts_index": re.compile(r'fts_tables|USING fts5|"fts_'),
    "vec_index": re.compile(r'vec_tables|USING vec0|"vec_'),
}


def sources() -> dict[str, str]:
    return {
        str(path.relative_to(SOURCES)): path.read_text(encoding="utf-8")
        for path in sorted(SOURCES.rglob("*.py"))
        if path.name != "schema.py"
    }


def test_each_table_is_written_by_its_own_module() -> None:
    writers: dict[str, set[str]] = {}
    for name, text in sources().items():
        for table in WRITE.findall(text):
            writers.setdefault(table, set()).add(Path(name).stem)
    assert writers == {table: {module} for table, module in WRITERS.items()}


@pytest.mark.parametrize("owner", sorted(NAMES))
def test_only_its_index_module_names_fts_or_vector_tables(owner: str) -> None:
    naming = {Path(name).stem for name, text in sources().items() if NAMES[owner].search(text)}
    assert naming == {owner}
