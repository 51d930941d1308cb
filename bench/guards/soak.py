"""Soak: a real cofferd under a long mix of file, folder and API churn, with kills, and the
oracle checked at quiet points.

What it does, for `--minutes` (default 30):

* starts the real `cofferd` (the venv's) in a scratch data home (removed at the end; the
  daemon is always stopped) with two knowledge bases: `notes` (the default one) and
  `soak2` (created through the API), each seeded with a few hundred tldr pages;
* loops over random operations at bounded rates (about 20 a second and a burst every
  10-30 s, sized for a 2-core machine: the daemon stays busy, not saturated): files
  created, edited, appended to, saved atomically (editor style), renamed, touched and
  deleted; folders moved and deleted; bursts of 200-1000 files (old bursts are deleted to
  keep each KB under `--max-files`); hostile files (binary `.md`, a name that is not UTF-8,
  YAML-alias frontmatter, multi-MB lines, empty files, symlinks out of the tree, a FIFO,
  NFC/NFD twin names, ...); API edits with `expected_sha256` (and deliberately stale
  ones: 409), Markdown adds, deletes, gets and lists; searches and greps (and a few
  requests meant to be bad, which must be refused with a 4xx);
* every `--kill-every` minutes (default 4; 0 = never) kills the daemon with SIGKILL (half
  the time a second or two after a burst, while it is being indexed) and starts it again
  (waits for health, then goes on mutating during the start-up reconcile);
* every `--quiet-every` minutes (default 5) and at the end reaches a quiet point (no
  mutations; status shows queue_depth 0, not busy, watcher running, start-up reconcile
  done, steady for a few seconds) and checks the oracle for each knowledge base: the
  daemon's index dump equals the dump of a fresh in-process rebuild from the same files,
  and no FTS row is orphaned;
* samples the daemon's RSS and open file descriptors every ~10 s.

Failures (must be 0): any 5xx, any 4xx that was not expected, a connection error, an
oracle mismatch, a daemon that exits unexpectedly, a quiet point that is never reached.

    PYTHONPATH=$PWD .venv/bin/python -m bench.guards.soak [--minutes 30] [--seed 1] \
        [--kill-every 4] [--quiet-every 5] [--max-files 3000]

(PYTHONPATH makes the daemon subprocess import this tree's cofferd.) Exit status 1 when
anything failed; the daemon's log is then kept in /tmp/coffer-soak-<pid>.log.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import logging
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
import unicodedata
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from bench.common import extract_tldr, machine, scratch_home
from cofferctl.client import Client, DaemonUnreachable, ProtocolError
from cofferd.infrastructure.storage import sqlite
from cofferd.infrastructure.storage.database import EXTENSIONS
from cofferd.infrastructure.storage.index_dump import dump_index
from tests.support.cofferd_process import start_cofferd
from tests.support.helpers import rebuild_dump_of

BIN = Path(sys.executable).parent
KB2 = "soak2"
BAD = "bad"  # hostile files live in docs/bad/ of each KB
SEED_FILES = {"notes": 350, KB2: 250}
DOC_FIELDS = (
    "id", "path", "title", "description", "content_sha256", "embed_pending", "source_mode",
    "metadata", "file_size", "file_mtime_ns", "chunking",
)  # fmt: skip
SAMPLE_EVERY_S = 10.0
SLEEP_S = (0.01, 0.08)  # between two operations
WORDS = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
    "uniform", "victor", "whiskey", "xray", "yankee", "zulu", "archive", "extract", "compress",
    "directory", "file", "list", "show", "print", "command", "network", "process", "memory",
]  # fmt: skip
CJK = "東京都の天気は晴れです知識ベース検索한국어문서테스트压缩文件目录"
UNICODE_NAMES = ["東京", "e f", "naïve", "Ärger", "日本語のノート", "한국어", "emoji-✓"]
# Expected refusals of the requests meant to be bad.
BAD_REQUESTS = "bad_request"


def is_markdown_name(name: str) -> bool:
    return name.lower().endswith((".md", ".markdown")) and not name.startswith(".")


def utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class Daemon:
    """The real cofferd from the venv, on a short socket path, logging to a file."""

    def __init__(self, home: Path, socket_path: Path, log: Path) -> None:
        self.home = home
        self.socket = socket_path
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0
        self._log_handle: Any = None

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NOTIFY_", "LISTEN_"))}
        env.update({"COFFER_HOME": str(self.home), "COFFER_SOCKET": str(self.socket)})
        self._log_handle = open(self.log, "ab")  # noqa: SIM115
        self.proc = start_cofferd(
            env, log_level="INFO", stdout=self._log_handle, stderr=subprocess.STDOUT
        )
        self.started_at = time.monotonic()
        client = Client(self.socket, actor="soak", timeout=10)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"cofferd exited at start with {self.proc.returncode}")
            try:
                if client.get("/api/v1/health"):
                    return
            except (DaemonUnreachable, ProtocolError, OSError):
                pass
            time.sleep(0.05)
        raise RuntimeError("cofferd not healthy within 60 s")

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        self._close_log()

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        self._close_log()
        return self.proc.returncode

    def _close_log(self) -> None:
        if self._log_handle is not None:
            self._log_handle.close()
            self._log_handle = None


def machine_jiffies() -> tuple[int, int]:
    """(busy, total) CPU time of the whole machine so far, from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return sum(values) - idle, sum(values)


class Sampler(threading.Thread):
    """RSS, open fds and CPU time of whichever daemon process is current, every ~10 s."""

    def __init__(self, daemon: Daemon, t0: float) -> None:
        super().__init__(daemon=True, name="sampler")
        self.d = daemon
        self.t0 = t0
        self.samples: list[dict[str, Any]] = []
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self._machine = machine_jiffies()

    def sample(self) -> None:
        pid = self.d.pid
        if pid is None or not self.d.alive():
            return
        try:
            rss = 0.0
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) / 1024
            fds = len(os.listdir(f"/proc/{pid}/fd"))
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return  # it exited between the checks
        busy, total = machine_jiffies()
        spent = total - self._machine[1]
        # every process on the machine, in % of one core (other work disturbs the figures)
        machine_cpu = 100 * (os.cpu_count() or 1) * (busy - self._machine[0]) / max(spent, 1)
        self._machine = (busy, total)
        with self.lock:
            self.samples.append(
                {
                    "t": time.monotonic() - self.t0,
                    "pid": pid,
                    "rss": rss,
                    "fds": fds,
                    "cpu": cpu,
                    "machine_cpu": machine_cpu,
                }
            )

    def run(self) -> None:
        while not self.stopping.wait(SAMPLE_EVERY_S):
            self.sample()


class Soak:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.scratch = scratch_home("soak")
        self.home = self.scratch / "home"
        self.outside = self.scratch / "outside"  # targets of symlinks out of the tree
        self.marker = self.scratch / "soak-is-running"
        sock = Path(f"/tmp/coffer-soak-{os.getpid()}.sock")  # sockets need short paths
        self.daemon = Daemon(self.home, sock, self.scratch / "cofferd.log")
        self.client = Client(sock, actor="soak", timeout=120)
        self.t0 = time.monotonic()
        self.sampler = Sampler(self.daemon, self.t0)
        self.kbs = ["notes", KB2]
        self.files: dict[str, list[str]] = {kb: [] for kb in self.kbs}
        self.dirs: dict[str, list[str]] = {kb: [] for kb in self.kbs}
        self.bad: dict[str, list[str]] = {kb: [] for kb in self.kbs}
        self.pool: list[bytes] = []  # tldr pages to write
        self.counter = 0
        self.ops: collections.Counter[str] = collections.Counter()
        self.api: collections.Counter[tuple[str, int]] = collections.Counter()
        self.refused: collections.Counter[tuple[str, int, str]] = collections.Counter()
        self.failures: list[str] = []
        self.oracle_passed = 0
        self.oracle_failed = 0
        self.kills = 0
        self.crashes = 0
        self.watcher_restarts: dict[int, int] = {}  # pid -> restarts, read at quiet points
        self.quiet_waits: list[float] = []
        self.warm_at: float | None = None  # after the first quiet point of the loop
        self.last_nonutf8 = 0.0
        self.totals: dict[str, int] = {}
        self.cpu_lately: list[float] = []  # daemon CPU % over the minute before each progress

    # -- plumbing ---------------------------------------------------------------------

    def docs(self, kb: str) -> Path:
        return self.home / "knowledge" / kb / "docs"

    def now(self) -> float:
        return time.monotonic() - self.t0

    def say(self, message: str) -> None:
        print(f"[{self.now() / 60:6.2f} min] {message}", flush=True)

    def fail(self, message: str) -> None:
        self.failures.append(f"{self.now() / 60:.2f} min: {message}")
        self.say(f"FAILURE: {message}")

    def token(self) -> str:
        self.counter += 1
        return f"soak{self.counter}x{self.rng.randrange(10**6):06d}"

    def words(self, n: int) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(n))

    def text(self) -> bytes:
        """A tldr page, or a generated note, with a unique token."""
        tok = self.token()
        if self.pool and self.rng.random() < 0.7:
            return self.rng.choice(self.pool) + f"\n- {tok}\n".encode()
        cjk = "".join(self.rng.choice(CJK) for _ in range(self.rng.randrange(0, 30)))
        paras = "\n\n".join(self.words(self.rng.randrange(5, 80)) for _ in range(1, 6))
        return f"# Note {tok}\n\n{paras}\n\n{cjk}\n".encode()

    def check_scratch(self) -> None:
        """Another process deleting our scratch files (a clean-up of /tmp/coffer-bench-*)
        would look like daemon failures: say so plainly, and put back what we need."""
        missing = [
            p for p in (self.marker, self.outside, *(self.docs(kb) for kb in self.kbs))
            if not p.exists()
        ]  # fmt: skip
        if missing:
            self.fail(f"ENVIRONMENT: files of this soak were deleted by another process: {missing}")
            self.outside.mkdir(parents=True, exist_ok=True)
            self.marker.touch()

    def check_daemon(self) -> None:
        """An unexpected exit is a crash: count it, keep the log tail, start again."""
        if self.daemon.alive():
            return
        assert self.daemon.proc is not None
        code = self.daemon.proc.returncode
        self.crashes += 1
        tail = self.daemon.log.read_bytes()[-3000:].decode("utf-8", "replace")
        self.fail(f"daemon exited unexpectedly with {code}; log tail:\n{tail}")
        self.daemon.stop()
        self.daemon.start()

    def call(
        self,
        op: str,
        method: str,
        path: str,
        body: Any = None,
        query: dict[str, Any] | None = None,
        *,
        ok: Iterable[int] = (200,),
        refusals: Iterable[str] = (),
    ) -> tuple[int, Any] | None:
        """One request. Statuses in `ok` are success; an error whose code is in `refusals`
        was expected (a race, or a request meant to be bad); anything else is a failure."""
        try:
            status, data = self.client.send(method, path, body, query)
        except (DaemonUnreachable, ProtocolError, OSError, ValueError) as exc:
            if self.daemon.alive():
                self.fail(f"{op}: {method} {path}: {type(exc).__name__}: {exc}")
            else:
                self.check_daemon()
            return None
        self.api[(op, status)] += 1
        if status in ok:
            return status, data
        error = data.get("error", {}) if isinstance(data, dict) else {}
        code = error.get("code", "?")
        if status < 500 and code in refusals:
            self.refused[(op, status, code)] += 1
        else:
            detail = json.dumps(error)[:600]
            shown = json.dumps(body)[:200] if body is not None else ""
            self.fail(f"{op}: {method} {path} {shown} -> {status} {detail}")
        return status, data

    # -- the files ---------------------------------------------------------------------

    def rescan(self, kb: str) -> None:
        """What is on disk: documents (outside bad/) and folders, as the picker sees them."""
        root = self.docs(kb)
        files, dirs = [], []
        for folder, subdirs, names in os.walk(root):
            rel = os.path.relpath(folder, root)
            rel = "" if rel == "." else rel + "/"
            if rel == f"{BAD}/" or rel.startswith(f"{BAD}/"):
                subdirs[:] = []
                continue
            subdirs[:] = [
                s for s in subdirs if utf8(s) and not os.path.islink(os.path.join(folder, s))
            ]
            dirs += [rel + s for s in subdirs if not (rel == "" and s == BAD)]
            for name in names:
                full = os.path.join(folder, name)
                if utf8(name) and is_markdown_name(name) and not os.path.islink(full):
                    files.append(rel + name)
        self.files[kb] = files
        self.dirs[kb] = dirs

    def pick_file(self, kb: str) -> str | None:
        files = self.files[kb]
        while files:
            i = self.rng.randrange(len(files))
            rel = files[i]
            if os.path.isfile(self.docs(kb) / rel):
                return rel
            files[i] = files[-1]
            files.pop()
        return None

    def new_name(self, kb: str) -> str:
        """A new file name, in an existing folder or a new one; now and then unusual."""
        tok = self.token()
        r = self.rng.random()
        if r < 0.1:
            name = f"{self.rng.choice(UNICODE_NAMES)} {tok}.md"
        elif r < 0.13:
            name = unicodedata.normalize("NFD", f"café {tok}.md")
        elif r < 0.18:
            name = f"{tok}.MD"
        elif r < 0.22:
            name = f"{tok}.markdown"
        else:
            name = f"{tok}.md"
        q = self.rng.random()
        if q < 0.25 or not self.dirs[kb]:
            return name
        if q < 0.3:
            return f"new-{tok}/sub/{name}"
        return f"{self.rng.choice(self.dirs[kb])}/{name}"

    def write(self, kb: str, rel: str, data: bytes) -> None:
        path = self.docs(kb) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    def op_create(self, kb: str) -> None:
        rel = self.new_name(kb)
        self.write(kb, rel, self.text())
        if "/" in rel and rel.rsplit("/", 1)[0] not in self.dirs[kb]:
            self.rescan(kb)
        else:
            self.files[kb].append(rel)

    def op_edit(self, kb: str) -> None:
        rel = self.pick_file(kb)
        if rel is None:
            return
        path = self.docs(kb) / rel
        lines = path.read_bytes().split(b"\n")
        i = self.rng.randrange(len(lines))
        if self.rng.random() < 0.5:
            lines[i] = f"edited {self.token()} {self.words(6)}".encode()
        else:
            lines.insert(i, f"inserted {self.token()}".encode())
        path.write_bytes(b"\n".join(lines))

    def op_append(self, kb: str) -> None:
        rel = self.pick_file(kb)
        if rel is None:
            return
        with open(self.docs(kb) / rel, "ab") as fh:
            fh.write(f"\n- appended {self.token()} {self.words(8)}\n".encode())

    def op_atomic_save(self, kb: str) -> None:
        """As editors save: a hidden temporary file, then a rename over the original."""
        rel = self.pick_file(kb)
        if rel is None:
            return
        path = self.docs(kb) / rel
        data = path.read_bytes() + f"\nsaved {self.token()}\n".encode()
        tmp = path.with_name(f".{path.name}.swp")
        tmp.write_bytes(data)
        os.replace(tmp, path)

    def op_touch(self, kb: str) -> None:
        rel = self.pick_file(kb)
        if rel is None:
            return
        path = self.docs(kb) / rel
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))

    def op_rename(self, kb: str) -> None:
        rel = self.pick_file(kb)
        if rel is None:
            return
        src = self.docs(kb) / rel
        r = self.rng.random()
        if r < 0.08:  # out of the document set, and back later maybe
            dest_rel = rel + ".txt"
        elif r < 0.12:
            folder = rel.rsplit("/", 1)[0] + "/" if "/" in rel else ""
            dest_rel = f"{folder}.hidden-{self.token()}.md"
        else:
            dest_rel = self.new_name(kb)
        dest = self.docs(kb) / dest_rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.rename(src, dest)
        self.files[kb].remove(rel)
        if is_markdown_name(dest.name):
            self.files[kb].append(dest_rel)
        if "/" in dest_rel and dest_rel.rsplit("/", 1)[0] not in self.dirs[kb]:
            self.rescan(kb)

    def op_delete(self, kb: str) -> None:
        rel = self.pick_file(kb)
        if rel is None:
            return
        (self.docs(kb) / rel).unlink()
        self.files[kb].remove(rel)

    def op_move_folder(self, kb: str) -> None:
        if not self.dirs[kb]:
            return
        rel = self.rng.choice(self.dirs[kb])
        src = self.docs(kb) / rel
        if self.rng.random() < 0.5:
            dest = src.with_name(f"{src.name}-mv{self.token()}")
        else:
            dest = self.docs(kb) / f"moved-{self.token()}" / src.name
            dest.parent.mkdir(parents=True)
        os.rename(src, dest)
        self.rescan(kb)

    def op_delete_folder(self, kb: str) -> None:
        if not self.dirs[kb]:
            return
        burst = [d for d in self.dirs[kb] if d.startswith("burst-") and "/" not in d]
        if burst and len(self.files[kb]) > self.args.max_files // 2:
            rel = self.rng.choice(burst)
        else:
            rel = self.rng.choice(self.dirs[kb])
        shutil.rmtree(self.docs(kb) / rel)
        self.rescan(kb)

    def op_burst(self, kb: str) -> None:
        """200-1000 files at once (a git checkout, a sync); old bursts go when full."""
        while len(self.files[kb]) > self.args.max_files - 1000:
            burst = [d for d in self.dirs[kb] if d.startswith("burst-") and "/" not in d]
            target = self.rng.choice(burst or self.dirs[kb])
            shutil.rmtree(self.docs(kb) / target)
            self.ops["burst_removed"] += 1
            self.rescan(kb)
        n = self.rng.randrange(200, 1001)
        folder = f"burst-{self.token()}"
        for i in range(n):
            sub = f"/d{i % 7}" if i % 3 else ""
            self.write(kb, f"{folder}{sub}/b{i:04d}.md", self.text())
        self.rescan(kb)
        self.say(f"burst of {n} files into {kb}/{folder}")

    # -- hostile files ------------------------------------------------------------------

    def op_bad_file(self, kb: str) -> str:
        """One hostile file in docs/bad/; the oldest go once there are more than 30."""
        bad = self.docs(kb) / BAD
        bad.mkdir(exist_ok=True)
        tok = self.token()
        kinds = [
            "binary", "aliases", "huge_line", "huge_token", "empty", "symlink_out",
            "symlink_dir_out", "dangling_symlink", "latin1", "crlf_bom_nul", "broken_frontmatter",
            "deep_frontmatter", "big_frontmatter", "dir_named_md", "fifo", "nfc_nfd_twins",
        ]  # fmt: skip
        if time.monotonic() - self.last_nonutf8 > self.args.nonutf8_every * 60:
            kind = "non_utf8_name"
        else:
            kind = self.rng.choice(kinds)
        name = f"{kind}-{tok}.md"
        path = bad / name
        if kind == "binary":
            path.write_bytes(bytes(self.rng.randrange(256) for _ in range(4096)) + b"\0" * 200)
        elif kind == "non_utf8_name":
            # A Latin-1 name (bytes that are not UTF-8); the watcher must survive it.
            self.last_nonutf8 = time.monotonic()
            raw = os.fsencode(bad) + f"/caf\xe9-{tok}.md".encode("latin-1")
            fd = os.open(raw, os.O_WRONLY | os.O_CREAT, 0o644)
            with os.fdopen(fd, "wb") as fh:
                fh.write(b"# Latin-1 name\n\ncaf\xe9\n")
            return kind
        elif kind == "aliases":
            lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
            for prev, cur in zip("abcdefgh", "bcdefghi", strict=True):
                refs = ",".join([f"*{prev}"] * 9)
                lines.append(f"{cur}: &{cur} [{refs}]")
            fm = "\n".join(lines)
            path.write_text(f"---\n{fm}\n---\n# Laughs {tok}\n\nbillion laughs\n")
        elif kind == "huge_line":
            n = self.rng.randrange(50_000, 400_000)
            path.write_text(f"# Huge line {tok}\n\n" + self.words(n) + "\n")
        elif kind == "huge_token":
            n = self.rng.randrange(100_000, 2_000_000)
            path.write_text(f"# Huge token {tok}\n\n" + "x" * n + "\n")
        elif kind == "empty":
            path.write_bytes(b"")
        elif kind == "symlink_out":
            target = self.outside / f"{tok}.md"
            target.write_text(f"# Outside {tok}\n\nmust never be indexed\n")
            path.symlink_to(target)
        elif kind == "symlink_dir_out":
            target = self.outside / f"dir-{tok}"
            target.mkdir()
            (target / "inside.md").write_text(f"# Outside dir {tok}\n")
            path.with_suffix("").symlink_to(target, target_is_directory=True)
        elif kind == "dangling_symlink":
            path.symlink_to(self.outside / "nothing-here.md")
        elif kind == "latin1":
            path.write_bytes(f"# Caf\xe9 {tok}\n\nna\xefve r\xe9sum\xe9\n".encode("latin-1"))
        elif kind == "crlf_bom_nul":
            path.write_bytes(b"\xef\xbb\xbf# CRLF " + tok.encode() + b"\r\n\r\nline\0one\r\n")
        elif kind == "broken_frontmatter":
            path.write_text(f"---\nbroken: [\n---\n# Broken {tok}\n\nkeep me\n")
        elif kind == "deep_frontmatter":
            fm = "a: " + "[" * 40 + "1" + "]" * 40
            path.write_text(f"---\n{fm}\n---\n# Deep {tok}\n")
        elif kind == "big_frontmatter":
            fm = "\n".join(f"k{i}: {self.words(3)}" for i in range(4000))
            path.write_text(f"---\n{fm}\n---\n# Big frontmatter {tok}\n")
        elif kind == "dir_named_md":
            path.mkdir()
            (path / "inner.md").write_text(f"# Inside a folder named .md {tok}\n")
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "nfc_nfd_twins":
            nfc = unicodedata.normalize("NFC", f"twin-é-{tok}.md")
            nfd = unicodedata.normalize("NFD", nfc)
            (bad / nfc).write_text(f"# Twin NFC {tok}\n")
            (bad / nfd).write_text(f"# Twin NFD {tok} longer\n")
            name = nfc
        self.bad[kb].append(name)
        while len(self.bad[kb]) > 30:
            self.remove_bad(kb, self.bad[kb].pop(0))
        return kind

    def remove_bad(self, kb: str, name: str) -> None:
        bad = self.docs(kb) / BAD
        for path in (bad / name, bad / Path(name).with_suffix("")):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.is_symlink() or path.exists():
                path.unlink()
        nfd = unicodedata.normalize("NFD", name)
        if nfd != name and (bad / nfd).exists():
            (bad / nfd).unlink()

    # -- the API --------------------------------------------------------------------------

    def pick_document(self, kb: str) -> dict[str, Any] | None:
        total = self.totals.get(kb, 50)
        got = self.call(
            "api_list",
            "GET",
            self.client.kb(kb, "/documents"),
            query={"limit": 20, "offset": self.rng.randrange(max(1, total))},
        )
        if got is None:
            return None
        self.totals[kb] = got[1]["total"]
        documents = got[1]["documents"]
        return self.rng.choice(documents) if documents else None

    def doc_call(
        self, op: str, kb: str, doc: dict[str, Any], method: str, body: Any = None
    ) -> tuple[int, Any] | None:
        """A request on one listed document. Its 404 is a race (fine) only when the file
        is gone: the index listed it a moment ago."""
        rel = doc["relative_path"]
        gone = not os.path.lexists(self.docs(kb) / rel)
        refusals = ["DOCUMENT_CHANGED"] + (["DOCUMENT_NOT_FOUND"] if gone else [])
        path = self.client.kb(kb, f"/documents/{doc['id']}")
        got = self.call(op, method, path, body, refusals=refusals)
        if got and got[0] == 404 and not gone:
            self.say(f"(404 for {rel}, which exists)")
        return got

    def op_api_get(self, kb: str) -> None:
        doc = self.pick_document(kb)
        if doc:
            self.doc_call("api_get", kb, doc, "GET")

    def op_api_edit(self, kb: str) -> None:
        """GET, then PUT with expected_sha256 (409 if the file changed meanwhile: a race)."""
        doc = self.pick_document(kb)
        if not doc:
            return
        got = self.doc_call("api_get", kb, doc, "GET")
        if not got or got[0] != 200:
            return
        body = got[1]["content"]
        if self.rng.random() < 0.2:
            content = f"---\ntitle: Edited {self.token()}\n---\n# Whole file\n\n{self.words(20)}\n"
        else:
            content = body + f"\n\napi edit {self.token()} {self.words(10)}\n"
        put = {"content": content, "expected_sha256": got[1]["content_sha256"]}
        result = self.doc_call("api_edit", kb, doc, "PUT", put)
        if result and result[0] == 200 and result[1]["relative_path"] != doc["relative_path"]:
            self.fail(f"api_edit moved {doc['relative_path']} to {result[1]['relative_path']}")

    def op_api_edit_stale(self, kb: str) -> None:
        """GET, change the file on disk, then PUT with the old sha: must be 409."""
        doc = self.pick_document(kb)
        if not doc:
            return
        got = self.doc_call("api_get", kb, doc, "GET")
        path = self.docs(kb) / doc["relative_path"]
        if not got or got[0] != 200 or not path.is_file() or path.is_symlink():
            return
        with open(path, "ab") as fh:
            fh.write(f"\nchanged under the API {self.token()}\n".encode())
        put = {"content": "lost edit", "expected_sha256": got[1]["content_sha256"]}
        api = self.client.kb(kb, f"/documents/{doc['id']}")
        self.call("api_edit_stale", "PUT", api, put, ok=(), refusals=["DOCUMENT_CHANGED"])

    def op_api_add(self, kb: str) -> None:
        tok = self.token()
        body: dict[str, Any] = {"content": f"# Added {tok}\n\n{self.words(40)}\n"}
        if self.rng.random() < 0.7:
            body["title"] = f"API note {tok}"
        got = self.call("api_add", "POST", self.client.kb(kb, "/documents"), body, ok=(201,))
        if got and got[0] == 201:
            self.files[kb].append(got[1]["document"]["relative_path"])

    def op_api_delete(self, kb: str) -> None:
        doc = self.pick_document(kb)
        if not doc or doc["relative_path"].startswith(f"{BAD}/"):
            return
        got = self.doc_call("api_delete", kb, doc, "DELETE")
        if got and got[0] == 200 and os.path.lexists(self.docs(kb) / doc["relative_path"]):
            self.fail(f"api_delete left {doc['relative_path']} on disk")

    def op_search(self, kb: str) -> None:
        r = self.rng.random()
        if r < 0.5:
            query = self.words(self.rng.randrange(1, 4))
        elif r < 0.7:
            query = "".join(self.rng.choice(CJK) for _ in range(self.rng.randrange(1, 4)))
        elif r < 0.85:
            query = f"soak{self.rng.randrange(1, max(2, self.counter))}"
        else:
            query = self.rng.choice(['"unbalanced', "a AND OR NOT", "-x*", "c++ && ||", "NEAR("])
        body = {"query": query, "top_k": self.rng.randrange(1, 30)}
        got = self.call("search", "POST", self.client.kb(kb, "/search"), body)
        if got and got[0] == 200 and not isinstance(got[1].get("passages"), list):
            self.fail(f"search {query!r}: no passages list")

    def op_grep(self, kb: str) -> None:
        pattern = self.rng.choice(
            [self.rng.choice(WORDS), r"soak\d+x", r"^# ", "tar|zip", "[0-9]{4}", "東京", "é"]
        )
        body = {
            "pattern": pattern,
            "max_matches": self.rng.randrange(1, 300),
            "ignore_case": self.rng.random() < 0.5,
        }
        got = self.call("grep", "POST", self.client.kb(kb, "/grep"), body)
        if got and got[0] == 200 and not isinstance(got[1].get("hits"), list):
            self.fail(f"grep {pattern!r}: no hits list")

    def op_bad_request(self, kb: str) -> None:
        """Requests meant to be bad: each must be refused with its 4xx, never a 5xx."""
        kbp = self.client.kb(kb)
        cases: list[tuple[str, str, Any, list[str]]] = [
            ("POST", kbp + "/search", {"query": ""}, ["VALIDATION_ERROR"]),
            ("POST", kbp + "/search", {"query": "x", "top_k": 0}, ["VALIDATION_ERROR"]),
            ("POST", kbp + "/grep", {"pattern": "("}, ["INVALID_PATTERN"]),
            ("POST", kbp + "/grep", {"pattern": "[a-"}, ["INVALID_PATTERN"]),
            ("POST", kbp + "/documents", {"content": "   "}, ["INGEST_REJECTED"]),
            ("POST", kbp + "/documents", {"bogus": 1}, ["VALIDATION_ERROR"]),
            ("GET", kbp + "/documents/nosuchdocument", None, ["DOCUMENT_NOT_FOUND"]),
            ("DELETE", kbp + "/documents/nosuchdocument", None, ["DOCUMENT_NOT_FOUND"]),
            (
                "PUT",
                kbp + "/documents/nosuchdocument",
                {"content": "x", "expected_sha256": "nothex"},
                ["VALIDATION_ERROR", "DOCUMENT_NOT_FOUND"],
            ),
            ("POST", self.client.kb("no-such-kb", "/search"), {"query": "x"}, ["KB_NOT_FOUND"]),
            ("POST", "/api/v1/knowledge_bases", {"name": "Bad Name!"}, ["VALIDATION_ERROR"]),
            ("POST", "/api/v1/knowledge_bases", {"name": KB2}, ["KB_EXISTS"]),
        ]
        method, path, body, refusals = self.rng.choice(cases)
        self.call(BAD_REQUESTS, method, path, body, ok=(), refusals=refusals)

    def op_status(self, kb: str) -> None:
        self.call("status", "GET", "/api/v1/status")
        self.call("metrics", "GET", self.client.kb(kb, "/metrics"))

    def op_reindex(self, kb: str) -> None:
        self.call("reindex", "POST", self.client.kb(kb, "/reindex"), {})

    # -- quiet points and the oracle ----------------------------------------------------

    def settle(self, timeout: float = 600.0) -> dict[str, Any] | None:
        """Wait until nothing is left to do: queue empty, not busy, watcher running, the
        start-up reconcile done, and no new file events, steadily for 3 s."""
        time.sleep(1.5)  # the watcher groups events for up to 1 s before handing them over
        started = time.monotonic()
        steady_since: float | None = None
        last_key: tuple[Any, ...] | None = None
        status: dict[str, Any] = {}
        while time.monotonic() - started < timeout:
            self.check_daemon()
            got = self.call("status", "GET", "/api/v1/status")
            if got and got[0] == 200:
                status = got[1]
                w = status["watcher"]
                quiet = (
                    status["queue_depth"] == 0
                    and not w["busy"]
                    and w["running"]
                    and status["startup_reconcile_done"]
                )
                key = (w["events_seen"], w["restarts"], w["last_full_reconcile_at"])
                if quiet and key == last_key:
                    steady_since = steady_since or time.monotonic()
                    if time.monotonic() - steady_since >= 3.0:
                        self.quiet_waits.append(time.monotonic() - started)
                        return status
                else:
                    steady_since = None
                last_key = key if quiet else None
            time.sleep(0.25)
        self.fail(f"no quiet point within {timeout:.0f} s; last status: {json.dumps(status)}")
        return None

    def daemon_dump(self, kb: str) -> dict[str, Any]:
        conn = sqlite.connect(self.home / "coffer.db", readonly=True, extensions=EXTENSIONS)
        try:
            return dump_index(conn, kb)
        finally:
            conn.close()

    def quiet_point(self, label: str) -> None:
        self.check_scratch()
        self.say(f"quiet point ({label}): waiting for the daemon to settle")
        status = self.settle()
        if status is None:
            return
        assert self.daemon.pid is not None
        self.watcher_restarts[self.daemon.pid] = status["watcher"]["restarts"]
        rebuilds = self.scratch / "rebuilds"
        rebuilds.mkdir(exist_ok=True)
        for kb in self.kbs:
            ours = self.daemon_dump(kb)
            fresh = asyncio.run(rebuild_dump_of(self.home / "knowledge" / kb, rebuilds))
            shutil.rmtree(rebuilds, ignore_errors=True)
            rebuilds.mkdir()
            problems = []
            if ours != fresh:
                problems.append("index != rebuild: " + diff_summary(ours, fresh))
            if ours["orphan_fts_rows"] != 0:
                problems.append(f"orphan_fts_rows = {ours['orphan_fts_rows']}")
            if problems:
                self.oracle_failed += 1
                self.fail(f"oracle ({label}) {kb}: " + "; ".join(problems))
            else:
                self.oracle_passed += 1
            state = next(k for k in status["knowledge_bases"] if k["name"] == kb)
            self.say(
                f"oracle {kb}: {'ok' if not problems else 'FAILED'}; {len(ours['documents'])}"
                f" documents, {len(ours['chunks'])} chunks; state {state['state']}"
            )
        self.rescan_all()
        self.say(
            f"quiet point done: watcher restarts {status['watcher']['restarts']},"
            f" settled after {self.quiet_waits[-1]:.1f} s"
        )

    def rescan_all(self) -> None:
        for kb in self.kbs:
            self.rescan(kb)

    # -- the run ----------------------------------------------------------------------------

    def seed(self) -> None:
        src = extract_tldr(self.scratch / "src")
        pages = sorted(src.glob("pages*/*/*.md"))
        rng = random.Random(self.args.seed)
        self.pool = [p.read_bytes() for p in rng.sample(pages, 3000)]
        for kb, n in SEED_FILES.items():
            docs = self.docs(kb)
            for page in rng.sample(pages, n):
                rel = page.relative_to(src)
                (docs / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(page, docs / rel)
        shutil.rmtree(self.scratch / "src")

    def run(self) -> None:
        self.outside.mkdir(parents=True)
        self.marker.touch()
        seed_kb2 = self.docs(KB2)
        self.seed()  # notes before the start (adopted); soak2 is moved in after creation
        staging = self.scratch / "staging"
        shutil.move(str(seed_kb2), str(staging))
        shutil.rmtree(self.home / "knowledge" / KB2)
        self.daemon.start()
        self.sampler.start()
        self.call("kb_create", "POST", "/api/v1/knowledge_bases", {"name": KB2}, ok=(201,))
        for entry in staging.iterdir():
            shutil.move(str(entry), str(self.docs(KB2) / entry.name))
        self.rescan_all()
        self.say(f"daemon pid {self.daemon.pid}; seeded {SEED_FILES}")
        self.quiet_point("initial")

        weights: dict[str, float] = {
            "create": 10, "edit": 10, "append": 10, "atomic_save": 4, "touch": 2, "rename": 5,
            "delete": 5, "move_folder": 0.6, "delete_folder": 0.4, "api_get": 3, "api_edit": 5,
            "api_edit_stale": 1, "api_add": 4, "api_delete": 2, "search": 15, "grep": 6,
            BAD_REQUESTS: 1.5, "status": 1, "reindex": 0.15,
        }  # fmt: skip
        ops: dict[str, Callable[[str], Any]] = {
            name: getattr(self, f"op_{name}") for name in weights
        }
        kinds, ws = list(weights), list(weights.values())
        loop_start = time.monotonic()
        end = loop_start + self.args.minutes * 60
        kill_every = self.args.kill_every * 60
        next_kill = loop_start + kill_every if kill_every > 0 else float("inf")
        next_quiet = loop_start + self.args.quiet_every * 60
        next_burst = loop_start + self.rng.uniform(20, 60)
        next_bad = loop_start + self.rng.uniform(3, 10)
        next_progress = loop_start + 60
        self.last_nonutf8 = loop_start - self.args.nonutf8_every * 60 + 45
        while (now := time.monotonic()) < end:
            self.check_daemon()
            kb = self.rng.choice(self.kbs)
            if now >= next_kill:
                if self.rng.random() < 0.5:  # half the kills land while a burst is indexed
                    self.op_burst(kb)
                    self.ops["burst"] += 1
                    time.sleep(self.rng.uniform(0, 2))
                self.say(f"kill -9 of pid {self.daemon.pid}")
                self.sampler.sample()
                self.daemon.kill()
                self.kills += 1
                self.ops["kill_restart"] += 1
                self.daemon.start()
                self.say(f"restarted: pid {self.daemon.pid}")
                next_kill = now + kill_every
                continue
            if now >= next_quiet:
                self.quiet_point(f"{self.now() / 60:.1f} min")
                self.sampler.sample()
                if self.warm_at is None:
                    self.warm_at = self.now()
                next_quiet = time.monotonic() + self.args.quiet_every * 60
                next_kill = max(next_kill, time.monotonic() + 30)
                continue
            if now >= next_progress:
                self.progress()
                next_progress = now + 60
            try:
                if now >= next_burst:
                    name = "burst"
                    self.op_burst(kb)
                    next_burst = now + self.rng.uniform(10, 30)
                elif now >= next_bad:
                    name = "bad_file:" + self.op_bad_file(kb)
                    next_bad = now + self.rng.uniform(5, 15)
                else:
                    name = self.rng.choices(kinds, ws)[0]
                    ops[name](kb)
            except (FileNotFoundError, NotADirectoryError, FileExistsError) as exc:
                # Our own bookkeeping was stale (a folder moved under the picked file).
                self.ops["skipped_stale_pick"] += 1
                self.say(f"(stale pick in {name}: {exc})")
                self.check_scratch()
                self.rescan(kb)
                continue
            self.ops[name] += 1
            time.sleep(self.rng.uniform(*SLEEP_S))
        self.loop_s = time.monotonic() - loop_start
        self.quiet_point("final")
        self.sampler.sample()

    def progress(self) -> None:
        self.check_scratch()
        samples = self.sampler.samples
        last = samples[-1] if samples else {"rss": 0, "fds": 0, "pid": 0, "t": 0, "cpu": 0}
        life = [s for s in samples if s["pid"] == last["pid"] and s["t"] >= last["t"] - 65]
        span = life[-1]["t"] - life[0]["t"] if life else 0
        cpu = 100 * (life[-1]["cpu"] - life[0]["cpu"]) / span if span else 0.0
        files = ", ".join(f"{kb} {len(self.files[kb])}" for kb in self.kbs)
        if span:
            self.cpu_lately.append(cpu)
        self.say(
            f"{sum(self.ops.values())} ops, files {files}; RSS {last['rss']:.0f} MB,"
            f" fds {last['fds']}, CPU {cpu:.0f} % lately; kills {self.kills},"
            f" crashes {self.crashes}, failures {len(self.failures)};"
            f" machine load {os.getloadavg()[0]:.2f}"
        )

    # -- the report ---------------------------------------------------------------------

    def log_summary(self) -> list[str]:
        counts: collections.Counter[str] = collections.Counter()
        tracebacks = 0
        try:
            text = self.daemon.log.read_text("utf-8", "replace")
        except OSError:
            return []
        for line in text.splitlines():
            if line.startswith("Traceback"):
                tracebacks += 1
            for level in ("CRITICAL", "ERROR", "WARNING"):
                if f" {level} " in line or line.startswith(level):
                    msg = line.split(level, 1)[1].strip()
                    counts[f"{level} {msg[:110]}"] += 1
        lines = [f"  tracebacks: {tracebacks}"]
        lines += [f"  {n:5d} x {msg}" for msg, n in counts.most_common(12)]
        return lines

    def report(self, wall: float) -> None:
        samples = self.sampler.samples
        p = print
        p("\n===== soak summary =====")
        p(f"machine: {machine()}")
        a = self.args
        p(
            f"args: --minutes {a.minutes:g} --seed {a.seed} --kill-every {a.kill_every:g}"
            f" --quiet-every {a.quiet_every:g} --max-files {a.max_files}"
        )
        loop = getattr(self, "loop_s", 0.0)
        p(f"duration: mutating loop {loop / 60:.1f} min; wall {wall / 60:.1f} min")
        total = sum(self.ops.values())
        p(f"operations: {total} ({total / max(loop, 1):.1f}/s)")
        for name, n in sorted(self.ops.items()):
            p(f"  {name:32s} {n}")
        p("API responses by operation and status:")
        for (op, status), n in sorted(self.api.items()):
            p(f"  {op:16s} {status}  {n}")
        p("expected refusals (4xx that were meant: races, bad requests):")
        for (op, status, code), n in sorted(self.refused.items()):
            p(f"  {op:16s} {status} {code:20s} {n}")
        fivexx = sum(n for (_, s), n in self.api.items() if s >= 500)
        p(f"5xx responses: {fivexx}")
        p(f"oracle checks: {self.oracle_passed} passed, {self.oracle_failed} failed")
        p(f"restarts: {self.kills} planned kill -9, {self.crashes} crashes (unexpected exits)")
        p(
            "watcher restarts (non-UTF-8 names end a watch), summed over the daemon lives:"
            f" {sum(self.watcher_restarts.values())}"
        )
        if self.quiet_waits:
            p(
                f"quiet points: {len(self.quiet_waits)}, settled after"
                f" max {max(self.quiet_waits):.1f} s"
            )
        if samples:
            warm = [s for s in samples if self.warm_at is not None and s["t"] >= self.warm_at]
            base = warm[0] if warm else samples[0]
            last = samples[-1]
            peak = max(samples, key=lambda s: s["rss"])
            growth = 100 * (last["rss"] - base["rss"]) / base["rss"]
            p(
                f"RSS: after warm-up {base['rss']:.0f} MB (at {base['t'] / 60:.1f} min),"
                f" max {peak['rss']:.0f} MB (at {peak['t'] / 60:.1f} min),"
                f" last {last['rss']:.0f} MB; growth beyond warm-up {growth:+.1f} %"
            )
            p(
                f"open fds: min {min(s['fds'] for s in samples)},"
                f" max {max(s['fds'] for s in samples)} ({len(samples)} samples)"
            )
            cpu = 0.0
            p("per daemon life (pid: samples, first/max/last RSS MB, fds min-max, CPU s):")
            for pid in dict.fromkeys(s["pid"] for s in samples):
                life = [s for s in samples if s["pid"] == pid]
                cpu += life[-1]["cpu"]
                p(
                    f"  {pid}: {len(life)}, {life[0]['rss']:.0f}/"
                    f"{max(s['rss'] for s in life):.0f}/{life[-1]['rss']:.0f},"
                    f" fds {min(s['fds'] for s in life)}-{max(s['fds'] for s in life)},"
                    f" {life[-1]['cpu']:.0f}"
                )
            p(f"daemon CPU: {100 * cpu / wall:.0f} % of one core on average over the wall time")
            own = resource.getrusage(resource.RUSAGE_SELF)
            mine = own.ru_utime + own.ru_stime
            whole = sorted(s["machine_cpu"] for s in samples[1:]) or [0.0]
            p(
                f"whole machine CPU (all processes, % of one core, per ~10 s): median"
                f" {whole[len(whole) // 2]:.0f} %, max {max(whole):.0f} % of"
                f" {100 * (os.cpu_count() or 1)} %"
            )
            p(f"soak process CPU (rebuilds included): {100 * mine / wall:.0f} % of one core")
            if self.cpu_lately:
                lately = self.cpu_lately
                p(
                    f"daemon CPU per minute while mutating: median"
                    f" {sorted(lately)[len(lately) // 2]:.0f} %, max {max(lately):.0f} %"
                )
            series, minute = [], -1
            for s in samples:
                if int(s["t"] // 60) != minute:
                    minute = int(s["t"] // 60)
                    series.append(f"{minute}m {s['rss']:.0f}")
            p("RSS over time (MB, first sample of each minute): " + ", ".join(series))
        p("daemon log (WARNING and above, most common):")
        for line in self.log_summary():
            p(line)
        p(f"failures: {len(self.failures)}")
        for f in self.failures:
            p(f"  - {f}")


def diff_summary(ours: dict[str, Any], fresh: dict[str, Any]) -> str:
    """Which documents differ, and how (a few examples)."""
    a = {r[0]: r for r in ours["documents"]}
    b = {r[0]: r for r in fresh["documents"]}
    only_ours = sorted(set(a) - set(b))
    only_fresh = sorted(set(b) - set(a))
    differing = []
    for doc in sorted(set(a) & set(b)):
        if a[doc] != b[doc]:
            fields = [DOC_FIELDS[i] for i in range(len(DOC_FIELDS)) if a[doc][i] != b[doc][i]]
            differing.append(f"{a[doc][1]} ({', '.join(fields)})")

    def by_doc(chunks: list[tuple[Any, ...]]) -> dict[str, list[tuple[Any, ...]]]:
        grouped: dict[str, list[tuple[Any, ...]]] = collections.defaultdict(list)
        for c in chunks:
            grouped[c[1]].append(c)
        return grouped

    ca, cb = by_doc(ours["chunks"]), by_doc(fresh["chunks"])
    chunk_docs = sorted(d for d in set(ca) | set(cb) if ca.get(d) != cb.get(d))
    parts = [
        f"{len(only_ours)} documents only in the index {[a[d][1] for d in only_ours[:5]]}",
        f"{len(only_fresh)} only in the rebuild {[b[d][1] for d in only_fresh[:5]]}",
        f"{len(differing)} differ {differing[:5]}",
        f"chunks differ for {len(chunk_docs)} documents {chunk_docs[:5]}",
    ]
    if ours["vectors"] != fresh["vectors"]:
        parts.append("vectors differ")
    return "; ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kill-every", type=float, default=4, help="minutes; 0 = never")
    parser.add_argument("--quiet-every", type=float, default=5, help="minutes")
    parser.add_argument("--max-files", type=int, default=3000, help="per knowledge base")
    parser.add_argument(
        "--nonutf8-every", type=float, default=3, help="minutes between non-UTF-8 names"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # the in-process rebuilds stay quiet
    soak = Soak(args)
    started = time.monotonic()
    code = 0
    try:
        soak.run()
    except KeyboardInterrupt:
        soak.fail("interrupted")
    except Exception as exc:  # noqa: BLE001 - whatever ends the run is reported with it
        traceback.print_exc()
        soak.fail(f"the soak itself stopped: {type(exc).__name__}: {exc}")
    finally:
        soak.sampler.stopping.set()
        returncode = soak.daemon.stop()
        if returncode not in (0, None):
            soak.fail(f"daemon exited with {returncode} on SIGTERM")
        soak.report(time.monotonic() - started)
        if soak.failures:
            kept = Path(f"/tmp/coffer-soak-{os.getpid()}.log")
            shutil.copyfile(soak.daemon.log, kept)
            print(f"daemon log kept in {kept}")
            code = 1
        shutil.rmtree(soak.scratch, ignore_errors=True)
        soak.daemon.socket.unlink(missing_ok=True)
    sys.exit(code)


if __name__ == "__main__":
    main()
