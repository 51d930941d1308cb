"""Issue 22 figures: how long `cofferctl` takes, process start to exit.

Against a running cofferd (a scratch data home with a small knowledge base), each round
runs `cofferctl --help` and `cofferctl search notes bread` once per checkout: this one (or
`--repo`) and, with `--old PATH`, a frozen checkout too, in the same rounds, their order
alternated. Then `python -X importtime` says what each checkout imports for that search.

    git -C /work/main worktree add /tmp/oldwt 0825721
    .venv/bin/python -m bench.studies.cli_startup --old /tmp/oldwt [--rounds 40]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench.common import (
    BIN,
    REPO,
    add_repo_argument,
    code_env,
    describe_code,
    machine,
    median,
    percentile,
    scratch_home,
    start_daemon,
    stop_daemon,
    wait,
)
from cofferctl.client import Client

COMMANDS = {"--help": ["--help"], "search": ["search", "notes", "bread"]}
NOTES = 200


def write_notes(docs: Path) -> None:
    docs.mkdir(parents=True)
    for i in range(NOTES):
        topic = "bread" if i % 10 == 0 else "garden"
        (docs / f"note-{i:03}.md").write_text(f"# Note {i}\n\nAbout {topic}, day {i}.\n")


def installed_env(env: dict[str, str]) -> dict[str, str]:
    """As an installed cofferctl runs: its compiled modules cached in __pycache__ (written
    by the warm-up rounds), whatever this shell says (PYTHONDONTWRITEBYTECODE)."""
    return {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run_ms(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) time of one run in ms: process start to exit, and the user and system
    time it used (less sensitive than the wall time to other work on the machine)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall * 1000, cpu * 1000


def import_summary(checkout: Path, env: dict[str, str], runs: int = 5) -> tuple[float, int, str]:
    """For `cofferctl search`: the median time its imports took (ms, those of Python's own
    start-up left out), how many modules it imported, and the heaviest it imported itself
    (cumulative ms)."""
    totals, count, heaviest = [], 0, ""
    for _ in range(runs):
        found = subprocess.run(
            [sys.executable, "-X", "importtime", str(BIN / "cofferctl"), *COMMANDS["search"]],
            env=env, capture_output=True, text=True, check=True,
        )  # fmt: skip
        imports = imports_after_site(found.stderr)
        totals.append(sum(own for _, own, _, _ in imports) / 1000)
        count = len(imports)
        top = sorted((i for i in imports if i[3] == 0), key=lambda i: -i[2])[:6]
        heaviest = ", ".join(f"{name} {cumulative / 1000:.1f}" for name, _, cumulative, _ in top)
    return median(totals), count, heaviest


def imports_after_site(report: str) -> list[tuple[str, int, int, int]]:
    """(module, own µs, cumulative µs, depth) of each import that `python -X importtime`
    reports after Python's own start-up (`site`)."""
    imports: list[tuple[str, int, int, int]] = []
    after_site = False
    for line in report.splitlines():
        fields = line.removeprefix("import time:").split("|")
        if len(fields) != 3 or not fields[0].strip().isdigit():
            continue  # the header, or a line of the program's own
        name = fields[2].strip()
        if after_site:
            depth = (len(fields[2]) - len(fields[2].lstrip()) - 1) // 2
            imports.append((name, int(fields[0]), int(fields[1]), depth))
        after_site = after_site or name == "site"
    return imports


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_repo_argument(parser)
    parser.add_argument(
        "--old", type=lambda text: Path(text).resolve(), help="a checkout to compare"
    )
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    checkouts = {"new": args.repo, **({"old": args.old} if args.old else {})}
    home = scratch_home("cli-startup")
    socket_path = home / "cofferd.sock"
    write_notes(home / "knowledge" / "notes" / "docs")
    daemon = start_daemon(REPO, home, socket_path)
    try:
        client = Client(socket_path)
        wait(
            lambda: client.post(client.kb("notes", "/search"), {"query": "bread"})["passages"],
            daemon, timeout=120, interval=0.1,
        )  # fmt: skip
        envs = {
            name: installed_env(code_env(checkout, COFFER_SOCKET=str(socket_path)))
            for name, checkout in checkouts.items()
        }
        report(checkouts, envs, measure(envs, args.rounds), args.rounds)
    finally:
        stop_daemon(daemon)
        shutil.rmtree(home, ignore_errors=True)


Times = dict[tuple[str, str], list[tuple[float, float]]]  # (checkout, command): (wall, CPU)


def measure(envs: dict[str, dict[str, str]], rounds: int) -> Times:
    times: Times = {}
    names = list(envs)
    python = ("python", "-c pass", [sys.executable, "-c", "pass"], dict(os.environ))
    for round_ in range(rounds + 2):  # the first two warm the file cache, and are dropped
        order = names if round_ % 2 == 0 else names[::-1]
        runs = [
            (name, command, [str(BIN / "cofferctl"), *argv], envs[name])
            for command, argv in COMMANDS.items()
            for name in order
        ]
        for name, command, argv, env in [*runs, python]:
            measured = run_ms(argv, env)
            if round_ >= 2:
                times.setdefault((name, command), []).append(measured)
    return times


def report(
    checkouts: dict[str, Path], envs: dict[str, dict[str, str]], times: Times, rounds: int
) -> None:
    print(f"machine: {machine()}; {rounds} rounds, checkouts alternated")
    for name, checkout in checkouts.items():
        print(f"{name}: {describe_code(checkout)}")
    print("\nms, process start to exit: wall median (p10-p90), CPU median")
    for (name, command), values in times.items():
        walls = [wall for wall, _ in values]
        spread = f"({percentile(walls, 10):.0f}-{percentile(walls, 90):.0f})"
        cpu = median([cpu for _, cpu in values])
        print(f"  {name:<7}{command:<10}{median(walls):>6.1f} {spread:<10} {cpu:>6.1f}")
    print("\n`cofferctl search` imports (python -X importtime; median of 5 runs):")
    for name, checkout in checkouts.items():
        total, count, heaviest = import_summary(checkout, envs[name])
        print(f"  {name}: {total:.1f} ms in {count} modules; heaviest (ms, cumulative): {heaviest}")


if __name__ == "__main__":
    main()
