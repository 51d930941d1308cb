"""`cofferctl lsp`: spawn to the `initialize` answer, and on tldr-pages (~38k notes) the
diagnostics of a 1,000-line note full of links (open and change: the message sent until
`publishDiagnostics` arrives) and go to definition, through tests.support.lsp_pipe's raw
client on pipes (no client library's own cost in the figures):

    .venv/bin/python -m bench.guards.lsp_latency [--repo PATH] [--spawns 20] [--rounds 30]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import queue
import shutil
import time
from pathlib import Path
from typing import Any

from bench.common import (
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
from tests.support.lsp_pipe import RawClient

KB = "tldr"
WITHIN_S = 120.0  # a slow answer is a figure (over its target), not a failure


def client_of(env: dict[str, str]) -> RawClient:
    """`cofferctl lsp` as a user runs it (its own bound on each call to the daemon)."""
    return RawClient(env, daemon_bound_s=None)


def published(
    client: RawClient, uri: str, method: str, params: dict[str, Any]
) -> tuple[float, list[dict[str, Any]]]:
    """Milliseconds from sending notification `method` until the diagnostics of `uri`
    arrive, and those diagnostics (any published before it was sent do not count)."""
    with contextlib.suppress(queue.Empty):
        while True:
            client.notes.get_nowait()
    started = time.perf_counter()
    client.notify(method, params)
    found = client.diagnostics(uri, within=WITHIN_S)
    return (time.perf_counter() - started) * 1000, found


def asked(client: RawClient, method: str, params: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    """Milliseconds from sending request `method` until its answer arrives, and the answer."""
    started = time.perf_counter()
    answer = client.ask(method, params, within=WITHIN_S)
    return (time.perf_counter() - started) * 1000, answer


def spawn_to_initialize(env: dict[str, str], spawns: int) -> list[float]:
    took = []
    for _ in range(spawns):
        started = time.perf_counter()
        client = client_of(env)
        client.ask("initialize", {"capabilities": {}}, within=WITHIN_S)
        took.append((time.perf_counter() - started) * 1000)
        client.end()
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
        f"[target <= 300 ms: {verdict(percentile(took, 95) <= 300, 'spawn p95')}]",
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
    client = client_of(env)
    client.ask("initialize", {"capabilities": {}}, within=WITHIN_S)
    client.notify("initialized", {})
    note = docs / "pages" / "notes" / "long.md"  # in a folder of its own: ../ links resolve
    uri = note.as_uri()
    text = long_note(pages)
    opened, changed = [], []
    found = 0
    for version in range(rounds):
        item = {"uri": uri, "languageId": "markdown", "version": 1, "text": text}
        took, diagnostics = published(client, uri, "textDocument/didOpen", {"textDocument": item})
        opened.append(took)
        found = len(diagnostics)
        edited = text + f"edit {version} [[another-missing-{version}]]\n"
        change = {
            "textDocument": {"uri": uri, "version": 2},
            "contentChanges": [{"text": edited}],
        }
        changed.append(published(client, uri, "textDocument/didChange", change)[0])
        published(client, uri, "textDocument/didClose", {"textDocument": {"uri": uri}})
    worst = max(percentile(opened, 95), percentile(changed, 95))
    print(
        f"diagnostics of a 1,000-line note ({found} diagnostics): open p50 "
        f"{percentile(opened, 50):.1f} / p95 {percentile(opened, 95):.1f} ms, change p50 "
        f"{percentile(changed, 50):.1f} / p95 {percentile(changed, 95):.1f} ms "
        f"[target <= 100 ms: {verdict(worst <= 100, 'diagnostics p95')}]",
        flush=True,
    )
    item = {"uri": uri, "languageId": "markdown", "version": 1, "text": text}
    published(client, uri, "textDocument/didOpen", {"textDocument": item})
    lines = text.split("\n")
    linked = [n for n, line in enumerate(lines) if line.startswith("See [[")]
    jumps = []
    for n in range(rounds * 5):
        position = {"line": linked[n % len(linked)], "character": 6}
        took, answer = asked(
            client, "textDocument/definition", {"textDocument": {"uri": uri}, "position": position}
        )
        jumps.append(took)
        assert answer.get("result"), answer
    print(
        f"go to definition: p50 {percentile(jumps, 50):.2f} / p95 "
        f"{percentile(jumps, 95):.2f} ms over {len(jumps)} "
        f"[target p95 <= 50 ms: {verdict(percentile(jumps, 95) <= 50, 'definition p95')}]",
        flush=True,
    )
    measure_completion(client, uri, text, rounds)
    measure_after_saves(client, uri, text, docs, pages, api, rounds)
    client.end()


def measure_after_saves(
    client: RawClient, uri: str, text: str, docs: Path, pages: list[str], api: Client, rounds: int
) -> None:
    """The first completion after a note was saved (and indexed): answered from the names
    read before while the daemon reads them again; and how long until its names are
    current (`fresh`), asked every 5 ms."""
    edited = text + "see [[ta"
    change = {"textDocument": {"uri": uri, "version": 999}, "contentChanges": [{"text": edited}]}
    published(client, uri, "textDocument/didChange", change)
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
        asked(
            client, "textDocument/completion", {"textDocument": {"uri": uri}, "position": position}
        )
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
            published(client, uri, "textDocument/didChange", change)
            lines = edited.split("\n")
            position = {
                "line": len(lines) - 1,
                "character": len(lines[-1].encode("utf-16-le")) // 2,
            }
            ms, answer = asked(
                client,
                "textDocument/completion",
                {"textDocument": {"uri": uri}, "position": position},
            )
            took.append(ms)
            by_typed.setdefault(typed, []).append(took[-1])
            counts[typed] = len(answer["result"]["items"]) if answer.get("result") else 0
    print(
        f"completion after [[ ({len(TYPED)} prefixes, items: "
        f"{', '.join(f'{t or chr(8709)}={c}' for t, c in counts.items())}): p50 "
        f"{percentile(took, 50):.1f} / p95 {percentile(took, 95):.1f} ms over {len(took)} "
        f"[target p95 <= 50 ms: {verdict(percentile(took, 95) <= 50, 'completion p95')}]; "
        "p95 by prefix: "
        f"{', '.join(f'{t or chr(8709)}={percentile(v, 95):.1f}' for t, v in by_typed.items())}",
        flush=True,
    )


if __name__ == "__main__":
    main()
    exit_by_targets()
