"""Faults of the machine and of the files: a real daemon keeps going, says what is wrong,
and repairs itself once it can."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cofferctl.client import ApiError
from cofferd.surfaces.http.error_envelope import status_of
from tests.support.cofferd_process import start_cofferd
from tests.support.daemon import Daemon, cleanup, new_daemon, upload, wait_for
from tests.support.helpers import assert_matches_rebuild, write

WATCHES = Path("/proc/sys/fs/inotify/max_user_watches")


def search(d: Daemon, kb: str, query: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = d.client.post(d.client.kb(kb, "/search"), {"query": query})[
        "passages"
    ]
    return found


def raw_write(folder: Path, name: bytes, data: bytes) -> None:
    """A file whose name is bytes that are not UTF-8 (as a Latin-1 system writes them)."""
    fd = os.open(os.fsencode(folder) + b"/" + name, os.O_WRONLY | os.O_CREAT, 0o644)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def kb_status(d: Daemon, kb: str) -> dict[str, Any]:
    kbs = d.client.get("/api/v1/status")["knowledge_bases"]
    found: dict[str, Any] = next(k for k in kbs if k["name"] == kb)
    return found


def test_a_name_that_is_not_utf8_is_skipped_and_everything_else_indexed(tmp_path: Path) -> None:
    d = new_daemon(tmp_path)
    try:
        docs = d.docs("notes")
        write(docs / "fine.md", "# Fine\n\nkingfisher")
        raw_write(docs, b"caf\xe9.md", b"# Latin-1 name")
        d.start()
        wait_for(lambda: search(d, "notes", "kingfisher"))
        result = d.client.post(d.client.kb("notes", "/reindex"))
        assert any("UTF-8" in s["reason"] for s in result["skipped"])
        # while running: the watcher survives such a name (restarts, slower each time)
        raw_write(docs, b"\xff\xfe.md", b"# another")
        write(docs / "after.md", "# After\n\ncormorant")
        wait_for(lambda: search(d, "notes", "cormorant"), timeout=30)
        time.sleep(3)
        restarts = d.client.get("/api/v1/status")["watcher"]["restarts"]
        assert restarts <= 3
        assert d.log.stat().st_size < 200_000
    finally:
        cleanup(d)


@pytest.mark.parametrize("damage", ["truncated", "garbage", "header", "middle"])
def test_a_damaged_index_is_moved_aside_and_rebuilt(tmp_path: Path, damage: str) -> None:
    d = new_daemon(tmp_path)
    try:
        for i in range(300):
            write(d.docs("notes") / f"n{i:03d}.md", f"# Note {i}\n\n" + f"puffin{i} " * 200)
        source = write(tmp_path / "src" / "tracked.txt", "a tracked source about terns")
        d.start()
        wait_for(lambda: d.client.get(d.client.kb("notes", "/metrics"))["documents"] == 300)
        d.client.post(d.client.kb("notes", "/documents"), {"source_path": str(source)})
        assert d.stop() == 0
        db = d.home / "coffer.db"
        size = db.stat().st_size
        with open(db, "r+b") as fh:
            if damage == "truncated":
                fh.truncate(size // 3)
            elif damage == "garbage":
                fh.write(os.urandom(size))
            elif damage == "header":
                fh.write(b"this is no SQLite database!!")
            else:
                fh.seek(size // 2)
                fh.write(os.urandom(64 * 1024))
        d.start()
        status = wait_for(lambda: (s := d.client.get("/api/v1/status"))["index_rebuilds"] and s)
        assert status["index_rebuilds"][0]["moved_to"].startswith(str(db))
        assert list(d.home.glob("coffer.db.corrupt-*"))
        wait_for(lambda: d.client.get(d.client.kb("notes", "/metrics"))["documents"] == 301)
        wait_for(lambda: search(d, "notes", "puffin299"))
        report = d.client.post(d.client.kb("notes", "/check-sources"))
        assert [e["source_path"] for e in report["unchanged"]] == [str(source)]  # restored
    finally:
        cleanup(d)


@pytest.fixture
def small_disk(tmp_path: Path) -> Any:
    """A 24 MiB filesystem of its own (tmpfs), where the machine lets us mount one."""
    mount = tmp_path / "disk"
    mount.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mount)], capture_output=True
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a small filesystem here: {proc.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> Path:
    filler = disk / "filler"
    with open(filler, "wb") as fh:
        try:
            while True:
                fh.write(b"\0" * (256 * 1024))
        except OSError:
            pass
    return filler


def test_a_full_disk_answers_storage_error_and_indexing_resumes(
    small_disk: Path, tmp_path: Path
) -> None:
    d = new_daemon(tmp_path)
    d.home = small_disk / "home"
    try:
        d.start()
        filler = fill(small_disk)
        with pytest.raises(ApiError) as err:
            d.client.post(d.client.kb("notes", "/documents"), {"content": "# x\n\n" + "y " * 9999})
        assert (status_of(err.value), err.value.code) == (507, "STORAGE_ERROR")
        with pytest.raises(ApiError) as err:
            d.client.post("/api/v1/knowledge_bases", {"name": "while-full"})
        assert (status_of(err.value), err.value.code) == (507, "STORAGE_ERROR")
        # a file that did fit, while the index could not grow: indexed once space returns
        filler.unlink()
        write(d.docs("notes") / "small.md", "# Small\n\nshearwater")
        filler = fill(small_disk)
        time.sleep(1.0)
        filler.unlink()
        wait_for(lambda: search(d, "notes", "shearwater"), timeout=60)
        assert d.client.get("/api/v1/status")["watcher"]["running"]
        d.client.post("/api/v1/knowledge_bases", {"name": "after-full"})
    finally:
        cleanup(d)


def test_a_failed_pass_stays_failing_until_a_whole_pass_succeeds_seconds_later(
    small_disk: Path, tmp_path: Path
) -> None:
    d = new_daemon(tmp_path)
    d.home = small_disk / "home"
    try:
        d.start()
        wait_for(lambda: kb_status(d, "notes")["state"] == "ok")
        staging = small_disk / "arriving"  # written while there is room, outside the KB
        for i in range(40):
            write(staging / f"note{i:02}.md", f"# Note {i}\n\n" + f"the sanderling {i}. " * 400)
        filler = fill(small_disk)
        staging.rename(d.docs("notes") / "arrived")  # their index cannot be written
        failed = wait_for(lambda: (e := kb_status(d, "notes"))["state"] == "failing" and e)
        assert "indexing fails" in failed["problem"]
        before = d.client.get("/api/v1/status")["watcher"]["last_full_reconcile_at"]

        filler.unlink()  # room again; a save succeeds before any whole pass has
        write(d.docs("notes") / "save.md", "# Save\n\nthe whimbrel")
        seen: list[tuple[str, str | None]] = []

        def ok() -> bool:
            status = d.client.get("/api/v1/status")
            (entry,) = [k for k in status["knowledge_bases"] if k["name"] == "notes"]
            seen.append((entry["state"], status["watcher"]["last_full_reconcile_at"]))
            return bool(entry["state"] == "ok")

        wait_for(ok, timeout=30, interval=0.01)  # a whole pass retried within seconds
        assert [s for s in seen if s[0] == "ok" and s[1] == before] == []  # not by the save
        assert search(d, "notes", "whimbrel")
        assert len(search(d, "notes", "sanderling")) >= 10
        assert_matches_rebuild(d, "notes", tmp_path)
    finally:
        cleanup(d)


@pytest.mark.skipif(not os.access(WATCHES, os.W_OK), reason="cannot change the watch limit")
def test_no_watches_left_falls_back_to_polling(tmp_path: Path) -> None:
    d = new_daemon(tmp_path)
    for i in range(40):
        write(d.docs("notes") / f"folder{i}" / "a.md", f"# A{i}\n\nwords")
    before = WATCHES.read_text()
    WATCHES.write_text("20\n")
    try:
        d.start()
        watcher = wait_for(
            lambda: (w := d.client.get("/api/v1/status")["watcher"])["polling"] and w
        )
        assert watcher["healthy"] is False
        write(d.docs("notes") / "folder39" / "new.md", "# New\n\nguillemot")
        wait_for(lambda: search(d, "notes", "guillemot"), timeout=30)
    finally:
        WATCHES.write_text(before)
        cleanup(d)


def test_status_says_when_docs_are_gone_or_unreadable(daemon: Daemon) -> None:
    d = daemon
    write(d.docs("notes") / "a.md", "# A\n\nheron")
    wait_for(lambda: search(d, "notes", "heron"))
    os.chmod(d.docs("notes"), 0)
    try:
        if os.access(d.docs("notes"), os.R_OK):
            pytest.skip("running as a user who reads everything (root without DAC checks)")
        for call in (
            lambda: d.client.post(d.client.kb("notes", "/grep"), {"pattern": "heron"}),
            lambda: d.client.post(d.client.kb("notes", "/reindex")),
        ):
            with pytest.raises(ApiError) as err:
                call()
            assert (status_of(err.value), err.value.code) == (507, "STORAGE_ERROR")
    finally:
        os.chmod(d.docs("notes"), 0o755)


def test_status_says_when_the_docs_folder_is_gone(daemon: Daemon) -> None:
    d = daemon
    write(d.docs("notes") / "a.md", "# A\n\nheron")
    wait_for(lambda: search(d, "notes", "heron"))
    shutil.rmtree(d.docs("notes"))
    entry = wait_for(lambda: (e := kb_status(d, "notes"))["state"] == "unavailable" and e)
    assert entry["documents"] == 1  # kept, not taken as deleted
    with pytest.raises(ApiError) as err:
        d.client.post(d.client.kb("notes", "/grep"), {"pattern": "heron"})
    assert err.value.code == "KB_UNAVAILABLE" and "missing" in err.value.message


def test_start_up_is_done_only_when_every_knowledge_base_is(tmp_path: Path) -> None:
    d = new_daemon(tmp_path)
    try:
        for kb in ("one", "two", "three"):
            for i in range(400):
                write(d.docs(kb) / f"{i}.md", f"# {kb} {i}\n\nwords {i}")
        d.start()
        status = wait_for(
            lambda: (s := d.client.get("/api/v1/status"))["startup_reconcile_done"] and s
        )
        assert [k["documents"] for k in status["knowledge_bases"]] == [400, 400, 400]
    finally:
        cleanup(d)


def test_stopping_mid_conversion_is_quick_and_answers(tmp_path: Path) -> None:
    import openpyxl

    d = new_daemon(tmp_path).start()
    try:
        book = openpyxl.Workbook(write_only=True)
        sheet = book.create_sheet()
        for i in range(40_000):
            sheet.append([i, f"row {i}", "some words in a cell", i * 3.5, "more text"])
        target = tmp_path / "big.xlsx"
        book.save(target)
        data = target.read_bytes()
        answer: dict[str, Any] = {}

        def send() -> None:
            try:
                answer["reply"] = upload(d, "notes", "big.xlsx", data)
            except Exception as exc:  # noqa: BLE001 - what the client saw is the result
                answer["error"] = exc

        sender = threading.Thread(target=send)
        sender.start()
        time.sleep(2.5)  # the worker starts and is converting
        assert sender.is_alive(), "the conversion finished too soon to test a stop during it"
        started = time.monotonic()
        assert d.proc is not None
        d.proc.send_signal(signal.SIGTERM)
        assert d.proc.wait(10) == 0
        assert time.monotonic() - started < 3.0
        sender.join(10)
        status, reply = answer["reply"]
        assert status == 503 and reply["error"]["code"] == "ENGINE_UNAVAILABLE"
    finally:
        cleanup(d)


def test_log_lines_stay_short_whatever_a_path_holds(tmp_path: Path) -> None:
    d = new_daemon(tmp_path)
    try:
        d.start()
        deep = d.docs("notes").joinpath(*(["f" * 240] * 15))  # a path of ~3,600 characters
        logged = "f" * 240 + "/" + "f" * 240

        def saved_and_logged() -> bool:  # each save's events are logged, path and all
            write(deep / "deep.md", f"# Deep\n\nbody {time.monotonic()}")
            return logged in d.log.read_text(errors="replace")

        wait_for(saved_and_logged, interval=0.2)
        longest = max(len(line) for line in d.log.read_text(errors="replace").splitlines())
        assert longest < 2_500
    finally:
        cleanup(d)


def _children(pid: int, command: str) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid), "-f", command], capture_output=True)
    return [int(p) for p in found.stdout.split()]


def test_preparing_workers_killed_while_they_start_and_work_lose_nothing(tmp_path: Path) -> None:
    """Every preparing worker killed (SIGKILL) every 0.15 s for 3 s while 600 notes come
    in, at start (before ready) and mid-unit: the pass goes on (a start that fails is a
    worker to start again), no note is blamed, and the index equals a fresh one (it once
    ended at "could not start: WorkerGone", 0 of 3000 files)."""
    d = new_daemon(tmp_path)
    try:
        d.start()
        assert d.proc is not None
        docs = d.docs("notes")
        for n in range(600):
            write(docs / f"n{n:04}.md", f"# Note {n}\n\nthe heron number h{n:04} waits\n" * 20)
        deadline = time.monotonic() + 3
        kills = 0
        while time.monotonic() < deadline:
            for pid in _children(d.proc.pid, "prepare_main"):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                    kills += 1
            time.sleep(0.15)
        assert kills
        wait_for(lambda: search(d, "notes", "h0599") and search(d, "notes", "h0000"), timeout=90)
        result = d.client.post(d.client.kb("notes", "/reindex"))
        assert result["skipped"] == []
        assert_matches_rebuild(d, "notes", tmp_path)
        # each killed worker reaped by asyncio alone (issue 42 §5)
        assert "Unknown child process pid" not in d.log.read_text(errors="replace")
    finally:
        cleanup(d)


def test_helpers_run_the_installed_code_whatever_folder_the_daemon_starts_in(
    tmp_path: Path,
) -> None:
    """A daemon started inside a folder holding packages named like Coffer's (another
    checkout, any project) runs its own code in its workers, not that folder's: a note is
    indexed and nothing of the folder is imported."""
    here = tmp_path / "a-checkout"
    marker = tmp_path / "imported"
    for package in ("cofferd", "coffer_kernel"):
        write(
            here / package / "__init__.py",
            f"open({str(marker)!r}, 'a').write({package!r})\nraise SystemExit(3)\n",
        )
    d = new_daemon(tmp_path)
    d.log_handle = open(d.log, "ab")  # noqa: SIM115
    env = d.env()
    if "PYTHONPATH" in env:  # this checkout's code, named absolutely, as the tests run it
        env["PYTHONPATH"] = os.pathsep.join(
            os.path.abspath(p) for p in env["PYTHONPATH"].split(os.pathsep) if p
        )
    d.proc = start_cofferd(env, cwd=here, stdout=d.log_handle, stderr=subprocess.STDOUT)
    try:
        wait_for(d.healthy, timeout=30)
        write(d.docs("notes") / "n.md", "# N\n\nquetzalcoatl feathers")
        wait_for(lambda: search(d, "notes", "quetzalcoatl"), timeout=30)
        assert not marker.exists(), marker.read_text()
        assert "No module named" not in d.log.read_text()
    finally:
        cleanup(d)
