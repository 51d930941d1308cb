"""Page accuracy and conversion time of PDFs (issue 35 §1: pages from the document).

PDFs are made of SciFact abstracts (fpdf2), one or more a page, so the true page of each
sentence is known: with and without a printed form on one page (a page of words in
columns, which makes markitdown read every page with pdfplumber and join them), and with
page labels (i, ii, iii, iv, then 1, 2, ...). Each is converted in process by the code of
`--repo` as the converter's process does it (markitdown_run.convert, and before issue 35
the daemon's derived_text after it), and each sentence's page is read back from the
converted text the way search and grep read it (the page mark above its line). A sentence
counts as right when its page's label is the true one ("page iv" for the fourth page of a
labelled PDF); found is the share whose text was found at all.

Then the time to convert a PDF of `--pages` pages (one abstract each), per page, against
markitdown's own conversion of it (all the converter did of a PDF before), in turns.

    .venv/bin/python -m bench.studies.document_pages [--repo DIR] [--pages 500] [--rounds 3]
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fpdf import FPDF

from bench.common import DATA, add_repo_argument, describe_code, machine, run_in_repo

WORDS_KEY = 8  # a sentence is known by its first words
FORM_PAGE = 1  # from 0: the page that holds a printed form
FORM_ROWS = 16  # enough that markitdown takes the page for a form beside two abstracts
ROMAN = ["i", "ii", "iii", "iv"]


def abstracts(count: int, max_chars: int) -> list[str]:
    found = []
    with (DATA / "scifact" / "corpus.jsonl").open() as fh:
        for line in fh:
            doc = json.loads(line)
            text = " ".join(f"{doc['title']}. {doc['text']}".split())
            text = text.encode("latin-1", "replace").decode("latin-1")  # fpdf's core fonts
            if 400 <= len(text) <= max_chars:
                found.append(text)
                if len(found) == count:
                    break
    return found


def make_pdf(pages: list[list[str]], *, form: bool, labels: bool) -> bytes:
    pdf = FPDF()
    pdf.set_auto_page_break(False)  # each page holds exactly what it is given
    pdf.set_font("helvetica", size=8)
    for n, texts in enumerate(pages):
        pdf.add_page()
        if labels and n == 0:
            pdf.set_page_label(label_style="r")
        if labels and n == len(ROMAN):
            pdf.set_page_label(label_style="D", label_start=1)
        for text in texts:
            pdf.multi_cell(0, 4, text)
            pdf.ln(3)
        if form and n == FORM_PAGE:
            for row in range(FORM_ROWS):
                for col, field in enumerate(("Name", "Date", "Amount", "Signed")):
                    pdf.text(20 + col * 45, 200 + row * 5, f"{field}{row}")
    return bytes(pdf.output())


def true_label(n: int, labels: bool) -> str:
    if labels:
        return ROMAN[n] if n < len(ROMAN) else str(n - len(ROMAN) + 1)
    return str(n + 1)


def normal(text: str) -> str:
    return " ".join(re.sub(r"[^\w]+", " ", text.lower()).split())


def sentence_keys(text: str) -> list[str]:
    keys = []
    for sentence in re.split(r"(?<=[.?!])\s+", text):
        words = normal(sentence).split()
        if len(words) >= WORDS_KEY:
            keys.append(" ".join(words[:WORDS_KEY]))
    return keys


# -- the code measured: today's, or the code before issue 35 ------------------------------


def converter() -> tuple[Callable[[Path], str], Callable[[str], list[tuple[int, str]]]]:
    """(convert a PDF to the text kept of it, the (line, label) where each page starts)."""
    from cofferd.infrastructure.conversion import markitdown_run

    markitdown = markitdown_run.load()
    try:
        from cofferd.domain.pages import page_starts
    except ImportError:  # before issue 35: the daemon marked the pages after the converter
        queue: Any = importlib.import_module("cofferd.application.indexing.conversion_queue")

        def convert_old(path: Path) -> str:
            made = markitdown_run.convert(markitdown, str(path), "pdf")
            assert not isinstance(made, tuple), made
            return str(queue.derived_text(made, "pdf", "markitdown"))

        def old_starts(text: str) -> list[tuple[int, str]]:
            return [(line, str(page)) for line, page in queue.page_starts(text)]

        return convert_old, old_starts

    def convert(path: Path) -> str:
        made = markitdown_run.convert(markitdown, str(path), "pdf")
        assert not isinstance(made, tuple), made
        return made.markdown

    return convert, lambda text: [(s.line, s.label) for s in page_starts(text)]


def placed(text: str, starts: list[tuple[int, str]]) -> list[tuple[str, str]]:
    """(label, normalised text) of each page of a converted text."""
    lines = text.split("\n")
    bounds = [line for line, _ in starts] + [len(lines) + 1]
    return [
        (label, normal("\n".join(lines[bounds[i] : bounds[i + 1] - 1])))
        for i, (_, label) in enumerate(starts)
    ]


def accuracy(
    convert: Callable[[Path], str],
    starts: Callable[[str], list[tuple[int, str]]],
    folder: Path,
    name: str,
    pages: list[list[str]],
    *,
    form: bool,
    labels: bool,
) -> dict[str, Any]:
    path = folder / f"{name}.pdf"
    path.write_bytes(make_pdf(pages, form=form, labels=labels))
    text = convert(path)
    sections = placed(text, starts(text))
    right = found = total = 0
    for n, texts in enumerate(pages):
        for key in (k for t in texts for k in sentence_keys(t)):
            total += 1
            where = [label for label, section in sections if key in section]
            if where:
                found += 1
                right += where[0] == true_label(n, labels)
    return {
        "set": name,
        "pages": len(pages),
        "sentences": total,
        "found": round(found / total, 3),
        "right_page": round(right / total, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_repo_argument(parser)
    parser.add_argument("--pages", type=int, default=500, help="pages of the timed PDF")
    parser.add_argument("--set-pages", type=int, default=40, help="pages of each accuracy set")
    parser.add_argument("--rounds", type=int, default=3, help="timings of each, in turns")
    args = parser.parse_args()
    run_in_repo(args.repo)
    print(f"code: {describe_code(args.repo)}")
    print(f"machine: {machine()}")
    print(f"load: {Path('/proc/loadavg').read_text().strip()}")
    convert, starts = converter()
    one = abstracts(args.set_pages, 3000)
    two = abstracts(2 * args.set_pages, 1800)
    pairs = [two[i : i + 2] for i in range(0, len(two), 2)]
    sets = [
        ("one a page", [[t] for t in one], False, False),
        ("one a page, a form on page 2", [[t] for t in one], True, False),
        ("two a page, a form on page 2", pairs, True, False),
        ("one a page, labels i-iv then 1", [[t] for t in one], False, True),
        ("labels and a form", [[t] for t in one], True, True),
    ]  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="coffer-pages-") as scratch:
        folder = Path(scratch)
        for name, pages, form, labels in sets:
            row = accuracy(convert, starts, folder, name, pages, form=form, labels=labels)
            print(json.dumps(row))
        timed = folder / "timed.pdf"
        pages = [[t] for t in abstracts(args.pages, 3000)]
        for form in (False, True):
            timed.write_bytes(make_pdf(pages, form=form, labels=False))
            print(json.dumps(timings(convert, starts, timed, args.pages, args.rounds, form)))


def timings(
    convert: Callable[[Path], str],
    starts: Callable[[str], list[tuple[int, str]]],
    path: Path,
    pages: int,
    rounds: int,
    form: bool,
) -> dict[str, Any]:
    """The conversion of `path` by the code measured, and by markitdown's own convert_local
    (all the converter's process did of a PDF before issue 35), taken in turns so that a
    busy machine weighs on both alike; the quickest of `rounds` each."""
    from markitdown import MarkItDown

    markitdown = MarkItDown(enable_plugins=False)
    ours, theirs = [], []
    marks = 0
    for _ in range(rounds):
        started = time.perf_counter()
        marks = len(starts(convert(path)))
        ours.append(time.perf_counter() - started)
        started = time.perf_counter()
        markitdown.convert_local(str(path))
        theirs.append(time.perf_counter() - started)
    return {
        "timed_pages": pages,
        "form": form,
        "ms_per_page": round(1000 * min(ours) / pages, 1),
        "markitdown_ms_per_page": round(1000 * min(theirs) / pages, 1),
        "marks": marks,
    }


if __name__ == "__main__":
    main()
