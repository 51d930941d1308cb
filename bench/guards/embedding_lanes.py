"""Issue 43 figures: a search and a save in one knowledge base while another bulk-embeds.

A real `cofferd` (the `--repo` checkout's code) in a scratch data home, two KBs on the
bundled multilingual model (multilingual-e5-small, vector and hybrid modes on): `live`,
20 CMRC 2018 paragraphs, embedded first; then `bulk`, 2,000 CJK chunks (CMRC 2018 and
JSQuAD paragraphs, cut at 400 characters, one file each), whose bulk pass runs for
many minutes. While it runs, over the Unix socket, one request at a time:

* query embedding: `--queries` CMRC questions searched in `probe` (the same 20 notes as
  `live`, vector mode: the time is the query's embedding and little else), p50/p95;
* search: the same questions in `live` (hybrid mode), p95; and how many of both fell
  back to keyword (`fallback` set, or another mode answered);
* a save: `--saves` new notes written to `live`'s folder one after another, each timed
  from the write until the status shows its vectors stored (polled every 50 ms).

`bulk` must still owe vectors at the end, or the figures were not taken beside its pass.
Targets: search p95 <= 100 ms, no fallback; each save's vectors within 2 s.

    .venv/bin/python -m bench.guards.embedding_lanes [--repo DIR] [--queries 40] [--saves 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from bench.common import (
    DATA,
    add_repo_argument,
    describe_code,
    exit_by_targets,
    kb_status,
    machine,
    percentile,
    scratch_home,
    start_daemon,
    stop_daemon,
    verdict,
    wait,
)
from cofferctl.client import Client

BULK_CHUNKS = 2000
LIVE_NOTES = 20
CHUNK_CHARS = 400  # under the 512 words (CJK characters) of a chunk: one chunk per file
SEARCH_P95_MS = 100.0
SAVE_S = 2.0
CONFIG = {
    "enabled_modes": ["keyword", "grep", "vector", "hybrid"],
    "default_mode": "hybrid",
    "embedding": {"provider": "local", "model": "multilingual-e5-small"},
}


def paragraphs(name: str) -> list[str]:
    with open(DATA / name / "corpus.jsonl", encoding="utf-8") as corpus:
        return [json.loads(line)["text"] for line in corpus]


def chunks(count: int) -> list[str]:
    found = []
    for text in paragraphs("cmrc2018-dev") + paragraphs("jsquad-valid"):
        found += [text[i : i + CHUNK_CHARS] for i in range(0, len(text), CHUNK_CHARS)]
    return found[:count]


def questions(count: int) -> list[str]:
    with open(DATA / "cmrc2018-dev" / "queries.jsonl", encoding="utf-8") as queries:
        return [json.loads(line)["text"] for line, _ in zip(queries, range(count), strict=False)]


def vectors_owed(client: Client, kb: str) -> int:
    entry = kb_status(client.get("/api/v1/status"), kb)
    return int(entry.get("vectors", {}).get("embed_pending", 0))


def embedded(client: Client, kb: str, documents: int) -> bool:
    entry = kb_status(client.get("/api/v1/status"), kb)
    owed = entry.get("vectors", {}).get("embed_pending", 0)
    return bool(entry["documents"] == documents and owed == 0)


def timed_search(client: Client, kb: str, query: str) -> tuple[float, Any]:
    started = time.perf_counter()
    found = client.post(client.kb(kb, "/search"), {"query": query})
    return (time.perf_counter() - started) * 1000, found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--saves", type=int, default=5)
    add_repo_argument(parser)
    args = parser.parse_args()

    home = scratch_home("lanes")
    socket_path = Path(f"/tmp/coffer-bench-lanes-{os.getpid()}.sock")
    daemon = start_daemon(args.repo, home, socket_path)
    client = Client(socket_path, actor="bench", timeout=120)
    try:
        wait(lambda: client.get("/api/v1/status")["startup_reconcile_done"], daemon, 120, 0.1)
        print(f"machine: {machine()}")
        print(f"code: {describe_code(args.repo)}")
        probe = {**CONFIG, "default_mode": "vector"}
        for kb, config in (("live", CONFIG), ("probe", probe)):
            client.post("/api/v1/knowledge_bases", {"name": kb, "config": config})
            for i, text in enumerate(paragraphs("cmrc2018-dev")[:LIVE_NOTES]):
                note = home / "knowledge" / kb / "docs" / f"note{i:02d}.md"
                note.write_text(text[:CHUNK_CHARS] + "\n", encoding="utf-8")
        for kb in ("live", "probe"):
            wait(lambda kb=kb: embedded(client, kb, LIVE_NOTES), daemon, 600, 0.2)
        live = home / "knowledge" / "live" / "docs"

        client.post("/api/v1/knowledge_bases", {"name": "bulk", "config": CONFIG})
        bulk = home / "knowledge" / "bulk" / "docs"
        staged = home / "staged"
        staged.mkdir()
        for i, text in enumerate(chunks(BULK_CHUNKS)):
            (staged / f"chunk{i:04d}.md").write_text(text + "\n", encoding="utf-8")
        shutil.rmtree(bulk)
        staged.rename(bulk)
        wait(lambda: vectors_owed(client, "bulk") >= BULK_CHUNKS * 0.9, daemon, 600, 0.2)
        print(f"bulk: {BULK_CHUNKS} CJK chunks indexed; their vectors owed, being embedded")

        asked = questions(args.queries)
        embedding_ms, search_ms, fallbacks = [], [], 0
        for query in asked:
            took, found = timed_search(client, "probe", query)
            embedding_ms.append(took)
            fallbacks += found["mode"] != "vector" or found.get("fallback") is not None
            took, found = timed_search(client, "live", query)
            search_ms.append(took)
            fallbacks += found["mode"] != "hybrid" or found.get("fallback") is not None
        save_s = []
        for n in range(args.saves):
            text = f"# 新笔记 {n}\n\n{paragraphs('jsquad-valid')[-1 - n][:CHUNK_CHARS]}\n"
            started = time.perf_counter()
            (live / f"saved{n}.md").write_text(text, encoding="utf-8")
            count = LIVE_NOTES + n + 1
            wait(lambda count=count: embedded(client, "live", count), daemon, 600, 0.05)
            save_s.append(time.perf_counter() - started)
        still_owed = vectors_owed(client, "bulk")

        e50, e95 = percentile(embedding_ms, 50), percentile(embedding_ms, 95)
        s50, s95 = percentile(search_ms, 50), percentile(search_ms, 95)
        print(
            f"query embedding (vector-mode search of {LIVE_NOTES} notes) over {len(asked)}"
            f" queries: p50 {e50:.0f} ms, p95 {e95:.0f} ms, max {max(embedding_ms):.0f} ms"
        )
        print(
            f"hybrid search over {len(asked)} queries: p50 {s50:.0f} ms, p95 {s95:.0f} ms,"
            f" max {max(search_ms):.0f} ms [target p95 <= {SEARCH_P95_MS:g} ms:"
            f" {verdict(s95 <= SEARCH_P95_MS, 'search p95 beside a bulk pass')}]"
        )
        print(
            f"fallbacks to keyword: {fallbacks} of {2 * len(asked)} searches [target 0:"
            f" {verdict(fallbacks == 0, 'no fallback')}]"
        )
        print(
            f"a save's vectors stored after: {', '.join(f'{s:.2f}' for s in save_s)} s"
            f" [target each <= {SAVE_S:g} s: {verdict(max(save_s) <= SAVE_S, 'save vectors')}]"
        )
        print(
            f"bulk still owes {still_owed} of {BULK_CHUNKS} documents' vectors at the end"
            f" [target > 0, the figures taken beside its pass:"
            f" {verdict(still_owed > 0, 'bulk pass under way')}]"
        )
    finally:
        stop_daemon(daemon)
        shutil.rmtree(home, ignore_errors=True)
        socket_path.unlink(missing_ok=True)
    exit_by_targets()


if __name__ == "__main__":
    main()
