"""Fuzz `cofferctl mcp` over its pipes against a real cofferd, for longer than
tests/clients/mcp/test_mcp_fuzz.py does, and count what every kind of case was answered.

One `cofferctl mcp` process gets every case (the test's generator: schema-derived tool
calls, random params, random JSON, malformed lines, deep nesting, lone surrogates, huge
ids, unknown methods, batches, notifications; plus `--oversize` lines over the size
bound), then a ping; then its stdin closes. Printed: per kind of case, how many got a
result (a tool's own failure: isError), an error (per code), an error with id null, or no
answer (notifications, answers, blank lines); the errors with id null by code; then every
problem (a crash, a missing, extra or malformed answer) and every internal error (-32603)
with the line that caused it, and the tool calls cofferd failed with a 500.

    .venv/bin/python -m bench.guards.mcp_fuzz [--cases 20000] [--seed N] [--oversize 2]
"""

from __future__ import annotations

import argparse
import random
import re
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench.common import exit_by_targets, machine, verdict
from cofferctl.mcp.protocol import MAX_LINE_BYTES
from tests.support.daemon import cleanup, new_daemon
from tests.support.mcp_fuzzing import (
    SEED,
    Generator,
    McpPipe,
    Tally,
    non_utf8_kb,
    run_fuzz,
    seed_kb,
)

SHOW = 300  # bytes of a line shown
KB = "fuzz"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--oversize", type=int, default=2, help="lines over the size bound")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    print(f"seed: {args.seed}   cases: {args.cases} (+{args.oversize} oversize)")
    with tempfile.TemporaryDirectory(prefix="coffer-bench-mcp-fuzz-") as tmp:
        scratch = Path(tmp)
        d = new_daemon(scratch)
        try:
            d.start(COFFER_AGENT_ROOTS=str(d.agent_root))
            kbs = [KB, f"{KB}-b"]
            refs = seed_kb(d, KB)
            d.client.post("/api/v1/knowledge_bases", {"name": kbs[1]})
            kbs.append(non_utf8_kb(d, scratch, f"{KB}-odd"))
            generator = Generator(random.Random(args.seed), kbs, [*refs, "heron.md"])
            pad = b"x" * (MAX_LINE_BYTES + 1)
            oversize = [("oversize", b'{"jsonrpc":"2.0","id":"big","p":"' + pad + b'"}')]
            pipe = McpPipe(d.socket, scratch / "mcp.log")
            pipe.call("init", "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}})
            started = time.perf_counter()
            tally = run_fuzz(pipe, generator, args.cases, oversize * args.oversize, timeout=1800)
            elapsed = time.perf_counter() - started
        finally:
            if d.proc is not None and d.proc.poll() is None:
                d.stop()
            cleanup(d)
    report(tally, args.cases + args.oversize, elapsed)


def report(tally: Tally, cases: int, elapsed: float) -> None:
    outcomes = sorted({o for counts in tally.outcomes.values() for o in counts})
    width = max(len(k) for k in tally.outcomes) + 2
    print(f"\n{'kind':<{width}}{'cases':>7}  " + "  ".join(outcomes))
    total: Counter[str] = Counter()
    for kind in sorted(tally.outcomes):
        counts = tally.outcomes[kind]
        total.update(counts)
        cells = "  ".join(f"{counts.get(o, 0):>{len(o)}}" for o in outcomes)
        print(f"{kind:<{width}}{counts.total():>7}  {cells}")
    cells = "  ".join(f"{total.get(o, 0):>{len(o)}}" for o in outcomes)
    print(f"{'all':<{width}}{total.total():>7}  {cells}")
    print(
        "\nerrors with id null: "
        + ", ".join(f"{o} x{n}" for o, n in sorted(tally.null_codes.items()))
    )
    crashes = sum("exited" in p for p in tally.problems)
    print(
        f"\n{cases} cases in {elapsed:.1f} s ({cases / elapsed:.0f}/s); crashes={crashes}, "
        f"problems={len(tally.problems)}, internal errors (-32603)={len(tally.internal)}"
    )
    clean = not (tally.problems or tally.internal or tally.daemon_failed)
    print(f"[target none of them (issue 21): {verdict(clean)}]")
    for problem in tally.problems[:50]:
        print(f"  problem: {problem}")
    for kind, line, answer in tally.internal[:50]:
        print(f"  internal ({kind}): {line[:SHOW]!r}\n    -> {answer['error']['message'][:SHOW]}")
    tools = Counter(_tool(line) for line, _ in tally.daemon_failed)
    print(f"tool calls cofferd failed (500): {len(tally.daemon_failed)} {dict(tools)}")
    for line, text in tally.daemon_failed[:3]:
        print(f"  {line[:SHOW]!r}\n    -> {text[:SHOW]}")


def _tool(line: bytes) -> str:
    found = re.search(rb'"name": ?"([a-z_]+)"', line)
    return found.group(1).decode() if found else "?"


if __name__ == "__main__":
    main()
    exit_by_targets()
