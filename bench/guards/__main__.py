"""Run every guard at quick settings, one after another (`make bench`, or
`python -m bench.guards [NAME ...]` for some of them); exit status 1 when any missed a
target or failed. Each guard's figures and targets are its own output.

install_weight and install_platforms are left out unless named: they ask the package
index (the first installs Coffer from it)."""

from __future__ import annotations

import subprocess
import sys
import time

QUICK: dict[str, list[str]] = {
    "parser_growth": [],
    "scifact_keyword": [],
    "tldr_index": [],
    "two_kbs": ["--reps", "10"],
    "search_all": [],
    "daemon_latency": ["--idle-seconds", "10", "--edits", "30"],
    "idle_rss": ["--settle", "40"],  # bulk workers stop after 30 s without work (pool.IDLE_S)
    "lsp_latency": ["--spawns", "10", "--rounds", "10"],
    "attach": ["--runs", "1"],
    "cjk_index": [],
    "cjk_questions": ["--limit", "300"],
    "scifact_vectors": [],
    "multilingual_search": ["--limit", "100"],
    "embedding_lanes": ["--queries", "20", "--saves", "3"],
    "noop_pass": ["--documents", "40000"],
    "scale": ["--documents", "40000"],
    "responsiveness": ["--side-by-side"],
    "fuzz": ["--examples", "60"],
    "mcp_fuzz": ["--cases", "2000"],
    "soak": ["--minutes", "3"],
    "helper_kills": ["--minutes", "2", "--vectors"],
}
ON_REQUEST: dict[str, list[str]] = {"install_weight": [], "install_platforms": []}


def main() -> int:
    named = sys.argv[1:] or list(QUICK)
    unknown = [n for n in named if n not in QUICK and n not in ON_REQUEST]
    if unknown:
        raise SystemExit(f"no guard {unknown}; the guards: {', '.join([*QUICK, *ON_REQUEST])}")
    failed = []
    for name in named:
        command = [sys.executable, "-m", f"bench.guards.{name}", *{**QUICK, **ON_REQUEST}[name]]
        print(f"\n=== {' '.join(command[1:])}", flush=True)
        started = time.monotonic()
        code = subprocess.run(command).returncode
        print(f"=== {name}: exit {code} after {time.monotonic() - started:.0f} s", flush=True)
        if code:
            failed.append(name)
    print(f"\nguards: {len(named) - len(failed)} passed, {len(failed)} failed {failed or ''}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
