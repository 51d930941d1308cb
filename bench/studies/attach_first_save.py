"""A note saved in the first seconds after its folder is attached: when is it searchable?

A real cofferd (of `--repo`, and of `--old` in turns); a folder with a few notes is
attached (`POST /api/v1/knowledge_bases` with its path), then a new note is written into it
`--after` seconds later, and the time from that write until search finds the note is
taken. Medians over `--rounds` runs of each checkout.

    .venv/bin/python -m bench.studies.attach_first_save [--old DIR] [--rounds 5] [--after 0.3,0.8]
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

from bench.common import (
    add_comparison_arguments,
    describe_code,
    machine,
    median,
    scratch_home,
    start_daemon,
    stop_daemon,
    wait,
)
from cofferctl.client import Client


def one_run(repo: Path, after_s: float) -> float:
    home = scratch_home("attach-first-save")
    try:
        folder = home / "folder"
        folder.mkdir()
        for n in range(20):
            (folder / f"old{n}.md").write_text(f"# Old {n}\n\nan older note {n}\n")
        socket_path = home / "s.sock"
        daemon = start_daemon(repo, home / "home", socket_path)
        try:
            client = Client(socket_path)
            wait(lambda: client.get("/api/v1/status")["startup_reconcile_done"], daemon, 60, 0.02)
            client.post("/api/v1/knowledge_bases", {"name": "fresh", "path": str(folder)})
            time.sleep(after_s)
            (folder / "new.md").write_text("# New\n\nzqfirstsavetoken in the first seconds\n")
            written = time.perf_counter()

            def found() -> bool:
                reply = client.post(client.kb("fresh", "/search"), {"query": "zqfirstsavetoken"})
                return bool(reply["passages"])

            wait(found, daemon, 30, 0.005)
            return time.perf_counter() - written
        finally:
            stop_daemon(daemon)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    add_comparison_arguments(parser)
    parser.add_argument("--after", default="0.3,0.8", help="seconds after the attach, each")
    args = parser.parse_args()
    rounds = max(args.rounds, 5) if args.rounds == 1 else args.rounds
    checkouts = [("new", args.repo)] + ([("old", args.old)] if args.old else [])
    print(f"machine: {machine()}")
    for label, repo in checkouts:
        print(f"{label}: {describe_code(repo)}")
    for after in (float(x) for x in args.after.split(",")):
        taken: dict[str, list[float]] = {label: [] for label, _ in checkouts}
        for _ in range(rounds):
            for label, repo in checkouts:
                taken[label].append(one_run(repo, after))
        for label, _ in checkouts:
            spread = ", ".join(f"{t:.2f}" for t in sorted(taken[label]))
            print(
                f"written {after:g} s after the attach, {label}: searchable after "
                f"median {median(taken[label]):.2f} s ({spread})"
            )


if __name__ == "__main__":
    main()
