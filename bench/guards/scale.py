"""How the daemon's costs grow with the number of documents (default 250,000).

tldr-pages (~38,400 Markdown files) is replicated into `copy000/`, `copy001/`, ... until
`--documents` files exist; each copy of a file gets a line `uniq<copy>x<index>` so that no
two files are equal. A real `cofferd` (this venv's, running the code of `--repo`, default
this checkout) then starts on that KB, over a Unix socket, and we report:

* (a) cold index: start-up until the KB's metrics count every file (and the status says
  the start-up reconcile is done), in files/s;
* (b) the daemon's peak RSS (VmHWM) after indexing;
* (c) no-op reconcile: `POST .../reindex`, median of 3;
* (d) keyword query latency over the socket: 30 queries (common and rare words,
  identifiers, CJK) x 10 reps;
* (e) save-to-searchable: append a unique token to a random file, poll search until it is
  found; p50/p95 over 30 edits;
* (f) database size (coffer.db + coffer.db-wal) against the corpus text bytes;
* (g) restart to idle, last: the daemon started again on the same home until its start-up
  reconcile is done and nothing is queued, median of 3;
* (h) vectors (skip with `--no-vectors`): the KB is given an OpenAI-compatible provider (a
  real HTTP server on loopback, `tests/support/fake_embeddings.py`); with the daemon stopped,
  every chunk gets a unit vector from a fixed seed, written by the code's own `vec_index`
  (embedding 250k documents for real would take hours; bench.studies.vector_recall measures
  quality on real embeddings); then the vector table's size against float32, and vector
  and hybrid search latency by query class (p50/p95/p99), and the daemon's memory.

(d) and (h) time each query class: short (a rare word or identifier), common words, long
sentences, CJK.

Run it at 38,000 too to see how each cost grows:

    .venv/bin/python -m bench.guards.scale [--documents 250000] [--timeout 1800] [--repo PATH]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import time
from pathlib import Path

import sqlean

from bench.common import (
    BIN,
    add_repo_argument,
    code_env,
    describe_code,
    exit_by_targets,
    extract_tldr,
    indexer_idle,
    kb_status,
    machine,
    median,
    memory_mb,
    percentile,
    scratch_home,
    start_daemon,
    stop_daemon,
    verdict,
    wait,
)
from cofferctl.client import Client
from tests.support.fake_embeddings import serving

KB = "big"
STALL_S = 120  # the count has not moved for this long while the daemon is idle: give up

# Keyword queries by class, as people type them: one rare word or identifier, the commonest
# words (long postings), whole sentences (many OR-ed terms, some common), CJK. The `short`
# class also gets one `uniq<copy>x7` identifier from the corpus at run time.
QUERY_CLASSES: dict[str, list[str]] = {
    "short": ["tar", "ffmpeg", "chmod", "k8s", "config.yaml", "xdg-open", "zzqnotaword",
              "pg_dump", "kill process", "extract archive"],
    "common": ["the", "file", "list files", "show help", "version", "directory", "git commit",
               "docker run", "network interface", "a file in the directory"],
    "long": ["how do I list all the files in a directory and show their sizes",
             "extract a tar archive into a specific directory with verbose output",
             "kill the process that is listening on a given network port",
             "convert a video file to another format and change its resolution",
             "show the differences between two files side by side with colors",
             "create a new user account and set the password for it",
             "display the current status of all the running docker containers",
             "search for a pattern in all the files of the current directory recursively"],
    "cjk": ["压缩", "文件", "目录", "进程", "ファイル", "ディレクトリ", "파일", "압축",
            "git 提交", "docker 镜像"],
}  # fmt: skip
EMBED_KEY = "COFFER_TEST_EMBED_KEY"  # the credential the vector phase's provider is given
VECTOR_SEED = 23
VECTOR_REPS = 3  # rounds of every query in each vector mode (float32 scans are slow)


def build_corpus(docs: Path, scratch: Path, documents: int) -> tuple[list[str], int]:
    """Write `documents` files under docs/copyNNN/; returns (relative paths, total bytes)."""
    source = extract_tldr(scratch)
    pages: list[tuple[str, bytes]] = []
    for folder, _, names in os.walk(source):  # does not follow the pages.en symlink
        for name in sorted(names):
            path = Path(folder, name)
            # cofferd ignores hidden files (tldr has 39 named `..md`)
            if name.endswith(".md") and not name.startswith(".") and not path.is_symlink():
                pages.append((path.relative_to(source).as_posix(), path.read_bytes()))
    pages.sort()
    shutil.rmtree(scratch)
    written: list[str] = []
    total = 0
    copy = 0
    while len(written) < documents:
        made: set[Path] = set()
        for index, (rel, data) in enumerate(pages[: documents - len(written)]):
            relpath = f"copy{copy:03d}/{rel}"
            target = docs / relpath
            if target.parent not in made:
                target.parent.mkdir(parents=True, exist_ok=True)
                made.add(target.parent)
            blob = data + f"\n\nuniq{copy}x{index}\n".encode()
            target.write_bytes(blob)
            written.append(relpath)
            total += len(blob)
        copy += 1
    return written, total


def query_latencies(
    client: Client, classes: dict[str, list[str]], reps: int
) -> dict[str, list[float]]:
    """Milliseconds per search over the socket, by class: each query once to warm up,
    then `reps` rounds of every query."""
    for queries in classes.values():
        for q in queries:
            client.post(client.kb(KB, "/search"), {"query": q})
    timed: dict[str, list[float]] = {name: [] for name in classes}
    for _ in range(reps):
        for name, queries in classes.items():
            for q in queries:
                t0 = time.perf_counter()
                client.post(client.kb(KB, "/search"), {"query": q})
                timed[name].append((time.perf_counter() - t0) * 1000)
    return timed


def print_classes(mode: str, timed: dict[str, list[float]]) -> None:
    for name, values in timed.items():
        print(
            f"    {mode} {name:>6}: p50 {percentile(values, 50):6.1f}  "
            f"p95 {percentile(values, 95):6.1f}  p99 {percentile(values, 99):6.1f} ms "
            f"({len(values)} searches)",
            flush=True,
        )


# Run in a process of its own with the code under test (`--repo`), on the stopped daemon's
# database: a unit vector from a fixed seed for every chunk of the KB, written by that
# code's vec_index (its own storage format), and nothing left owing vectors.
FILL_VECTORS = """
import sys, time
import numpy as np
from cofferd.infrastructure.storage import sqlite, vec_index
db, kb, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
conn = sqlite.connect(db)
assert vec_index.load(conn), vec_index.load_error
model, dims = vec_index.recorded(conn, kb)
ids = [r[0] for r in conn.execute(
    "SELECT id FROM chunks WHERE kind = 'knowledge_base' AND resource_name = ? ORDER BY seq",
    (kb,))]
rng = np.random.default_rng(seed)
started = time.perf_counter()
with sqlite.atomic(conn):
    for start in range(0, len(ids), 5000):
        block = rng.standard_normal((len(ids[start:start + 5000]), dims)).astype(np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        vec_index.insert(conn, kb, list(zip(ids[start:start + 5000], block.tolist())))
    conn.execute("UPDATE documents SET embed_pending = 0, embed_error = NULL, embed_retry_at = 0"
                 " WHERE kind = 'knowledge_base' AND resource_name = ?", (kb,))
conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
print(f"{len(ids)} {dims} {time.perf_counter() - started:.1f}")
"""


def vector_bytes(db: Path) -> int:
    """The KB's vector table on disk (its vec0 shadow tables), in bytes."""
    conn = sqlean.connect(f"file:{db}?mode=ro", uri=True)
    try:
        (table,) = conn.execute(
            "SELECT table_name FROM vec_tables WHERE resource_name = ?", (KB,)
        ).fetchone()
        (size,) = conn.execute(
            "SELECT sum(pgsize) FROM dbstat WHERE name LIKE ?", (f"{table}%",)
        ).fetchone()
    finally:
        conn.close()
    return int(size)


def measure_vectors(
    client: Client,
    daemon: subprocess.Popen[bytes],
    classes: dict[str, list[str]],
    home: Path,
    socket_path: Path,
    repo: Path,
) -> subprocess.Popen[bytes]:
    """(h) vectors at this scale: every chunk gets a seeded unit vector through the code's
    own write path, then vector and hybrid searches are timed by class. Returns the
    daemon, restarted."""
    with serving(384) as server:  # a real OpenAI-compatible server on loopback
        server.mode = "down"  # the KB owes vectors but embeds none: the fill stands in
        client.request("PATCH", client.kb(KB), {"config": server.config()})
        wait(
            lambda: (
                (kb_status(client.get("/api/v1/status"), KB).get("vectors") or {}).get(
                    "consecutive_failures", 0
                )
                > 0
            ),
            daemon,
            120,
            0.5,
        )
        stop_daemon(daemon, grace_s=60)
        filled = subprocess.run(
            [str(BIN / "python"), "-c", FILL_VECTORS, str(home / "coffer.db"), KB,
             str(VECTOR_SEED)],
            env=code_env(repo), check=True, capture_output=True, text=True,
        ).stdout.split()  # fmt: skip
        chunks, dims, fill_s = int(filled[0]), int(filled[1]), float(filled[2])
        server.mode = "ok"
        daemon = start_daemon(repo, home, socket_path)
        wait(lambda: indexer_idle(client.get("/api/v1/status")), daemon, 300, 0.5)
        owed = kb_status(client.get("/api/v1/status"), KB)["vectors"]["embed_pending"]
        stored = vector_bytes(home / "coffer.db")
        float32 = chunks * dims * 4
        print(
            f"(h) vectors: {chunks:,} chunks x {dims} written in {fill_s:.1f} s; "
            f"{owed} documents owe vectors after the restart (should be 0); vector table "
            f"{stored / 1e6:.1f} MB = {stored / float32:.0%} of float32 ({float32 / 1e6:.1f} MB) "
            f"[target <= 40 %: {target(stored <= 0.4 * float32)}]",
            flush=True,
        )
        for mode in ("vector", "hybrid"):
            client.request("PATCH", client.kb(KB), {"config": {"default_mode": mode}})
            timed = query_latencies(client, classes, VECTOR_REPS)
            every = [ms for values in timed.values() for ms in values]
            p50, p95 = percentile(every, 50), percentile(every, 95)
            goal = f" [target p95 <= 100 ms: {target(p95 <= 100)}]" if mode == "hybrid" else ""
            print(f"    {mode} all: p50 {p50:.1f} ms, p95 {p95:.1f} ms{goal}", flush=True)
            print_classes(mode, timed)
        rss, peak = memory_mb(daemon.pid)
        total = sum(f.stat().st_size for f in home.glob("coffer.db*"))
        print(
            f"    daemon RSS after vector searches {rss:.0f} MB (peak since restart "
            f"{peak:.0f} MB); database with vectors {total / 1e6:.1f} MB",
            flush=True,
        )
    return daemon


def target(ok: bool) -> str:
    return verdict(ok)


RESTARTS = 3


def measure_restart(
    client: Client, daemon: subprocess.Popen[bytes], home: Path, socket_path: Path, repo: Path
) -> subprocess.Popen[bytes]:
    """(g) restart to idle: the daemon stopped and started again on the same home, timed
    from its start until the status says its start-up reconcile is done and nothing is
    queued or being indexed (everything already indexed); median of RESTARTS. Returns the
    daemon, restarted."""
    took = []
    for _ in range(RESTARTS):
        stop_daemon(daemon, grace_s=60)
        started = time.perf_counter()
        daemon = start_daemon(repo, home, socket_path)
        wait(lambda: indexer_idle(client.get("/api/v1/status")), daemon, 300, 0.25)
        took.append(time.perf_counter() - started)
    print(
        f"(g) restart to idle: median {median(took):.2f} s over {RESTARTS} (min "
        f"{min(took):.2f}, max {max(took):.2f}) [target <= 5 s: {target(median(took) <= 5)}]",
        flush=True,
    )
    return daemon


def run(
    documents: int, timeout: float, home: Path, socket_path: Path, repo: Path, vectors: bool
) -> None:
    docs = home / "knowledge" / KB / "docs"
    docs.mkdir(parents=True)
    started = time.perf_counter()
    files, corpus_bytes = build_corpus(docs, home / "src", documents)
    print(f"machine: {machine()}; code: {describe_code(repo)}", flush=True)
    print(
        f"corpus: {len(files):,} files, {corpus_bytes / 1e6:.1f} MB, "
        f"written in {time.perf_counter() - started:.0f} s",
        flush=True,
    )

    client = Client(socket_path)
    os.environ.setdefault(EMBED_KEY, "sk-bench")  # the daemon inherits it (h)
    started = time.perf_counter()
    daemon = start_daemon(repo, home, socket_path)
    try:
        # (a) cold index; polls are 0.5 s apart so as not to slow the machine they measure
        status_done: list[float] = []
        last = [-1, 0.0]  # document count, when it last changed

        def indexed() -> bool:
            status = client.get("/api/v1/status")
            now = time.perf_counter()
            if status["startup_reconcile_done"] and not status_done:
                status_done.append(now - started)
            count = int(client.get(client.kb(KB, "/metrics"))["documents"])
            if count != last[0]:
                last[:] = [count, now]
            elif status_done and status["queue_depth"] == 0 and now - last[1] > STALL_S:
                raise RuntimeError(f"indexing stalled at {count:,} of {len(files):,} documents")
            return bool(status_done) and count >= len(files)

        try:
            wait(indexed, daemon, timeout, 0.5)
        except TimeoutError:
            print(f"(a) cold index: TIMED OUT after {timeout:.0f} s with {last[0]:,} documents")
            raise
        cold_s = time.perf_counter() - started
        rate = len(files) / cold_s
        print(
            f"(a) cold index: {last[0]:,} documents searchable {cold_s:.1f} s after start = "
            f"{rate:,.0f} files/s, {corpus_bytes / 1e6 / cold_s:.2f} MB/s "
            f"(status said startup_reconcile_done at {status_done[0]:.1f} s) "
            f"[target >= 2,500 files/s: {target(rate >= 2500)}]",
            flush=True,
        )

        # (b) memory
        rss, peak = memory_mb(daemon.pid)
        print(
            f"(b) daemon RSS after indexing {rss:.0f} MB, peak (VmHWM) {peak:.0f} MB "
            f"[target peak <= 250 MB: {target(peak <= 250)}]",
            flush=True,
        )

        # (f) is measured now, before the edits below add to it
        db = home / "coffer.db"
        wal = home / "coffer.db-wal"
        db_bytes = db.stat().st_size
        wal_bytes = wal.stat().st_size if wal.exists() else 0

        # (c) no-op reconcile
        noop = []
        for _ in range(3):
            t0 = time.perf_counter()
            result = client.post(client.kb(KB, "/reindex"))
            noop.append(time.perf_counter() - t0)
        changed = {k: v for k, v in result.items() if k.startswith("documents_") and v}
        print(
            f"(c) no-op reconcile: median {median(noop):.2f} s over 3 (min {min(noop):.2f}, "
            f"max {max(noop):.2f}); last result {changed} (should be only unchanged) "
            f"[target <= 3 s: {target(median(noop) <= 3)}]",
            flush=True,
        )

        # (d) keyword queries over the socket
        classes = {**QUERY_CLASSES}
        classes["short"] = [*classes["short"], f"uniq{int(files[-1][4:7])}x7"]
        timed = query_latencies(client, classes, 10)
        latencies = [ms for values in timed.values() for ms in values]
        p50, p95 = percentile(latencies, 50), percentile(latencies, 95)
        print(
            f"(d) keyword query over the socket, {len(latencies)} queries "
            f"({sum(map(len, classes.values()))} distinct): p50 {p50:.1f} ms, p95 {p95:.1f} ms, "
            f"max {max(latencies):.1f} ms "
            f"[target p50/p95 <= 10/40 ms: {target(p50 <= 10 and p95 <= 40)}]",
            flush=True,
        )
        print_classes("keyword", timed)

        # (e) save-to-searchable
        def found(token: str) -> bool:
            body = client.post(client.kb(KB, "/search"), {"query": token, "top_k": 1})
            return bool(body["passages"])

        rng = random.Random(7)
        saves = []
        for i, relpath in enumerate(rng.sample(files, 30)):
            token = f"zq{i:03d}x{rng.randrange(10**6):06d}7"
            t0 = time.perf_counter()
            with open(docs / relpath, "a", encoding="utf-8") as fh:
                fh.write(f"\n- edit {token}\n")
            wait(lambda token=token: found(token), daemon, 120, 0.005)
            saves.append((time.perf_counter() - t0) * 1000)
        s50, s95 = percentile(saves, 50), percentile(saves, 95)
        print(
            f"(e) save-to-searchable over {len(saves)} edits: p50 {s50:.0f} ms, "
            f"p95 {s95:.0f} ms, max {max(saves):.0f} ms [target p50 <= 100 ms: "
            f"{target(s50 <= 100)}]",
            flush=True,
        )

        print(
            f"(f) database after cold index: coffer.db {db_bytes / 1e6:.1f} MB + wal "
            f"{wal_bytes / 1e6:.1f} MB = {(db_bytes + wal_bytes) / 1e6:.1f} MB = "
            f"{(db_bytes + wal_bytes) / corpus_bytes:.2f}x the corpus text "
            f"({corpus_bytes / 1e6:.1f} MB)",
            flush=True,
        )
        if vectors:
            daemon = measure_vectors(client, daemon, classes, home, socket_path, repo)
        daemon = measure_restart(client, daemon, home, socket_path, repo)
    finally:
        stop_daemon(daemon, grace_s=60)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--documents", type=int, default=250_000)
    parser.add_argument("--timeout", type=float, default=1800, help="cold index limit, s")
    parser.add_argument("--no-vectors", dest="vectors", action="store_false", help="skip (h)")
    add_repo_argument(parser)
    args = parser.parse_args()
    home = scratch_home("scale")
    socket_path = Path(f"/tmp/coffer-bench-scale-{os.getpid()}.sock")
    try:
        run(args.documents, args.timeout, home, socket_path, args.repo, args.vectors)
    finally:
        shutil.rmtree(home, ignore_errors=True)
        socket_path.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
    exit_by_targets()
