"""Word files per second in the converter's process (issue 35 §6), and their Markdown.

Three sets: SciFact abstracts written by python-docx (bench.studies.in_place's writer: one
template's styles.xml, 349 KB), and the corpus of tests.support.word_corpus (headings, lists,
tables, an image, footnotes, comments, hyperlinks, non-ASCII text) with a style of each
file's own (so no two files share a styles.xml, as real files) and with the template's.
Each file is converted, in turns, by markitdown's own `convert_local` with mammoth's
minidom parser (what the converter did before issue 35 §6) and by the converter's
`markitdown_run.convert` of the code at `--repo`, its kept parts as a run of that set
leaves them; CPU time of this process, the median of `--rounds` each. The Markdown of
each file is compared to markitdown's to the byte.

    .venv/bin/python -m bench.studies.word_rate [--files 30] [--rounds 3] [--repo DIR]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import add_repo_argument, describe_code, machine, run_in_repo
from bench.guards.scifact_keyword import load_scifact
from bench.studies.in_place import make_docx
from tests.support.word_corpus import mammoths_own_parser, varied_docx


def cpu_ms(run: Callable[..., Any], *args: Any) -> tuple[float, Any]:
    started = time.process_time()
    made = run(*args)
    return 1000 * (time.process_time() - started), made


def measure(name: str, paths: list[Path], rounds: int) -> dict[str, Any]:
    from markitdown import MarkItDown

    from cofferd.infrastructure.conversion import markitdown_run

    markitdown = MarkItDown(enable_plugins=False)
    engine = markitdown_run.load()
    theirs: list[list[float]] = [[] for _ in paths]
    ours: list[list[float]] = [[] for _ in paths]
    same = 0
    for round_ in range(rounds):
        for n, path in enumerate(paths):
            with mammoths_own_parser():
                spent, expected = cpu_ms(markitdown.convert_local, str(path))
            theirs[n].append(spent)
            spent, _ = cpu_ms(markitdown_run.convert, engine, str(path), "docx")
            ours[n].append(spent)
            if round_ == 0:
                own = markitdown_run._by_own_converter(str(path), "docx")
                same += own is not None and own.markdown == expected.markdown
    before = statistics.mean(statistics.median(t) for t in theirs)
    after = statistics.mean(statistics.median(t) for t in ours)
    return {
        "set": name,
        "files": len(paths),
        "markitdown_ms": round(before, 1),
        "converter_ms": round(after, 1),
        "markitdown_files_per_s": round(1000 / before, 1),
        "converter_files_per_s": round(1000 / after, 1),
        "speedup": round(before / after, 2),
        "markdown_identical": f"{same}/{len(paths)}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_repo_argument(parser)
    parser.add_argument("--files", type=int, default=30, help="Word files of each set")
    parser.add_argument("--rounds", type=int, default=3, help="conversions of each file")
    args = parser.parse_args()
    run_in_repo(args.repo)
    print(f"code: {describe_code(args.repo)}")
    print(f"machine: {machine()}")
    print(f"load: {Path('/proc/loadavg').read_text().strip()}")
    corpus, _, _ = load_scifact()
    sets: dict[str, Callable[[int], bytes]] = {
        "abstracts (one template)": lambda n: make_docx(corpus[n]["title"], corpus[n]["text"]),
        "corpus, styles of their own": varied_docx,
        "corpus, one template": lambda n: varied_docx(n, own_styles=False),
    }
    with tempfile.TemporaryDirectory(prefix="coffer-word-rate-") as scratch:
        for name, make in sets.items():
            folder = Path(scratch) / str(len(list(Path(scratch).iterdir())))
            folder.mkdir()
            paths = []
            for n in range(args.files):
                paths.append(folder / f"{n}.docx")
                paths[-1].write_bytes(make(n))
            print(measure(name, paths, args.rounds), flush=True)
    print(f"load after: {Path('/proc/loadavg').read_text().strip()}")


if __name__ == "__main__":
    main()
