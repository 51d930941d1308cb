"""The two costs of a large, unchanged KB, two checkouts side by side on one home: a no-op
reconcile (`POST .../reindex` when nothing changed) and restart to idle (start until the
start-up reconcile is done and nothing is queued), with the daemon's memory after them.

The corpus is `bench.guards.scale`'s (tldr-pages replicated to `--documents` files), indexed once
by `--repo`'s daemon; then each round starts every checkout's daemon on it in turn
(`--old` first), so both meet the same files, database and page cache:

    .venv/bin/python -m bench.guards.noop_pass [--documents 250000] [--old DIR] [--rounds 2]
        [--home DIR]   # keep the built home there and use it again next time
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from pathlib import Path

from bench.common import (
    add_comparison_arguments,
    describe_code,
    exit_by_targets,
    indexer_idle,
    machine,
    median,
    memory_mb,
    scratch_home,
    start_daemon,
    stop_daemon,
    verdict,
    wait,
)
from bench.guards.scale import KB, build_corpus
from cofferctl.client import Client

NOOPS = 3  # no-op reconciles per daemon start
POLL_S = 0.05


def build(home: Path, documents: int, repo: Path, client: Client, socket_path: Path) -> None:
    """The corpus, indexed (skipped when `home` holds it already)."""
    docs = home / "knowledge" / KB / "docs"
    if docs.exists():
        return
    docs.mkdir(parents=True)
    files, corpus_bytes = build_corpus(docs, home / "src", documents)
    print(f"corpus: {len(files):,} files, {corpus_bytes / 1e6:.1f} MB", flush=True)
    started = time.perf_counter()
    daemon = start_daemon(repo, home, socket_path)
    try:
        wait(lambda: indexer_idle(client.get("/api/v1/status")), daemon, 3600, 1.0)
        print(f"cold index: {time.perf_counter() - started:.0f} s", flush=True)
    finally:
        stop_daemon(daemon, grace_s=120)


def one_round(repo: Path, home: Path, client: Client, socket_path: Path) -> dict[str, float]:
    started = time.perf_counter()
    daemon = start_daemon(repo, home, socket_path)
    try:
        wait(lambda: indexer_idle(client.get("/api/v1/status")), daemon, 600, POLL_S)
        restart = time.perf_counter() - started
        noops = []
        for _ in range(NOOPS):
            t0 = time.perf_counter()
            result = client.post(client.kb(KB, "/reindex"))
            noops.append(time.perf_counter() - t0)
            changed = {k: v for k, v in result.items() if k.startswith("documents_") and v}
            assert list(changed) == ["documents_unchanged"], changed
        rss, peak = memory_mb(daemon.pid)
    finally:
        stop_daemon(daemon, grace_s=120)
    return {"restart": restart, "noop": median(noops), "rss": rss, "peak": peak}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--documents", type=int, default=250_000)
    parser.add_argument("--home", type=lambda t: Path(t).resolve(), help="a home to keep")
    add_comparison_arguments(parser)
    args = parser.parse_args()
    home = args.home or scratch_home("noop")
    socket_path = Path(f"/tmp/coffer-bench-noop-{os.getpid()}.sock")
    client = Client(socket_path)
    repos = {"OLD": args.old, "NEW": args.repo} if args.old else {"NEW": args.repo}
    print(f"machine: {machine()}", flush=True)
    for label, repo in repos.items():
        print(f"{label}: {describe_code(repo)}", flush=True)
    try:
        build(home, args.documents, args.repo, client, socket_path)
        seen: dict[str, list[dict[str, float]]] = {label: [] for label in repos}
        for round_no in range(args.rounds):
            for label, repo in repos.items():
                got = one_round(repo, home, client, socket_path)
                seen[label].append(got)
                print(
                    f"round {round_no + 1} {label}: restart to idle {got['restart']:.2f} s, "
                    f"no-op reconcile {got['noop']:.2f} s (median of {NOOPS}), "
                    f"RSS {got['rss']:.0f} MB, peak {got['peak']:.0f} MB",
                    flush=True,
                )
        for label, rounds in seen.items():
            print(
                f"{label}: restart to idle {median([r['restart'] for r in rounds]):.2f} s, "
                f"no-op reconcile {median([r['noop'] for r in rounds]):.2f} s, "
                f"peak {median([r['peak'] for r in rounds]):.0f} MB "
                f"(medians of {len(rounds)} rounds) [targets <= 5 s: "
                f"{verdict(median([r['restart'] for r in rounds]) <= 5)}, <= 3 s: "
                f"{verdict(median([r['noop'] for r in rounds]) <= 3)}]",
                flush=True,
            )
    finally:
        if args.home is None:
            shutil.rmtree(home, ignore_errors=True)
        socket_path.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
    exit_by_targets()
