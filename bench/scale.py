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
* (f) database size (coffer.db + coffer.db-wal) against the corpus text bytes.

Run it at 38,000 too to see how each cost grows:

    .venv/bin/python -m bench.scale [--documents 250000] [--timeout 1800] [--repo PATH]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import time
from pathlib import Path

from bench.common import (
    add_repo_argument,
    describe_code,
    extract_tldr,
    machine,
    median,
    memory_mb,
    percentile,
    scratch_home,
    start_daemon,
    stop_daemon,
    wait,
)
from cofferctl.client import Client

KB = "big"
STALL_S = 120  # the count has not moved for this long while the daemon is idle: give up

QUERIES = [
    "tar", "list files", "the", "file", "git commit", "docker run", "show help", "version",
    "directory", "network interface", "extract archive", "kill process",
    "ffmpeg", "chmod", "k8s", "config.yaml", "xdg-open", "zzqnotaword", "pg_dump",
    "压缩", "文件", "目录", "进程", "ファイル", "ディレクトリ", "파일", "압축",
    "git 提交", "docker 镜像",
]  # fmt: skip
# ... plus one `uniq<copy>x7` identifier from the corpus, added at run time: 30 in all.


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


def target(ok: bool) -> str:
    return "met" if ok else "MISSED"


def run(documents: int, timeout: float, home: Path, socket_path: Path, repo: Path) -> None:
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
            f"[target <= 5 s: {target(median(noop) <= 5)}]",
            flush=True,
        )

        # (d) keyword queries over the socket
        queries = [*QUERIES, f"uniq{int(files[-1][4:7])}x7"]
        for q in queries:  # warm up
            client.post(client.kb(KB, "/search"), {"query": q})
        latencies = []
        for _ in range(10):
            for q in queries:
                t0 = time.perf_counter()
                client.post(client.kb(KB, "/search"), {"query": q})
                latencies.append((time.perf_counter() - t0) * 1000)
        p50, p95 = percentile(latencies, 50), percentile(latencies, 95)
        print(
            f"(d) keyword query over the socket, {len(latencies)} queries ({len(queries)} "
            f"distinct): p50 {p50:.1f} ms, p95 {p95:.1f} ms, max {max(latencies):.1f} ms "
            f"[target p50/p95 <= 10/40 ms: {target(p50 <= 10 and p95 <= 40)}]",
            flush=True,
        )

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
    finally:
        stop_daemon(daemon, grace_s=60)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--documents", type=int, default=250_000)
    parser.add_argument("--timeout", type=float, default=1800, help="cold index limit, s")
    add_repo_argument(parser)
    args = parser.parse_args()
    home = scratch_home("scale")
    socket_path = Path(f"/tmp/coffer-bench-scale-{os.getpid()}.sock")
    try:
        run(args.documents, args.timeout, home, socket_path, args.repo)
    finally:
        shutil.rmtree(home, ignore_errors=True)
        socket_path.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
