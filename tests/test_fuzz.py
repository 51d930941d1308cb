"""Schemathesis fuzzes a real cofferd from docs/openapi.yaml, through a loopback forwarder.

Every operation gets schema-derived requests (coverage edge cases, then positive and
negative examples). No answer may be a 5xx, every body must be strict JSON, and status,
content type and body must match the contract. A knowledge base `fuzz` with three
documents (a Markdown one, an upload kept in raw/, a path-tracked one) is rebuilt before
each operation, and path parameters often name it, so requests get past the 404s.

COFFER_FUZZ_EXAMPLES (default 60) sets the generated examples per operation; a longer run
that reports every failure instead of the first: `.venv/bin/python -m bench.fuzz`.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from tests.daemon import CONTRACT, Daemon, cleanup, new_daemon
from tests.forwarder import Forwarder

ACTOR = "fuzz"
FUZZ_KB = "fuzz"
EXAMPLES = int(os.environ.get("COFFER_FUZZ_EXAMPLES", "60"))  # generated, per operation


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def strict_json(ctx: Any, response: schemathesis.Response, case: schemathesis.Case) -> None:
    """Every answer, errors included, is JSON without NaN or Infinity."""
    try:
        json.loads(response.content, parse_constant=_refuse_constant)
    except ValueError as exc:
        raise AssertionError(
            f"body is not strict JSON ({exc}): {response.content[:200]!r}"
        ) from None


CHECKS: list[Callable[..., Any]] = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
    strict_json,
]


@dataclass
class Known:
    """Names and document ids that exist, so generated paths can reach real resources."""

    names: list[str] = field(default_factory=lambda: [FUZZ_KB])
    doc_ids: list[str] = field(default_factory=list)


KNOWN = Known()
SEED_WORDS = ["alpha", "beta gamma", "Seed", "delta", "epsilon", "zeta eta", "Tracked", "a"]


def _plug_known(params: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Keep the generated path parameters, or swap in existing names and ids.

    Name and DocId are any string, so a string swapped for a string never turns a negative
    case positive; values that are not strings (negative mode) are left alone.
    """
    options = [params]
    if isinstance(params, dict) and isinstance(params.get("name"), str):
        for name in KNOWN.names:
            options.append({**params, "name": name})
            if isinstance(params.get("doc_id"), str):
                options += [{**params, "name": name, "doc_id": d} for d in KNOWN.doc_ids]
    return st.sampled_from(options)


def fuzz_schema(max_examples: int) -> Any:
    config = schemathesis.Config.from_dict(
        {
            "headers": {"X-Coffer-Actor": ACTOR},
            "request-timeout": 120,
            "generation": {
                "mode": "all",
                "max-examples": max_examples,
                "deterministic": True,
                "database": "none",
            },
            "phases": {"stateful": {"enabled": False}},
            # searches and greps often name words the seeded documents hold
            "dictionaries": {"words": {"values": SEED_WORDS}},
            "parameters": {
                "body.query": {"dictionary": "words", "probability": 0.3},
                "body.pattern": {"dictionary": "words", "probability": 0.3},
            },
        }
    )
    schema = schemathesis.openapi.from_path(CONTRACT, config=config)

    @schema.hook
    def flatmap_path_parameters(context: Any, path_parameters: dict[str, Any]) -> Any:
        return _plug_known(path_parameters)

    return schema


def reset_fuzz_kb(base_url: str, scratch: Path) -> None:
    """(Re)create the `fuzz` knowledge base with one document of each kind."""
    s = requests.Session()
    s.headers["X-Coffer-Actor"] = "tests"
    kbs = f"{base_url}/api/v1/knowledge_bases"
    try:
        s.delete(f"{kbs}/{FUZZ_KB}", timeout=120)  # 404 when a fuzzed call deleted it
        _ok(s.post(kbs, json={"name": FUZZ_KB}, timeout=120))
        docs = f"{kbs}/{FUZZ_KB}/documents"
        ids = [
            _ok(s.post(docs, json={"content": "# Seed\n\nalpha beta gamma\n"}, timeout=120)),
            _ok(s.post(docs, files={"file": ("upload.txt", b"delta epsilon\n")}, timeout=120)),
        ]
        source = scratch / "tracked.md"
        source.write_text("# Tracked\n\nzeta eta theta\n")
        ids.append(_ok(s.post(docs, json={"source_path": str(source)}, timeout=120)))
        KNOWN.doc_ids = ids
    finally:
        s.close()


def _ok(response: requests.Response) -> str:
    assert response.status_code in (200, 201), (response.status_code, response.text)
    return str(response.json().get("document", {}).get("id", ""))


@contextmanager
def fuzz_target(tmp: Path) -> Iterator[tuple[Daemon, Forwarder]]:
    """A real daemon in `tmp`, reachable over TCP."""
    d = new_daemon(tmp)
    try:
        d.start()
        with Forwarder(d.socket) as fwd:
            yield d, fwd
    finally:
        if d.proc is not None:
            with contextlib.suppress(Exception):
                d.stop()  # also closes the log
        cleanup(d)


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
