"""How the time of every parser of untrusted text grows with its input: for each parser and
hostile family of inputs (tests/support/adversarial.py), the time at 10k, 20k, 40k, 80k and
160k characters, the worst ratio between one size and the next (2 when linear, 4 when
quadratic), and the time at 160k over the time at 10k, whose target is GROWTH_LIMIT (as in
tests/unit/test_linear_time.py). Each case runs in its own process with the checkout's code
first on PYTHONPATH, and is stopped after --timeout seconds: sizes it did not reach show
`>N s`.

    .venv/bin/python -m bench.guards.parser_growth [--repo PATH] [--timeout SECONDS] [PARSER...]

--repo measures another checkout (an older commit, say). What else is on PYTHONPATH stays
there; pathspec uses RE2 whenever google-re2 can be imported, so measure a checkout that
predates it in an environment without it.
"""

from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import sys
from pathlib import Path

from bench.common import REPO, exit_by_targets, machine, verdict
from tests.support.adversarial import CASES, GROWTH_LIMIT

SIZES = (10_000, 20_000, 40_000, 80_000, 160_000)
WORKER = REPO / "tests" / "support" / "adversarial.py"


def measure(case: str, repo: Path, timeout: float) -> list[float | None]:
    """Seconds per size, None for the sizes not reached in time."""
    paths = [str(repo), *filter(None, [os.environ.get("PYTHONPATH")])]
    command = [sys.executable, str(WORKER), case, *map(str, SIZES)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths))
    try:
        out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
        if out.returncode:
            raise RuntimeError(f"{case}: {out.stderr.strip().splitlines()[-1]}")
        printed = out.stdout
    except subprocess.TimeoutExpired as stopped:
        printed = stopped.stdout.decode() if isinstance(stopped.stdout, bytes) else ""
    times = dict(line.split() for line in printed.splitlines())
    return [float(times[str(size)]) if str(size) in times else None for size in SIZES]


def shown(seconds: float | None, timeout: float) -> str:
    if seconds is None:
        return f">{timeout:g} s"
    return f"{seconds * 1000:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def worst_doubling(times: list[float | None]) -> str:
    ratios = [b / a for a, b in itertools.pairwise(times) if a and b]
    return f"{max(ratios):.1f}" if ratios else "-"


def growth(case: str, times: list[float | None]) -> str:
    """The time at the largest size over the time at the smallest, against GROWTH_LIMIT (a
    size not reached in time is a miss)."""
    first, last = times[0], times[-1]
    if not first or last is None:
        return f"-, {verdict(False, case)}"
    return f"{last / first:.1f}, {verdict(last / first < GROWTH_LIMIT, case)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, default=REPO, help="checkout to measure")
    parser.add_argument("--timeout", type=float, default=60, help="seconds per case")
    parser.add_argument("parsers", nargs="*", help="only these (`links`, `FTS phrase`, ...)")
    args = parser.parse_args()
    print(f"{args.repo.resolve()}; {machine()}\n")
    sizes = [f"{size // 1000}k" for size in SIZES]
    limit = f"{SIZES[-1] // SIZES[0]}x input (< {GROWTH_LIMIT:g})"
    print("| parser | family | " + " | ".join(sizes) + f" | worst doubling | {limit} |")
    print("|---|---|" + "---:|" * (len(SIZES) + 2))
    for case in CASES:
        if args.parsers and case.parser not in args.parsers:
            continue
        times = measure(case.name, args.repo, args.timeout)
        cells = [shown(t, args.timeout) for t in times]
        row = [case.parser, case.family.replace("|", "\\|"), *cells, worst_doubling(times)]
        row.append(growth(case.name, times))
        print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
    exit_by_targets()
