"""Does the daemon keep answering while it indexes? A prober measures it under load.

A real `cofferd` (this venv's, running the code of `--repo`, default this checkout) on a
scratch data home holds a small KB `probe` (20 notes). While a load is indexed into KB
`load`, a prober (this checkout's cofferctl client, in threads of this process) sends
`GET /api/v1/health` and a keyword search in `probe` in turn, one request every 20 ms, each
over a fresh connection; each kind has a thread of its own, so a search that hangs does
not hide whether health still answers. It records latencies until the load is indexed:
every file counted among the KB's documents or its skipped files, nothing queued, the
indexer idle (status polled). Per scenario: duration, number of probes, p50/p99/max of
health and of search, the longest gap with no answer of each kind (a request still
unanswered at the end counts with its age then), and the targets beside them: health and
search p99 <= 50 ms in every scenario; no request waits more than 100 ms behind a hostile
file (max <= 100 ms); side-by-side save-to-searchable p50 <= 100 ms.

Scenarios (`--all` runs every one, all hostile classes and 250,000 documents):

* `--hostile [CLASS ...]` (every class when none is named): each class of hostile file in
  turn, written beside the data home and renamed into `load`'s docs folder, with a daemon
  of its own (started on the same data home, so a stalled one does not hold up the next
  class): `links-12000` and `links-20000` (`[a](b` repeated), `merge-markers` (21 KB of
  `<<<<<<<` and `=======` lines, no `>>>>>>>`), `ignore-pattern` (a `.gitignore` holding
  `*a*a*a*a*a*a*b` beside a note named with 81 `a`s and 5 other notes), `headings-8mb`
  (`# h` lines), `hash-line` (10,000 `#`s), `backticks` (50,000), `open-brackets`
  (100,000 `[`), `open-wikilinks` (`[[` 50,000 times), `nested-brackets` (20,000 levels,
  plain and as nested links), `long-line-5mb` (no spaces), `cjk-2mb` (no punctuation).
  Per class also: the time until its files are indexed or skipped (and the skip reasons);
  the daemon's RSS and peak (VmRSS, VmHWM) plus its child processes' summed RSS, and the
  database size (coffer.db + WAL), before, after indexing and after the files are deleted
  again. Each class is probed for at least 1 s, so a quick one still gets ~50 probes.
  A class not indexed within `--hostile-timeout` s is reported as such and its daemon
  killed.
* `--tldr`: tldr-pages (~38,400 files) moved into `load` while the daemon runs.
* `--scale [N]`: bench.guards.scale's corpus of N documents (default 250,000) cold indexed at
  daemon start; the probe KB was indexed by an earlier start. Probing starts with the
  daemon and counts from its first answer.
* `--side-by-side [tldr|scale]`: saves in `probe` (a new word appended to a note, search
  polled until it finds it), one after the other, while `load` cold-indexes tldr-pages
  (default) or a 40,000-file bench.guards.scale corpus, moved in; 30 of them, or as many as begin
  before the load is indexed (a save on an idle daemon would measure nothing: a daemon
  that holds the first save until the load is done shows one save, as long as the load);
  save-to-searchable p50/p95/max.

Full run (long: the lead's, on a quiet machine), then small runs:

    .venv/bin/python -m bench.guards.responsiveness --all [--repo /work/old]
    python -m bench.guards.responsiveness --hostile links-12000 ignore-pattern --repo /work/old
    .venv/bin/python -m bench.guards.responsiveness --scale 20000 --side-by-side --repo /work/old
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import (
    DaemonMemory,
    add_repo_argument,
    count_documents,
    daemon_memory,
    database_mb,
    describe_code,
    exit_by_targets,
    extract_tldr,
    indexer_idle,
    kb_status,
    machine,
    percentile,
    scratch_home,
    start_daemon,
    stop_daemon,
    verdict,
    wait,
)
from bench.guards.scale import build_corpus
from cofferctl import api as ctl_api
from cofferctl.client import ApiError, Client, DaemonUnreachable, ProtocolError

PROBE_KB = "probe"
LOAD_KB = "load"
PROBE_WORD = "lantern"
INTERVAL_S = 0.02
MIN_WINDOW_S = 1.0
POLL_TIMEOUT_S = 5.0  # a status poll that waits longer than this counts as "not yet"
SAVES = 30
SIDE_DOCUMENTS = 40_000
DEPTH = 20_000  # of the nested brackets
TOPICS = [
    "garden", "budget", "recipes", "travel", "reading list", "taxes", "bicycle repair",
    "meeting notes", "birthdays", "passwords policy", "backups", "fitness", "music",
    "language lessons", "car service", "insurance", "plants", "photography", "holidays",
    "home network",
]  # fmt: skip
PROBE_NOTES = {
    f"note{i:02d}.md": f"# {topic.title()}\n\nA {PROBE_WORD} note about {topic}, number {i}.\n"
    for i, topic in enumerate(TOPICS)
}


def _repeat_to(pattern: bytes, size: int) -> bytes:
    return (pattern * (size // len(pattern) + 1))[:size]


def _cjk(size: int) -> bytes:
    """`size` bytes of CJK ideographs (3 bytes each in UTF-8), varied, no punctuation."""
    return "".join(chr(0x4E00 + (i * 7919) % 20902) for i in range(size // 3)).encode()


# Each class: the files written into the load KB's docs folder, in this order.
HOSTILE: dict[str, Callable[[], dict[str, bytes]]] = {
    "links-12000": lambda: {"links.md": b"[a](b" * 12_000},
    "links-20000": lambda: {"links.md": b"[a](b" * 20_000},
    "merge-markers": lambda: {"conflict.md": b"<<<<<<<\n=======\n" * 1_344},
    "ignore-pattern": lambda: {
        ".gitignore": b"*a*a*a*a*a*a*b\n",
        **{f"note{i}.md": f"# Note {i}\n\nSome text.\n".encode() for i in range(5)},
        "a" * 81 + ".md": b"# A\n\nThe name is the hostile part.\n",
    },
    "headings-8mb": lambda: {"headings.md": b"# h\n" * (2 * 1024 * 1024)},
    "hash-line": lambda: {"hashes.md": b"#" * 10_000 + b"\n"},
    "backticks": lambda: {"backticks.md": b"`" * 50_000},
    "open-brackets": lambda: {"brackets.md": b"[" * 100_000},
    "open-wikilinks": lambda: {"wikilinks.md": b"[[" * 50_000},
    "nested-brackets": lambda: {
        "nested.md": b"[" * DEPTH + b"]" * DEPTH + b"\n\n" + b"[" * DEPTH + b"a" + b"](b)" * DEPTH
    },
    "long-line-5mb": lambda: {
        "line.md": _repeat_to(b"abcdefghijklmnopqrstuvwxyz0123456789", 5 << 20)
    },
    "cjk-2mb": lambda: {"cjk.md": _cjk(2 << 20)},
}


# -- the prober -----------------------------------------------------------------------------


@dataclass
class Series:
    """What the prober saw of one kind of request."""

    latencies_ms: list[float] = field(default_factory=list)
    answered_at: list[float] = field(default_factory=list)
    sent_at: float | None = None  # of the request in flight
    errors: int = 0  # failed requests once the daemon had answered
    empty: int = 0  # searches that found nothing in the probe KB
    unanswered: int = 0  # in flight when probing stopped (counted with its age then)
    longest_gap_ms: float = 0.0  # with no answer, from the first answer on

    def spread(self) -> str:
        values = self.latencies_ms
        return "/".join(
            f"{v:.0f}" for v in (percentile(values, 50), percentile(values, 99), max(values))
        )

    def __str__(self) -> str:
        values = self.latencies_ms
        text = (
            f"p50 {percentile(values, 50):.1f} / p99 {percentile(values, 99):.1f} / "
            f"max {max(values):.1f} ms, longest gap {self.longest_gap_ms:.0f} ms"
        )
        for count, what in (
            (self.errors, "errors"),
            (self.unanswered, "unanswered at the end"),
            (self.empty, "found nothing"),
        ):
            if count:
                text += f", {count} {what}"
        return text


@dataclass
class Probes:
    health: Series
    search: Series

    def verdict(self, hostile: bool) -> str:
        """Against the targets: p99 <= 50 ms, and for a hostile file max <= 100 ms."""
        kinds = (self.health, self.search)
        if not all(s.latencies_ms for s in kinds):
            verdict(False)
            return "no answers"
        fast = all(percentile(s.latencies_ms, 99) <= 50 for s in kinds)
        bounded = not hostile or all(max(s.latencies_ms) <= 100 for s in kinds)
        failed = any(s.errors or s.unanswered for s in kinds)
        return verdict(fast and bounded and not failed)

    def __str__(self) -> str:
        count = len(self.health.latencies_ms) + len(self.search.latencies_ms)
        if not (self.health.latencies_ms and self.search.latencies_ms):
            return f"{count} probes answered: too few to measure"
        return f"{count} probes; health {self.health}; search {self.search}"


class Prober:
    """Health and a keyword search in the probe KB, each from a thread of its own every
    2 x INTERVAL_S, half a period apart (so a request goes out every INTERVAL_S), each
    over a fresh connection; separate so that a stalled search does not hide whether
    health answers. stop() returns what they saw."""

    def __init__(self, socket_path: Path) -> None:
        self.client = Client(socket_path, actor="bench")
        self.series = {"health": Series(), "search": Series()}
        self.up = threading.Event()  # the daemon has answered once
        self._closed = False
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(kind, i * INTERVAL_S), daemon=True)
            for i, kind in enumerate(self.series)
        ]
        for thread in self._threads:
            thread.start()

    def _ask(self, kind: str) -> bool:
        """Whether the answer is a useful one."""
        if kind == "health":
            return bool(self.client.get("/api/v1/health")["status"] == "ok")
        found = self.client.post(self.client.kb(PROBE_KB, "/search"), {"query": PROBE_WORD})
        return bool(found["passages"])

    def _run(self, kind: str, offset: float) -> None:
        series = self.series[kind]
        due = time.perf_counter() + offset
        while not self._stopping.wait(max(0.0, due - time.perf_counter())):
            sent = time.perf_counter()
            with self._lock:
                series.sent_at = sent
            useful: bool | None
            try:
                useful = self._ask(kind)
            except (DaemonUnreachable, ApiError, ProtocolError, OSError, ValueError, KeyError):
                useful = None
            answered = time.perf_counter()
            with self._lock:
                if self._closed:
                    return
                series.sent_at = None
                if useful is None:
                    series.errors += self.up.is_set()  # before that, it is not up yet
                else:
                    series.latencies_ms.append((answered - sent) * 1000)
                    series.answered_at.append(answered)
                    series.empty += not useful
                    self.up.set()
            due = max(due + 2 * INTERVAL_S, answered)

    def stop(self) -> Probes:
        """Stop probing; a request still unanswered a second later counts with the age it
        has then (the daemon is stuck; its thread is left to it)."""
        self._stopping.set()
        deadline = time.perf_counter() + 1.0
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.perf_counter()))
        with self._lock:
            self._closed = True
            ended = time.perf_counter()
            for series in self.series.values():
                if series.sent_at is not None and self.up.is_set():
                    series.latencies_ms.append((ended - series.sent_at) * 1000)
                    series.unanswered = 1
                moments = [*series.answered_at, ended]
                gaps = (b - a for a, b in itertools.pairwise(moments))
                series.longest_gap_ms = 1000 * max(gaps, default=0.0)
            return Probes(**self.series)


# -- the daemon's state -------------------------------------------------------------------


def load_accounted(client: Client) -> tuple[int, bool]:
    """(documents + skipped files of the load KB, whether the indexer is idle)."""
    status = client.get("/api/v1/status")
    load = kb_status(status, LOAD_KB)
    return load["documents"] + load["skipped"], indexer_idle(status)


def wait_accounted(
    client: Client,
    daemon: subprocess.Popen[bytes],
    done: Callable[[int], bool],
    timeout: float,
    interval: float,
) -> float | None:
    """Seconds until the load KB's count satisfies `done` with the indexer idle; None if
    that did not happen within `timeout` s."""
    started = time.perf_counter()

    def reached() -> bool:
        count, quiet = load_accounted(client)
        return quiet and done(count)

    try:
        wait(reached, daemon, timeout, interval)
    except TimeoutError:
        return None
    return time.perf_counter() - started


def settle(client: Client, daemon: subprocess.Popen[bytes]) -> None:
    """Until the daemon is up, the probe KB indexed and nothing queued."""

    def settled() -> bool:
        status = client.get("/api/v1/status")
        return indexer_idle(status) and kb_status(status, PROBE_KB)["documents"] >= len(PROBE_NOTES)

    try:
        wait(settled, daemon, 120, 0.1)
    except TimeoutError:
        raise RuntimeError("cofferd did not settle within 120 s") from None


# -- scenarios ------------------------------------------------------------------------------


@dataclass
class Row:
    scenario: str
    seconds: float | None  # None: not indexed within the time limit
    probes: Probes
    hostile: bool = False
    saves_ms: list[float] | None = None  # side-by-side: save-to-searchable

    def saves(self) -> str:
        """The save-to-searchable figures beside their target."""
        if not self.saves_ms:
            return "no save began while the load was being indexed"
        p50 = percentile(self.saves_ms, 50)
        return (
            f"save-to-searchable over {len(self.saves_ms)} saves begun while the load was being "
            f"indexed ({SAVES} wanted): p50 {p50:.0f} ms, p95 "
            f"{percentile(self.saves_ms, 95):.0f} ms, max {max(self.saves_ms):.0f} ms "
            f"[target p50 <= 100 ms: {verdict(p50 <= 100)}]"
        )


class Bench:
    def __init__(self, repo: Path, timeout: float, hostile_timeout: float) -> None:
        self.repo = repo
        self.timeout = timeout
        self.hostile_timeout = hostile_timeout
        self.socket_path = Path(f"/tmp/coffer-bench-responsiveness-{os.getpid()}.sock")
        self.client = Client(self.socket_path, actor="bench", timeout=POLL_TIMEOUT_S)
        self.rows: list[Row] = []

    def new_home(self) -> Path:
        home = scratch_home("responsiveness")
        probe = home / "knowledge" / PROBE_KB / "docs"
        probe.mkdir(parents=True)
        for name, text in PROBE_NOTES.items():
            (probe / name).write_text(text, encoding="utf-8")
        (home / "knowledge" / LOAD_KB / "docs").mkdir(parents=True)
        return home

    def start(self, home: Path) -> subprocess.Popen[bytes]:
        daemon = start_daemon(self.repo, home, self.socket_path)
        try:
            settle(self.client, daemon)
        except BaseException:
            stop_daemon(daemon)
            raise
        return daemon

    def report(self, row: Row, detail: str) -> None:
        self.rows.append(row)
        took = "NOT indexed" if row.seconds is None else f"indexed in {row.seconds:.2f} s"
        print(f"  {took}{detail}")
        target = "p99 <= 50 ms" + (", max <= 100 ms" if row.hostile else "")
        print(f"  {row.probes} [target {target}: {row.probes.verdict(row.hostile)}]")
        if row.saves_ms is not None:
            print(f"  {row.saves()}")

    # -- hostile files

    def hostile(self, classes: list[str]) -> None:
        home = self.new_home()
        try:
            for name in classes:
                print(f"== hostile: {name}")
                try:
                    self.hostile_class(home, name)
                except RuntimeError as exc:  # the daemon died, or never settled
                    print(f"  FAILED: {exc}")
        finally:
            shutil.rmtree(home, ignore_errors=True)

    def hostile_class(self, home: Path, name: str) -> None:
        files = HOSTILE[name]()
        documents = sum(rel.endswith(".md") for rel in files)
        staging = home / "staging"
        staging.mkdir(exist_ok=True)
        for rel, data in files.items():
            (staging / rel).write_bytes(data)
        docs = home / "knowledge" / LOAD_KB / "docs"
        size = sum(len(d) for d in files.values())
        print(f"  {len(files)} files, {size / 1024:,.1f} KB, {documents} documents")
        daemon = self.start(home)
        try:
            base, _ = load_accounted(self.client)
            memory = [daemon_memory(daemon.pid)]
            db = [database_mb(home)]
            prober = Prober(self.socket_path)
            try:
                started = time.perf_counter()
                for rel in files:
                    (staging / rel).rename(docs / rel)
                seconds = wait_accounted(
                    self.client, daemon, lambda n: n >= base + documents, self.hostile_timeout, 0.05
                )
                if seconds is not None:
                    time.sleep(max(0.0, MIN_WINDOW_S - (time.perf_counter() - started)))
            finally:
                probes = prober.stop()
            row = Row(f"hostile {name}", seconds, probes, hostile=True)
            if seconds is None:
                limit = f" within {self.hostile_timeout:.0f} s"
                self.report(row, f"{limit}; daemon {daemon_memory(daemon.pid)}")
                return
            memory.append(daemon_memory(daemon.pid))
            db.append(database_mb(home))
            skipped = ctl_api.skipped(self.client, LOAD_KB)["items"]
            reasons = [f"{s['relative_path'][:40]}: {s['reason']}" for s in skipped]
            self.report(row, f" (skipped: {'; '.join(reasons)})" if reasons else " (none skipped)")
            for rel in files:
                (docs / rel).unlink()
            gone = wait_accounted(self.client, daemon, lambda n: n <= base, self.timeout, 0.05)
            memory.append(daemon_memory(daemon.pid))
            db.append(database_mb(home))
            print(f"  deleted again: {'NOT forgotten' if gone is None else f'{gone:.2f} s'}")
            print_before_after(memory, db)
        finally:
            stop_daemon(daemon, grace_s=10)
            for rel in files:
                (docs / rel).unlink(missing_ok=True)

    # -- large loads

    def tldr(self) -> None:
        print("== tldr: tldr-pages moved into a KB")
        self.moved_in("tldr", saves=False)

    def side_by_side(self, corpus: str) -> None:
        print(f"== side-by-side: {SAVES} saves in the probe KB while {corpus} is indexed")
        self.moved_in(corpus, saves=True)

    def moved_in(self, corpus: str, saves: bool) -> None:
        home = self.new_home()
        try:
            staged = home / "staging" / "corpus"
            if corpus == "tldr":
                extract_tldr(home / "staging").rename(staged)
            else:
                staged.mkdir(parents=True)
                build_corpus(staged, home / "src", SIDE_DOCUMENTS)
            expected = count_documents(staged)
            print(f"  {expected:,} documents")
            daemon = self.start(home)
            try:
                prober = Prober(self.socket_path)
                try:
                    started = time.perf_counter()
                    staged.rename(home / "knowledge" / LOAD_KB / "docs" / "corpus")
                    saves_ms = self.saves(home, daemon, expected) if saves else None
                    left = self.timeout - (time.perf_counter() - started)
                    done = wait_accounted(self.client, daemon, lambda n: n >= expected, left, 0.5)
                finally:
                    probes = prober.stop()
                seconds = None if done is None else time.perf_counter() - started
                name = f"side-by-side {corpus}" if saves else corpus
                row = Row(name, seconds, probes, saves_ms=saves_ms)
                self.report(row, f"; daemon {daemon_memory(daemon.pid)}")
            finally:
                stop_daemon(daemon)
        finally:
            shutil.rmtree(home, ignore_errors=True)

    def saves(self, home: Path, daemon: subprocess.Popen[bytes], expected: int) -> list[float]:
        """Save-to-searchable in the probe KB, up to SAVES times, each begun while the load
        is being indexed (a save measured on an idle daemon would tell nothing)."""
        client = Client(self.socket_path, actor="bench")  # waits as long as the daemon does

        def begun() -> bool:
            status = client.get("/api/v1/status")
            return bool(kb_status(status, LOAD_KB)["documents"] or not indexer_idle(status))

        wait(begun, daemon, 60, 0.01)
        rng = random.Random(7)
        notes = sorted(PROBE_NOTES)
        latencies: list[float] = []
        while len(latencies) < SAVES and load_accounted(client)[0] < expected:
            token = f"zq{len(latencies):03d}x{rng.randrange(10**6):06d}7"
            note = home / "knowledge" / PROBE_KB / "docs" / notes[len(latencies) % len(notes)]
            started = time.perf_counter()
            with open(note, "a", encoding="utf-8") as fh:
                fh.write(f"\n- edit {token}\n")

            def found(token: str = token) -> bool:
                hits = client.post(client.kb(PROBE_KB, "/search"), {"query": token, "top_k": 1})
                return bool(hits["passages"])

            wait(found, daemon, self.timeout, 0.005)
            latencies.append((time.perf_counter() - started) * 1000)
        return latencies

    def scale(self, documents: int) -> None:
        print(f"== scale: {documents:,} documents cold indexed at daemon start")
        home = self.new_home()
        try:
            stop_daemon(self.start(home))  # the probe KB is indexed, the load KB empty
            built = time.perf_counter()
            _, size = build_corpus(home / "knowledge" / LOAD_KB / "docs", home / "src", documents)
            built = time.perf_counter() - built
            print(f"  corpus: {size / 1e6:.1f} MB, written in {built:.0f} s")
            prober = Prober(self.socket_path)
            started = time.perf_counter()
            daemon = start_daemon(self.repo, home, self.socket_path)
            try:
                try:
                    wait(prober.up.is_set, daemon, 60, 0.01)
                    up = time.perf_counter() - started
                    done = wait_accounted(
                        self.client, daemon, lambda n: n >= documents, self.timeout, 0.5
                    )
                finally:
                    probes = prober.stop()
                seconds = None if done is None else time.perf_counter() - started
                memory = daemon_memory(daemon.pid)
                self.report(
                    Row(f"scale {documents}", seconds, probes),
                    f" after start (first answer at {up:.2f} s); daemon {memory}",
                )
            finally:
                stop_daemon(daemon)
        finally:
            shutil.rmtree(home, ignore_errors=True)

    def summary(self) -> None:
        print("\nsummary: p50/p99/max and longest gap with no answer, in ms")
        print(
            f"  {'scenario':<28} {'seconds':>8} {'health':>14} {'gap':>6} {'search':>14}"
            f" {'gap':>6}  target"
        )
        for row in self.rows:
            seconds = "-" if row.seconds is None else f"{row.seconds:.1f}"
            kinds = [row.probes.health, row.probes.search]
            cells = "".join(
                f" {s.spread() if s.latencies_ms else '-':>14} {s.longest_gap_ms:>6.0f}"
                for s in kinds
            )
            print(f"  {row.scenario:<28} {seconds:>8}{cells}  {row.probes.verdict(row.hostile)}")
            if row.saves_ms is not None:
                print(f"    {row.saves()}")


def print_before_after(memory: list[DaemonMemory], db: list[float]) -> None:
    for label, mem, size in zip(("before", "indexed", "deleted"), memory, db, strict=True):
        print(f"  {label:<8} daemon {mem}; database {size:.2f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hostile", nargs="*", choices=sorted(HOSTILE), metavar="CLASS")
    parser.add_argument("--tldr", action="store_true")
    parser.add_argument("--scale", nargs="?", type=int, const=250_000, metavar="N")
    parser.add_argument("--side-by-side", nargs="?", const="tldr", choices=("tldr", "scale"))
    parser.add_argument("--all", action="store_true", help="every scenario, in full")
    parser.add_argument("--timeout", type=float, default=3600, help="limit per load, s")
    parser.add_argument(
        "--hostile-timeout", type=float, default=120, help="limit per hostile class, s"
    )
    add_repo_argument(parser)
    args = parser.parse_args()
    if args.all:
        args.hostile, args.tldr = [], True
        args.scale = args.scale or 250_000
        args.side_by_side = args.side_by_side or "tldr"
    if args.hostile is None and not (args.tldr or args.scale or args.side_by_side):
        parser.error("name a scenario (--hostile, --tldr, --scale, --side-by-side) or --all")

    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    print(f"machine: {machine()}")
    print(f"code: {describe_code(args.repo)}")
    bench = Bench(args.repo, args.timeout, args.hostile_timeout)
    try:
        if args.hostile is not None:
            bench.hostile(args.hostile or list(HOSTILE))
        if args.tldr:
            bench.tldr()
        if args.side_by_side:
            bench.side_by_side(args.side_by_side)
        if args.scale:
            bench.guards.scale(args.scale)
    finally:
        bench.summary()
        bench.socket_path.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
    exit_by_targets()
