"""(b) cold full reconcile, (c) no-op full reconcile, (d) keyword query latency, on tldr-pages.

In-process (no daemon), with the code of `--repo` (default this checkout; another checkout
is run by bench.common.run_in_repo).

.venv/bin/python -m bench.guards.tldr_index [--repo PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

from bench.common import (
    add_repo_argument,
    describe_code,
    exit_by_targets,
    extract_tldr,
    machine,
    median,
    peak_rss_mb,
    percentile,
    run_in_repo,
    scratch_home,
    verdict,
)
from coffer_kernel.locations import Locations
from cofferd.surfaces.core import Coffer

# 50 fixed queries: English words and phrases, identifiers, and CJK terms of 1-3 characters.
QUERIES = [
    "tar", "extract archive", "list files", "git commit", "docker run", "network interface",
    "compress", "ssh key", "kill process", "disk usage", "change permissions", "io",
    "config.yaml", "k8s", "python virtual environment", "http request", "search text",
    "rename", "copy directory recursively", "show help", "version", "download file",
    "the", "print current working directory", "environment variable",
    "压缩", "文件", "目录", "进程", "网络", "下载", "删除", "显示", "提交", "镜像",
    "ファイル", "ディレクトリ", "圧縮", "表示", "検索",
    "파일", "디렉토리", "압축", "표시", "검색",
    "东", "京", "git 提交", "docker 镜像", "tar 压缩",
]  # fmt: skip
# issue 2's targets
TARGET_FILES_S, TARGET_RSS_MB, TARGET_NOOP_S = 2_800, 200, 1.0
TARGET_P50_MS, TARGET_P95_MS = 5, 25


async def run(repo: Path) -> None:
    home = scratch_home("tldr")
    locations = Locations(home=home, socket=home / "cofferd.sock")
    async with await Coffer.open(locations) as coffer:
        kb = await coffer.kbs.create("tldr")
        docs = locations.docs_dir("tldr")
        docs.rmdir()
        extract_tldr(home / "src").rename(docs)
        files = [p for p in docs.rglob("*.md") if p.is_file() and not p.is_symlink()]
        total_bytes = sum(p.stat().st_size for p in files)

        started = time.perf_counter()
        cold = await coffer.reindexer.reconcile(kb)
        cold_s = time.perf_counter() - started
        rss_after_cold = peak_rss_mb()

        noop_runs = []
        for _ in range(5):
            started = time.perf_counter()
            noop = await coffer.reindexer.reconcile(kb)
            noop_runs.append(time.perf_counter() - started)
            assert not noop.changed

        for q in QUERIES:  # warm the page cache once
            await coffer.retrieval.search("tldr", q)
        latencies = []
        for _ in range(10):
            for q in QUERIES:
                started = time.perf_counter()
                await coffer.retrieval.search("tldr", q)
                latencies.append((time.perf_counter() - started) * 1000)
    db_mb = sum(p.stat().st_size for p in home.glob("coffer.db*") if p.is_file()) / 1e6

    rate, noop_s = cold.documents_added / cold_s, median(noop_runs)
    p50, p95 = percentile(latencies, 50), percentile(latencies, 95)
    print(f"machine: {machine()}")
    print(f"code: {describe_code(repo)}")
    print(f"corpus: {len(files)} files, {total_bytes / 1e6:.1f} MB")
    print(
        f"(b) cold reconcile: {cold.documents_added} documents in {cold_s:.2f} s = "
        f"{rate:,.0f} files/s, {total_bytes / 1e6 / cold_s:.2f} MB/s, "
        f"peak RSS {rss_after_cold:.0f} MB, database {db_mb:.1f} MB "
        f"[targets >= {TARGET_FILES_S:,} files/s: "
        f"{verdict(rate >= TARGET_FILES_S, 'cold files/s')}, <= {TARGET_RSS_MB} MB: "
        f"{verdict(rss_after_cold <= TARGET_RSS_MB, 'peak RSS')}]"
    )
    print(
        f"(c) no-op reconcile: median {noop_s:.3f} s over {len(noop_runs)} runs "
        f"(min {min(noop_runs):.3f}, max {max(noop_runs):.3f}) "
        f"[target <= {TARGET_NOOP_S} s: {verdict(noop_s <= TARGET_NOOP_S, 'no-op reconcile')}]"
    )
    print(
        f"(d) keyword query latency over {len(latencies)} queries ({len(QUERIES)} distinct): "
        f"p50 {p50:.2f} ms, p95 {p95:.2f} ms, max {max(latencies):.2f} ms "
        f"[targets p50 <= {TARGET_P50_MS} ms: {verdict(p50 <= TARGET_P50_MS, 'query p50')}, "
        f"p95 <= {TARGET_P95_MS} ms: {verdict(p95 <= TARGET_P95_MS, 'query p95')}]"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_repo_argument(parser)
    args = parser.parse_args()
    run_in_repo(args.repo)
    asyncio.run(run(args.repo))


if __name__ == "__main__":
    main()
    exit_by_targets()
