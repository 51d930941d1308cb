"""A cold index as a user sees it: the real `cofferd` started over a knowledge base attached
at a folder of new files, timed from the process's start until the documents are
searchable, and the index it leaves at rest measured whole.

The data home is made by the code measured (in-process, before the clock starts): a KB
attached at an empty folder, the database then deleted (the index is derived: the next
start builds it anew, as a first start does). The corpus is copied into the folder and
`cofferd` is started as the README starts it (no log level given, its log to a file),
its code compiled first as `make run` compiles it (bytecode in __pycache__, whatever this
shell's PYTHONDONTWRITEBYTECODE says: a first start from source takes ~0.15 s more).
Its API is polled over the Unix socket every `POLL_S`: a document counted by the KB's
`/metrics` is committed, so a search finds it. The moments taken: the socket answering,
98 % and 100 % of the documents counted, and the daemon idle (its start-up reconcile
done, nothing queued). Then, once the writes after the pass (the keyword index merged,
space given back) have settled, the daemon is stopped: closing its last connection writes
the WAL back into the database. What counts as the index: coffer.db with its -wal and
-shm (which should be gone or empty then) and `derived/` (text converted from other
formats). The database is also accounted table by table (SQLite's dbstat). Where /proc is,
the CPU time the daemon and its worker processes had used when every document was
counted is taken too (on 2 cores, their sum over 2 is the least the pass can take).
"""

from __future__ import annotations

import asyncio
import compileall
import math
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import sqlean

from bench.common import code_env, descendants, indexer_idle, start_cofferd, stop_daemon, wait
from coffer_kernel.locations import Locations
from cofferctl.client import Client

POLL_S = 0.05
SHARE = 0.98
QUIET_S = 1.0  # the database files unchanged this long after the daemon is idle: settled
INDEX_FILES = ("coffer.db", "coffer.db-wal", "coffer.db-shm")


@dataclass
class ColdStart:
    documents: int
    answering_s: float  # the socket answered
    first_s: float  # the first document counted
    share_s: float  # SHARE of the documents counted
    all_s: float  # every document counted
    idle_s: float  # start-up reconcile done and nothing queued
    settled_s: float  # the writes after the pass over
    index_files: dict[str, int] = field(default_factory=dict)  # name: bytes, at rest
    others: dict[str, int] = field(default_factory=dict)  # the rest of the home (not index)
    tables: list[tuple[str, int, int]] = field(default_factory=list)  # (name, bytes, unused)
    free_pages: int = 0
    page_size: int = 0
    cpu_s: dict[str, float] = field(default_factory=dict)  # daemon, workers: when all counted

    @property
    def index_bytes(self) -> int:
        return sum(self.index_files.values())


async def _attach(code_home: Path, folder: Path, kb: str) -> None:
    from cofferd.surfaces.core import Coffer  # the measured checkout's (bench.common.run_in_repo)

    locations = Locations(home=code_home, socket=code_home / "cofferd.sock")
    async with await Coffer.open(locations) as coffer:
        await coffer.kbs.create(kb, folder=folder)


def _compiled(repo: Path) -> None:
    """The checkout's bytecode written, as `make run` writes it (compileall)."""
    for package in ("coffer_kernel", "cofferd", "cofferctl"):
        if (repo / package).is_dir():
            compileall.compile_dir(repo / package, quiet=1)


def _cpu_s(pid: int) -> float:
    """CPU seconds (user and system) process `pid` has used; 0 once it has ended."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_split(pid: int) -> dict[str, float]:
    """The CPU the daemon `pid` and its worker processes have used (none without /proc)."""
    if not Path("/proc/self/stat").exists():
        return {}
    workers = descendants(pid)
    return {
        "daemon": _cpu_s(pid),
        "workers": sum(map(_cpu_s, workers)),
        "processes": len(workers),
    }


def _tree_bytes(root: Path) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder, name)
            if not path.is_symlink():
                sizes[path.relative_to(root).as_posix()] = path.stat().st_size
    return sizes


def _accounting(db: Path) -> tuple[list[tuple[str, int, int]], int, int]:
    """(table or index, bytes, unused bytes inside its pages) by size, free pages, page size."""
    conn = sqlean.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT name, sum(pgsize), sum(unused) FROM dbstat GROUP BY name ORDER BY 2 DESC"
        ).fetchall()
        (free,) = conn.execute("PRAGMA freelist_count").fetchone()
        (page,) = conn.execute("PRAGMA page_size").fetchone()
    finally:
        conn.close()
    return [(str(n), int(s), int(u)) for n, s, u in rows], int(free), int(page)


def _settled(home: Path) -> None:
    """Until the database files have not changed for QUIET_S."""

    def state() -> tuple[tuple[int, int], ...]:
        return tuple(
            (p.stat().st_size, p.stat().st_mtime_ns) if p.exists() else (0, 0)
            for p in (home / name for name in INDEX_FILES)
        )

    last, since = state(), time.perf_counter()
    while time.perf_counter() - since < QUIET_S:
        time.sleep(POLL_S)
        now = state()
        if now != last:
            last, since = now, time.perf_counter()


def cold_start(repo: Path, root: Path, corpus: Path, documents: int, kb: str = "docs") -> ColdStart:
    """Measure one cold start (see the module's docstring) in a fresh home under `root`."""
    home, folder, sock = root / "home", root / "attached", root / "cofferd.sock"
    folder.mkdir()
    asyncio.run(_attach(home, folder, kb))
    for name in INDEX_FILES:
        (home / name).unlink(missing_ok=True)
    shutil.copytree(corpus, folder, dirs_exist_ok=True)
    client = Client(sock)
    want = math.ceil(SHARE * documents)
    moments: dict[str, float] = {}
    _compiled(repo)
    env = code_env(repo, COFFER_HOME=str(home), COFFER_SOCKET=str(sock))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    with open(root / "cofferd.log", "wb") as log:
        started = time.perf_counter()
        daemon = start_cofferd(env, log_level=None, stdout=log, stderr=subprocess.STDOUT)
    try:

        def counted() -> bool:
            count = int(client.get(client.kb(kb, "/metrics"))["documents"])
            now = time.perf_counter() - started
            moments.setdefault("answering", now)
            if count:
                moments.setdefault("first", now)
            if count >= want:
                moments.setdefault("share", now)
            return count >= documents

        wait(counted, daemon, 600, POLL_S)
        moments["all"] = time.perf_counter() - started
        cpu = _cpu_split(daemon.pid)
        wait(lambda: indexer_idle(client.get("/api/v1/status")), daemon, 600, POLL_S)
        moments["idle"] = time.perf_counter() - started
        _settled(home)
        moments["settled"] = time.perf_counter() - started - QUIET_S
    finally:
        stop_daemon(daemon)
    if daemon.returncode not in (0, None):
        raise RuntimeError(f"cofferd ended with {daemon.returncode}: see {root / 'cofferd.log'}")
    sizes = _tree_bytes(home)
    index = {n: s for n, s in sizes.items() if n in INDEX_FILES or n.startswith("derived/")}
    result = ColdStart(
        documents,
        *(moments[k] for k in ("answering", "first", "share", "all", "idle", "settled")),
        index_files=index,
        others={n: s for n, s in sizes.items() if n not in index},
        cpu_s=cpu,
    )
    result.tables, result.free_pages, result.page_size = _accounting(home / "coffer.db")
    return result


def report(result: ColdStart, text_bytes: int, top: int = 12) -> None:
    r = result
    print(
        f"  socket answering {r.answering_s:.2f} s, first document searchable {r.first_s:.2f} s,"
        f" {SHARE:.0%} {r.share_s:.2f} s, all {r.documents} {r.all_s:.2f} s, idle "
        f"{r.idle_s:.2f} s, writes after the pass settled {r.settled_s:.2f} s (from the start)"
    )
    if r.cpu_s:
        print(
            f"  CPU until every document was searchable: daemon {r.cpu_s['daemon']:.2f} s, "
            f"{r.cpu_s['processes']:.0f} worker processes {r.cpu_s['workers']:.2f} s"
        )
    files = ", ".join(f"{n} {s / 1e6:.2f} MB" for n, s in sorted(r.index_files.items()))
    print(
        f"  index at rest: {r.index_bytes / 1e6:.1f} MB = {r.index_bytes / text_bytes:.2f}x the "
        f"text ({files}); {r.free_pages} free pages of {r.page_size} B; the rest of the home "
        f"{sum(r.others.values()) / 1e3:.0f} kB in {len(r.others)} files"
    )
    for name, size, unused in r.tables[:top]:
        print(f"    {name:<40} {size / 1e6:7.2f} MB ({unused / 1e6:5.2f} MB unused in its pages)")
