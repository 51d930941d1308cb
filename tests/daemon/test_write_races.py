"""Writes, creations, deletions and restores raced against a folder of the knowledge base
being swapped for a link to a folder outside it, thousands of times: nothing is ever
written, made or removed outside (writes walk folders by handles, cofferd's dir_handles).

In-process on the real filesystem for the thousands of tries, and once through a real
daemon for the restore that used to write outside (1 try in 23)."""

from __future__ import annotations

import ctypes
import multiprocessing
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from coffer_kernel.locations import Locations
from cofferctl.client import ApiError
from cofferd.domain.errors import CofferError
from cofferd.domain.file_records import TrashEntry
from cofferd.infrastructure.files.confinement import remove_home_file, write_home_file
from cofferd.infrastructure.files.document_policy import DocumentPolicy
from cofferd.infrastructure.files.trash_bin import FileTrash
from cofferd.infrastructure.files.tree_scan import FileDocsTree
from tests.support.daemon import Daemon, wait_for
from tests.support.helpers import write

TRIES = 3000


LIBC = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
RENAME_EXCHANGE = 2


def exchange(a: Path, b: Path) -> None:
    """Swap two names at once (renameat2 RENAME_EXCHANGE): the folder is never missing,
    so a write never makes it again, it only ever meets the folder or the link."""
    if LIBC.renameat2(AT_FDCWD, bytes(a), AT_FDCWD, bytes(b), RENAME_EXCHANGE) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(a))


class Swapper:
    """A process that swaps a folder for a link to a folder outside and back, as fast as
    it can, while it runs (`held` stops it between two swaps, the folder in its place). A
    process of its own: a thread would swap only when the test's thread lets go of the
    GIL, always at the same points."""

    def __init__(self, folder: Path, outside: Path) -> None:
        self.folder = folder
        self.link = folder.with_name(folder.name + ".link")
        self.link.symlink_to(outside)
        context = multiprocessing.get_context("fork")
        self._swaps = context.Value("q", 0)
        self._go = context.Event()
        self._idle = context.Event()
        self._stop = context.Event()
        self._process = context.Process(target=self._run, daemon=True)

    @property
    def swaps(self) -> int:
        return int(self._swaps.value)

    def _run(self) -> None:
        while True:
            self._idle.set()
            self._go.wait()
            self._idle.clear()
            if self._stop.is_set():
                return
            for _ in range(100):
                exchange(self.folder, self.link)
                exchange(self.folder, self.link)
            with self._swaps.get_lock():
                self._swaps.value += 100

    @contextmanager
    def held(self) -> Iterator[None]:
        self._go.clear()
        self._idle.wait()
        try:
            yield
        finally:
            self._go.set()

    def __enter__(self) -> Swapper:
        self._go.set()
        self._process.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._go.set()
        self._process.join()
        self.link.unlink()


@pytest.fixture
def tree(tmp_path: Path) -> tuple[FileDocsTree, Locations]:
    locations = Locations(tmp_path / "home", tmp_path / "cofferd.sock")
    (locations.docs_dir("notes") / "sub").mkdir(parents=True)
    return FileDocsTree(locations, DocumentPolicy(locations)), locations


def test_writes_creations_and_removals_never_land_outside(
    tree: tuple[FileDocsTree, Locations], tmp_path: Path
) -> None:
    docs, locations = tree
    outside = tmp_path / "outside"
    outside.mkdir()
    written = refused = 0
    with Swapper(locations.docs_dir("notes") / "sub", outside) as swapper:
        for n in range(TRIES):
            try:
                if n % 3 == 0:
                    docs.write("notes", "sub/plan.md", b"# Plan\n")
                elif n % 3 == 1:
                    docs.create("notes", "sub", "new", b"# New\n")
                else:
                    docs.remove("notes", "sub/plan.md")
                written += 1
            except (CofferError, OSError):
                refused += 1
            assert not any(outside.iterdir()), f"written outside at try {n}"
    assert swapper.swaps > 100, "the folder was hardly swapped: the race was not run"
    assert written > 100 and refused > 100, (written, refused)


def test_the_data_homes_own_files_never_land_outside(tmp_path: Path) -> None:
    """local/ (a KB's machine settings, attachment record, tracked sources) swapped for a
    link while Coffer writes and removes its files there."""
    locations = Locations(tmp_path / "home", tmp_path / "cofferd.sock")
    locations.local_dir.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    settings = locations.local_settings_path("notes")
    written = refused = 0
    with Swapper(locations.local_dir, outside) as swapper:
        for n in range(10 * TRIES):  # until both outcomes were seen often (load shifts them)
            if n >= TRIES and min(written, refused) >= 100:
                break
            try:
                if n % 2:
                    write_home_file(locations.home, settings, b"config: {}\n")
                else:
                    remove_home_file(locations.home, settings)
                written += 1
            except OSError:  # FolderRefused: local/ was the link at that moment
                refused += 1
            assert not any(outside.iterdir()), f"written outside at try {n}"
    assert swapper.swaps > 100, "the folder was hardly swapped: the race was not run"
    assert min(written, refused) >= 100, (written, refused)


def test_trash_moves_never_land_outside(
    tree: tuple[FileDocsTree, Locations], tmp_path: Path
) -> None:
    docs, locations = tree
    trash = FileTrash(locations, docs.boundary)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.md").write_text("the user's own file, outside")
    docs.write("notes", "sub/keep.md", b"# Keep\n")
    moved = 0
    with Swapper(locations.docs_dir("notes") / "sub", outside) as swapper:
        for n in range(TRIES // 3):
            entry = TrashEntry(
                f"01J{n:023d}", "doc", "sub/keep.md", "Keep", "2026-12-04T00:00:00+00:00"
            )
            try:
                trash.put("notes", entry, None)
            except (CofferError, OSError):
                continue
            for _ in range(500):  # back, whatever the swaps say
                try:
                    trash.restore("notes", entry)
                    moved += 1
                    break
                except (CofferError, OSError):
                    continue
            assert sorted(p.name for p in outside.iterdir()) == ["keep.md"], n
            assert (outside / "keep.md").read_text() == "the user's own file, outside"
    assert swapper.swaps > 100 and moved > 20, (swapper.swaps, moved)


def test_a_restore_raced_against_a_swap_never_writes_outside(
    daemon: Daemon, tmp_path: Path
) -> None:
    d = daemon
    docs = d.docs("notes")
    write(docs / "race/otter.md", "# Otter\n\nThe otter swims.")
    wait_for(lambda: d.client.get(d.client.document("notes", "race/otter.md")))
    outside = tmp_path / "outside"
    outside.mkdir()
    restored = 0
    with Swapper(docs / "race", outside) as swapper:
        for _ in range(10):
            with swapper.held():  # the delete is not what races: the restore is
                # (a pass over the swapped folder may take the note out and back meanwhile)
                trashed = wait_for(
                    lambda: d.client.request("DELETE", d.client.document("notes", "race/otter.md"))
                )
            restore = d.client.kb("notes", f"/trash/{trashed['trash']['id']}/restore")
            # refused while the folder is a link, or after the files moved back (the note
            # was indexed again through a link): the entry leaving the trash tells
            retried(partial(d.client.post, restore))
            items = d.client.get(d.client.kb("notes", "/trash"))["items"]
            restored += trashed["trash"]["id"] not in [item["id"] for item in items]
            assert list(outside.iterdir()) == []
    assert restored >= 5 and swapper.swaps > 100, (restored, swapper.swaps)
    # nothing lost: the note is in its folder, or in the trash
    trashed = d.client.get(d.client.kb("notes", "/trash"))["items"]
    assert (docs / "race/otter.md").exists() or trashed


def retried(call: Callable[[], Any], tries: int = 200) -> Any:
    """The call's answer once it is not refused (by the swap: a link, not found meanwhile)."""
    for _ in range(tries):
        try:
            return call()
        except ApiError:
            continue
    return None
