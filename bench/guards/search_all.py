"""Issue 12 figures: search latency in the real daemon, one KB and every KB at once.

A real `cofferd` runs in a scratch data home (under /tmp/search-all-bench/) with four
keyword-mode knowledge bases made through the API: `tldr` (tldr-pages, every language,
~38,400 files), `scifact` (5,183 abstracts), `cmrc` (848 Chinese paragraphs) and `jsquad`
(1,145 Japanese paragraphs); BEIR documents are `# title` + text, one file each. The
default KB the daemon makes in an empty home is deleted first, so "every KB" is these
four. The corpora are staged on the same file system, then moved into the docs folders
while the daemon runs; indexing time is from the moves until every KB holds all its
documents and the queue is empty (status polled every 0.1 s).

Then, over HTTP on the Unix socket with one persistent connection, timing each round trip
in the client (request sent to body read), after 20 warm-up queries each:

* (a) `POST /api/v1/knowledge_bases/tldr/search`, 300 tldr queries: 150 command names
  (page titles) and 150 description lines in en, zh, ja, ko, es, de, fr, ru;
* (b) `POST /api/v1/search` without `knowledge_bases` (every enabled KB, merged by rank
  fusion), 400 queries shuffled: 100 tldr (as above), 100 SciFact test claims,
  100 CMRC 2018 questions, 100 JSQuAD questions;

top_k 10; p50/p95 overall, per query set and per query language. Also the daemon's RSS
after indexing. Targets: (a) p50 <= 5 ms, p95 <= 25 ms; (b) p50 <= 25 ms.

    .venv/bin/python -m bench.guards.search_all [--queries N] [--keep]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from bench.common import (
    count_documents,
    exit_by_targets,
    extract_tldr,
    machine,
    memory_mb,
    percentile,
    verdict,
)
from bench.guards.scifact_keyword import load_beir, write_beir
from tests.support.cofferd_process import start_cofferd

BIN = Path(sys.executable).parent
SCRATCH = Path("/tmp/search-all-bench")
# KB name -> (data folder, language of its queries)
BEIR_SETS = {
    "scifact": ("scifact", "en"),
    "cmrc": ("cmrc2018-dev", "zh"),
    "jsquad": ("jsquad-valid", "ja"),
}
KBS = ("tldr", *BEIR_SETS)
TOP_K = 10
WARMUP = 20
PER_KB_QUERIES = 300
PER_SET_QUERIES = 100
POLL_S = 0.1
INDEX_TIMEOUT_S = 1800.0
# Shares of the tldr description-line queries, by language of the page.
DESCRIPTION_LANGS = {"en": 10, "zh": 4, "ja": 4, "ko": 4, "es": 2, "de": 2, "fr": 2, "ru": 2}


@dataclass(frozen=True)
class Query:
    text: str
    source: str  # tldr, scifact, cmrc, jsquad
    lang: str  # the language of the words; `cmd` for command names


# -- queries ------------------------------------------------------------------------------


def page_language(folder: str) -> str:
    return "en" if folder == "pages" else folder.removeprefix("pages.")


def tldr_pages(corpus: Path) -> dict[str, list[Path]]:
    """Page files by language (`pages.en` is a link to `pages`: not a language of its own)."""
    pages: dict[str, list[Path]] = {}
    for folder in sorted(corpus.iterdir()):
        if folder.is_dir() and not folder.is_symlink() and folder.name.startswith("pages"):
            pages[page_language(folder.name)] = sorted(folder.rglob("*.md"))
    return pages


def page_title(text: str) -> str | None:
    for line in text.splitlines():
        if line.startswith("# "):
            return line[2:].strip() or None
    return None


def page_description(text: str) -> str | None:
    """The first `> ` line that is not the link to more information."""
    for line in text.splitlines():
        if line.startswith("> ") and "<http" not in line:
            return line[2:].strip().rstrip(".。") or None
    return None


def tldr_queries(pages: dict[str, list[Path]], n: int, seed: int) -> list[Query]:
    """n realistic tldr queries: half command names, half description lines."""
    rng = random.Random(seed)
    commands = n // 2
    weights = sum(DESCRIPTION_LANGS.values())
    quotas = {lang: (n - commands) * w // weights for lang, w in DESCRIPTION_LANGS.items()}
    quotas["en"] += n - commands - sum(quotas.values())
    queries: list[Query] = []

    def draw(lang: str, count: int, read: Callable[[str], str | None], label: str) -> None:
        seen: set[str] = set()
        for path in rng.sample(pages[lang], len(pages[lang])):
            if len(seen) == count:
                break
            text = read(path.read_text(encoding="utf-8"))
            if text and text not in seen:
                seen.add(text)
                queries.append(Query(text, "tldr", label))

    draw("en", commands, page_title, "cmd")
    for lang, count in quotas.items():
        draw(lang, count, page_description, lang)
    rng.shuffle(queries)
    return queries


def beir_queries(kb: str, n: int, seed: int) -> list[Query]:
    """n test queries of a BEIR set, sampled with a fixed seed."""
    name, lang = BEIR_SETS[kb]
    _, queries, qrels = load_beir(name)
    ids = sorted(qrels)
    return [Query(queries[q], kb, lang) for q in random.Random(seed).sample(ids, min(n, len(ids)))]


# -- the corpora --------------------------------------------------------------------------


def stage_beir(kb: str, into: Path) -> Path:
    name, _ = BEIR_SETS[kb]
    corpus, _, _ = load_beir(name)
    folder = into / kb
    folder.mkdir(parents=True)
    write_beir(folder, corpus)
    return folder


# -- the daemon over its socket -----------------------------------------------------------


class ApiFailed(Exception):
    pass


class Api:
    """One persistent HTTP/1.1 connection to cofferd's Unix socket."""

    def __init__(self, socket_path: Path) -> None:
        connector = aiohttp.UnixConnector(path=str(socket_path), limit=1)
        self.session = aiohttp.ClientSession(
            connector=connector,
            base_url="http://cofferd",
            timeout=aiohttp.ClientTimeout(total=600),
            headers={"X-Coffer-Actor": "bench"},
        )

    async def close(self) -> None:
        await self.session.close()

    async def timed(self, method: str, path: str, body: Any = None) -> tuple[float, Any]:
        """(round trip in ms, decoded body); an error status raises ApiFailed."""
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data is not None else None
        started = time.perf_counter()
        async with self.session.request(method, path, data=data, headers=headers) as resp:
            raw = await resp.read()
        elapsed = (time.perf_counter() - started) * 1000
        decoded = json.loads(raw) if raw else None
        if resp.status >= 400:
            raise ApiFailed(f"{method} {path} -> {resp.status}: {decoded}")
        return elapsed, decoded

    async def call(self, method: str, path: str, body: Any = None) -> Any:
        return (await self.timed(method, path, body))[1]


async def wait_until_up(api: Api, daemon: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        if daemon.poll() is not None:
            raise RuntimeError(f"cofferd exited with {daemon.returncode}")
        try:
            status = await api.call("GET", "/api/v1/status")
            if status["startup_reconcile_done"]:
                return
        except (aiohttp.ClientConnectionError, FileNotFoundError):
            pass
        await asyncio.sleep(POLL_S)
    raise TimeoutError("cofferd did not come up")


async def wait_indexed(
    api: Api, expected: dict[str, int], started: float
) -> tuple[dict[str, float], dict[str, int]]:
    """Poll status until every KB holds its expected documents and nothing is queued.
    Returns seconds (since `started`) at which each KB was complete, and the counts."""
    done_at: dict[str, float] = {}
    last: dict[str, int] = {}
    stable_polls = 0
    while time.perf_counter() - started < INDEX_TIMEOUT_S:
        status = await api.call("GET", "/api/v1/status")
        counts = {kb["name"]: kb["documents"] for kb in status["knowledge_bases"]}
        now = time.perf_counter() - started
        for name, want in expected.items():
            if name not in done_at and counts.get(name, 0) >= want:
                done_at[name] = now
        idle = status["queue_depth"] == 0 and not status["watcher"]["busy"]
        if idle and len(done_at) == len(expected):
            return done_at, counts
        for kb in status["knowledge_bases"]:
            if kb["state"] != "ok":
                print(f"  warning: KB {kb['name']} is {kb['state']}: {kb.get('problem')}")
        # Some files may be refused (too large, unreadable): settle once idle and unchanged
        # for 10 s rather than wait for a count that will never come.
        stable_polls = stable_polls + 1 if idle and counts == last else 0
        if stable_polls * POLL_S >= 10:
            print(f"  warning: settled short of the expected counts: {counts} vs {expected}")
            for name in expected:
                done_at.setdefault(name, now)
            return done_at, counts
        last = counts
        await asyncio.sleep(POLL_S)
    raise TimeoutError(f"not indexed after {INDEX_TIMEOUT_S:.0f} s")


# -- measuring ----------------------------------------------------------------------------


@dataclass
class Timing:
    query: Query
    ms: float
    hits: int


async def run_queries(
    api: Api, path: str, queries: list[Query], warmup: list[Query], expect_kbs: set[str] | None
) -> list[Timing]:
    for q in warmup:
        await api.call("POST", path, {"query": q.text, "top_k": TOP_K})
    timings = []
    for q in queries:
        ms, body = await api.timed("POST", path, {"query": q.text, "top_k": TOP_K})
        if expect_kbs is not None and set(body["knowledge_bases"]) != expect_kbs:
            raise ApiFailed(f"searched {sorted(body['knowledge_bases'])}, not {sorted(expect_kbs)}")
        modes = (
            {a["mode"] for a in body["knowledge_bases"].values()}
            if expect_kbs is not None
            else {body["mode"]}
        )
        if modes != {"keyword"}:
            raise ApiFailed(f"answered in {modes}, not keyword")
        timings.append(Timing(q, ms, len(body["passages"])))
    return timings


def stats(label: str, timings: list[Timing], width: int = 22) -> str:
    ms = [t.ms for t in timings]
    hit = sum(1 for t in timings if t.hits)
    return (
        f"  {label:<{width}} n={len(ms):>3}  p50 {percentile(ms, 50):6.2f} ms"
        f"  p95 {percentile(ms, 95):6.2f} ms  max {max(ms):7.2f} ms  with hits {hit}/{len(ms)}"
    )


def report(title: str, timings: list[Timing], by_source: bool) -> None:
    print(title)
    print(stats("all", timings))
    if by_source:
        groups: dict[str, list[Timing]] = defaultdict(list)
        for t in timings:
            groups[t.query.source].append(t)
        for source in KBS:
            if groups.get(source):
                print(stats(f"set {source}", groups[source]))
    langs: dict[str, list[Timing]] = defaultdict(list)
    for t in timings:
        langs[t.query.lang].append(t)
    for lang in sorted(langs, key=lambda k: (-len(langs[k]), k)):
        print(stats(f"lang {lang}", langs[lang]))


def progress(message: str, since: float) -> None:
    print(f"[{time.perf_counter() - since:6.1f} s] {message}", file=sys.stderr, flush=True)


# -- the run ------------------------------------------------------------------------------


async def run(per_kb: int, per_set: int, keep: bool) -> None:
    SCRATCH.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="home-", dir=SCRATCH))
    socket_path = home / "cofferd.sock"
    staging = home / "staging"
    print(f"machine: {machine()}")
    print(f"scratch data home: {home}")
    begun = time.perf_counter()

    # Stage the corpora and draw the queries before the daemon starts (not timed).
    tldr_corpus = extract_tldr(staging / "tldr")
    staged: dict[str, list[Path]] = {"tldr": sorted(tldr_corpus.iterdir())}
    expected = {"tldr": count_documents(tldr_corpus)}
    for kb in BEIR_SETS:
        folder = stage_beir(kb, staging)
        staged[kb] = [folder]
        expected[kb] = count_documents(folder)
    pages = tldr_pages(tldr_corpus)
    tldr_warm = tldr_queries(pages, WARMUP, seed=1)
    tldr_a = tldr_queries(pages, per_kb, seed=2)
    mixed = tldr_queries(pages, per_set, seed=3)
    mixed_warm = tldr_queries(pages, WARMUP // 4, seed=4)
    for i, kb in enumerate(BEIR_SETS):
        drawn = beir_queries(kb, per_set + WARMUP // 4, seed=10 + i)
        mixed_warm += drawn[: WARMUP // 4]
        mixed += drawn[WARMUP // 4 :]
    random.Random(5).shuffle(mixed)
    random.Random(6).shuffle(mixed_warm)

    progress("corpora staged, queries drawn; starting cofferd", begun)
    env = {**os.environ, "COFFER_HOME": str(home), "COFFER_SOCKET": str(socket_path)}
    daemon = start_cofferd(env, log_level="WARNING")
    api = Api(socket_path)
    try:
        await wait_until_up(api, daemon)
        progress("cofferd is up; making the KBs", begun)
        for kb in (await api.call("GET", "/api/v1/knowledge_bases"))["knowledge_bases"]:
            await api.call("DELETE", f"/api/v1/knowledge_bases/{kb['name']}")  # the default
        config = {"enabled_modes": ["keyword", "grep"], "default_mode": "keyword"}
        for kb in KBS:
            await api.call("POST", "/api/v1/knowledge_bases", {"name": kb, "config": config})
        status = await api.call("GET", "/api/v1/status")
        docs = {kb["name"]: Path(kb["docs_path"]) for kb in status["knowledge_bases"]}

        progress("moving the corpora in", begun)
        started = time.perf_counter()
        for kb in KBS:
            for entry in staged[kb]:
                entry.rename(docs[kb] / entry.name)
        done_at, counts = await wait_indexed(api, expected, started)
        indexed_s = max(done_at.values())
        rss, peak = memory_mb(daemon.pid)
        print(
            f"indexed {sum(counts.values()):,} documents in {indexed_s:.1f} s "
            f"(moved into 4 new KBs at once; each complete at: "
            + ", ".join(f"{kb} {counts[kb]:,} @ {done_at[kb]:.1f} s" for kb in KBS)
            + ")"
        )
        print(f"daemon RSS after indexing: {rss:.0f} MB (peak {peak:.0f} MB)")

        one_kb = "/api/v1/knowledge_bases/tldr/search"
        progress("indexed; measuring", begun)
        per_kb_t = await run_queries(api, one_kb, tldr_a, tldr_warm, None)
        all_t = await run_queries(api, "/api/v1/search", mixed, mixed_warm, set(KBS))
        rss_end, peak_end = memory_mb(daemon.pid)
        progress("measured; stopping cofferd", begun)
    finally:
        await api.close()
        daemon.terminate()
        daemon.wait(30)
        progress("cofferd stopped", begun)
        if not keep:
            progress("removing the scratch home (slow on some disks)", begun)
            shutil.rmtree(home, ignore_errors=True)
        progress("done", begun)

    report(f"(a) tldr KB search, {len(per_kb_t)} queries, top_k {TOP_K}:", per_kb_t, False)
    report(f"(b) search across all 4 KBs, {len(all_t)} queries, top_k {TOP_K}:", all_t, True)
    print(f"daemon RSS after the queries: {rss_end:.0f} MB (peak {peak_end:.0f} MB)")
    a = [t.ms for t in per_kb_t]
    b = [t.ms for t in all_t]
    a50, a95, b50 = percentile(a, 50), percentile(a, 95), percentile(b, 50)
    print(
        f"targets: tldr p50 <= 5 ms ({a50:.2f}: {verdict(a50 <= 5)}), "
        f"p95 <= 25 ms ({a95:.2f}: {verdict(a95 <= 25)}); "
        f"all KBs p50 <= 25 ms ({b50:.2f}: {verdict(b50 <= 25)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--queries",
        type=int,
        default=None,
        metavar="N",
        help=f"at most N queries per set (default {PER_KB_QUERIES} for the tldr KB, "
        f"{PER_SET_QUERIES} per set across all KBs)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch data home")
    args = parser.parse_args()
    per_kb = min(args.queries, PER_KB_QUERIES) if args.queries else PER_KB_QUERIES
    per_set = min(args.queries, PER_SET_QUERIES) if args.queries else PER_SET_QUERIES
    asyncio.run(run(per_kb, per_set, args.keep))


if __name__ == "__main__":
    main()
    exit_by_targets()
