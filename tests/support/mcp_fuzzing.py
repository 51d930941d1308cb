"""The MCP fuzzer's parts, shared by tests/clients/mcp/test_mcp_fuzz.py and bench.guards.mcp_fuzz:
`cofferctl mcp` on its pipes with every answer checked, what each line must be answered with,
the seeded generator of tool calls (valid, boundary and hostile), and the run that tallies
the outcomes."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import string
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from cofferctl.jsonrpc import MAX_DEPTH
from cofferctl.mcp.all_tools import TOOLS
from cofferctl.mcp.protocol import MAX_IN_FLIGHT, MAX_LINE_BYTES
from tests.support.daemon import BIN, Daemon, wait_for
from tests.support.mcp_client import PYTHONPATH

SEED = 21_06


INITIALIZE = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "fuzz", "version": "0"},
}
NO_ANSWER = ("none",)
NULL_ID = ("null",)


# --- speaking to `cofferctl mcp` over its pipes ----------------------------------------


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_answer(line: bytes) -> dict[str, Any]:
    """One answer line, checked: strict UTF-8 JSON, JSON-RPC 2.0, result xor error."""
    answer = json.loads(line.decode(), parse_constant=_refuse_constant)
    assert isinstance(answer, dict) and answer.get("jsonrpc") == "2.0", line[:300]
    assert set(answer) <= {"jsonrpc", "id", "result", "error"} and "id" in answer, line[:300]
    assert answer["id"] is None or usable_id(answer["id"]), line[:300]
    assert ("result" in answer) != ("error" in answer), line[:300]
    if "result" in answer:
        assert isinstance(answer["result"], dict), line[:300]
    else:
        error = answer["error"]
        assert isinstance(error, dict), line[:300]
        assert type(error.get("code")) is int and isinstance(error.get("message"), str)
    return answer


class McpPipe:
    """A `cofferctl mcp` process spoken to line by line; a thread collects its answers."""

    def __init__(self, socket: Path, log: Path) -> None:
        self.log = log
        self._stderr = open(log, "wb")  # noqa: SIM115 - closed by close()
        env = {"COFFER_SOCKET": str(socket), "PATH": "/usr/bin:/bin", **PYTHONPATH}
        self.proc = subprocess.Popen(
            [str(BIN / "cofferctl"), "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
        )
        self.answers: list[dict[str, Any]] = []
        self.by_id: dict[str, list[dict[str, Any]]] = {}  # answers by their id, as JSON
        self.bad: list[tuple[bytes, str]] = []  # lines that are not valid answers, and why
        self._seen = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                answer = parse_answer(line)
            except (ValueError, AssertionError) as exc:
                with self._seen:
                    self.bad.append((line[:500], repr(exc)))
                continue
            with self._seen:
                self.answers.append(answer)
                self.by_id.setdefault(json.dumps(answer["id"]), []).append(answer)
                self._seen.notify_all()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, line: bytes | str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((line.encode() if isinstance(line, str) else line) + b"\n")
        self.proc.stdin.flush()

    def request(self, request_id: Any, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(json.dumps(message))

    def wait(self, found: Callable[[list[dict[str, Any]]], Any], timeout: float = 30) -> Any:
        deadline = time.monotonic() + timeout
        with self._seen:
            while not (result := found(self.answers)):
                left = deadline - time.monotonic()
                if left <= 0 or not self.alive():
                    raise AssertionError(
                        f"no such answer within {timeout} s (alive: {self.alive()}); "
                        f"answers: {self.answers[-5:]}; bad lines: {self.bad[-3:]}; "
                        f"stderr: {self.log.read_text(errors='replace')[-2000:]}"
                    )
                self._seen.wait(min(left, 0.5))
        return result

    def answer(self, request_id: Any, timeout: float = 30) -> dict[str, Any]:
        key = json.dumps(request_id)
        self.wait(lambda _: self.by_id.get(key), timeout)
        return self.by_id[key][0]

    def call(self, request_id: Any, method: str, params: Any = None) -> dict[str, Any]:
        self.request(request_id, method, params)
        return self.answer(request_id)

    def nulls(self) -> int:
        with self._seen:
            return sum(a["id"] is None for a in self.answers)

    def close(self, timeout: float = 120) -> int:
        """Close stdin (the server finishes what runs, then exits) and collect the rest."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(BrokenPipeError):  # it died: the code says so
                self.proc.stdin.close()
        try:
            code = self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self._reader.join(10)
            self._stderr.close()
        return code


def non_utf8_kb(d: Daemon, tmp: Path, name: str) -> str:
    """A KB attached through a symlink to a folder whose real path is not UTF-8."""
    real = Path(os.fsdecode(bytes(tmp) + b"/caf\xe9-\xff"))
    try:
        real.mkdir()
    except OSError as exc:  # a file system that keeps names UTF-8 (macOS)
        pytest.skip(f"this file system refuses a name that is not UTF-8: {exc}")
    (real / "heron.md").write_text("# Heron census\n\nThe heron census counts herons.\n")
    link = tmp / f"{name}-link"
    link.symlink_to(real)
    d.client.post("/api/v1/knowledge_bases", {"name": name, "path": str(link)})
    wait_for(lambda: d.client.get(d.client.kb(name, "/documents"))["total"] == 1)
    return name


# --- the fuzzer ----------------------------------------------------------------------------


def usable_id(value: Any) -> bool:
    if isinstance(value, str):
        return not has_surrogate(value)
    return isinstance(value, int) and not isinstance(value, bool)


def has_surrogate(text: str) -> bool:
    return any("\ud800" <= c <= "\udfff" for c in text)


def _unservable(value: Any) -> bool:
    """Deeper than MAX_DEPTH, or a lone surrogate in a string or key (iteratively)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str) and has_surrogate(item):
            return True
        if isinstance(item, (dict, list)):
            if depth > MAX_DEPTH:
                return True
            if isinstance(item, dict):
                stack += [(k, depth) for k in item]
            stack += [(v, depth + 1) for v in (item.values() if isinstance(item, dict) else item)]
    return False


def expected(line: bytes) -> tuple[Any, ...]:
    """What JSON-RPC 2.0 (and MCP) owe a line: NO_ANSWER (a notification, an answer, a
    blank line), NULL_ID (one error with id null), or ("id", X): one answer with id X."""
    if not line.strip():
        return NO_ANSWER
    if len(line) > MAX_LINE_BYTES:
        return NULL_ID
    try:
        value = json.loads(line.decode(), parse_constant=_refuse_constant)
    except (ValueError, RecursionError):
        return NULL_ID
    if not isinstance(value, dict):
        return NULL_ID
    answer = ("id", value["id"]) if usable_id(value.get("id")) else NULL_ID
    if _unservable(value) or value.get("jsonrpc") != "2.0":
        return answer
    if "method" not in value:
        response = "id" in value and ("result" in value or "error" in value)
        return NO_ANSWER if response else answer
    if isinstance(value["method"], str) and "id" not in value:
        return NO_ANSWER
    return answer


LETTERS = string.ascii_letters + string.digits + " -_./#*\"'\\()[]{}:;,?!|&%$@^~`+=<>"
UNICODE = "éüßøñçЖж中文字日本語한국어עבריתالعربية🙂👍🏽\u200b\u2028\u00a0\t\u0301"
NASTY = ["", " ", "\x00", "\\", '"', "../..", "/etc/passwd", "%2e%2e", "NaN", "null", "\u202e"]


@dataclass
class Generator:
    """Lines to send, from a seed: schema-derived tool calls and everything else."""

    rng: random.Random
    kbs: list[str]
    refs: list[str] = field(default_factory=list)  # document ids and paths that exist
    serial: int = 0

    KINDS = (
        ("tool_valid", 20),
        ("tool_boundary", 10),
        ("tool_wrong", 14),
        ("method_params", 10),
        ("unknown_method", 5),
        ("notification", 8),
        ("envelope", 10),
        ("random_json", 6),
        ("malformed", 7),
        ("deep", 3),
        ("surrogate", 4),
        ("huge_id", 2),
        ("batch", 1),
    )

    def case(self) -> tuple[str, bytes]:
        """(kind, line)."""
        self.serial += 1
        kinds, weights = zip(*self.KINDS, strict=True)
        kind = self.rng.choices(kinds, weights)[0]
        made: bytes | dict[str, Any] | list[Any] = getattr(self, kind)()
        if isinstance(made, bytes):
            return kind, made.replace(b"\n", b" ")
        ensure_ascii = self.rng.random() < 0.5 or kind == "surrogate"
        return kind, json.dumps(made, ensure_ascii=ensure_ascii).encode("utf-8", "surrogatepass")

    # -- values ------------------------------------------------------------------------

    def text(self, low: int = 0, high: int = 24) -> str:
        r = self.rng
        if r.random() < 0.1:
            return r.choice(NASTY)
        pool = LETTERS if r.random() < 0.7 else LETTERS + UNICODE
        return "".join(r.choice(pool) for _ in range(r.randint(low, max(low, high))))

    def any_value(self, depth: int = 0) -> Any:
        r = self.rng
        roll = r.random()
        if depth > 3 or roll < 0.55:
            return r.choice(
                [
                    None,
                    True,
                    False,
                    0,
                    -1,
                    r.randint(-(10**30), 10**30),
                    r.random() * 10 ** r.randint(-5, 300),
                    -0.0,
                    self.text(),
                ]
            )
        if roll < 0.75:
            return [self.any_value(depth + 1) for _ in range(r.randint(0, 4))]
        return {self.text(0, 8): self.any_value(depth + 1) for _ in range(r.randint(0, 4))}

    def request_id(self) -> Any:
        r = self.rng
        return self.serial if r.random() < 0.7 else f"c{self.serial}-{self.text(0, 12)}"

    def message(self, method: str, params: Any = None, notify: bool = False) -> dict[str, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if not notify:
            message["id"] = self.request_id()
        if params is not None:
            message["params"] = params
        return message

    # -- tool calls derived from the input schemas --------------------------------------

    def valid(self, schema: dict[str, Any], name: str) -> Any:
        r = self.rng
        types = schema.get("type", "string")
        kind = r.choice(types) if isinstance(types, list) else types
        if "enum" in schema:
            return r.choice(schema["enum"])
        if kind == "null":
            return None
        if kind == "boolean":
            return r.random() < 0.5
        if kind == "integer":
            low = schema.get("minimum", 0)
            return r.randint(low, schema.get("maximum", low + 1000))
        if kind == "array":
            count = r.randint(schema.get("minItems", 0), min(schema.get("maxItems", 5), 5))
            return [self.valid(schema["items"], name) for _ in range(count)]
        pattern = schema.get("pattern", "")
        if pattern.startswith("^[a-z0-9]"):
            return r.choice(self.kbs) if r.random() < 0.9 else f"fz-{self.serial}"
        if pattern.startswith("^[0-9a-f]"):
            return "".join(r.choice("0123456789abcdef") for _ in range(64))
        if name in ("document_id", "trash_id") and self.refs and r.random() < 0.7:
            return r.choice(self.refs)
        low = schema.get("minLength", 0)
        return self.text(low, min(schema.get("maxLength", 40), 40))

    def tool_call(self, arguments: Any, name: str | None = None) -> dict[str, Any]:
        return self.message("tools/call", {"name": name, "arguments": arguments})

    def pick_tool(self) -> tuple[str, dict[str, Any]]:
        name = self.rng.choice(sorted(TOOLS))
        return name, TOOLS[name].input_schema

    def valid_arguments(self, schema: dict[str, Any]) -> dict[str, Any]:
        properties = schema["properties"]
        return {
            key: self.valid(sub, key)
            for key, sub in properties.items()
            if key in schema["required"] or self.rng.random() < 0.4
        }

    def tool_valid(self) -> dict[str, Any]:
        name, schema = self.pick_tool()
        return self.tool_call(self.valid_arguments(schema), name)

    def tool_boundary(self) -> dict[str, Any]:
        name, schema = self.pick_tool()
        arguments = self.valid_arguments(schema)
        if not schema["properties"]:
            return self.tool_call({"extra": self.any_value()}, name)
        key, sub = self.rng.choice(list(schema["properties"].items()))
        edges: list[Any] = []
        if "minimum" in sub:
            edges += [sub["minimum"], sub["minimum"] - 1, -(2**63), 10**20]
        if "maximum" in sub:
            edges += [sub["maximum"], sub["maximum"] + 1]
        if "maxLength" in sub:
            edges += ["a" * sub["maxLength"], "a" * (sub["maxLength"] + 1), "中" * sub["maxLength"]]
        if "minLength" in sub:
            edges += ["", " " * sub["minLength"]]
        if "maxItems" in sub:
            item = self.valid(sub["items"], key)
            edges += [[item] * sub["maxItems"], [item] * (sub["maxItems"] + 1), []]
        if "pattern" in sub:
            edges += ["", "A", "-a", "a" * 65, "a/b", "a%2fb", "a\nb"]
        arguments[key] = self.rng.choice(edges or [None, 0, ""])
        return self.tool_call(arguments, name)

    def tool_wrong(self) -> dict[str, Any]:
        r = self.rng
        name, schema = self.pick_tool()
        roll = r.random()
        if roll < 0.15:
            return self.tool_call(r.choice([[], [1], "x", 1, True, 1.5]), name)
        if roll < 0.25:
            return self.tool_call(self.valid_arguments(schema), r.choice([None, 1, [], {}, ""]))
        if roll < 0.35:
            return self.tool_call(self.valid_arguments(schema), self.text(0, 12))
        arguments = self.valid_arguments(schema)
        if roll < 0.45 or not schema["properties"]:
            arguments[self.text(1, 10)] = self.any_value()
        elif roll < 0.55 and schema["required"]:
            arguments.pop(r.choice(schema["required"]), None)
        else:
            key, sub = r.choice(list(schema["properties"].items()))
            wrong = [None, True, 1, -1, 1.5, 1e308, "s", [], {}, [1, "a"], {"a": 1}]
            allowed = sub.get("type", [])
            allowed = [allowed] if isinstance(allowed, str) else allowed
            arguments[key] = r.choice([w for w in wrong if not _fits(w, allowed)])
        return self.tool_call(arguments, name)

    # -- the other methods, the envelope, and what is not a request ----------------------

    METHODS = (
        "initialize",
        "ping",
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "prompts/list",
        "prompts/get",
    )
    KEYS = ("name", "arguments", "uri", "cursor", "protocolVersion", "clientInfo", "_meta")

    def method_params(self) -> dict[str, Any]:
        r = self.rng
        method = r.choice(self.METHODS)
        if r.random() < 0.2:
            return self.message(method, self.any_value())
        params = {k: self.any_value() for k in r.sample(self.KEYS, r.randint(0, 3))}
        if method == "resources/read" and r.random() < 0.6:
            kb, ref = r.choice(self.kbs), r.choice([*self.refs, self.text()])
            params["uri"] = r.choice([f"coffer://{kb}/{ref}", f"coffer://{self.text()}", ref])
        if method == "prompts/get" and r.random() < 0.6:
            params["name"] = "answer_from_notes"
            params["arguments"] = {"question": self.text(), "kb": r.choice([*self.kbs, ""])}
        if method == "resources/list" and r.random() < 0.5:
            params["cursor"] = f"{r.choice(self.kbs)}:{r.choice(['0', '100', '-1', 'x', ''])}"
        return self.message(method, params or None)

    def unknown_method(self) -> dict[str, Any]:
        method = self.rng.choice(
            ["", "tools/lis", "TOOLS/LIST", "rpc.discover", "server/discover", self.text(1, 30)]
        )
        return self.message(method, self.rng.choice([None, {}, self.any_value()]))

    def notification(self) -> dict[str, Any]:
        method = self.rng.choice(
            [*self.METHODS, "notifications/initialized", "notifications/cancelled", self.text()]
        )
        return self.message(method, self.rng.choice([None, {}, self.any_value()]), notify=True)

    def envelope(self) -> dict[str, Any]:
        r = self.rng
        message = self.message(r.choice(["ping", "tools/list", "prompts/list"]))
        field_ = r.choice(["jsonrpc", "id", "method", "params", "extra", "answer"])
        if field_ == "jsonrpc":
            message["jsonrpc"] = r.choice(["1.0", 2.0, 2, None, "2.0 ", ""])
            if r.random() < 0.5:
                del message["jsonrpc"]
        elif field_ == "id":
            message["id"] = r.choice([None, True, False, 1.5, 1e300, [], [1], {}, {"id": 1}])
        elif field_ == "method":
            message["method"] = r.choice([None, 1, True, [], ["ping"], {}, {"m": "ping"}])
        elif field_ == "params":
            message["params"] = r.choice([None, [], [1], "x", 0, True])
        elif field_ == "extra":
            message[self.text(1, 8)] = self.any_value()
        else:
            message[r.choice(["result", "error"])] = self.any_value()
            if r.random() < 0.5:
                del message["method"]
        return message

    def random_json(self) -> Any:
        value = self.any_value()
        if isinstance(value, dict) and self.rng.random() < 0.5:
            value.update({"jsonrpc": "2.0", "id": self.request_id()})
        return value

    def malformed(self) -> bytes:
        r = self.rng
        good = json.dumps(self.message("ping")).encode()
        return r.choice(
            [
                bytes(r.randrange(256) for _ in range(r.randint(1, 60))),
                good[: r.randint(1, len(good) - 1)],
                good.replace(b"ping", b"pi\xffng"),
                b"\xef\xbb\xbf" + good,
                good.decode().encode("utf-16"),
                good + b" " + good,
                good[:-1] + b',"params":{"x":NaN}}',
                b'{"jsonrpc":"2.0","id":' + b"9" * r.randint(4301, 6000) + b',"method":"ping"}',
                good[:-1] + b',"params":{"x":"a\x01b"}}',
                b'{"jsonrpc":"2.0","id":1,"method":"ping",}',
                b"{'jsonrpc':'2.0','id':1,'method':'ping'}",
                self.text(1, 40).encode(),
            ]
        )

    def deep(self) -> bytes:
        r = self.rng
        depth = r.choice([MAX_DEPTH - 2, MAX_DEPTH - 1, MAX_DEPTH + 1, 300, 5000, 100_000])
        bracket = r.choice(["[", '{"a":'])
        closing = "]" if bracket == "[" else "}"
        inner = bracket * depth + "1" + closing * depth
        place = r.choice(["params", "id", "method", "top", "x"])
        if place == "top":
            return inner.encode()
        fields = {"jsonrpc": '"2.0"', "id": str(self.serial), "method": '"ping"'}
        fields[place] = '{"a":' + inner + "}" if place == "params" else inner
        return ("{" + ",".join(f'"{k}":{v}' for k, v in fields.items()) + "}").encode()

    def surrogate(self) -> dict[str, Any]:
        r = self.rng
        lone = chr(r.randint(0xD800, 0xDFFF))
        message = self.tool_call({"kb": r.choice(self.kbs), "query": "x" + lone}, "search")
        where = r.choice(["id", "method", "key", "argument", "pair"])
        if where == "id":
            message["id"] = f"s{self.serial}{lone}"
        elif where == "method":
            message["method"] = "tools/call" + lone
        elif where == "key":
            message["params"]["arguments"] = {lone: 1}
        elif where == "pair":  # a proper pair is a character, and fine
            message["params"]["arguments"]["query"] = "\ud83d\ude00 heron"
        return message

    def huge_id(self) -> dict[str, Any]:
        r = self.rng
        request_id = r.choice(
            [
                2**63 + self.serial,
                -(2**64) - self.serial,
                10**300 + self.serial,
                f"{self.serial}:" + "x" * r.randint(1000, 100_000),
                f"{self.serial}:" + self.text(0, 40),
            ]
        )
        return {"jsonrpc": "2.0", "id": request_id, "method": r.choice(["ping", "tools/list"])}

    def batch(self) -> list[Any]:
        return [self.message("ping") for _ in range(self.rng.randint(0, 3))]


def _fits(value: Any, types: list[str]) -> bool:
    kinds = {
        "string": str,
        "integer": int,
        "number": (int, float),
        "boolean": bool,
        "array": list,
        "object": dict,
        "null": type(None),
    }
    for t in types:
        if isinstance(value, bool) and t in ("integer", "number"):
            continue
        if t == "integer" and isinstance(value, float):
            if value.is_integer():
                return True
            continue
        if isinstance(value, kinds[t]):
            return True
    return False


@dataclass
class Tally:
    """Which answer each kind of case got."""

    outcomes: dict[str, Counter[str]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    internal: list[tuple[str, bytes, dict[str, Any]]] = field(default_factory=list)
    null_codes: Counter[str] = field(default_factory=Counter)  # the errors with id null
    daemon_failed: list[tuple[bytes, str]] = field(default_factory=list)  # cofferd's 500s

    def add(self, kind: str, outcome: str) -> None:
        self.outcomes.setdefault(kind, Counter())[outcome] += 1


def outcome(answer: dict[str, Any] | None) -> str:
    if answer is None:
        return "no answer"
    if "result" in answer:
        return "result (isError)" if answer["result"].get("isError") else "result"
    return f"error {answer['error']['code']}"


def seed_kb(d: Daemon, kb: str) -> list[str]:
    """A KB with a few documents; their ids and paths."""
    d.client.post("/api/v1/knowledge_bases", {"name": kb})
    refs = []
    for n, text in enumerate(["alpha beta", "heron census", "gamma [[alpha]] #tag"]):
        doc = d.client.post(d.client.kb(kb, "/documents"), {"content": f"# Note {n}\n\n{text}\n"})
        refs += [doc["document"]["id"], doc["document"]["relative_path"]]
    return refs


WINDOW = MAX_IN_FLIGHT // 2  # requests the fuzzer lets wait for an answer at once


def _in_flight(answers: list[dict[str, Any]], owed: dict[str, tuple[str, bytes]]) -> int:
    answered = {json.dumps(a.get("id")) for a in answers}
    return sum(1 for key in owed if key not in answered)


def run_fuzz(
    pipe: McpPipe,
    generator: Generator,
    cases: int,
    extra: list[tuple[str, bytes]] | None = None,
    timeout: float = 300,
) -> Tally:
    """Send `cases` generated lines (then `extra` ones), ping, close stdin (the server
    finishes what runs, then exits) and account for every answer."""
    tally = Tally()
    before = len(pipe.answers)
    owed: dict[str, tuple[str, bytes]] = {}  # answer id (as JSON) -> kind, line
    nulls: list[tuple[str, bytes]] = []
    generated = (generator.case() for _ in range(cases))
    for kind, line in itertools.chain(generated, extra or []):
        want = expected(line)
        shown = line[:1000]  # what a report quotes
        if want == NULL_ID:
            nulls.append((kind, shown))
        elif want == NO_ANSWER:
            tally.add(kind, "no answer")
        elif json.dumps(want[1]) in owed:
            continue  # the same id twice (random JSON can repeat one): not sent
        else:
            owed[json.dumps(want[1])] = (kind, shown)
        with contextlib.suppress(BrokenPipeError):  # the server died: found just below
            pipe.send(line)
        if not pipe.alive():
            tally.problems.append(f"the server exited (seen after a {kind} case: {line[:300]!r})")
            return tally
        # several in flight at once, never past the server's bound (those are answered
        # busy by design: a test of its own), whatever the machine's speed
        with contextlib.suppress(AssertionError):  # one never answered is reported below
            pipe.wait(lambda answers: _in_flight(answers[before:], owed) < WINDOW, timeout)
    try:
        pipe.request("fuzz-done", "ping")
        pipe.answer("fuzz-done", timeout)
    except (AssertionError, BrokenPipeError) as exc:
        tally.problems.append(f"no answer to the last ping: {exc}")
    code = pipe.close(timeout)
    if code != 0:
        tally.problems.append(f"the server exited with {code} (when stdin closed)")
    tally.problems += [f"not a JSON-RPC answer ({why}): {line[:300]!r}" for line, why in pipe.bad]
    answers = pipe.answers[before:]
    counted = Counter(json.dumps(a["id"]) for a in answers if a["id"] is not None)
    for key, count in counted.items():
        if key not in owed and key != '"fuzz-done"':
            tally.problems.append(f"an answer nobody asked for: id {key[:200]}")
        elif count != 1:
            tally.problems.append(f"{count} answers to id {key[:200]}")
    for key, (kind, line) in owed.items():
        answer = pipe.by_id.get(key, [None])[0]
        tally.add(kind, outcome(answer))
        if answer is None:
            tally.problems.append(f"no answer to a {kind} case: {line[:300]!r}")
        elif "error" in answer and answer["error"]["code"] == -32603:
            tally.internal.append((kind, line, answer))
        elif "result" in answer and "INTERNAL_ERROR" in str(answer["result"].get("content"))[:40]:
            tally.daemon_failed.append((line, answer["result"]["content"][0]["text"]))
    null_answers = [a for a in answers if a["id"] is None]
    if len(null_answers) != len(nulls):
        tally.problems.append(f"{len(null_answers)} answers with id null for {len(nulls)} lines")
    for kind, _ in nulls:
        tally.add(kind, "error, id null")
    tally.null_codes.update(outcome(a) for a in null_answers)
    return tally
