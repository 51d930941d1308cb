"""The daemon's idle memory after indexing tldr-pages, without vectors: the daemon alone and
each of its child processes (document workers, converter), RSS and PSS.

A real `cofferd` (this venv's, running the code of `--repo`, default this checkout) starts
on a scratch data home whose KB `tldr` holds tldr-pages (~38,400 files; keyword search
only, the default). Once every file is indexed or skipped and nothing is queued, the
daemon is left alone for `--settle` s, then /proc is read for it and every process below
it: VmRSS and VmHWM (peak) from status, Pss from smaps_rollup (shared pages divided among
the processes that map them, so the PSS figures add up and the RSS figures do not).

    .venv/bin/python -m bench.guards.idle_rss [--settle 10] [--repo PATH]
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from pathlib import Path

from bench.common import (
    add_repo_argument,
    count_documents,
    descendants,
    describe_code,
    exit_by_targets,
    extract_tldr,
    indexer_idle,
    kb_status,
    machine,
    memory_mb,
    pss_mb,
    scratch_home,
    start_daemon,
    stop_daemon,
    verdict,
    wait,
)
from cofferctl.client import Client

KB = "tldr"
TARGET_RSS_MB = 150  # issue 20's: the daemon and its workers, idle


def command(pid: int) -> str:
    words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    return " ".join(w.decode(errors="replace") for w in words if w)[:80]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--settle", type=float, default=10, help="idle seconds before reading")
    parser.add_argument("--timeout", type=float, default=1200, help="indexing limit, s")
    add_repo_argument(parser)
    args = parser.parse_args()

    home = scratch_home("idle-rss")
    socket_path = Path(f"/tmp/coffer-bench-idle-rss-{os.getpid()}.sock")
    docs = home / "knowledge" / KB / "docs"
    docs.parent.mkdir(parents=True)
    extract_tldr(home / "src").rename(docs)
    expected = count_documents(docs)
    client = Client(socket_path, timeout=5)
    started = time.perf_counter()
    daemon = start_daemon(args.repo, home, socket_path)
    try:

        def indexed() -> bool:
            status = client.get("/api/v1/status")
            tldr = kb_status(status, KB)
            return indexer_idle(status) and tldr["documents"] + tldr["skipped"] >= expected

        wait(indexed, daemon, args.timeout, 0.5)
        indexed_s = time.perf_counter() - started
        time.sleep(args.settle)  # idle is the point: nothing to poll for
        rows = []
        for pid in [daemon.pid, *descendants(daemon.pid)]:
            try:
                rss, peak = memory_mb(pid)
                rows.append((pid, command(pid), rss, peak, pss_mb(pid)))
            except (OSError, KeyError):  # ended meanwhile, or a zombie
                pass
    finally:
        stop_daemon(daemon)
        shutil.rmtree(home, ignore_errors=True)
        socket_path.unlink(missing_ok=True)

    print(f"machine: {machine()}")
    print(f"code: {describe_code(args.repo)}")
    print(
        f"tldr-pages: {expected:,} documents indexed {indexed_s:.1f} s after start "
        f"(keyword only); then idle for {args.settle:.0f} s"
    )
    for i, (pid, cmd, rss, peak, pss) in enumerate(rows):
        label = "daemon" if i == 0 else "child"
        print(
            f"  {label:<6} {pid:>7}  RSS {rss:6.1f} MB (peak {peak:6.1f})  PSS {pss:6.1f} MB  {cmd}"
        )
    children = rows[1:]
    print(
        f"  children: {len(children)}, RSS {sum(r[2] for r in children):.1f} MB, "
        f"PSS {sum(r[4] for r in children):.1f} MB"
    )
    rss = sum(r[2] for r in rows)
    print(
        f"  daemon + children: RSS {rss:.1f} MB, PSS {sum(r[4] for r in rows):.1f} MB "
        f"[target RSS <= {TARGET_RSS_MB} MB: {verdict(rss <= TARGET_RSS_MB, 'idle RSS')}]"
    )


if __name__ == "__main__":
    main()
    exit_by_targets()
