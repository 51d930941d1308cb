"""Per-KB search isolation: does a large KB slow down keyword search in a small one?

Two KBs in one data home: `tldr` (tldr-pages, ~38,400 files) and `small` (10 short notes
whose text shares common English words with tldr, plus a few words of their own). Keyword
query latency (`coffer.retrieval.search`, in-process) for 10 fixed common-word queries,
repeated many times:

* (a) in `small` while `tldr` exists;
* (b) in `tldr`;
* (c) in `small` after `tldr` has been deleted (the same query with the large KB absent).

Prints p50/p95 for each and the ratio (a)/(c).

    .venv/bin/python -m bench.guards.two_kbs [--reps 50]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import time

from bench.common import exit_by_targets, extract_tldr, machine, percentile, scratch_home, verdict
from coffer_kernel.locations import Locations
from cofferd.surfaces.core import Coffer

QUERIES = [
    "file", "list", "the", "command", "directory", "show", "list files", "show the file",
    "command directory", "print",
]  # fmt: skip

SMALL_DOCS = {
    f"note{i:02d}.md": f"# Note {i}\n\n{text}\n"
    for i, text in enumerate(
        [
            "Show the list of every file in the project directory. Word: quillfeather.",
            "The backup command copies each file to a second directory every night.",
            "A short list: milk, bread, the newspaper. Print it before leaving. zephyrlatch",
            "Show which command opened the file, then close the directory window.",
            "The directory of old photos needs a list of names; file them by year.",
            "Print the command output to a file and show it to the team. Word: marblequay.",
            "Meeting notes: the list of open questions, one file per topic. Word: obsidianrook.",
            "Use the search command to show every file that mentions the budget.",
            "Clean the downloads directory, keep the list of installers. Word: tangerinevault.",
            "The command line is faster than a file manager for directory work. cobaltmoth",
        ]
    )
}


async def measure(coffer: Coffer, kb: str, reps: int) -> list[float]:
    for q in QUERIES:  # warm up
        await coffer.retrieval.search(kb, q)
    latencies = []
    for _ in range(reps):
        for q in QUERIES:
            started = time.perf_counter()
            await coffer.retrieval.search(kb, q)
            latencies.append((time.perf_counter() - started) * 1000)
    return latencies


def line(label: str, latencies: list[float]) -> str:
    return (
        f"{label}: p50 {percentile(latencies, 50):.2f} ms, p95 {percentile(latencies, 95):.2f} ms,"
        f" max {max(latencies):.2f} ms over {len(latencies)} queries"
    )


async def run(reps: int) -> None:
    home = scratch_home("twokbs")
    try:
        locations = Locations(home=home, socket=home / "cofferd.sock")
        async with await Coffer.open(locations) as coffer:
            tldr = await coffer.kbs.create("tldr")
            docs = locations.docs_dir("tldr")
            docs.rmdir()
            extract_tldr(home / "src").rename(docs)
            small = await coffer.kbs.create("small")
            for name, text in SMALL_DOCS.items():
                (locations.docs_dir("small") / name).write_text(text, encoding="utf-8")

            started = time.perf_counter()
            big = await coffer.reindexer.reconcile(tldr)
            few = await coffer.reindexer.reconcile(small)
            indexed_s = time.perf_counter() - started

            with_big = await measure(coffer, "small", reps)
            in_big = await measure(coffer, "tldr", reps)
            await coffer.kbs.delete("tldr")
            without_big = await measure(coffer, "small", reps)
            hits = await coffer.retrieval.search("small", "quillfeather")
            assert hits.passages, "the small KB lost its documents"

        p50_a, p50_c = percentile(with_big, 50), percentile(without_big, 50)
        print(f"machine: {machine()}")
        print(
            f"setup: tldr {big.documents_added} documents, small {few.documents_added} documents,"
            f" indexed in {indexed_s:.1f} s; {len(QUERIES)} queries x {reps} reps each"
        )
        print(line("(a) small, tldr present", with_big))
        print(line("(b) tldr", in_big))
        print(line("(c) small, tldr deleted", without_big))
        print(
            f"ratio (a)/(c): p50 {p50_a / p50_c:.2f}x,"
            f" p95 {percentile(with_big, 95) / percentile(without_big, 95):.2f}x"
        )
        print(
            f"targets: small-KB p50 <= 5 ms (got {p50_a:.2f} ms: "
            f"{verdict(p50_a <= 5)}); (a) <= 1.2x (c) "
            f"(got {p50_a / p50_c:.2f}x: {verdict(p50_a <= 1.2 * p50_c)})"
        )
    finally:
        shutil.rmtree(home, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=50, help="repetitions of the query set")
    args = parser.parse_args()
    asyncio.run(run(args.reps))


if __name__ == "__main__":
    main()
    exit_by_targets()
