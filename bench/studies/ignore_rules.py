"""What a `.gitignore` of many wildcard patterns costs a reindex: for 1k, 20k and 100k
patterns of the hostile kind (`*3f2a*.tmp1`, `build7/**/x?y*`, each with a different word),
the seconds to read and compile the rules of a tree, the longest another thread waited
meanwhile (it sleeps 0.5 ms at a time: what holds the GIL holds the daemon's event loop
up as long), and the time to decide, for every note of a tree of --paths notes in ten
folders, whether it is ignored (what a full scan does). Each size runs in a process of
its own with the checkout's code first on PYTHONPATH, and is stopped after --timeout
seconds (`>N s`).

    .venv/bin/python -m bench.studies.ignore_rules [--repo PATH] [--paths N] [--timeout SECONDS]
    .venv/bin/python -m bench.studies.ignore_rules --stages

--repo measures another checkout (`git archive <commit> cofferd | tar -x -C DIR`).
--stages: where compiling the 10,000 rules a folder applies goes, stage by stage: pathspec's
translation of each line to a regular expression, compiling that with Python's `re` (as
pathspec's GitIgnoreSpec.from_lines does), finding each one's literal, the RE2 sets.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
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
        # reads and compiles the top folder's rules
        waited = while_waiting(lambda: rules.excluded("warm.md"))
        compiled = time.perf_counter() - start
        start = time.perf_counter()
        for path in paths(count):
            rules.excluded(path)
        decided = time.perf_counter() - start
        problems = "; ".join(rules.problems.values())
    print(f"{compiled:.3f} {decided:.3f} {waited:.4f} {problems}")


def while_waiting(work: Callable[[], object]) -> float:
    """Runs `work` in a thread; the longest a thread sleeping 0.5 ms at a time waited
    meanwhile (seconds)."""
    done = threading.Event()

    def run() -> None:
        work()
        done.set()

    thread = threading.Thread(target=run)
    worst = 0.0
    thread.start()
    while not done.is_set():
        started = time.perf_counter()
        time.sleep(0.0005)
        worst = max(worst, time.perf_counter() - started)
    thread.join()
    return worst


def stages() -> None:
    """Seconds of each stage of compiling one folder's 10,000 rules (prints a table)."""
    import re

    import pathspec
    import re2
    from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

    from cofferd.infrastructure.files import ignore_patterns, ignore_rules

    lines = patterns(20_000).splitlines()[: ignore_rules.MAX_IGNORE_RULES]

    def timed(work: Callable[[], object]) -> float:
        start = time.perf_counter()
        work()
        return time.perf_counter() - start

    regexes = [GitIgnoreSpecPattern.pattern_to_regex(line)[0] or "" for line in lines]
    literals = {ignore_patterns._literal(regex) for regex in regexes}
    rows = [
        ("pathspec GitIgnoreSpec.from_lines, whole", lambda: pathspec.GitIgnoreSpec.from_lines(
            lines, backend="simple")),
        ("  of which: translate each line (pattern_to_regex)", lambda: [
            GitIgnoreSpecPattern.pattern_to_regex(line) for line in lines]),
        ("  of which: compile each with Python's re", lambda: [
            re.compile(regex) for regex in regexes]),
        ("our literal of each", lambda: [ignore_patterns._literal(regex) for regex in regexes]),
    ]  # fmt: skip
    print(f"{len(lines):,} rules of the hostile kind; {machine()}\n")
    print("| stage | seconds |\n|---|---|")
    for name, work in rows:
        re.purge()
        print(f"| {name} | {timed(work):.3f} |")
    escaped = [re2.escape(literal) for literal in literals]
    for chunk in (len(escaped), ignore_patterns.SET_CHUNK):
        ignore_patterns.SET_CHUNK = chunk
        print(f"| RE2 sets of the literals, {chunk:,} a set | "
              f"{timed(lambda: ignore_patterns._Sets(escaped)):.3f} |")  # fmt: skip
    whole = timed(lambda: ignore_patterns.Spec(lines))
    print(f"| the rules of a folder now (files and folders), whole | {whole:.3f} |")


def measure(n: int, repo: Path, count: int, timeout: float) -> str:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(repo), str(REPO)]))
    command = [
        sys.executable,
        "-m",
        "bench.studies.ignore_rules",
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
        return f"| {n:,} | >{timeout:.0f} s | | | | |"
    if out.returncode:
        return f"| {n:,} | failed: {out.stderr.strip().splitlines()[-1]} | | | | |"
    compiled, decided, waited, *problems = out.stdout.split(" ", 3)
    per_path = float(decided) / count * 1000
    note = problems[0].strip() if problems else ""
    return (
        f"| {n:,} | {float(compiled):.2f} s | {float(waited) * 1000:.0f} ms "
        f"| {float(decided):.2f} s | {per_path:.3f} ms | {note} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=REPO)
    parser.add_argument("--paths", type=int, default=2_000)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--stages", action="store_true")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("sizes", nargs="*", type=int, default=list(SIZES))
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.paths)
        return
    if args.stages:
        stages()
        return
    print(machine())
    print(f"{args.paths:,} notes in ten folders; code of {args.repo}\n")
    print("| patterns | read and compile | longest wait of another thread meanwhile "
          "| decide every note | per note | reported |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for n in args.sizes:
        print(measure(n, args.repo.resolve(), args.paths, args.timeout), flush=True)


if __name__ == "__main__":
    main()
