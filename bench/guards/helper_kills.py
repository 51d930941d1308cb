"""Soak of the helper processes (issue 42): a real cofferd whose every helper process
(preparing workers, the converter, the model process when vectors are on) is killed
(SIGKILL) or frozen for a while (SIGSTOP, then SIGCONT) at random, for `--minutes`, while
notes are saved, renamed and deleted and Word files added.

It alternates a few seconds of changes with a few seconds of none (the kills go on). While
nothing changes, every `status` that says the KB is `ok` is checked against the files: the
indexed paths must be the files' paths, and each note's indexed hash its file's hash (a
status read while a change may still be on its way from the watcher is not checked). At
the end the kills stop, status must reach `ok`, and the index must equal a fresh index of
the same files (tests/helpers.rebuild_dump_of; with vectors on, vectors and the embed flag
are left out of the comparison and no document may still owe vectors).

It prints kills (by process and signal), saves, renames, deletes, Word files, the states
status said, `ok` said while the index did not match, what the daemon's log says of
helpers that failed, and the final differences. Exit status 1 when an `ok` was wrong or
the index differs at the end.

Long on purpose: the changes, the kills, the checks of what status says and the report are
one run, read together.

    PYTHONPATH=$PWD .venv/bin/python -m bench.guards.helper_kills [--minutes 10] [--seed 1] \
        [--notes 300] [--word-files 20] [--kill-every 0.7] [--vectors]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import hashlib
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import scratch_home
from bench.guards.soak import Daemon, diff_summary
from coffer_kernel.locations import Locations
from cofferctl import api as ctl_api
from cofferctl.client import Client, DaemonUnreachable, ProtocolError
from cofferd.infrastructure.storage import document_rows, sqlite
from cofferd.infrastructure.storage.database import EXTENSIONS
from cofferd.infrastructure.storage.index_dump import dump_index
from cofferd.surfaces.core import Coffer
from tests.support.helpers import index_dump
from tests.support.word_corpus import varied_docx

KB = "notes"
HELPERS = {  # a helper's module, as its command line names it -> what it is
    "cofferd.surfaces.processes.prepare_main": "worker",
    "cofferd.infrastructure.conversion.convert_main": "converter",
    "cofferd.infrastructure.models.model_main": "model",
}
CHANGES_S = (3.0, 8.0)  # a stretch of changes
QUIET_S = (4.0, 7.0)  # then one of none
HANDED_OVER_S = 1.5  # the watcher hands a change over within 1 s: later, `ok` is checked
POLL_S = 0.1
END_TIMEOUT_S = 300.0
WORDS = [
    "heron",
    "egret",
    "ibis",
    "stork",
    "crane",
    "plover",
    "avocet",
    "godwit",
    "dunlin",
    "knot",
    "curlew",
    "whimbrel",
]


async def fresh_dump(kb_dir: Path, scratch: Path) -> dict[str, Any]:
    """The dump of a fresh index of the same files in a second data home, its Word files
    converted too (tests/helpers.rebuild_dump_of, with the indexing service and its
    conversions running until nothing is owed)."""
    home = scratch / f"rebuild-{os.urandom(4).hex()}"
    other = await Coffer.open(Locations(home=home, socket=home / "s.sock"))
    try:
        copy = home / "knowledge" / kb_dir.name
        copy.mkdir(parents=True, exist_ok=True)
        if (copy / "docs").is_dir():
            (copy / "docs").rmdir()
        shutil.copy(kb_dir / "kb.yaml", copy / "kb.yaml")
        other.registry.repo.attach(kb_dir.name, (kb_dir / "docs").resolve())
        await other.kbs.adopt(kb_dir.name)
        other.indexing.start(full_reconcile=False)
        other.indexing.request_full(kb_dir.name)
        await asyncio.sleep(1.0)
        while (
            other.indexing.owed(kb_dir.name)
            or other.conversions.waiting(kb_dir.name)
            or other.indexing.queue_depth
        ):
            await asyncio.sleep(0.5)
        return await index_dump(other, kb_dir.name)
    finally:
        await other.close()


def unconverted(metadata: Any) -> Any:
    """A document's metadata without the time its text was converted."""
    if not isinstance(metadata, str):
        return metadata
    found = json.loads(metadata)
    if isinstance(found, dict):
        found.pop("converted_at", None)
    return json.dumps(found, sort_keys=True)


def helpers_of(pid: int) -> dict[int, str]:
    """The daemon's helper processes now: pid -> worker, converter or model."""
    children: dict[int, list[int]] = collections.defaultdict(list)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            children[int(stat.rsplit(")", 1)[1].split()[1])].append(int(entry))
    found: dict[int, str] = {}
    todo = list(children[pid])
    while todo:
        child = todo.pop()
        todo += children[child]
        try:
            argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        for module, kind in HELPERS.items():
            if module.encode() in argv:
                found[child] = kind
    return found


class HelperKills:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.scratch = scratch_home("helper-kills")
        run = Path(tempfile.mkdtemp(prefix="cofk", dir="/tmp"))  # a socket needs a short path
        self.daemon = Daemon(self.scratch / "home", run / "cofferd.sock", self.scratch / "log")
        self.docs = self.daemon.home / "knowledge" / KB / "docs"
        self.client = Client(self.daemon.socket, actor="helper-kills", timeout=30)
        self.counts: collections.Counter[str] = collections.Counter()
        self.states: collections.Counter[str] = collections.Counter()
        self.wrong_ok: list[str] = []
        self.last_change = time.monotonic()
        self.changing = threading.Event()  # set while a stretch of changes runs
        self.ending = threading.Event()
        self.serial = 0
        self.lock = threading.Lock()  # the files' picture: not read while it changes

    def say(self, message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)

    # -- the files ------------------------------------------------------------------------

    def text(self, n: int) -> str:
        words = " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(20, 400)))
        return f"# Note {n}\n\n{words}\n"

    def notes(self) -> list[Path]:
        return sorted(self.docs.rglob("*.md"))

    def save(self) -> None:
        self.serial += 1
        notes = self.notes()
        if notes and self.rng.random() < 0.5:
            target = self.rng.choice(notes)  # an edit, saved atomically as editors do
        else:
            target = self.docs / f"d{self.serial % 7}" / f"note{self.serial}.md"
            target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{target.name}.tmp")
        temporary.write_text(self.text(self.serial))
        os.replace(temporary, target)
        self.counts["saves"] += 1

    def rename(self) -> None:
        notes = self.notes()
        if notes:
            self.serial += 1
            source = self.rng.choice(notes)
            source.rename(self.docs / f"d{self.serial % 7}" / f"moved{self.serial}.md")
            self.counts["renames"] += 1

    def delete(self) -> None:
        notes = self.notes()
        if len(notes) > self.args.notes // 2:
            self.rng.choice(notes).unlink()
            self.counts["deletes"] += 1

    def word_file(self) -> None:
        self.serial += 1
        (self.docs / "word").mkdir(parents=True, exist_ok=True)
        (self.docs / "word" / f"report{self.serial}.docx").write_bytes(varied_docx(self.serial))
        self.counts["word files"] += 1

    def change(self) -> None:
        with self.lock:
            roll = self.rng.random()
            if roll < 0.55:
                self.save()
            elif roll < 0.75:
                self.rename()
            elif roll < 0.93:
                self.delete()
            else:
                self.word_file()
            self.last_change = time.monotonic()

    def seed(self) -> None:
        for _ in range(self.args.notes):
            self.save()
        for _ in range(self.args.word_files):
            self.word_file()
        self.counts.clear()

    # -- the kills ------------------------------------------------------------------------

    def killer(self) -> None:
        frozen: list[int] = []
        while not self.ending.wait(self.rng.expovariate(1 / self.args.kill_every)):
            assert self.daemon.pid is not None
            helpers = helpers_of(self.daemon.pid)
            if not helpers:
                continue
            pid = self.rng.choice(sorted(helpers))
            stop = self.rng.random() < 0.3
            try:
                os.kill(pid, signal.SIGSTOP if stop else signal.SIGKILL)
            except ProcessLookupError:
                continue
            self.counts[f"{helpers[pid]} {'SIGSTOP' if stop else 'SIGKILL'}"] += 1
            if stop:
                frozen.append(pid)
                threading.Timer(self.rng.uniform(0.2, 3.0), self.resume, (pid, frozen)).start()

    def resume(self, pid: int, frozen: list[int]) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
        if pid in frozen:
            frozen.remove(pid)

    # -- what status says -----------------------------------------------------------------

    def status_entry(self) -> dict[str, Any] | None:
        try:
            status = self.client.get("/api/v1/status")
        except (DaemonUnreachable, ProtocolError, OSError):
            return None
        found: dict[str, Any] = next(k for k in status["knowledge_bases"] if k["name"] == KB)
        return found

    def poller(self) -> None:
        while not self.ending.wait(POLL_S):
            with self.lock:  # the files stand still while status and the index are read
                checked = (
                    not self.changing.is_set()
                    and time.monotonic() - self.last_change > HANDED_OVER_S
                )
                entry = self.status_entry()
                if entry is None:
                    continue
                self.states[entry["state"]] += 1
                if entry["state"] == "ok" and checked:
                    self.states["ok checked"] += 1
                    wrong = self.mismatch()
                    if wrong:
                        self.wrong_ok.append(wrong)
                        self.say(f"status said ok, but {wrong}")

    def mismatch(self) -> str | None:
        """How the index differs from the files now (None: it matches them)."""
        conn = sqlite.connect(self.daemon.home / "coffer.db", readonly=True, extensions=EXTENSIONS)
        try:
            rows = conn.execute(
                f"SELECT path, content_sha256 FROM documents WHERE {document_rows.SCOPE}",
                (document_rows.KB_KIND, KB),
            ).fetchall()
        finally:
            conn.close()
        indexed = {row[0]: row[1] for row in rows}
        files = {str(p.relative_to(self.docs)): p for p in self.docs.rglob("*") if p.is_file()}
        files = {rel: p for rel, p in files.items() if not p.name.startswith(".")}
        missing = sorted(set(files) - set(indexed) - set(self.skipped()))
        extra = sorted(set(indexed) - set(files))
        stale = [
            rel
            for rel, path in files.items()
            if rel.endswith(".md")
            and rel in indexed
            and hashlib.sha256(path.read_bytes()).hexdigest() != indexed[rel]
        ]
        if not (missing or extra or stale):
            return None
        return (
            f"{len(missing)} files not indexed {missing[:3]}, {len(extra)} gone files"
            f" indexed {extra[:3]}, {len(stale)} stale {stale[:3]}"
        )

    def skipped(self) -> dict[str, str]:
        """The files the daemon says it skipped, and why."""
        try:
            items = ctl_api.skipped(self.client, KB)["items"]
        except (DaemonUnreachable, ProtocolError, OSError):
            return {}
        return {i["relative_path"]: i["reason"] for i in items if not i.get("degraded")}

    # -- the run --------------------------------------------------------------------------

    def run(self) -> int:
        self.seed()
        self.daemon.start()
        if self.args.vectors:
            config = {
                "enabled_modes": ["keyword", "grep", "vector"],
                "embedding": {"provider": "local"},
            }
            self.client.request("PATCH", self.client.kb(KB), {"config": config})
        threads = [threading.Thread(target=t, daemon=True) for t in (self.killer, self.poller)]
        for thread in threads:
            thread.start()
        self.say(
            f"{self.args.notes} notes and {self.args.word_files} Word files;"
            f" killing for {self.args.minutes} min"
        )
        deadline = time.monotonic() + self.args.minutes * 60
        while time.monotonic() < deadline:
            self.changing.set()
            stretch = time.monotonic() + self.rng.uniform(*CHANGES_S)
            while time.monotonic() < stretch:
                self.change()
                time.sleep(self.rng.uniform(0.02, 0.1))
            self.changing.clear()
            time.sleep(self.rng.uniform(*QUIET_S))
            self.say(f"{dict(self.counts)}; states {dict(self.states)}")
        self.ending.set()
        for thread in threads:
            thread.join()
        return self.end()

    def end(self) -> int:
        started = time.monotonic()
        entry = None
        while time.monotonic() - started < END_TIMEOUT_S:
            entry = self.status_entry()
            if entry is not None and entry["state"] == "ok":
                break
            time.sleep(0.5)
        took = time.monotonic() - started
        ok = entry is not None and entry["state"] == "ok"
        self.say(f"after the kills: {'ok' if ok else 'NOT ok'} in {took:.1f} s; {entry}")
        if ok and (wrong := self.mismatch()):
            self.wrong_ok.append(wrong)
            self.say(f"status said ok at the end, but {wrong}")
        ours = self.dump()
        fresh = asyncio.run(fresh_dump(self.daemon.home / "knowledge" / KB, self.scratch))
        for dump in (ours, fresh):  # a conversion's time is its own
            dump["documents"] = [(*r[:7], unconverted(r[7]), *r[8:]) for r in dump["documents"]]
        if self.args.vectors:
            owing = [row[1] for row in ours["documents"] if row[5]]
            for dump in (ours, fresh):
                dump["documents"] = [(*r[:5], None, *r[6:]) for r in dump["documents"]]
                dump["vectors"] = None
        else:
            owing = []
        same = ours == fresh
        log = self.daemon.log.read_text(errors="replace")
        said = {
            phrase: log.count(phrase)
            for phrase in (
                "could not start",
                "WorkerGone",
                "TimeoutError",
                "crashed",
                "died",
                "skipping it",
                "indexing fails",
                "Traceback",
            )
        }
        print()
        print(f"kills:        {dict(sorted((k, v) for k, v in self.counts.items() if 'SIG' in k))}")
        changes = dict(sorted((k, v) for k, v in self.counts.items() if "SIG" not in k))
        print(f"changes:      {changes}")
        print(f"states seen:  {dict(self.states)}")
        print(f"wrong ok:     {len(self.wrong_ok)} (files neither indexed nor skipped)")
        skipped = self.skipped()
        reasons = collections.Counter(why.split(":")[0] for why in skipped.values())
        print(f"skipped:      {len(skipped)} files at the end: {dict(reasons)}")
        print(f"log says:     {said}")
        print(f"documents:    {len(ours['documents'])} (fresh index {len(fresh['documents'])})")
        if owing:
            print(f"still owing vectors: {len(owing)} {owing[:3]}")
        print(f"final differences: {'0' if same else diff_summary(ours, fresh)}")
        return 0 if same and ok and not self.wrong_ok and not owing else 1

    def dump(self) -> dict[str, Any]:
        conn = sqlite.connect(self.daemon.home / "coffer.db", readonly=True, extensions=EXTENSIONS)
        try:
            return dump_index(conn, KB)
        finally:
            conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--notes", type=int, default=300, help="notes at the start")
    parser.add_argument("--word-files", type=int, default=20, help="Word files at the start")
    parser.add_argument("--kill-every", type=float, default=0.7, help="mean seconds between kills")
    parser.add_argument("--vectors", action="store_true", help="vectors on: the model process too")
    soak = HelperKills(parser.parse_args())
    code = 1
    try:
        code = soak.run()
    finally:
        soak.ending.set()
        soak.daemon.stop()
        if code and soak.daemon.log.exists():
            kept = Path(f"/tmp/coffer-helper-kills-{os.getpid()}.log")
            shutil.copyfile(soak.daemon.log, kept)
            print(f"daemon log kept in {kept}")
        shutil.rmtree(soak.scratch, ignore_errors=True)
        shutil.rmtree(soak.daemon.socket.parent, ignore_errors=True)
    sys.exit(code)


if __name__ == "__main__":
    main()
