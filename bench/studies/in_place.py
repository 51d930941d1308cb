"""Documents indexed where they lie (issue 25), through a real daemon on a folder made here:
SciFact abstracts (real scientific prose) written as PDF, DOCX, PPTX, XLSX, HTML, EPUB
and plain text with the formats' own libraries (fpdf2, python-docx, python-pptx,
openpyxl, zipfile).

(a) documents per second per format: a folder of `--per-format` files of one format,
    attached, until every one is indexed;
(b) cold conversion of `--files` mixed files: the time until all are indexed, the peak
    RSS of the daemon and of the converter process, the size of the converted texts
    against the originals, and the latency of a Markdown save (written until found by
    search) while the backlog converts, beside the same with nothing to convert;
(c) retrieval over the converted texts: SciFact's claims whose relevant abstracts are all
    in the mixed folder, nDCG@10 over them against the same abstracts as Markdown notes.

    .venv/bin/python -m bench.studies.in_place [--files 1000] [--per-format 50] [--repo PATH]
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import shutil
import threading
import time
import zipfile
from collections.abc import Callable
from html import escape
from pathlib import Path
from typing import Any

from bench.common import (
    DATA,
    add_repo_argument,
    descendants,
    describe_code,
    kb_status,
    machine,
    memory_mb,
    percentile,
    scratch_home,
    start_daemon,
    stop_daemon,
    wait,
)
from bench.guards.scifact_keyword import load_scifact, ndcg_at
from cofferctl.client import Client

FORMATS = ["pdf", "docx", "pptx", "xlsx", "html", "epub", "txt"]
FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")


# -- the documents ------------------------------------------------------------------------


def sentences(text: str) -> list[str]:
    parts = [s.strip() for s in text.replace("? ", "?|").replace(". ", ".|").split("|")]
    return [s for s in parts if s]


def make_pdf(title: str, text: str) -> bytes:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_title(title)
    if FONT.exists():
        pdf.add_font("dejavu", fname=str(FONT))
        pdf.set_font("dejavu", size=11)
    else:  # the core font holds Latin-1 only
        pdf.set_font("helvetica", size=11)
        title, text = (t.encode("latin-1", "replace").decode("latin-1") for t in (title, text))
    said = sentences(text)
    per_page = max(1, math.ceil(len(said) / 3))  # three pages an abstract
    for start in range(0, len(said), per_page):
        pdf.add_page()
        if start == 0:
            pdf.multi_cell(0, 7, title)
            pdf.ln(4)
        pdf.multi_cell(0, 6, " ".join(said[start : start + per_page]))
    return bytes(pdf.output())


def make_docx(title: str, text: str) -> bytes:
    import docx

    document = docx.Document()
    document.add_heading(title, level=1)
    for sentence in sentences(text):
        document.add_paragraph(sentence)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def make_pptx(title: str, text: str) -> bytes:
    import pptx

    deck = pptx.Presentation()
    said = sentences(text)
    per_slide = max(1, math.ceil(len(said) / 3))
    for n, start in enumerate(range(0, len(said), per_slide)):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title if n == 0 else f"{title} ({n + 1})"
        slide.placeholders[1].text = " ".join(said[start : start + per_slide])
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def make_xlsx(title: str, text: str) -> bytes:
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.append(["title", title])
    for n, sentence in enumerate(sentences(text), 1):
        sheet.append([n, sentence])
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def make_html(title: str, text: str) -> bytes:
    body = "".join(f"<p>{escape(s)}</p>" for s in sentences(text))
    return (
        f"<html><head><title>{escape(title)}</title></head>"
        f"<body><h1>{escape(title)}</h1>{body}</body></html>"
    ).encode()


def make_epub(title: str, text: str) -> bytes:
    out = io.BytesIO()
    body = "".join(f"<p>{escape(s)}</p>" for s in sentences(text))
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        z.writestr(
            "META-INF/container.xml",
            '<?xml version="1.0"?><container version="1.0" '
            'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
            '<rootfile full-path="OEBPS/content.opf" '
            'media-type="application/oebps-package+xml"/></rootfiles></container>',
        )
        z.writestr(
            "OEBPS/content.opf",
            '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" '
            'version="3.0" unique-identifier="id"><metadata '
            f'xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>{escape(title)}</dc:title>'
            '<dc:identifier id="id">b</dc:identifier><dc:language>en</dc:language>'
            '</metadata><manifest><item id="c1" href="c1.xhtml" '
            'media-type="application/xhtml+xml"/></manifest><spine><itemref idref="c1"/>'
            "</spine></package>",
        )
        z.writestr(
            "OEBPS/c1.xhtml",
            '<html xmlns="http://www.w3.org/1999/xhtml"><body>'
            f"<h1>{escape(title)}</h1>{body}</body></html>",
        )
    return out.getvalue()


def make_txt(title: str, text: str) -> bytes:
    return f"{title}\n\n{text}\n".encode()


MAKERS: dict[str, Callable[[str, str], bytes]] = {
    "pdf": make_pdf,
    "docx": make_docx,
    "pptx": make_pptx,
    "xlsx": make_xlsx,
    "html": make_html,
    "epub": make_epub,
    "txt": make_txt,
}


def write_folder(folder: Path, docs: list[dict[str, str]], formats: list[str]) -> dict[str, str]:
    """Each abstract as a file of the next format in turn, in folders of 50; returns the
    SciFact id of each file's relative path."""
    made = {}
    for n, doc in enumerate(docs):
        fmt = formats[n % len(formats)]
        relpath = f"{fmt}/{n // 50:03d}/{doc['_id']}.{fmt}"
        path = folder / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(MAKERS[fmt](doc["title"], doc["text"]))
        made[relpath] = doc["_id"]
    return made


# -- the daemon ---------------------------------------------------------------------------


class Peaks:
    """The largest RSS of the daemon and of its converter process, sampled every 0.1 s."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.daemon_mb = 0.0
        self.converter_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.1):
            try:
                self.daemon_mb = max(self.daemon_mb, memory_mb(self.pid)[0])
                for child in descendants(self.pid):
                    command = Path(f"/proc/{child}/cmdline").read_bytes()
                    if b"conversion.convert_main" in command:
                        self.converter_mb = max(self.converter_mb, memory_mb(child)[0])
            except (OSError, KeyError, ValueError):
                continue

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def attach(api: Client, name: str, folder: Path, formats: list[str]) -> None:
    api.post(
        "/api/v1/knowledge_bases",
        {"name": name, "path": str(folder), "config": {"index_formats": formats}},
    )


def indexed(api: Client, name: str, expected: int) -> bool:
    entry = kb_status(api.get("/api/v1/status"), name)
    return bool(entry["documents"] + entry["skipped"] >= expected and entry["converting"] == 0)


def save_latency(api: Client, kb: str, folder: Path, label: str) -> float:
    """ms from writing a note to search finding it (polled every 5 ms)."""
    token = f"zqsave{label}x{time.monotonic_ns()}"
    started = time.perf_counter()
    (folder / "notes" / f"{token}.md").write_text(f"# Note\n\n{token}\n", encoding="utf-8")
    deadline = started + 60
    while not api.post(api.kb(kb, "/search"), {"query": token, "top_k": 1})["passages"]:
        if time.perf_counter() > deadline:
            raise TimeoutError("a saved note was not found within 60 s")
        time.sleep(0.005)
    return (time.perf_counter() - started) * 1000


def folder_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6


# -- the measures -------------------------------------------------------------------------


def per_format(api: Client, daemon: Any, work: Path, corpus: list[dict[str, str]], n: int) -> None:
    print("(a) documents per second, one format at a time:", flush=True)
    for i, fmt in enumerate(FORMATS):
        folder = work / f"only-{fmt}"
        write_folder(folder, corpus[i * n : (i + 1) * n], [fmt])
        started = time.perf_counter()
        attach(api, f"only-{fmt}", folder, [fmt])
        wait(lambda f=fmt: indexed(api, f"only-{f}", n), daemon, 900, 0.05)
        took = time.perf_counter() - started
        entry = kb_status(api.get("/api/v1/status"), f"only-{fmt}")
        print(
            f"  {fmt:5} {n} files, {folder_mb(folder):6.2f} MB: {took:6.2f} s, "
            f"{n / took:6.1f} documents/s ({entry['documents']} indexed, "
            f"{entry['skipped']} skipped)",
            flush=True,
        )


def mixed(
    api: Client, daemon: Any, home: Path, work: Path, corpus: list[dict[str, str]], files: int
) -> dict[str, str]:
    folder = work / "mixed"
    made = write_folder(folder, corpus[:files], FORMATS)
    notes = work / "notes-kb"
    (notes / "notes").mkdir(parents=True)
    attach(api, "notes-kb", notes, [])
    idle = [save_latency(api, "notes-kb", notes, f"idle{i}") for i in range(20)]
    peaks = Peaks(daemon.pid)
    started = time.perf_counter()
    attach(api, "mixed", folder, FORMATS)
    busy: list[float] = []
    backlog: list[int] = []
    while not indexed(api, "mixed", files):
        entry = kb_status(api.get("/api/v1/status"), "mixed")
        if entry["converting"]:
            backlog.append(entry["converting"])
            busy.append(save_latency(api, "notes-kb", notes, f"busy{len(busy)}"))
        time.sleep(0.2)
        if time.perf_counter() - started > 3600:
            raise TimeoutError("the mixed folder was not indexed within an hour")
    took = time.perf_counter() - started
    peaks.stop()
    entry = kb_status(api.get("/api/v1/status"), "mixed")
    originals = folder_mb(folder)
    derived = folder_mb(home / "derived" / "mixed")
    print(f"(b) cold conversion of {files} mixed files ({originals:.1f} MB):", flush=True)
    print(
        f"  all indexed in {took:.1f} s: {files / took:.1f} documents/s; "
        f"{entry['documents']} indexed, {entry['skipped']} skipped; formats {entry['formats']}",
        flush=True,
    )
    print(
        f"  peak RSS: daemon {peaks.daemon_mb:.0f} MB, converter {peaks.converter_mb:.0f} MB",
        flush=True,
    )
    print(
        f"  converted texts {derived:.2f} MB = {100 * derived / originals:.1f} % of the "
        f"originals ({originals:.1f} MB)",
        flush=True,
    )
    print(
        f"  a Markdown save until searchable: idle p50 {percentile(idle, 50):.0f} / p95 "
        f"{percentile(idle, 95):.0f} ms; while {max(backlog, default=0)}-"
        f"{min(backlog, default=0)} files waited to convert p50 {percentile(busy, 50):.0f} "
        f"/ p95 {percentile(busy, 95):.0f} ms over {len(busy)} saves",
        flush=True,
    )
    return made


def quality(api: Client, daemon: Any, work: Path, made: dict[str, str]) -> None:
    corpus, queries, qrels = load_scifact()
    within = set(made.values())
    by_id = {doc["_id"]: doc for doc in corpus}
    asked = {q: rels for q, rels in qrels.items() if rels and set(rels) <= within}
    notes = work / "as-markdown"
    notes.mkdir()
    for doc_id in within:
        doc = by_id[doc_id]
        (notes / f"{doc_id}.md").write_text(f"# {doc['title']}\n\n{doc['text']}\n", "utf-8")
    attach(api, "as-markdown", notes, [])
    wait(lambda: indexed(api, "as-markdown", len(within)), daemon, 600, 0.2)
    scores: dict[str, list[float]] = {"as-markdown": [], "mixed": []}
    format_of = {doc_id: relpath.split("/", 1)[0] for relpath, doc_id in made.items()}
    by_format: dict[str, list[tuple[float, float]]] = {}
    for qid, rels in asked.items():
        for kb in scores:
            passages = api.post(api.kb(kb, "/search"), {"query": queries[qid], "top_k": 50})
            ranked = list(
                dict.fromkeys(
                    p["relative_path"].rsplit("/", 1)[-1].rsplit(".", 1)[0]
                    for p in passages["passages"]
                )
            )
            scores[kb].append(ndcg_at(ranked, rels, 10))
        if len({format_of[doc_id] for doc_id in rels}) == 1:
            pair = (scores["as-markdown"][-1], scores["mixed"][-1])
            by_format.setdefault(format_of[next(iter(rels))], []).append(pair)
    print(
        f"(c) SciFact claims whose abstracts are all in the folder ({len(asked)}): nDCG@10 "
        f"as Markdown {sum(scores['as-markdown']) / len(asked):.4f}, converted where they "
        f"lie {sum(scores['mixed']) / len(asked):.4f}",
        flush=True,
    )
    for fmt, pairs in sorted(by_format.items()):
        markdown, converted = (sum(p[i] for p in pairs) / len(pairs) for i in (0, 1))
        print(f"  {fmt:5} ({len(pairs)} claims): {markdown:.4f} -> {converted:.4f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--per-format", type=int, default=50)
    parser.add_argument(
        "--parts", default="mixed,per-format,quality", help="which of the three to run"
    )
    add_repo_argument(parser)
    args = parser.parse_args()
    print(f"machine: {machine()}; code: {describe_code(args.repo)}", flush=True)
    corpus, _, _ = load_scifact()
    home = scratch_home("in-place")
    work = scratch_home("in-place-folders")
    socket_path = Path(f"/tmp/coffer-bench-in-place-{os.getpid()}.sock")
    daemon = start_daemon(args.repo, home, socket_path)
    api = Client(socket_path)
    try:
        wait(lambda: api.get("/api/v1/health"), daemon, 60, 0.05)
        parts = args.parts.split(",")
        made = mixed(api, daemon, home, work, corpus[: args.files], args.files)
        if "per-format" in parts:
            per_format(api, daemon, work, corpus[args.files :], args.per_format)
        if "quality" in parts:
            quality(api, daemon, work, made)
    finally:
        stop_daemon(daemon)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
        socket_path.unlink(missing_ok=True)
    print(json.dumps({"data": str(DATA)}), flush=True)


if __name__ == "__main__":
    main()
