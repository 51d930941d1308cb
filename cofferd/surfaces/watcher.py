"""The watch of every knowledge base's files: the knowledge/ folder and each KB's folder
alone (KBs created, deleted or copied in; settings; docs/ links), and each KB's root, as
the confinement boundary resolves and checks it, whole. When a root comes, goes or changes
(attached, mounted, unmounted, swapped, refused) the watch starts again. Each watch, once
set up, asks for a full reconcile, which reads what changed while nothing watched (at
start, between two watches): no save falls between a scan and a watch.

It only turns file events into paths for the indexing service; what a path is is the
DocumentPolicy's to say, and what to do is the service's. Events are sorted off the serving
loop (a `git checkout` brings thousands at once, and ignore files may have to be read).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import watchfiles

from coffer_kernel.locations import normalize_relpath
from cofferd.application.indexing.indexing import IndexingService
from cofferd.domain.errors import KBUnavailable
from cofferd.domain.models import utc_now
from cofferd.infrastructure.files.document_policy import DocumentPolicy, Kind
from cofferd.infrastructure.files.probe import FsProbe

log = logging.getLogger(__name__)

STEP_MS = 30  # quiet time that ends a batch: the main term of save-to-searchable latency
DEBOUNCE_MS = 1000  # longest a burst is grouped before it is handed over
POLL_DELAY_MS = 2000  # polling, when the OS has no watches left for us
WATCH_LIMIT = "watch limit"  # in the OSError watchfiles raises when inotify watches run out
LAYOUT_CHECK_S = 2.0  # how often KB roots and folders are checked for coming and going
# (at once when the KB service has created, attached or deleted one)


@dataclass(frozen=True)
class _Layout:
    roots: frozenset[tuple[str, Path, int, int]]  # (KB, root, st_dev, st_ino)
    folders: frozenset[str]  # the folders of knowledge/


@dataclass
class WatcherState:
    running: bool = False
    last_event_at: str | None = None
    events_seen: int = 0
    restarts: int = 0
    last_error: str | None = None
    polling: str | None = None  # why the tree is polled instead of watched
    # Unreadable folders are skipped only once one was met: skipping them from the start
    # would also hide that the OS has no watches left (watchfiles reports both alike).
    skip_unreadable: bool = False
    watched: tuple[str, ...] = ()  # the KBs whose roots the watch under way covers


class Watcher:
    def __init__(
        self,
        policy: DocumentPolicy,
        indexing: IndexingService,
        *,
        step_ms: int = STEP_MS,
        debounce_ms: int = DEBOUNCE_MS,
    ) -> None:
        self.policy = policy
        self.indexing = indexing
        self.root = policy.locations.knowledge_root
        self.step_ms = step_ms
        self.debounce_ms = debounce_ms
        self.state = WatcherState()
        self._stop = asyncio.Event()
        self._cycle = asyncio.Event()  # ends one watch, to start the next
        self._look = asyncio.Event()  # the layout is to be checked now, not at the next check
        self._probe = FsProbe("knowledge bases' folders")
        self.boundary = policy.boundary
        self._logged: set[str] = set()

    def start(self) -> None:
        """Watch until stopped; the indexing service restarts each watch that ends."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.indexing.supervise("file watcher", self.session, self.adapt)

    def look(self) -> None:
        """A KB's folder came, went or was attached: the layout is checked now, not at the
        next check (the composition root subscribes it to LayoutChanged)."""
        self._look.set()

    async def stop(self) -> None:
        self._stop.set()
        self._cycle.set()
        self.state.running = False

    def status(self) -> dict[str, Any]:
        s = self.state
        return {
            "healthy": s.running and s.polling is None,
            "running": s.running,
            "watching": [
                kb.name for kb in self.indexing.kbs.list() if kb.enabled and kb.name in s.watched
            ],
            "last_event_at": s.last_event_at,
            "events_seen": s.events_seen,
            "restarts": s.restarts,
            "last_error": s.last_error,
            "polling": s.polling,
        }

    async def session(self) -> None:
        """One watch: until the KBs' roots or the folders of knowledge/ change, the watcher
        is stopped, or the backend fails (raised: a file name that is not UTF-8 ends it).

        The knowledge root and each folder of it that may be a KB are watched alone (KBs
        coming and going, settings, docs/ links); each KB's root is watched whole where it
        really is, once the boundary has checked it. Nothing is watched through a link of
        knowledge/: a synced-in `docs -> ../..` would otherwise watch the data home again
        under that KB, and its events for other KBs' files would arrive under its name."""
        if self._stop.is_set():
            await asyncio.Event().wait()  # stopped: nothing to watch until the service stops
        self._cycle = asyncio.Event()
        layout = await self._probe(self._layout) or _Layout(frozenset(), frozenset())
        changed = asyncio.create_task(self._until_layout_changes(self._cycle, layout))
        known = {kb.name for kb in self.indexing.kbs.list()}
        folders = [self.root, *(self.root / name for name in sorted(known | layout.folders))]
        trees = {kb: path for kb, path, *_ in layout.roots}
        try:
            self.state.running = True
            watches = [asyncio.create_task(self._watch(folders, False, None))]
            if trees:
                watches.append(asyncio.create_task(self._watch(list(trees.values()), True, trees)))
            await asyncio.sleep(0)  # each watch is set up on its first step: now it is
            self.state.watched = tuple(sorted(trees))
            # Whatever changed while nothing watched (before the first session, between two,
            # in a folder that is no KB yet) is read now that the watch sees what follows.
            self.indexing.request_full()
            for name in layout.folders - known:
                self.indexing.request_full(name)
            try:
                done, _ = await asyncio.wait(watches, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    task.result()  # a failed watch ends the session with its error
            finally:
                self.state.watched = ()
                self._cycle.set()
                for task in watches:
                    task.cancel()
                await asyncio.gather(*watches, return_exceptions=True)
            self.state.last_error = None
        finally:
            changed.cancel()
        if self._stop.is_set():
            await asyncio.Event().wait()  # stopped: nothing more to hand over

    async def _watch(
        self, paths: list[Path], recursive: bool, trees: dict[str, Path] | None
    ) -> None:
        async for changes in watchfiles.awatch(
            *paths,
            watch_filter=None,  # sorted in a thread: _sort
            step=self.step_ms,
            debounce=self.debounce_ms,
            stop_event=self._cycle,
            ignore_permission_denied=self.state.skip_unreadable,
            force_polling=self.state.polling is not None,
            poll_delay_ms=POLL_DELAY_MS,
            recursive=recursive,
        ):
            self._hand_over(*await asyncio.to_thread(self._sort, changes, trees))

    def adapt(self, exc: BaseException) -> bool:
        """What a failed watch says; True when the next one runs differently (folders
        that cannot be read left out, polling instead of inotify) and may start at once."""
        message = f"{type(exc).__name__}: {exc}"[:500]
        self.state.last_error = message
        self.state.restarts += 1
        self.state.running = False
        if _permission_denied(exc) and not self.state.skip_unreadable:
            log.warning("%s; folders that cannot be read are not watched", message)
            self.state.skip_unreadable = True
            return True
        if WATCH_LIMIT in str(exc) and self.state.polling is None:
            self.state.polling = (
                "the OS has no file watches left (fs.inotify.max_user_watches); "
                f"polling every {POLL_DELAY_MS / 1000:g} s instead"
            )
            log.error("%s; %s", message, self.state.polling)
            return True
        if message not in self._logged:  # once each, not every second
            log.error("file watcher failed: %s; restarting", message, exc_info=exc)
            self._logged.add(message)
        return False

    def _layout(self) -> _Layout:
        """Every KB's root that the boundary lets be used now, by identity (a remount or
        a swapped folder is a new one), and every folder of knowledge/ that may be a KB (a
        folder, never a link, with a KB's name), or become one once its settings arrive."""
        found = set()
        for kb in self.indexing.kbs.list():
            with contextlib.suppress(KBUnavailable, OSError):
                root = self.boundary.root(kb.name)
                st = os.stat(root)
                found.add((kb.name, root, st.st_dev, st.st_ino))
        with os.scandir(self.root) as entries:
            names = [entry.name for entry in entries if entry.is_dir(follow_symlinks=False)]
        folders = {name for name in names if self.indexing.kbs.repo.refusal(name) is None}
        return _Layout(frozenset(found), frozenset(folders))

    async def _until_layout_changes(self, cycle: asyncio.Event, watched: _Layout) -> None:
        """Ends the watch when a root or a folder of knowledge/ comes, goes or changes. The
        layout is looked at in a thread with a time limit: a root on a dead mount never
        holds the daemon up. A KB created or attached is watched at once, so a file saved in
        its first seconds is not left for the next check."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._look.wait(), LAYOUT_CHECK_S)
            self._look.clear()
            now = await self._probe(self._layout)
            if now is not None and now != watched:
                break
        log.info("knowledge bases' folders changed; watching them afresh")
        cycle.set()

    def _sort(
        self, changes: set[tuple[watchfiles.Change, str]], trees: dict[str, Path] | None
    ) -> tuple[int, set[str], dict[str, set[str]]]:
        """(events, KBs to reconcile whole, paths to sync by KB) from file events: of the
        KBs' roots (`trees`), or of the knowledge root and the KBs' folders."""
        whole: set[str] = set()
        paths: dict[str, set[str]] = {}
        for _, path in changes:
            where = _in_tree(path, trees) if trees is not None else self.policy.locate(path)
            if where is None:
                continue
            kb, relpath = where
            if relpath is None:
                whole.add(kb)  # its folder, docs/ or settings: read again, whole
                continue
            kind = self.policy.classify(kb, relpath, is_dir=None)
            if kind in (Kind.IGNORE_FILE, Kind.CONFLICT_COPY):
                whole.add(kb)  # a full scan reads ignore files, finds copies
            elif kind in (Kind.DOCUMENT, Kind.FOLDER):
                paths.setdefault(kb, set()).add(relpath)
        return len(changes), whole, paths

    def _hand_over(self, events: int, whole: set[str], paths: dict[str, set[str]]) -> None:
        self.state.last_event_at = utc_now()
        self.state.events_seen += events
        for kb in whole:
            self.indexing.request_full(kb)
        for kb, relpaths in paths.items():
            self.indexing.paths_changed(kb, relpaths)


def _in_tree(path: str, trees: dict[str, Path]) -> tuple[str, str | None] | None:
    """(KB, path inside its root, or None for the root itself) of an event of a root."""
    for kb, root in trees.items():
        top = str(root)
        if path == top:
            return kb, None
        if path.startswith(top + os.sep):
            return kb, normalize_relpath(path[len(top) + 1 :])
    return None


def _permission_denied(exc: BaseException) -> bool:
    return isinstance(exc, PermissionError) or "ermission denied" in str(exc)
