"""`cofferctl lsp` answers every request once and never fails inside, whatever it is sent:
a seeded stream of the methods it serves with random, wrong-typed and hostile params
(positions past the end, huge lines, lone surrogates, deep nesting, links that never
close, notes and headings renamed to hostile names), notes opened and changed with hostile
text, against a real daemon and vault.
COFFER_LSP_FUZZ_CASES sets the number of cases (default 300)."""

from __future__ import annotations

import json
import os
import random
import subprocess
from typing import Any

from tests.support.daemon import BIN, Daemon
from tests.support.helpers import new_vault

SEED = 24_03
CASES = int(os.environ.get("COFFER_LSP_FUZZ_CASES", "300"))
INTERNAL_ERROR = -32603
REQUESTS = [
    "textDocument/definition", "textDocument/completion", "textDocument/hover",
    "textDocument/references", "textDocument/documentSymbol", "workspace/symbol",
    "textDocument/codeAction", "workspace/willRenameFiles", "textDocument/rename",
    "no/such/method",
]  # fmt: skip
NOTIFICATIONS = ["textDocument/didOpen", "textDocument/didChange", "textDocument/didClose"]
HOSTILE_TEXT = [
    "[[" * 5000, "](" * 5000 + "x", "#" * 10_000, "[[計画#" + "予" * 3000, "a" * 200_000,
    "<<<<<<< HEAD\nx\n=======\ny\n>>>>>>> z\n" * 200, "[x](<" + " " * 1000, "\u0000\ud7ff",
    "[[a|" * 2000, "# " * 5000 + "\n" * 5000, "😀" * 5000 + "[[😀]]",
]  # fmt: skip


HOSTILE_NAMES = [
    "a]]b",
    "a|b",
    "a#b",
    "a^b",
    "a[[b",
    "a\nb",
    "a\rb",
    "a\u2028b",
    "a%20b",
    "x) [[y]] (",
    "A\rB",
    "A\u2028B",
    "A]]B",
    "A|B",
    "A) B",
    "Plan ##",
    "C# at 100%25",
]  # fmt: skip  (renamed notes' names and headings' new text)


def frame(message: Any) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def answers(out: bytes) -> list[dict[str, Any]]:
    found = []
    while out:
        head, _, rest = out.partition(b"\r\n\r\n")
        length = int(head.split(b":")[1])
        found.append(json.loads(rest[:length]))
        out = rest[length:]
    return found


def value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(9 if depth < 4 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False, 0, -1, 2**63, 1.5])
    if kind == 2:
        return rng.choice(["", "x", "\ud800", "file:///etc/passwd", "file:///" + "a/" * 500])
    if kind in (3, 4, 5):
        return rng.randrange(-5, 100_000)
    if kind == 6:
        return [value(rng, depth + 1) for _ in range(rng.randrange(3))]
    return {rng.choice(["uri", "line", "character", "text", "query"]): value(rng, depth + 1)}


def params(rng: random.Random, uris: list[str], renamed: list[str]) -> dict[str, Any]:
    """Mostly well shaped (so the server's own work runs), sometimes anything."""
    if rng.random() < 0.2:
        got = value(rng)
        return got if isinstance(got, dict) else {"x": got}
    uri = rng.choice(uris)
    start = {"line": rng.randrange(-1, 40), "character": rng.randrange(-1, 300)}
    end = {"line": start["line"] + rng.randrange(2), "character": rng.randrange(300)}
    return {
        "textDocument": {"uri": uri, "version": rng.randrange(100)},
        "position": start,
        "range": {"start": start, "end": end},
        "context": {"diagnostics": []},
        "newName": rng.choice(["Budget", "", "a\nb", "計画 2", *HOSTILE_NAMES]),
        "query": rng.choice(["plan", "", "計", "x" * 300]),
        "files": [{"oldUri": uri, "newUri": rng.choice([*uris, *renamed])}],
    }


def test_every_request_is_answered_once_and_nothing_fails_inside(shared_daemon: Daemon) -> None:
    d = shared_daemon
    notes = {
        "projects/計画.md": "# 計画\n\n## 予算\n\n[[plan]] [[nowhere]]\n",
        "projects/plan.md": "# Plan\n\nsee [[計画#予算|money]] #team [b](計画.md#予算)\n",
        "archive/plan.md": "# Old plan\n",
    }
    kb = new_vault(d, "fz", notes)
    docs = d.docs(kb)
    uris = [(docs / p).as_uri() for p in [*notes, "new/today.md"]] + ["untitled:1", "file:///x"]
    renamed = [(docs / "projects" / f"{name}.md").as_uri() for name in HOSTILE_NAMES]
    rng = random.Random(SEED)
    stream = [frame({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}})]
    stream.append(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
    asked = [0]
    for case in range(1, CASES + 1):
        if rng.random() < 0.35:
            text = rng.choice([*HOSTILE_TEXT, *notes.values()])
            method = rng.choice(NOTIFICATIONS)
            item = {"uri": rng.choice(uris), "languageId": "markdown", "version": case}
            sent = {
                "textDocument": {**item, "text": text},
                "contentChanges": [{"text": text}],
            }
            stream.append(frame({"jsonrpc": "2.0", "method": method, "params": sent}))
        else:
            method = rng.choice(REQUESTS)
            stream.append(
                frame(
                    {
                        "jsonrpc": "2.0",
                        "id": case,
                        "method": method,
                        "params": params(rng, uris, renamed),
                    }
                )
            )
            asked.append(case)
    stream.append(frame({"jsonrpc": "2.0", "id": "end", "method": "shutdown"}))
    stream.append(frame({"jsonrpc": "2.0", "method": "exit"}))
    done = subprocess.run(
        [str(BIN / "cofferctl"), "lsp"],
        input=b"".join(stream),
        env=d.env(),
        capture_output=True,
        timeout=300,
    )
    replies = [a for a in answers(done.stdout) if "id" in a]
    ids = [a["id"] for a in replies]
    assert sorted(ids, key=str) == sorted([*asked, "end"], key=str)  # each once
    failed = [a for a in replies if a.get("error", {}).get("code") == INTERNAL_ERROR]
    assert failed == [], (failed[:3], done.stderr.decode()[-3000:])
    assert done.returncode == 0
    assert not (docs / "new").exists()  # nothing is written
