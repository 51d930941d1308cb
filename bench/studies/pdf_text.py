"""A PDF's converted text against what its reader sees (issue 44 §1, §2, §5), side by side.

For each PDF in `--folder` (default /work/corpora/pdf) and two made here with fpdf2 (four
pages of justified prose in two columns written row by row; three pages, one with a ruled
table among prose), each converted in process as the converter's process converts it
(markitdown_run.convert) by the code of `--repo`, page by page (the page marks of the
converted Markdown):

- runs: the share of PDFium's five-word runs (pypdfium2's get_text_range of each page;
  of the generated two-column PDF, whose PDFium text mixes the columns' lines, the text
  written on each page), words lower-cased, a hyphen between letters dropped on both
  sides so that `exam-` / `ple` and `example` read alike) found among the converted
  page's five-word runs; "once": the same with PDFium's running headers and footers kept
  on their first page only (text_cleanup's rule, which the converter applies: the runs
  of a header repeated on every page are the one thing dropped on purpose);
- tables: pages turned into a Markdown table, against pages holding a drawn table
  (pdfplumber's find_tables, "lines" strategy, of at least 2 rows and 2 columns);
- long: words over 25 letters in the converted text, against PDFium's own count;
- sentences: of up to 24 sentences per document (8 to 40 words, taken evenly from
  PDFium's text of its pages), the share whose words follow one another in the converted
  text of their page (a phrase search of that page);
- s/100 pages: seconds to convert, per 100 pages, median of `--rounds`.

The real PDFs (copied to /work/corpora/pdf, never committed):
- artima_python_super.pdf, artima_scheme_TheAdventuresofaPythonistainSchemeland.pdf,
  pypers_europython17_slides.pdf: github micheles/papers (LaTeX article, book, beamer);
- yellowpaper_paper.pdf: github 5chdn/yellowpaper, paper.pdf at f595a1a2 (the Ethereum
  yellow paper: two columns, LaTeX, tables ruled across only);
- ieeetran_howto.pdf: github 48302-DiogoJesus/DgJ_MEIC_paper, IEEEtran_HOWTO.pdf at
  560f17f4 (IEEEtran's manual: two columns, tables ruled as grids on three pages);
- latexpaper_paper.pdf: github 96ibman/latex-paper, paper.pdf at 23759b98 (a paper, one
  column, booktabs tables).

With `--old DIR`, both checkouts are measured (each in its own process) and printed side
by side; `--candidates` adds the raw text of other readers of each page (pypdfium2 as it
is, pdfminer with other layout parameters, and pdftext when `--pdftext-path` holds it).

    .venv/bin/python -m bench.studies.pdf_text --old /tmp/base44 [--folder DIR] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.common import REPO, add_repo_argument, code_env, describe_code, machine, run_in_repo

FOLDER = Path("/work/corpora/pdf")
RUN = 5
LONG = 25
SENTENCES = 24
_HYPHEN = re.compile(r"(?<=\w)[-\ufffe\u00ad]\s*(?=\w)")
_WORD = re.compile(r"\w+")
_MARK = re.compile(r"^## Page [^\n]*\n", re.M)
_TABLE_RULE = re.compile(r"^\|(?: ?:?-{3,}:? ?\|)+\s*$", re.M)


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(_HYPHEN.sub("", text))]


def runs(found: list[str]) -> Iterator[tuple[str, ...]]:
    return (tuple(found[n : n + RUN]) for n in range(len(found) - RUN + 1))


def pdfium_pages(path: Path) -> list[str]:
    import pypdfium2 as pdfium

    document = pdfium.PdfDocument(path)
    texts = []
    for n in range(len(document)):
        page = document[n]
        text_page = page.get_textpage()
        texts.append(text_page.get_text_range())
        text_page.close()
        page.close()
    document.close()
    return texts


def drawn_table_pages(path: Path) -> int:
    import pdfplumber

    count = 0
    with pdfplumber.open(path) as pdf:
        for page in pdf.pages:
            tables = page.find_tables(
                {"vertical_strategy": "lines", "horizontal_strategy": "lines"}
            )
            count += any(
                len(t.rows) >= 2 and max(len(r.cells) for r in t.rows) >= 2 for t in tables
            )
            page.close()
    return count


def sentences(pages: list[str]) -> list[tuple[int, list[str]]]:
    found = []
    for n, text in enumerate(pages):
        flat = " ".join(_HYPHEN.sub("", text).split())
        for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z])", flat):
            said = words(sentence)
            if 8 <= len(said) <= 40:
                found.append((n, said))
    if len(found) <= SENTENCES:
        return found
    step = len(found) / SENTENCES
    return [found[int(k * step)] for k in range(SENTENCES)]


def follows(said: list[str], page: list[str]) -> bool:
    return f" {' '.join(said)} " in f" {' '.join(page)} "


def converted_pages(path: Path) -> tuple[list[str], float]:
    from cofferd.infrastructure.conversion import markitdown_run

    engine = markitdown_run.load()
    started = time.perf_counter()
    made = markitdown_run.convert(engine, str(path), "pdf")
    took = time.perf_counter() - started
    if isinstance(made, tuple):
        raise SystemExit(f"{path.name}: {made}")
    return _MARK.split(made.markdown)[1:], took


def measure(path: Path, rounds: int, reference: dict[str, Any]) -> dict[str, Any]:
    pages, took = converted_pages(path)
    times = [took] + [converted_pages(path)[1] for _ in range(rounds - 1)]
    truth = reference["pages"]
    if len(pages) != len(truth):
        raise SystemExit(f"{path.name}: {len(pages)} pages converted, {len(truth)} in the PDF")
    return scores(pages, truth) | {
        "drawn": reference["drawn"],
        "s_per_100": statistics.median(times) / len(truth) * 100,
    }


def share_of_runs(pages: list[str], truth: list[str]) -> float:
    total = found = 0
    for text, real in zip(pages, truth, strict=True):
        have = set(runs(words(text)))
        wanted = list(runs(words(real)))
        total += len(wanted)
        found += sum(run in have for run in wanted)
    return found / max(1, total)


def scores(pages: list[str], truth: list[str]) -> dict[str, Any]:
    from cofferd.infrastructure.conversion.text_cleanup import without_running_lines

    once = without_running_lines([page.replace("\r\n", "\n") for page in truth])
    picked = sentences(truth)
    page_words = [words(text) for text in pages]
    return {
        "pages": len(truth),
        "runs": share_of_runs(pages, truth),
        "runs_once": share_of_runs(pages, once),
        "tables": sum(bool(_TABLE_RULE.search(text)) for text in pages),
        "long": sum(len(w) > LONG for text in pages for w in _WORD.findall(text)),
        "long_pdfium": sum(len(w) > LONG for text in truth for w in _WORD.findall(text)),
        "sentences": sum(follows(s, page_words[n]) for n, s in picked) / max(1, len(picked)),
        "picked": len(picked),
    }


def sentences_of(words: int, seed: int) -> str:
    """Generated prose cut into sentences of 12 words."""
    from tests.support import pdf_layouts

    said = pdf_layouts.prose(words, seed).split()
    parts = [said[n : n + 12] for n in range(0, len(said), 12)]
    return " ".join(" ".join([p[0].capitalize(), *p[1:]]) + "." for p in parts)


def generated(into: Path) -> tuple[list[Path], dict[str, list[str]]]:
    """The generated PDFs, and the text of each page of those whose PDFium text is not
    what a reader reads (columns written row by row: PDFium's text mixes their lines)."""
    from tests.support import pdf_layouts

    made = []
    titles = ("Opening words", "Middle matters", "Further on", "Closing remarks")
    texts = [
        (title, sentences_of(300, page), sentences_of(300, page + 11))
        for page, title in enumerate(titles)
    ]
    made.append(into / "generated_two_columns.pdf")
    made[-1].write_bytes(_joined([pdf_layouts.two_columns(a, b, t) for t, a, b in texts]))
    known = {str(made[-1]): [" ".join(page) for page in texts]}
    rows = [("Item", "Count", "Where")] + [
        (f"item {n}", str(n * 7), f"shelf {n % 4}") for n in range(8)
    ]
    pages = [
        pdf_layouts.drawn_table([], sentences_of(250, 2), sentences_of(200, 5)),
        pdf_layouts.drawn_table(rows, sentences_of(120, 3), sentences_of(120, 8)),
        pdf_layouts.drawn_table([], sentences_of(250, 4), sentences_of(200, 6)),
    ]
    made.append(into / "generated_drawn_table.pdf")
    made[-1].write_bytes(_joined(pages))
    return made, known


def _joined(documents: list[bytes]) -> bytes:
    import pypdfium2 as pdfium

    out = pdfium.PdfDocument.new()
    for data in documents:
        out.import_pages(pdfium.PdfDocument(data))
    with tempfile.NamedTemporaryFile(suffix=".pdf") as fh:
        out.save(fh.name)
        return Path(fh.name).read_bytes()


def references(paths: list[Path], texts: dict[str, list[str]], cache: Path) -> dict[str, Any]:
    """PDFium's text of each page (else the text known of it) and the pages pdfplumber
    finds a drawn table on, kept in `cache` between runs (pdfplumber takes minutes)."""
    known: dict[str, Any] = json.loads(cache.read_text()) if cache.exists() else {}
    for path in paths:
        key = f"{path.name}:{path.stat().st_size}"
        if key not in known:
            known[key] = {"pages": pdfium_pages(path), "drawn": drawn_table_pages(path)}
        if str(path) in texts:
            known[key]["pages"] = texts[str(path)]
    cache.write_text(json.dumps(known))
    return {str(path): known[f"{path.name}:{path.stat().st_size}"] for path in paths}


def candidates(path: Path, truth: list[str], pdftext_path: str | None) -> dict[str, dict[str, Any]]:
    """Other readers' raw text of each page, scored alike (no cleanup, no page marks)."""
    from pdfminer.high_level import extract_pages, extract_text
    from pdfminer.layout import LAParams

    del extract_pages
    readers: dict[str, Callable[[], list[str]]] = {
        "pypdfium2 get_text_range": lambda: pdfium_pages(path),
        "pdfminer word_margin=0.05": lambda: [
            extract_text(path, page_numbers=[n], laparams=LAParams(word_margin=0.05))
            for n in range(len(truth))
        ],
        "pdfminer char_margin=1, boxes_flow=None": lambda: [
            extract_text(
                path, page_numbers=[n], laparams=LAParams(char_margin=1.0, boxes_flow=None)
            )
            for n in range(len(truth))
        ],
    }
    if pdftext_path:
        sys.path.insert(0, pdftext_path)
        from pdftext.extraction import paginated_plain_text_output

        readers["pdftext 0.7.1"] = lambda: list(paginated_plain_text_output(str(path)))
    out = {}
    for name, read in readers.items():
        started = time.perf_counter()
        pages = read()
        took = time.perf_counter() - started
        out[name] = scores(pages, truth) | {"s_per_100": took / len(truth) * 100}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_repo_argument(parser)
    parser.add_argument("--old", type=lambda t: Path(t).resolve(), help="a checkout to compare")
    parser.add_argument("--folder", type=Path, default=FOLDER)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write this checkout's figures here")
    parser.add_argument("--candidates", action="store_true")
    parser.add_argument("--pdftext-path", help="a folder holding pdftext (pip --target)")
    args = parser.parse_args()
    if args.old:
        sides = {}
        for name, repo in (("base", args.old), ("new", REPO)):
            with tempfile.NamedTemporaryFile(suffix=".json") as out:
                command = [sys.executable, "-m", "bench.studies.pdf_text", "--repo", str(repo)]
                command += ["--folder", str(args.folder), "--rounds", str(args.rounds)]
                subprocess.run([*command, "--json", out.name], check=True, env=code_env(REPO))
                sides[name] = json.loads(Path(out.name).read_text())
        print(f"machine: {machine()}; base {describe_code(args.old)}; new {describe_code(REPO)}")
        print_side_by_side(sides["base"], sides["new"])
        return
    run_in_repo(args.repo)
    with tempfile.TemporaryDirectory(prefix="coffer-pdf-text-") as scratch:
        made, texts = generated(Path(scratch))
        paths = sorted(args.folder.glob("*.pdf")) + made
        cache = Path(tempfile.gettempdir()) / "coffer-pdf-text-reference.json"
        known = references(paths, texts, cache)
        figures = {path.name: measure(path, args.rounds, known[str(path)]) for path in paths}
        if args.candidates:
            for path in paths:
                for name, row in candidates(
                    path, known[str(path)]["pages"], args.pdftext_path
                ).items():
                    print(path.name, name, _row(row))
    if args.json:
        args.json.write_text(json.dumps(figures))
    else:
        print(f"{describe_code(args.repo)}; {machine()}")
        for name, row in figures.items():
            print(name, _row(row))


def _row(row: dict[str, Any]) -> str:
    return (
        f"runs {row['runs']:.3f} (once {row['runs_once']:.3f}),"
        f" tables {row['tables']}/{row.get('drawn', '?')},"
        f" long {row['long']}"
        f" ({row['long_pdfium']}), sentences {row['sentences']:.2f} of {row['picked']},"
        f" {row['s_per_100']:.2f} s/100 pages"
    )


def print_side_by_side(base: dict[str, Any], new: dict[str, Any]) -> None:
    print(
        "| PDF | pages | five-word runs found (headers once) | pages as tables (drawn)"
        " | words > 25 letters"
        " (PDFium's) | sentences found on their page | s / 100 pages | faster |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, old in base.items():
        now = new[name]
        print(
            f"| {name} | {now['pages']} | {old['runs']:.3f} → {now['runs']:.3f}"
            f" ({old['runs_once']:.3f} → {now['runs_once']:.3f})"
            f" | {old['tables']} → {now['tables']} ({now['drawn']})"
            f" | {old['long']} → {now['long']} ({now['long_pdfium']})"
            f" | {old['sentences']:.2f} → {now['sentences']:.2f} (of {now['picked']})"
            f" | {old['s_per_100']:.2f} → {now['s_per_100']:.3f}"
            f" | {old['s_per_100'] / now['s_per_100']:.1f}x |"
        )


if __name__ == "__main__":
    main()
