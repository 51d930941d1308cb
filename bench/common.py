"""Helpers shared by the benchmark scripts: data locations, a scratch data home, stats,
running a checkout's code (`--repo`), a real daemon and what it holds in memory."""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from cofferctl.client import ApiError, DaemonUnreachable
from tests.support.cofferd_process import BIN, start_cofferd  # noqa: F401 - benches take BIN from here

REPO = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("COFFER_BENCH_DATA", REPO.parent / "shared" / "data"))
T = TypeVar("T")


def scratch_home(prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"coffer-bench-{prefix}-"))


def extract_tldr(into: Path) -> Path:
    """Unpack tldr-pages; returns the corpus folder (holds pages/, pages.zh/, ...)."""
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-xzf", str(DATA / "tldr-pages.tar.gz"), "-C", str(into)], check=True)
    return into / "corpus-tldr"


def scifact_notes(count: int) -> list[tuple[str, str]]:
    """The first `count` SciFact abstracts as notes: (file name, `# title` + text)."""
    found = []
    with open(DATA / "scifact" / "corpus.jsonl", encoding="utf-8") as corpus:
        for line in corpus:
            row = json.loads(line)
            found.append((f"{row['_id']}.md", f"# {row['title']}\n\n{row['text']}\n"))
            if len(found) == count:
                break
    return found


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


def count_documents(root: Path) -> int:
    """Regular `.md` files, links neither counted nor followed (as the daemon scans)."""
    count = 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        count += sum(
            1
            for f in files
            if f.lower().endswith(".md")
            and not f.startswith(".")
            and not os.path.islink(os.path.join(folder, f))
        )
    return count


def database_mb(home: Path) -> float:
    """coffer.db and its write-ahead log, in MB."""
    files = (home / "coffer.db", home / "coffer.db-wal")
    return sum(p.stat().st_size for p in files if p.exists()) / 1e6


# -- whose code runs ----------------------------------------------------------------------


def add_repo_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--repo",
        type=lambda text: Path(text).resolve(),
        default=REPO,
        help="the checkout whose cofferd is measured (default: this one)",
    )


def add_comparison_arguments(parser: argparse.ArgumentParser) -> None:
    """`--repo`, and `--old`, `--rounds`, `--settle` for a run comparing two checkouts."""
    add_repo_argument(parser)
    parser.add_argument("--old", type=lambda t: Path(t).resolve(), help="a checkout to compare")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each checkout, alternated")
    parser.add_argument("--settle", type=float, default=5, help="idle seconds before reading")


def code_env(root: Path, **extra: str) -> dict[str, str]:
    """The environment of a Python process that imports cofferd and cofferctl from `root`:
    first on the path, and the working folder not put before it (PYTHONSAFEPATH), in the
    processes it starts too."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NOTIFY_", "LISTEN_"))}
    return {**env, "PYTHONPATH": str(root), "PYTHONSAFEPATH": "1", **extra}


def describe_code(repo: Path) -> str:
    found = subprocess.run(
        ["git", "-C", str(repo), "describe", "--always", "--dirty"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return f"{repo} at {found.stdout.strip() or 'an unknown commit'}"


def code_of_repo(repo: Path) -> list[tuple[str, Path]]:
    """The packages a child measuring `repo` imports: `repo`'s programs (and their shared
    kernel, where it has one), this checkout's bench and tests' support."""
    ours = [(name, repo) for name in ("coffer_kernel", "cofferd", "cofferctl")]
    return [(n, c) for n, c in ours if (c / n).is_dir()] + [("bench", REPO), ("tests", REPO)]


def run_in_repo(repo: Path) -> None:
    """Make the cofferd this script imports in-process `repo`'s: when it is another
    checkout's, run the same command again in a child whose import path holds `repo`'s
    cofferd and cofferctl beside this checkout's bench, and exit with its status."""
    import cofferd

    loaded = Path(cofferd.__file__).resolve().parent.parent
    if loaded == repo:
        return
    if os.environ.get("COFFER_BENCH_CODE"):  # this is the child already
        raise SystemExit(f"cofferd was imported from {loaded}, not from {repo}")
    main = sys.modules["__main__"].__spec__
    assert main is not None, "run the script as `python -m bench.<name>`"
    root = Path(tempfile.mkdtemp(prefix="coffer-bench-code-"))
    try:
        for package, checkout in code_of_repo(repo):
            (root / package).symlink_to(checkout / package)
        env = code_env(root, COFFER_BENCH_CODE=str(repo))
        child = subprocess.run([sys.executable, "-m", main.name, *sys.argv[1:]], env=env)
    finally:
        shutil.rmtree(root)
    sys.exit(child.returncode)


def embed_as(embedder: Any, query: bool) -> dict[str, Any]:
    """The keyword arguments that ask a checkout's embedder for passages' vectors or
    (`query`) a search's: its lane (domain.index_records.EmbedLane) since issue 43, a
    `query` flag before."""
    if "lane" not in inspect.signature(embedder.embed).parameters:
        return {"query": query}
    from cofferd.domain.index_records import EmbedLane

    return {"lane": EmbedLane.QUERY if query else EmbedLane.BULK}


def asks_query(query: bool, lane: Any) -> bool:
    """Whether a call to an embedder of a bench's own (standing in for the real one)
    asks for a search's vectors: `query` from a checkout before issue 43, `lane` after."""
    return query or getattr(lane, "value", None) == "query"


# -- targets (the guards) ----------------------------------------------------------------

_missed: list[str] = []


def verdict(met: bool, what: str = "a target") -> str:
    """ "met" or "MISSED", said beside a figure and its target; a miss makes `exit_by_targets`
    end the run with status 1."""
    if not met:
        _missed.append(what)
    return "met" if met else "MISSED"


def exit_by_targets() -> None:
    """The end of a guard: exit status 1 when any target was missed."""
    if _missed:
        print(f"{len(_missed)} target(s) MISSED: {', '.join(_missed)}", flush=True)
        sys.exit(1)


# -- a real daemon ------------------------------------------------------------------------


def start_daemon(repo: Path, home: Path, socket_path: Path) -> subprocess.Popen[bytes]:
    """The venv's `cofferd` on `home`, running `repo`'s code."""
    env = code_env(repo, COFFER_HOME=str(home), COFFER_SOCKET=str(socket_path))
    return start_cofferd(env, log_level="WARNING")


def stop_daemon(daemon: subprocess.Popen[bytes], grace_s: float = 30) -> None:
    """SIGTERM, then SIGKILL after `grace_s` (a daemon stuck on a file does not stop);
    worker processes it leaves behind are killed too."""
    children = descendants(daemon.pid) if daemon.poll() is None else []
    daemon.terminate()
    try:
        daemon.wait(grace_s)
    except subprocess.TimeoutExpired:
        daemon.kill()
        daemon.wait()
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def wait(
    condition: Callable[[], T | None],
    daemon: subprocess.Popen[bytes],
    timeout: float,
    interval: float,
) -> T:
    """Poll `condition` until it is truthy (an unreachable or erring daemon counts as not
    yet); raise TimeoutError after `timeout` s, RuntimeError if the daemon exits."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        if daemon.poll() is not None:
            raise RuntimeError(f"cofferd exited with status {daemon.returncode}")
        try:
            value = condition()
        except (DaemonUnreachable, ApiError, OSError):
            value = None
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError("condition not met")


def kb_status(status: dict[str, Any], name: str) -> dict[str, Any]:
    """A KB's entry in `GET /api/v1/status`."""
    for entry in status["knowledge_bases"]:
        if entry["name"] == name:
            return dict(entry)
    raise KeyError(f"no KB {name!r} in the daemon's status")


def indexer_idle(status: dict[str, Any]) -> bool:
    """From `GET /api/v1/status`: the start-up reconcile is done and nothing is queued or
    being indexed."""
    return bool(
        status["startup_reconcile_done"]
        and status["queue_depth"] == 0
        and not status["watcher"]["busy"]
    )


def attach_and_index(
    client: Any,
    daemon: subprocess.Popen[bytes],
    name: str,
    folder: Path,
    timeout: float,
    documents: int = 0,
) -> float:
    """Attach `folder` as knowledge base `name` once the daemon answers, and wait until
    it is indexed (state ok, nothing queued, at least `documents` of them): the seconds
    the pass took."""
    wait(lambda: client.get("/api/v1/health"), daemon, 60, 0.1)
    client.post("/api/v1/knowledge_bases", {"name": name, "path": str(folder)})
    started = time.perf_counter()
    wait(
        lambda: (
            (s := client.get("/api/v1/status"))
            and indexer_idle(s)
            and kb_status(s, name)["state"] == "ok"
            and kb_status(s, name)["documents"] >= documents
        ),
        daemon,
        timeout,
        1.0,
    )
    return time.perf_counter() - started


# -- memory -------------------------------------------------------------------------------


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (children, their children, ...), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # it ended meanwhile
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        below = children.get(todo.pop(), [])
        found += below
        todo += below
    return found


def pss_mb(pid: int) -> float:
    """Proportional set size in MB (shared pages divided among their users)."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    raise ValueError(f"no Pss in /proc/{pid}/smaps_rollup")


@dataclass
class DaemonMemory:
    rss_mb: float
    peak_mb: float  # VmHWM
    children: int
    children_rss_mb: float

    def __str__(self) -> str:
        text = f"RSS {self.rss_mb:.0f} MB (peak {self.peak_mb:.0f} MB)"
        if self.children:
            plural = "es" if self.children > 1 else ""
            text += f" + {self.children} child process{plural} {self.children_rss_mb:.0f} MB"
        return text


def daemon_memory(pid: int) -> DaemonMemory:
    rss, peak = memory_mb(pid)
    children = 0
    children_rss = 0.0
    for child in descendants(pid):
        try:
            children_rss += memory_mb(child)[0]
            children += 1
        except (OSError, KeyError):  # ended meanwhile, or a zombie
            pass
    return DaemonMemory(rss, peak, children, children_rss)
