"""`cofferctl lsp`: spawn to the `initialize` answer, and on tldr-pages (~38k notes) the
diagnostics of a 1,000-line note full of links (open and change: the message sent until
`publishDiagnostics` arrives) and go to definition, through a raw client on pipes (no
client library's own cost in the figures):

    .venv/bin/python -m bench.guards.lsp_latency [--repo PATH] [--spawns 20] [--rounds 30]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import IO, Any

from bench.common import (
    BIN,
    add_repo_argument,
    code_env,
    describe_code,
    exit_by_targets,
    extract_tldr,
    indexer_idle,
    machine,
    percentile,
    scratch_home,
    start_daemon,
    stop_daemon,
    verdict,
    wait,
)
from cofferctl.client import Client

KB = "tldr"


class RawClient:
    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [str(BIN / "cofferctl"), "lsp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        self.next_id = 0

    def send(self, method: str, params: dict[str, Any], request: bool = True) -> int | None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        if request:
            self.next_id += 1
            message["id"] = self.next_id
        body = json.dumps(message).encode()
        stdin: IO[bytes] = self.proc.stdin  # type: ignore[assignment]
        stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        stdin.flush()
        return self.next_id if request else None

    def receive(self) -> dict[str, Any]:
        stdout: IO[bytes] = self.proc.stdout  # type: ignore[assignment]
        length = 0
        while (line := stdout.readline()) not in (b"\r\n", b""):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        found: dict[str, Any] = json.loads(stdout.read(length))
        return found

    def until(self, wanted: str | int) -> dict[str, Any]:
        while True:
            message = self.receive()
            if message.get("id") == wanted or message.get("method") == wanted:
                return message

    def close(self) -> None:
        """Shut the server down, reading what it still says (diagnostics it publishes
        meanwhile would fill the pipe and hold it) until it exits."""
        ending = self.send("shutdown", {})
        assert ending is not None
        self.until(ending)
        self.send("exit", {}, request=False)
        stdout: IO[bytes] = self.proc.stdout  # type: ignore[assignment]
        stdout.read()
        self.proc.wait(10)


def spawn_to_initialize(env: dict[str, str], spawns: int) -> list[float]:
    took = []
    for _ in range(spawns):
        started = time.perf_counter()
        client = RawClient(env)
        wanted = client.send("initialize", {"capabilities": {}})
        assert wanted is not None
        client.until(wanted)
        took.append((time.perf_counter() - started) * 1000)
        client.close()
    return took


def long_note(pages: list[str]) -> str:
    """1,000 lines: headings, prose, and links that resolve, are ambiguous or broken."""
    lines = []
    for i in range(1000):
        page = pages[(i * 37) % len(pages)]
        name = page.rsplit("/", 1)[-1].removesuffix(".md")
        if i % 50 == 0:
            lines.append(f"## Part {i // 50}")
        elif i % 3 == 0:
            lines.append(f"See [[{name}]] and [its page](../../{page}) for the {name} command.")
        elif i % 7 == 0:
            lines.append(f"A [[missing-note-{i}]] here, and `[[{name}]]` in code.")
        else:
            lines.append(f"Plain prose about {name}, the shell and its options, line {i}.")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--spawns", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=30)
    add_repo_argument(parser)
    args = parser.parse_args()
    home = scratch_home("lsp")
    socket_path = Path(f"/tmp/coffer-bench-lsp-{os.getpid()}.sock")
    env = code_env(args.repo, COFFER_HOME=str(home), COFFER_SOCKET=str(socket_path))
    print(f"machine: {machine()}; code: {describe_code(args.repo)}", flush=True)
    took = spawn_to_initialize(env, args.spawns)
    print(
        f"spawn to initialize: p50 {percentile(took, 50):.0f} ms, p95 "
        f"{percentile(took, 95):.0f} ms over {len(took)} "
        f"[target <= 300 ms: {verdict(percentile(took, 95) <= 300)}]",
        flush=True,
    )
    docs = home / "knowledge" / KB / "docs"
    corpus = extract_tldr(home / "src")
    shutil.copytree(corpus, docs, symlinks=True)
    shutil.rmtree(home / "src")
    pages = sorted(
        p.relative_to(docs).as_posix()
        for p in docs.rglob("*.md")
        if not p.name.startswith(".") and not p.is_symlink()
    )
    client_api = Client(socket_path)
    daemon = start_daemon(args.repo, home, socket_path)
    try:
        wait(lambda: indexer_idle(client_api.get("/api/v1/status")), daemon, 900, 0.5)
        count = client_api.get(client_api.kb(KB, "/metrics"))["documents"]
        print(f"{count:,} notes indexed", flush=True)
        measure_note(env, docs, pages, args.rounds, client_api)
    finally:
        stop_daemon(daemon)
        shutil.rmtree(home, ignore_errors=True)
        socket_path.unlink(missing_ok=True)


def measure_note(
    env: dict[str, str], docs: Path, pages: list[str], rounds: int, api: Client
) -> None:
    client = RawClient(env)
    ready = client.send("initialize", {"capabilities": {}})
    assert ready is not None
    client.until(ready)
    client.send("initialized", {}, request=False)
    note = docs / "pages" / "notes" / "long.md"  # in a folder of its own: ../ links resolve
    uri = note.as_uri()
    text = long_note(pages)
    opened, changed = [], []
    for version in range(rounds):
        started = time.perf_counter()
        item = {"uri": uri, "languageId": "markdown", "version": 1, "text": text}
        client.send("textDocument/didOpen", {"textDocument": item}, request=False)
        published = client.until("textDocument/publishDiagnostics")
        opened.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        edited = text + f"edit {version} [[another-missing-{version}]]\n"
        change = {
            "textDocument": {"uri": uri, "version": 2},
            "contentChanges": [{"text": edited}],
        }
        client.send("textDocument/didChange", change, request=False)
        client.until("textDocument/publishDiagnostics")
        changed.append((time.perf_counter() - started) * 1000)
        client.send("textDocument/didClose", {"textDocument": {"uri": uri}}, request=False)
        client.until("textDocument/publishDiagnostics")
    found = len(published["params"]["diagnostics"])
    worst = max(percentile(opened, 95), percentile(changed, 95))
    print(
        f"diagnostics of a 1,000-line note ({found} diagnostics): open p50 "
        f"{percentile(opened, 50):.1f} / p95 {percentile(opened, 95):.1f} ms, change p50 "
        f"{percentile(changed, 50):.1f} / p95 {percentile(changed, 95):.1f} ms "
        f"[target <= 100 ms: {verdict(worst <= 100)}]",
        flush=True,
    )
    item = {"uri": uri, "languageId": "markdown", "version": 1, "text": text}
    client.send("textDocument/didOpen", {"textDocument": item}, request=False)
    client.until("textDocument/publishDiagnostics")
    lines = text.split("\n")
    linked = [n for n, line in enumerate(lines) if line.startswith("See [[")]
    jumps = []
    for n in range(rounds * 5):
        line_no = linked[n % len(linked)]
        started = time.perf_counter()
        position = {"line": line_no, "character": 6}
        wanted = client.send(
            "textDocument/definition", {"textDocument": {"uri": uri}, "position": position}
        )
        assert wanted is not None
        answer = client.until(wanted)
        jumps.append((time.perf_counter() - started) * 1000)
        assert answer.get("result"), answer
    print(
        f"go to definition: p50 {percentile(jumps, 50):.2f} / p95 "
        f"{percentile(jumps, 95):.2f} ms over {len(jumps)} "
        f"[target p95 <= 50 ms: {verdict(percentile(jumps, 95) <= 50)}]",
        flush=True,
    )
    measure_completion(client, uri, text, rounds)
    measure_after_saves(client, uri, text, docs, pages, api, rounds)
    client.close()


def measure_after_saves(
    client: RawClient, uri: str, text: str, docs: Path, pages: list[str], api: Client, rounds: int
) -> None:
    """The first completion after a note was saved (and indexed): answered from the names
    read before while the daemon reads them again; and how long until its names are
    current (`fresh`), asked every 5 ms."""
    edited = text + "see [[ta"
    change = {"textDocument": {"uri": uri, "version": 999}, "contentChanges": [{"text": edited}]}
    client.send("textDocument/didChange", change, request=False)
    client.until("textDocument/publishDiagnostics")
    lines = edited.split("\n")
    position = {"line": len(lines) - 1, "character": len(lines[-1])}
    took, current = [], []
    for n in range(min(rounds, 10)):
        token = f"zqsaved{n}x"
        with open(docs / pages[n * 97], "a", encoding="utf-8") as fh:
            fh.write(f"\n{token}\n")
        deadline = time.perf_counter() + 30
        while not api.post(api.kb(KB, "/search"), {"query": token, "top_k": 1})["passages"]:
            assert time.perf_counter() < deadline, "the save was not indexed"
            time.sleep(0.01)
        started = time.perf_counter()
        wanted = client.send(
            "textDocument/completion", {"textDocument": {"uri": uri}, "position": position}
        )
        assert wanted is not None
        client.until(wanted)
        took.append((time.perf_counter() - started) * 1000)
        while not api.get(api.kb(KB, "/names"), q="ta", limit=1)["fresh"]:
            assert time.perf_counter() < deadline, "the names were not read again"
            time.sleep(0.005)
        current.append((time.perf_counter() - started) * 1000)
    print(
        f"first completion after a save: p50 {percentile(took, 50):.1f} / max "
        f"{max(took):.1f} ms over {len(took)}; names current after p50 "
        f"{percentile(current, 50):.0f} / max {max(current):.0f} ms",
        flush=True,
    )


TYPED = ["", "t", "ta", "tar", "git c", "dock", "xyzq", "計", "ファイ", "압축", "lsof"]


def measure_completion(client: RawClient, uri: str, text: str, rounds: int) -> None:
    """After `[[` and each of TYPED, as typed at the end of the note."""
    took = []
    counts = {}
    by_typed: dict[str, list[float]] = {}
    for n in range(rounds):
        for typed in TYPED:
            edited = text + f"see [[{typed}"
            change = {
                "textDocument": {"uri": uri, "version": n + 3},
                "contentChanges": [{"text": edited}],
            }
            client.send("textDocument/didChange", change, request=False)
            client.until("textDocument/publishDiagnostics")
            lines = edited.split("\n")
            position = {
                "line": len(lines) - 1,
                "character": len(lines[-1].encode("utf-16-le")) // 2,
            }
            started = time.perf_counter()
            wanted = client.send(
                "textDocument/completion", {"textDocument": {"uri": uri}, "position": position}
            )
            assert wanted is not None
            answer = client.until(wanted)
            took.append((time.perf_counter() - started) * 1000)
            by_typed.setdefault(typed, []).append(took[-1])
            counts[typed] = len(answer["result"]["items"]) if answer.get("result") else 0
    print(
        f"completion after [[ ({len(TYPED)} prefixes, items: "
        f"{', '.join(f'{t or chr(8709)}={c}' for t, c in counts.items())}): p50 "
        f"{percentile(took, 50):.1f} / p95 {percentile(took, 95):.1f} ms over {len(took)} "
        f"[target p95 <= 50 ms: {verdict(percentile(took, 95) <= 50)}]; p95 by prefix: "
        f"{', '.join(f'{t or chr(8709)}={percentile(v, 95):.1f}' for t, v in by_typed.items())}",
        flush=True,
    )


if __name__ == "__main__":
    main()
    exit_by_targets()
