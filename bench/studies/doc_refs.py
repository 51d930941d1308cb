"""Issue 22 figures: what naming a document costs the daemon, against a real cofferd with
tldr-pages indexed (~38,400 files): `GET .../documents/DOC` by id, by path, by what people
call a document (its path without `.md`, the end of its path, its title) and for a name
that no document has, answered with suggestions of close names (each read every
document's id, path and title of the knowledge base).

    .venv/bin/python -m bench.studies.doc_refs [--rounds 20] [--repo PATH]
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from pathlib import Path

from bench.common import (
    add_repo_argument,
    describe_code,
    extract_tldr,
    machine,
    median,
    percentile,
    scratch_home,
    start_daemon,
    stop_daemon,
    wait,
)
from cofferctl.client import ApiError, Client

# (the rule that finds it, the reference); tldr-pages holds each page in up to 16
# languages (pages/, pages.de/, ...), so a name or a title fits several documents
REFERENCES = [
    ("path", "pages/common/tar.md"),
    ("path without .md", "pages/common/tar"),
    ("end of the path", "common/tar"),
    ("title", "git bisect"),
    ("a typo: suggestions", "gti-bisect"),
    ("no such path: suggestions", "pages/common/tarball-extract"),
]


def time_ms(client: Client, path: str) -> tuple[float, str]:
    """(ms, what it answered: ok or the error code) of one GET."""
    started = time.perf_counter()
    try:
        client.get(path)
        answer = "ok"
    except ApiError as exc:
        answer = exc.code
    return (time.perf_counter() - started) * 1000, answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    add_repo_argument(parser)
    args = parser.parse_args()
    home = scratch_home("doc-refs")
    socket_path = Path(f"/tmp/coffer-bench-{os.getpid()}.sock")
    docs = home / "knowledge" / "tldr" / "docs"
    docs.parent.mkdir(parents=True)
    extract_tldr(home / "src").rename(docs)
    daemon = start_daemon(args.repo, home, socket_path)
    client = Client(socket_path)
    try:
        wait(
            lambda: client.get("/api/v1/status")["startup_reconcile_done"],
            daemon, timeout=600, interval=0.5,
        )  # fmt: skip
        count = client.get(client.kb("tldr", "/metrics"))["documents"]
        doc_id = client.get(client.document("tldr", "pages/common/tar.md"))["id"]
        print(f"machine: {machine()}\ncode: {describe_code(args.repo)}")
        print(f"{count} documents; GET .../documents/DOC, {args.rounds} rounds: median (p90) ms")
        for what, ref in [("id", doc_id), *REFERENCES]:
            times, answers = [], set()
            for _ in range(args.rounds):
                ms, answer = time_ms(client, client.document("tldr", ref))
                times.append(ms)
                answers.add(answer)
            spread = f"{median(times):.1f} ({percentile(times, 90):.1f})"
            print(f"  {what:<28}{spread:<16}{', '.join(sorted(answers))}")
    finally:
        stop_daemon(daemon)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
