"""Restart to idle (twice: the first start of new code migrates the index) and three no-op
full passes on a prebuilt home, with the daemon's peak RSS. Run it on a copy of the home
for each checkout: a home migrated by newer code cannot be opened by older code.

    cp -a HOME /dev/shm/h-old && cp -a HOME /dev/shm/h-new
    .venv/bin/python -m bench.studies.restart_noop /dev/shm/h-old --repo /tmp/old-checkout
    .venv/bin/python -m bench.studies.restart_noop /dev/shm/h-new
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from bench.common import (
    add_repo_argument,
    describe_code,
    indexer_idle,
    machine,
    memory_mb,
    start_daemon,
    stop_daemon,
    wait,
)
from bench.guards.scale import KB
from cofferctl.client import Client


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("home", type=Path, help="a prebuilt data home (bench.guards.scale's)")
    add_repo_argument(parser)
    args = parser.parse_args()
    print(f"machine: {machine()}; code: {describe_code(args.repo)}", flush=True)
    socket_path = Path(f"/tmp/coffer-bench-restart-{os.getpid()}.sock")
    client = Client(socket_path)
    for start in range(2):
        started = time.perf_counter()
        daemon = start_daemon(args.repo, args.home, socket_path)
        try:
            wait(lambda: client.get("/api/v1/status"), daemon, 600, 0.01)
            serving = time.perf_counter() - started
            wait(lambda: indexer_idle(client.get("/api/v1/status")), daemon, 900, 0.02)
            idle = time.perf_counter() - started
            print(f"start {start}: serving {serving:.2f} s, idle {idle:.2f} s", flush=True)
            if start == 1:
                for _ in range(3):
                    began = time.perf_counter()
                    client.post(client.kb(KB, "/reindex"))
                    print(f"  no-op pass {time.perf_counter() - began:.2f} s", flush=True)
                rss, peak = memory_mb(daemon.pid)
                print(f"  RSS {rss:.0f} MB, peak {peak:.0f} MB", flush=True)
        finally:
            stop_daemon(daemon, grace_s=60)
    socket_path.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
