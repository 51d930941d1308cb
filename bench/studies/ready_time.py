"""Issue 7 figure: time from process start to READY=1 (sd_notify), with an empty data
home and with the tldr-pages corpus already indexed (median of 5 each).

    .venv/bin/python -m bench.studies.ready_time
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

from bench.common import extract_tldr, machine, median, scratch_home
from cofferctl.client import Client
from tests.support.cofferd_process import start_cofferd

BIN = Path(sys.executable).parent


def time_to_ready(home: Path) -> float:
    run = Path(tempfile.mkdtemp(dir="/tmp", prefix="cof"))
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(run / "notify"))
    notify.settimeout(120)
    env = {**os.environ, "COFFER_HOME": str(home), "COFFER_SOCKET": str(run / "s.sock"),
           "NOTIFY_SOCKET": str(run / "notify")}  # fmt: skip
    started = time.perf_counter()
    daemon = start_cofferd(env, log_level="WARNING")
    try:
        while "READY=1" not in notify.recv(4096).decode():
            pass
        elapsed = time.perf_counter() - started
        client = Client(run / "s.sock")
        while not client.get("/api/v1/status")["startup_reconcile_done"]:
            time.sleep(0.2)  # let the start-up reconcile finish before the next run
    finally:
        daemon.terminate()
        daemon.wait(60)
        notify.close()
        shutil.rmtree(run, ignore_errors=True)
    return elapsed * 1000


def main() -> None:
    empty = [time_to_ready(scratch_home("ready-empty")) for _ in range(5)]
    home = scratch_home("ready-tldr")
    docs = home / "knowledge" / "tldr" / "docs"
    docs.parent.mkdir(parents=True)
    extract_tldr(home / "src").rename(docs)
    time_to_ready(home)  # the first start indexes the corpus
    indexed = [time_to_ready(home) for _ in range(5)]
    print(f"machine: {machine()}")
    print(f"start to READY=1, empty data home: median {median(empty):.0f} ms")
    print(
        f"start to READY=1, tldr-pages (38,366 documents) indexed: median {median(indexed):.0f} ms"
    )


if __name__ == "__main__":
    main()
