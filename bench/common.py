"""Helpers shared by the benchmark scripts: data locations, a scratch data home, stats."""

from __future__ import annotations

import os
import platform
import resource
import statistics
import subprocess
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("COFFER_BENCH_DATA", REPO.parent / "shared" / "data"))


def scratch_home(prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"coffer-bench-{prefix}-"))


def extract_tldr(into: Path) -> Path:
    """Unpack tldr-pages; returns the corpus folder (holds pages/, pages.zh/, ...)."""
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-xzf", str(DATA / "tldr-pages.tar.gz"), "-C", str(into)], check=True)
    return into / "corpus-tldr"


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def median(values: list[float]) -> float:
    return statistics.median(values)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {cpu}, Python {platform.python_version()}"


def memory_mb(pid: int) -> tuple[float, float]:
    """(RSS, peak RSS) of a process in MB, from /proc."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) / 1024
    return values["VmRSS"], values["VmHWM"]
