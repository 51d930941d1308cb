"""Schemathesis fuzzes a real cofferd from docs/openapi.yaml, through a loopback forwarder.

Every operation gets schema-derived requests (coverage edge cases, then positive and
negative examples). No answer may be a 5xx, every body must be strict JSON, and status,
content type and body must match the contract. A knowledge base `fuzz` with three
documents (a Markdown one, an upload kept in raw/, a path-tracked one) is rebuilt before
each operation, and path parameters often name it, so requests get past the 404s.

Then what schemathesis does not send (`hostile_requests`), straight to the socket: unknown
and repeated query parameters and values not of their type, URLs, request lines and headers
over every limit, too many headers, requests that are not HTTP, and null for every body
field whose type does not list it. Each must be refused in the envelope with a stable code
(the one expected, naming the parameter or field), never a 500.

COFFER_FUZZ_EXAMPLES (default 60) sets the generated examples per operation; a longer run
that reports every failure instead of the first: `.venv/bin/python -m bench.guards.fuzz`.
"""

from __future__ import annotations

import os
import random
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings

from tests.support.api_fuzzing import (
    CHECKS,
    KNOWN,
    fuzz_schema,
    fuzz_target,
    hostile_requests,
    judge,
    reset_fuzz_kb,
    send_raw,
)
from tests.support.daemon import Daemon
from tests.support.forwarder import Forwarder

EXAMPLES = int(os.environ.get("COFFER_FUZZ_EXAMPLES", "60"))  # generated, per operation


# -- the test ------------------------------------------------------------------------------

schema = fuzz_schema(EXAMPLES)


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Daemon, Forwarder, Path]]:
    tmp = tmp_path_factory.mktemp("fuzz")
    with fuzz_target(tmp) as (d, fwd):
        yield d, fwd, tmp


@pytest.fixture
def base_url(target: tuple[Daemon, Forwarder, Path]) -> str:
    d, fwd, tmp = target
    assert d.proc is not None and d.proc.poll() is None, "cofferd died:\n" + d.log.read_text()
    reset_fuzz_kb(fwd.url, tmp)
    return fwd.url


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_api_matches_contract(case: schemathesis.Case, base_url: str) -> None:
    case.call_and_validate(base_url=base_url, checks=CHECKS)


def test_hostile_requests_are_refused_in_the_envelope(
    target: tuple[Daemon, Forwarder, Path],
) -> None:
    d, fwd, tmp = target
    reset_fuzz_kb(fwd.url, tmp)
    problems = []
    for hostile in hostile_requests(random.Random(20261203), KNOWN.doc_ids):
        status, reply = send_raw(d.socket, hostile.raw)
        problem = judge(hostile, status, reply)
        if problem:
            problems.append(f"{hostile.what} {hostile.operation}: {problem}")
    assert d.proc is not None and d.proc.poll() is None, "cofferd died:\n" + d.log.read_text()
    assert not problems, "\n".join(problems[:20])


def test_forwarder_stops_cleanly() -> None:
    before = len(os.listdir("/proc/self/fd"))
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp, fuzz_target(Path(tmp)) as (_, fwd):
        s = requests.Session()
        assert s.get(f"{fwd.url}/api/v1/health", timeout=30).json()["status"] == "ok"
        assert requests.get(f"{fwd.url}/api/v1/health", timeout=30).status_code == 200
        assert fwd.connections == 2
        url = fwd.url
    with pytest.raises(requests.ConnectionError):
        s.get(f"{url}/api/v1/health", timeout=5)
    s.close()
    assert len(os.listdir("/proc/self/fd")) <= before
