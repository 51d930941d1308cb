"""Where a first conversion's time goes, and a Word file's (issue 35 §6).

(a) Through a real daemon: a folder of one small DOCX attached, the time until it is
    indexed (the converter's process started cold), then a second file written while that
    process is warm, the time until it is indexed; and the same cold for a TXT (no
    conversion) to show what the daemon itself takes.
(b) In this process (CPU seconds, so that a loaded machine does not decide): importing
    markitdown (and each converter's libraries), then per Word file: markitdown's whole
    conversion, mammoth alone, and mammoth on the same file with a minimal styles.xml
    (what the document's own body costs), and parsing its styles.xml alone with minidom
    (mammoth's parser) and with ElementTree.

    nice -n 10 .venv/bin/python -m bench.studies.conversion_startup [--files 30] [--repo PATH]
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import io
import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
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
from bench.guards.scifact_keyword import load_scifact
from bench.studies.in_place import make_docx
from cofferctl.client import Client

MINIMAL_STYLES = (
    b'<?xml version="1.0"?><w:styles xmlns:w="http://schemas.openxmlformats.org/'
    b'wordprocessingml/2006/main"><w:style w:type="paragraph" w:styleId="Heading1">'
    b'<w:name w:val="heading 1"/></w:style></w:styles>'
)


def cpu_ms(run: Callable[[], Any]) -> float:
    started = time.process_time()
    run()
    return (time.process_time() - started) * 1000


def indexed_after(api: Client, daemon: Any, kb: str, documents: int, started: float) -> float:
    wait(
        lambda: kb_status(api.get("/api/v1/status"), kb)["documents"] >= documents,
        daemon,
        300,
        0.01,
    )
    return time.perf_counter() - started


def through_the_daemon(repo: Path, work: Path, docs: list[dict[str, str]]) -> None:
    home = scratch_home("conversion-startup")
    socket_path = Path(f"/tmp/coffer-bench-cs-{os.getpid()}.sock")
    daemon = start_daemon(repo, home, socket_path)
    api = Client(socket_path)
    try:
        wait(lambda: api.get("/api/v1/health"), daemon, 60, 0.05)
        for fmt in ("txt", "docx"):
            folder = work / f"first-{fmt}"
            folder.mkdir()
            data = make_docx(docs[0]["title"], docs[0]["text"]) if fmt == "docx" else b"a note\n"
            (folder / f"one.{fmt}").write_bytes(data)
            started = time.perf_counter()
            api.post(
                "/api/v1/knowledge_bases",
                {"name": f"first-{fmt}", "path": str(folder), "config": {"index_formats": [fmt]}},
            )
            cold = indexed_after(api, daemon, f"first-{fmt}", 1, started)
            print(f"(a) one {fmt} attached until indexed: {cold:.2f} s (converter cold)")
            if fmt == "docx":
                started = time.perf_counter()
                (folder / "two.docx").write_bytes(make_docx(docs[1]["title"], docs[1]["text"]))
                warm = indexed_after(api, daemon, "first-docx", 2, started)
                print(f"    a second docx written until indexed: {warm:.2f} s (converter warm)")
    finally:
        stop_daemon(daemon)
        socket_path.unlink(missing_ok=True)
        shutil.rmtree(home, ignore_errors=True)


def imports() -> None:
    code = (
        "import time; s = time.process_time(); import {m}; "
        "print(round((time.process_time() - s) * 1000))"
    )
    for module in ("markitdown", "magika", "pandas", "pdfminer.high_level", "bs4", "mammoth"):
        found = subprocess.run(
            [sys.executable, "-c", code.format(m=module)], capture_output=True, text=True
        )
        print(f"(b) import {module} alone, in a fresh process: {found.stdout.strip()} ms CPU")


def word_files(work: Path, docs: list[dict[str, str]]) -> None:
    from xml.dom import minidom
    from xml.etree import ElementTree

    import mammoth  # type: ignore[import-untyped]
    from markitdown import MarkItDown

    paths = []
    for doc in docs:
        path = work / f"{doc['_id']}.docx"
        path.write_bytes(make_docx(doc["title"], doc["text"]))
        paths.append(path)
    markitdown = MarkItDown(enable_plugins=False)
    markitdown.convert_local(str(paths[0]), file_extension=".docx")  # lazy imports

    def minimal(path: Path) -> bytes:
        out = io.BytesIO()
        with zipfile.ZipFile(path) as zin, zipfile.ZipFile(out, "w") as zout:
            for info in zin.infolist():
                data = zin.read(info.filename)
                zout.writestr(info, MINIMAL_STYLES if info.filename == "word/styles.xml" else data)
        return out.getvalue()

    styles = zipfile.ZipFile(paths[0]).read("word/styles.xml")
    small = [minimal(p) for p in paths]

    def each(run: Callable[[int], object]) -> list[float]:
        return [cpu_ms(functools.partial(run, n)) for n in range(len(paths))]

    figures = {
        "markitdown's whole conversion": each(
            lambda n: markitdown.convert_local(str(paths[n]), file_extension=".docx")
        ),
        "mammoth alone": each(lambda n: mammoth.convert_to_html(io.BytesIO(paths[n].read_bytes()))),
        "mammoth, styles.xml minimal": each(
            lambda n: mammoth.convert_to_html(io.BytesIO(small[n]))
        ),
        f"styles.xml ({len(styles):,} bytes) parsed by minidom": each(
            lambda _: minidom.parseString(styles)
        ),
        "... by ElementTree": each(lambda _: ElementTree.fromstring(styles)),
    }
    if importlib.util.find_spec("cofferd.infrastructure.conversion.word_xml") is not None:
        from cofferd.infrastructure.conversion import markitdown_run, word_xml

        made = markitdown_run.load()  # word_xml in mammoth with the first Word file

        def fresh(n: int) -> object:
            word_xml._kept.clear()  # as if each file had styles of its own
            return markitdown_run.convert(made, str(paths[n]), "docx")

        figures["the converter's (markitdown_run.convert), styles of its own"] = each(fresh)
        figures["... the files of one template (styles kept)"] = each(
            lambda n: markitdown_run.convert(made, str(paths[n]), "docx")
        )
    for what, values in figures.items():
        print(f"(b) per Word file, {what}: {sum(values) / len(values):.0f} ms CPU")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=30)
    add_repo_argument(parser)
    args = parser.parse_args()
    print(f"machine: {machine()}; load {Path('/proc/loadavg').read_text().split()[:3]}")
    print(f"code: {describe_code(args.repo)}", flush=True)
    corpus, _, _ = load_scifact()
    work = scratch_home("conversion-startup-files")
    try:
        through_the_daemon(args.repo, work, corpus)
        imports()
        word_files(work, corpus[: args.files])
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
