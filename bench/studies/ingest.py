"""Issue 4 figures: ingest throughput of a mixed batch (100 docx, 50 pdf, 100 html,
50 xlsx) end to end through `cofferctl add` against a real cofferd, and the median
conversion time per format in a warm worker.

    .venv/bin/python -m bench.studies.ingest
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

from bench.common import machine, median, scratch_home
from cofferctl.client import Client, DaemonUnreachable
from cofferd.infrastructure.conversion.converter import ConverterPool
from tests.support.cofferd_process import start_cofferd
from tests.support.samples import make_docx, make_html, make_pdf, make_xlsx

BIN = Path(sys.executable).parent
BATCH = {"docx": (100, make_docx), "pdf": (50, make_pdf), "html": (100, make_html),
         "xlsx": (50, make_xlsx)}  # fmt: skip


def generate(folder: Path) -> dict[str, list[Path]]:
    files: dict[str, list[Path]] = {}
    for fmt, (count, make) in BATCH.items():
        for i in range(count):
            path = folder / fmt / f"{fmt}-{i:03d}.{fmt}"
            path.parent.mkdir(parents=True, exist_ok=True)
            text = f"Document {i} of {fmt}: findings number {i} about topic t{i % 17} and more. "
            path.write_bytes(make(text * 20) if fmt != "pdf" else make_pdf(text * 20, pages=3))
            files.setdefault(fmt, []).append(path)
    return files


async def conversion_times(files: dict[str, list[Path]]) -> dict[str, float]:
    converter = ConverterPool()
    try:
        await converter.convert(files["html"][0], "html")  # warm the worker
        medians = {}
        for fmt, paths in files.items():
            times = []
            for path in paths[:20]:
                started = time.perf_counter()
                await converter.convert(path, fmt)
                times.append((time.perf_counter() - started) * 1000)
            medians[fmt] = median(times)
        return medians
    finally:
        await converter.close()


def main() -> None:
    home = scratch_home("ingest")
    files = generate(home / "inbox")
    total = sum(len(v) for v in files.values())
    socket_path = Path(f"/tmp/coffer-bench-ingest-{os.getpid()}.sock")
    env = {**os.environ, "COFFER_HOME": str(home / "data"), "COFFER_SOCKET": str(socket_path)}
    daemon = start_cofferd(env, log_level="WARNING")
    client = Client(socket_path)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                client.get("/api/v1/health")
                break
            except DaemonUnreachable:
                time.sleep(0.05)
        started = time.perf_counter()
        subprocess.run(
            [str(BIN / "cofferctl"), "add", "notes", str(home / "inbox")], env=env, check=True
        )
        elapsed = time.perf_counter() - started
        documents = client.get(client.kb("notes", "/metrics"))["documents"]
    finally:
        daemon.terminate()
        daemon.wait(30)
    medians = asyncio.run(conversion_times(files))
    print(f"machine: {machine()}")
    print(
        f"cofferctl add of {total} files ({', '.join(f'{len(v)} {k}' for k, v in files.items())}):"
        f" {documents} documents in {elapsed:.1f} s = {documents / elapsed:.1f} documents/s"
    )
    print(
        "median warm conversion per format: "
        + ", ".join(f"{fmt} {ms:.0f} ms" for fmt, ms in medians.items())
    )


if __name__ == "__main__":
    main()
