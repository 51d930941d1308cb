"""cofferd's life: one per data home, serve at once, reconcile in the background, stop cleanly."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import signal
import sys
import time
from typing import IO, Any

from coffer_kernel import __version__
from coffer_kernel.locations import Locations
from cofferd.application.indexing.knowledge_bases import DEFAULT_KB
from cofferd.domain.errors import PortUnavailable
from cofferd.domain.models import KnowledgeBase
from cofferd.infrastructure.files.confinement import home_folder, home_problems
from cofferd.infrastructure.files.probe import FsProbe
from cofferd.surfaces import systemd
from cofferd.surfaces.core import Coffer, Tuning
from cofferd.surfaces.http import unix_socket
from cofferd.surfaces.progress_bar import show_progress

log = logging.getLogger("cofferd")


SHUTDOWN_S = 1.5  # in-flight requests get this long to answer once a stop is asked for


class AlreadyRunning(RuntimeError):
    pass


def acquire_lock(locations: Locations) -> IO[str]:
    """Hold an exclusive lock on the data home for the daemon's lifetime."""
    locations.home.mkdir(parents=True, exist_ok=True)
    fh = open(locations.lock_path, "a+")  # noqa: SIM115 - held open until exit
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.seek(0)
        pid = fh.read().strip() or "?"
        fh.close()
        raise AlreadyRunning(
            f"cofferd is already running for {locations.home} (pid {pid})"
        ) from None
    fh.seek(0)
    fh.truncate()
    fh.write(f"{os.getpid()}\n")
    fh.flush()
    return fh


class Daemon:
    def __init__(self, locations: Locations, tuning: Tuning | None = None) -> None:
        self.locations = locations
        self.tuning = tuning or Tuning()
        self.started_at = time.time()
        self.socket_path = str(locations.socket)
        self._stop = asyncio.Event()
        self._folders = FsProbe("status")
        self._home = FsProbe("data home")

    def _folder(self, kb: str) -> tuple[str | None, str]:
        """(why its docs folder may not be used now, or None; where it is)."""
        return self.coffer.boundary.problem(kb), str(self.locations.docs_folder(kb))

    def request_stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        lock = acquire_lock(self.locations)
        try:
            await self._serve()
        finally:
            lock.close()

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop)
        async with contextlib.AsyncExitStack() as stack:
            self.coffer = coffer = await stack.enter_async_context(
                await Coffer.open(self.locations, self.tuning)
            )
            # the HTTP layer imported once the index is open: the worker processes a new
            # index starts (Coffer.open) import their own code meanwhile, on another core
            from aiohttp import web

            from cofferd.surfaces.http.api import create_app
            from cofferd.surfaces.http.uploads import UPLOAD_PREFIX
            from cofferd.surfaces.http.web_listener import WebListener
            from cofferd.surfaces.http.web_page import create_web_app

            clear_uploads(self.locations, UPLOAD_PREFIX)
            if not coffer.kbs.list():
                await coffer.kbs.create(DEFAULT_KB, actor="system")
                log.info("created the default knowledge base %r", DEFAULT_KB)
            self.watcher = watcher = coffer.watcher()
            stack.push_async_callback(watcher.stop)
            inherited = systemd.inherited_socket()
            bound = (
                unix_socket.BoundSocket(inherited, None)
                if inherited
                else unix_socket.bind(self.locations.socket)
            )
            if inherited:
                self.socket_path = str(inherited.getsockname()) or "(inherited, unnamed)"
            stack.callback(bound.remove)
            self.web = WebListener(lambda access: create_web_app(coffer, self.status, access))
            runner = web.AppRunner(
                create_app(coffer, self.status, self.web),
                access_log=None,
                handle_signals=False,
            )  # the parser's limits are the application's (http.server)
            await runner.setup()
            stack.push_async_callback(runner.cleanup)  # first out: stop accepting requests
            await web.SockSite(runner, bound.sock, shutdown_timeout=SHUTDOWN_S).start()
            stack.push_async_callback(self.web.close)  # before the API's runner: LIFO
            if self.tuning.web_port is not None:
                await self._open_web(self.tuning.web_port)
            watcher.start()  # its first watch, once set up, asks for the start-up reconcile
            coffer.indexing.start(full_reconcile=False)
            checking = asyncio.create_task(coffer.check_index(), name="quick-check")
            stack.push_async_callback(_cancel, checking)
            if sys.stderr.isatty():  # `make run` in the foreground; services log only
                bar = asyncio.create_task(show_progress(coffer.progress, sys.stderr).run())
                stack.push_async_callback(_cancel, bar)
            log.info(
                "cofferd %s serving on %s; data home %s",
                __version__,
                self.socket_path,
                self.locations.home,
            )
            systemd.notify("READY=1\nSTATUS=serving")
            await self._stop.wait()
            log.info("stopping")
            systemd.notify("STOPPING=1")
            await coffer.converter.interrupt()  # in-flight uploads are answered, not dropped
            await coffer.conversions.converter.interrupt()
        log.info("stopped")

    async def _open_web(self, port: int) -> None:
        """--web-port: the page on from the start; a port taken is said, and the daemon
        serves without it (`cofferctl web` opens it on a free port)."""
        try:
            await self.web.open(port)
        except PortUnavailable as exc:
            log.warning("the web page is off: %s", exc.message)

    async def _kb_status(
        self, kb: KnowledgeBase, folder: tuple[str | None, str] | None
    ) -> dict[str, Any]:
        """One KB's entry of `status`; `folder` is what `_folder` found (None: its folder
        did not answer in time)."""
        coffer = self.coffer
        owed = self._owed(kb)  # read before the counts: once nothing is, they are complete
        counts = await coffer.kbs.counts(kb.name)
        progress = coffer.progress.get(kb.name)
        docs_path = folder[1] if folder else kb.attached
        entry: dict[str, Any] = {
            "name": kb.name,
            "enabled": kb.enabled,
            "documents": counts["documents"],
            "documents_degraded": counts["documents_degraded"],
            "skipped": coffer.reindexer.skipped_count(kb.name),
            "formats": await coffer.stores.index.formats(kb.name),
            "converting": coffer.conversions.waiting(kb.name),
            "progress": progress.as_dict() if progress else None,
            "docs_path": docs_path or str(self.locations.docs_dir(kb.name)),
        }
        if kb.attached:
            entry["attached"] = True
        conflicts = await coffer.documents.conflict_count(kb.name)
        if conflicts:
            entry["conflicts"] = conflicts
        embedding = (  # vectors owed, while embedding can work (else a problem says why)
            kb.config.vector_enabled
            and kb.config.embedding is not None
            and coffer.embeddings.unavailable is None
            and counts["embed_pending"] > 0
        )
        entry.update(self._state(kb, folder, entry["docs_path"], owed or embedding))
        entry["problems"] += coffer.kbs.problems(kb)
        if kb.ignored_settings:
            entry["ignored_settings"] = list(kb.ignored_settings)
        if kb.settings_error:
            entry["settings_error"] = kb.settings_error
        if kb.config.vector_enabled and kb.config.embedding is not None:
            vectors = coffer.embeddings.status(kb.name)
            entry["vectors"] = {
                "model": kb.config.embedding.model,
                "provider": kb.config.embedding.provider,
                "embed_pending": counts["embed_pending"],
                **vectors,
                "model_choice": coffer.embeddings.choice.describe(kb),
            }
            if vectors["unavailable"]:
                entry["problems"].append(vectors["unavailable"])
            if vectors["last_error"]:
                entry["problems"].append(f"embedding fails: {vectors['last_error']}")
        return entry

    def _owed(self, kb: KnowledgeBase) -> bool:
        """Whether indexing `kb` is known to owe work: what the indexing service owes it
        (its first pass, a pass asked for or a retry, paths queued or being synced), work
        on the progress board, documents whose text is being converted."""
        coffer = self.coffer
        progress = coffer.progress.get(kb.name)
        return (
            coffer.indexing.owed(kb.name)
            or (progress is not None and progress.done < progress.total)
            or coffer.conversions.waiting(kb.name) > 0
        )

    def _state(
        self, kb: KnowledgeBase, folder: tuple[str | None, str] | None, docs_path: str, owed: bool
    ) -> dict[str, Any]:
        """`state`, and the `problem` behind it, listed once in `problems`: its folder away
        or refused now (`unavailable`: what search finds may be stale), else a pass that
        failed and no whole pass succeeded since (`failing`), else work owed (`indexing`),
        else `ok`: its last whole pass succeeded and nothing is owed."""
        if folder is None:
            why = f"its docs folder {docs_path} does not answer (a network mount that went away?)"
            return {"state": "unavailable", "problem": why, "problems": [why]}
        if folder[0] is not None:
            return {"state": "unavailable", "problem": folder[0], "problems": [folder[0]]}
        failure = self.coffer.indexing.problems().get(kb.name)
        if failure is not None:
            why = f"indexing fails: {failure}"
            return {"state": "failing", "problem": why, "problems": [why]}
        return {"state": "indexing" if owed else "ok", "problems": []}

    async def status(self) -> dict[str, Any]:
        coffer = self.coffer
        # read before the counts: once it says done, the counts below are complete
        startup_done = coffer.indexing.startup_done()
        known = coffer.kbs.list()
        folders = await self._folders(lambda: {kb.name: self._folder(kb.name) for kb in known})
        names = [kb.name for kb in known]
        refused = await self._home(lambda: home_problems(self.locations, names))
        kbs = [await self._kb_status(kb, (folders or {}).get(kb.name)) for kb in known]
        indexing = coffer.indexing.status()
        watcher = self.watcher.status()
        return {
            "version": __version__,
            "pid": os.getpid(),
            "uptime_s": round(time.time() - self.started_at, 1),
            "data_home": str(self.locations.home),
            "socket": self.socket_path,
            "database": str(self.locations.db_path),
            **coffer.engines(),
            "knowledge_bases": kbs,
            "refused_folders": [
                {"name": name, "reason": why}
                for name, why in sorted(coffer.registry.refused.items())
            ],
            "formats": coffer.policy.supported_formats(),
            "extensions": coffer.policy.extensions(),
            "watcher": {
                **watcher,
                **indexing,
                "last_error": watcher["last_error"] or indexing["last_error"],
            },
            "queue_depth": indexing["queue_depth"],
            "web": self.web.state(),
            "workers": coffer.preparer.status(),
            "conversions": coffer.conversions.status(),
            "startup_reconcile_done": startup_done,
            "problems": refused if refused is not None else ["the data home does not answer"],
        }


def clear_uploads(locations: Locations, prefix: str) -> None:
    """Remove the uploads a stop cut short (named with `prefix`), from incoming/ reached
    through no link (one that is a link is refused: status says so, and nothing outside is
    removed)."""
    try:
        with home_folder(locations.home, locations.incoming_dir) as incoming:
            for name in os.listdir(incoming):
                if name.startswith(prefix):
                    with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                        os.unlink(name, dir_fd=incoming)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("uploads left in %s are not removed: %s", locations.incoming_dir, exc)


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def run(locations: Locations, tuning: Tuning) -> None:
    daemon = Daemon(locations, tuning)
    with contextlib.suppress(asyncio.CancelledError):
        await daemon.run()
