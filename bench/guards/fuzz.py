"""Fuzz a real cofferd's REST API from docs/openapi.yaml with schemathesis, for longer than
tests/daemon/test_fuzz.py does, and report every distinct failure instead of the first.

Per operation: schemathesis' coverage cases (edge values, missing fields, wrong methods),
then N positive and N negative generated requests. Each answer goes through the same
checks as the test (no 5xx, strict JSON, status / content type / body per the contract,
invalid input refused); failures are grouped by check, operation, status and kind, with
the smallest request that reproduces each.

Then R rounds of the hostile requests schemathesis does not send (tests/daemon/test_fuzz.py
`hostile_requests`, drawn anew each round): unknown, repeated and mistyped query
parameters, URLs, request lines and headers over every limit, too many headers, requests
that are not HTTP, null for typed body fields. Each must be refused in the envelope with
the expected status, stable code and field.

    .venv/bin/python -m bench.guards.fuzz [--examples 200] [--hostile-rounds 20] [--seed N]
                                   [--only SUBSTRING] [--all-checks]

`--all-checks` adds schemathesis' other checks, e.g. positive_data_acceptance (a request the
contract allows is refused: the contract is looser than the daemon).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from inspect import isfunction
from pathlib import Path
from typing import Any

import requests
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import Case, GenerationMode
from schemathesis.checks import CHECKS as REGISTERED
from schemathesis.checks import load_all_checks
from schemathesis.core.failures import FailureGroup

from bench.common import exit_by_targets, machine, verdict
from tests.support.api_fuzzing import (
    CHECKS,
    KNOWN,
    Hostile,
    fuzz_schema,
    fuzz_target,
    hostile_requests,
    judge,
    reset_fuzz_kb,
    send_raw,
)

SHOW = 400  # characters of a body shown in a reproduction


@dataclass
class Group:
    title: str
    message: str
    request: str
    answer: str
    count: int = 0
    size: int = 1 << 60


@dataclass
class Tally:
    cases: int = 0
    statuses: dict[str, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))
    groups: dict[tuple[str, str, int, str], Group] = field(default_factory=dict)

    def failed(
        self,
        check: str,
        label: str,
        request: str,
        status: int,
        title: str,
        message: str,
        answer: str,
    ) -> None:
        key = (check, label, status, title)
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = Group(title, message, request, answer)
        group.count += 1
        if len(request) < group.size:  # keep the smallest reproduction
            group.size = len(request)
            group.message, group.request, group.answer = message, request, answer


def short(value: Any, limit: int = SHOW) -> str:
    if isinstance(value, bytes):
        text = repr(value)
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, default=repr)
        except (TypeError, ValueError):
            text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def describe(case: Case) -> str:
    line = f"{case.method.upper()} {case.formatted_path}"
    if case.query:
        line += "?" + "&".join(f"{k}={short(v, 80)}" for k, v in case.query.items())
    extras = [
        f"{k}: {short(v, 80)}" for k, v in (case.headers or {}).items() if k != "X-Coffer-Actor"
    ]
    if extras:
        line += "  [headers " + ", ".join(extras) + "]"
    if case.body is not None and not _unset(case.body):
        line += f"  [{case.media_type}] {short(case.body)}"
    return line


def _unset(body: Any) -> bool:
    return type(body).__name__ == "NotSet"


def run_case(case: Case, base_url: str, tally: Tally, checks: list[Any]) -> None:
    tally.cases += 1
    try:
        response = case.call(base_url=base_url)
    except requests.RequestException as exc:  # a dropped connection: the daemon failed hard
        tally.statuses[case.operation.label][0] += 1
        failure = (0, type(exc).__name__, str(exc)[:SHOW], "(no answer)")
        tally.failed("connection", case.operation.label, describe(case), *failure)
        return
    tally.statuses[case.operation.label][response.status_code] += 1
    answer = f"{response.status_code} {short(response.content, SHOW)}"
    for check in checks:
        try:
            case.validate_response(response, checks=[check])
        except FailureGroup as group:
            for failure in group.exceptions:
                title = getattr(failure, "title", type(failure).__name__)
                message = getattr(failure, "message", str(failure))
                failure = (response.status_code, title, message, answer)
                tally.failed(check.__name__, case.operation.label, describe(case), *failure)
        except AssertionError as exc:
            failure = (response.status_code, str(exc)[:80], "", answer)
            tally.failed(check.__name__, case.operation.label, describe(case), *failure)


def run_hostile(socket_path: Path, rng: random.Random, only: str, tally: Tally) -> None:
    """One round of hostile requests, straight to the socket."""
    for hostile in hostile_requests(rng, KNOWN.doc_ids):
        if only not in hostile.operation:
            continue
        label = f"hostile: {hostile.operation or 'no route'}"
        tally.cases += 1
        try:
            status, reply = send_raw(socket_path, hostile.raw)
        except OSError as exc:
            status, reply = 0, f"{type(exc).__name__}: {exc}"
        tally.statuses[label][status] += 1
        problem = judge(hostile, status, reply)
        if problem:
            answer = f"{status} {short(reply, SHOW)}"
            tally.failed(
                "hostile", label, raw_request(hostile), status, hostile.what, problem, answer
            )


def raw_request(hostile: Hostile) -> str:
    return f"[{hostile.what}] {short(hostile.raw, 200)} ({len(hostile.raw)} bytes)"


def fuzz_operation(
    schema: Any,
    operation: Any,
    base_url: str,
    examples: int,
    run_seed: int,
    tally: Tally,
    checks: list[Any],
) -> None:
    config = schema.config.generation_for(operation=operation, phase="coverage")
    for case in schema.iter_coverage_cases(
        operation, generation_modes=list(GenerationMode), generation_config=config
    ):
        run_case(case, base_url, tally, checks)
    for mode in GenerationMode:

        @seed(run_seed)
        @settings(
            max_examples=examples,
            deadline=None,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy(generation_mode=mode))
        def generated(case: Case) -> None:
            run_case(case, base_url, tally, checks)

        with contextlib.suppress(Unsatisfiable):  # nothing to negate: no parameters, no body
            generated()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=200, help="per operation and mode")
    parser.add_argument(
        "--hostile-rounds", type=int, default=20, help="rounds of hostile requests (each ~220)"
    )
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--only", default="", help="operations whose label contains this")
    parser.add_argument(
        "--all-checks",
        action="store_true",
        help="add every other per-response check schemathesis has (e.g. positive_data_acceptance)",
    )
    args = parser.parse_args()
    checks = list(CHECKS)
    if args.all_checks:
        load_all_checks()
        names = {c.__name__ for c in checks}
        checks += [c for c in REGISTERED.get_all() if isfunction(c) and c.__name__ not in names]
    run_seed = args.seed if args.seed is not None else random.randrange(1 << 32)

    print(f"machine: {machine()}")
    print(f"seed: {run_seed}   examples: {args.examples} per operation and mode, plus coverage")
    print("checks: " + ", ".join(c.__name__ for c in checks))
    schema = fuzz_schema(args.examples)
    tally = Tally()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="coffer-bench-fuzz-") as tmp:
        scratch = Path(tmp)
        with fuzz_target(scratch) as (daemon, fwd):
            for result in schema.get_all_operations():
                operation = result.ok()
                if args.only not in operation.label:
                    continue
                reset_fuzz_kb(fwd.url, scratch)
                before, t0 = tally.cases, time.perf_counter()
                fuzz_operation(schema, operation, fwd.url, args.examples, run_seed, tally, checks)
                seen = tally.statuses[operation.label]
                print(
                    f"  {operation.label}: {tally.cases - before} cases "
                    f"in {time.perf_counter() - t0:.1f} s; statuses "
                    + " ".join(f"{code}x{n}" for code, n in sorted(seen.items())),
                    flush=True,
                )
                assert daemon.proc is not None
                if daemon.proc.poll() is not None:
                    print(f"cofferd exited with {daemon.proc.returncode}:")
                    print(daemon.log.read_text()[-4000:])
                    break
            assert daemon.proc is not None
            if daemon.proc.poll() is None and args.hostile_rounds > 0:
                reset_fuzz_kb(fwd.url, scratch)
                before, t0 = tally.cases, time.perf_counter()
                rng = random.Random(run_seed)
                for _ in range(args.hostile_rounds):
                    run_hostile(daemon.socket, rng, args.only, tally)
                seen: Counter[int] = Counter()
                for label, counts in tally.statuses.items():
                    if label.startswith("hostile: "):
                        seen.update(counts)
                print(
                    f"  hostile requests, {args.hostile_rounds} rounds: {tally.cases - before} "
                    f"cases in {time.perf_counter() - t0:.1f} s; statuses "
                    + " ".join(f"{code}x{n}" for code, n in sorted(seen.items())),
                    flush=True,
                )
                if daemon.proc.poll() is not None:
                    print(f"cofferd exited with {daemon.proc.returncode}:")
                    print(daemon.log.read_text()[-4000:])
    elapsed = time.perf_counter() - started
    report(tally, elapsed)


def report(tally: Tally, elapsed: float) -> None:
    print(f"\n{tally.cases} cases in {elapsed:.0f} s; {len(tally.groups)} distinct failures")
    print(f"[target no failure (issues 11, 21): {verdict(not tally.groups)}]")
    by_check: dict[str, list[tuple[tuple[str, str, int, str], Group]]] = defaultdict(list)
    for key, group in tally.groups.items():
        by_check[key[0]].append((key, group))
    for check in sorted(by_check):
        print(f"\n== {check} ==")
        for (_, operation, status, title), group in sorted(by_check[check], key=lambda kv: kv[0]):
            print(f"\n* {operation} -> {status}: {title} ({group.count} cases)")
            if group.message:
                detail = group.message.strip().splitlines()
                print("  " + "\n  ".join(detail[:6]))
            print(f"  request: {group.request}")
            print(f"  answer:  {group.answer}")


if __name__ == "__main__":
    main()
    exit_by_targets()
