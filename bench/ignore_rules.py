"""What a `.gitignore` of many wildcard patterns costs a reindex: for 1k, 20k and 100k
patterns of the hostile kind (`*3f2a*.tmp1`, `build7/**/x?y*`, each with a different word),
the seconds to read and compile the rules of a tree and to decide, for every note of a
tree of --paths notes in ten folders, whether it is ignored (what a full scan does), and
the milliseconds per path. Each size runs in a process of its own with the checkout's code
first on PYTHONPATH, and is stopped after --timeout seconds (`>N s`).

    .venv/bin/python -m bench.ignore_rules [--repo PATH] [--paths N] [--timeout SECONDS]

--repo measures another checkout (`git archive <commit> cofferd | tar -x -C DIR`).
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import REPO, machine

SIZES = (1_000, 20_000, 100_000)


def patterns(n: int) -> str:
    rnd = random.Random(n)
    lines = [
        f"*{rnd.randrange(16**6):x}*.tmp{i % 7}" if i % 3 else f"build{i}/**/x?y*" for i in range(n)
    ]
    return "\n".join([*lines, "*.log.md", "!keep*.md"]) + "\n"


def paths(count: int) -> list[str]:
    rnd = random.Random(7)
    return [f"notes/sub{i % 10}/note{i}-{rnd.randrange(16**6):x}.md" for i in range(count)]


def worker(n: int, count: int) -> None:
    """Prints compile seconds and decide seconds for n patterns (run in its own process)."""
    from cofferd.infrastructure.files.ignore_rules import IgnoreRules

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        (root / ".gitignore").write_text(patterns(n))
        rules = IgnoreRules(lambda: root)
        start = time.perf_counter()
        rules.excluded("warm.md")  # reads and compiles the top folder's rules
        compiled = time.perf_counter() - start
        start = time.perf_counter()
        ignored = sum(rules.excluded(path) for path in paths(count))
        decided = time.perf_counter() - start
        problems = "; ".join(rules.problems.values())
    print(f"{compiled:.3f} {decided:.3f} {ignored} {problems}")


def measure(n: int, repo: Path, count: int, timeout: float) -> str:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(repo), str(REPO)]))
    command = [
        sys.executable,
        "-m",
        "bench.ignore_rules",
        "--worker",
        str(n),
        "--paths",
        str(count),
    ]
    try:
        out = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=timeout, cwd=repo
        )
    except subprocess.TimeoutExpired:
        return f"| {n:,} | >{timeout:.0f} s | | | |"
    if out.returncode:
        return f"| {n:,} | failed: {out.stderr.strip().splitlines()[-1]} | | | |"
    compiled, decided, _ignored, *problems = out.stdout.split(" ", 3)
    per_path = float(decided) / count * 1000
    note = problems[0].strip() if problems else ""
    return (
        f"| {n:,} | {float(compiled):.2f} s | {float(decided):.2f} s | {per_path:.3f} ms | {note} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=REPO)
    parser.add_argument("--paths", type=int, default=2_000)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("sizes", nargs="*", type=int, default=list(SIZES))
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.paths)
        return
    print(machine())
    print(f"{args.paths:,} notes in ten folders; code of {args.repo}\n")
    print("| patterns | read and compile | decide every note | per note | reported |")
    print("|---|---|---|---|---|")
    for n in args.sizes:
        print(measure(n, args.repo.resolve(), args.paths, args.timeout), flush=True)


if __name__ == "__main__":
    main()
