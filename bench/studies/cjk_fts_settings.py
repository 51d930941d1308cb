"""What FTS5's settings and the writer's pragmas change in the writer's floor on CJK text
(issue 36 §3, "Cold index, the critical path").

The pingcap-like corpus of bench.guards.cjk_index, prepared as the workers prepare it, inserted
into an FTS5 table with Coffer's tokenizer in 16 transactions (as a cold reconcile's
batches) on a WAL database with Coffer's writer pragmas; then the merge after the load
(`merge` steps of 2,000 pages until none is left, as the reindexer's upkeep does). CPU
seconds (median of 3) of the inserts and of the merge, and the files' size after. Each
variant changes one thing: FTS5's `automerge`, `hashsize` or `pgsz`, the page cache, one
transaction for all, `wal_autocheckpoint` off (with the checkpoint after, timed), or the
table's `remove_diacritics 0` (what prefolding in the workers would save); and with the
native tokenizer (native/cjk_tokens.c: the same tokens), which every other variant leaves out.

    .venv/bin/python -m bench.studies.cjk_fts_settings [--target-mb 12.8]
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from dataclasses import dataclass, field

import sqlean as sqlite3

from bench.common import machine, scratch_home
from bench.guards.cjk_index import build_corpus, prepared_rows
from cofferd.infrastructure.storage import cjk_tokens, fts_index

TRANSACTIONS = 16
MERGE_PAGES = 2_000


@dataclass(frozen=True)
class Variant:
    name: str
    config: tuple[str, ...] = ()  # FTS5 configuration commands after the table is made
    pragmas: tuple[str, ...] = ()
    transactions: int = TRANSACTIONS
    tokenizer: str = fts_index.TOKENIZER
    checkpoint_after: bool = False
    native: bool = False  # the tokenizer of native/cjk_tokens.c loaded (Coffer's, where built)


@dataclass
class Figures:
    insert: list[float] = field(default_factory=list)
    merge: list[float] = field(default_factory=list)
    checkpoint: list[float] = field(default_factory=list)
    mb: list[float] = field(default_factory=list)


VARIANTS = (
    Variant("SQLite's tokenizer (16 transactions)"),
    Variant("native tokenizer (Coffer's)", native=True),
    Variant("one transaction", transactions=1),
    Variant("automerge 0", config=("automerge", "0")),
    Variant("automerge 16", config=("automerge", "16")),
    Variant("hashsize 8 MB", config=("hashsize", str(8 * 1024 * 1024))),
    Variant("pgsz 8000", config=("pgsz", "8000")),
    Variant("cache 64 MB", pragmas=("PRAGMA cache_size = -64000",)),
    Variant(
        "wal_autocheckpoint off", pragmas=("PRAGMA wal_autocheckpoint = 0",), checkpoint_after=True
    ),
    Variant("remove_diacritics 0", tokenizer="porter unicode61 remove_diacritics 0"),
)


def trial(rows: list[tuple[str, str]], variant: Variant, figures: Figures) -> None:
    home = scratch_home("cjk-fts-settings")
    conn = sqlite3.connect(home / "t.db", isolation_level=None)
    try:
        if variant.native and not cjk_tokens.load(conn):
            raise SystemExit(f"the native tokenizer: {cjk_tokens.load_error}")
        for pragma in (
            "PRAGMA journal_mode = WAL",
            "PRAGMA synchronous = NORMAL",
            "PRAGMA cache_size = -16000",
            *variant.pragmas,
        ):
            conn.execute(pragma)
        conn.execute(
            "CREATE VIRTUAL TABLE t USING fts5(text, heading, meta,"
            f" tokenize = '{variant.tokenizer}')"
        )
        for command, value in zip(variant.config[::2], variant.config[1::2], strict=True):
            conn.execute("INSERT INTO t (t, rank) VALUES (?, ?)", (command, int(value)))
        size = -(-len(rows) // variant.transactions)
        started = time.process_time()
        for first in range(0, len(rows), size):
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(
                "INSERT INTO t (rowid, text, heading, meta) VALUES (?, ?, ?, '')",
                [(first + i + 1, *row) for i, row in enumerate(rows[first : first + size])],
            )
            conn.execute("COMMIT")
        figures.insert.append(time.process_time() - started)
        started = time.process_time()
        while True:
            before = conn.total_changes
            conn.execute("INSERT INTO t (t, rank) VALUES ('merge', ?)", (-MERGE_PAGES,))
            if conn.total_changes - before < 2:
                break
        figures.merge.append(time.process_time() - started)
        started = time.process_time()
        if variant.checkpoint_after:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        figures.checkpoint.append(time.process_time() - started)
        figures.mb.append(sum(p.stat().st_size for p in home.glob("t.db*")) / 1e6)
    finally:
        conn.close()
        shutil.rmtree(home, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--target-mb", type=float, default=12.8, help="corpus size")
    args = parser.parse_args()
    root = scratch_home("cjk-fts-settings-corpus")
    try:
        files = build_corpus(root, 0, args.target_mb)
        rows = prepared_rows([(p.read_bytes(), p.relative_to(root).as_posix()) for p in files])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"machine: {machine()}")
    print(f"{len(files)} files, {len(rows)} chunks; CPU seconds, median of 3 (runs alternated)")
    results = {variant.name: Figures() for variant in VARIANTS}
    for _ in range(3):
        for variant in VARIANTS:
            trial(rows, variant, results[variant.name])
    for variant in VARIANTS:
        got = results[variant.name]
        mid = {key: sorted(values)[1] for key, values in vars(got).items()}
        print(
            f"  {variant.name:<28} insert {mid['insert']:.2f}  merge after {mid['merge']:.2f}"
            f"  checkpoint after {mid['checkpoint']:.2f}  files {mid['mb']:.1f} MB"
            f"  (inserts {min(got.insert):.2f}-{max(got.insert):.2f})"
        )
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
