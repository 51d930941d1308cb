"""cofferd's life: one per data home, serve at once, reconcile in the background, stop cleanly."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import signal
import time
from dataclasses import dataclass
from typing import IO, Any

from aiohttp import web

from cofferd import __version__
from cofferd.application.knowledge_bases import DEFAULT_KB
from cofferd.infrastructure import vec_index
from cofferd.infrastructure.database import SQLITE_VERSION
from cofferd.infrastructure.paths import Locations
from cofferd.surfaces import systemd, unix_socket
from cofferd.surfaces.core import Coffer
from cofferd.surfaces.http_api import UPLOAD_PREFIX, create_app
from cofferd.surfaces.watcher import RECONCILE_INTERVAL_S, Watcher

log = logging.getLogger("cofferd")


class AlreadyRunning(RuntimeError):
    pass


@dataclass(frozen=True)
class Settings:
    reconcile_interval_s: float = RECONCILE_INTERVAL_S


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
    def __init__(self, locations: Locations, settings: Settings | None = None) -> None:
        self.locations = locations
        self.settings = settings or Settings()
        self.started_at = time.time()
        self._stop = asyncio.Event()

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
        for upload in self.locations.incoming_dir.glob(UPLOAD_PREFIX + "*"):
            upload.unlink(missing_ok=True)  # uploads cut short by a stop
        async with contextlib.AsyncExitStack() as stack:
            self.coffer = coffer = await stack.enter_async_context(
                await Coffer.open(self.locations)
            )
            for kb in coffer.kbs.list():
                await coffer.kbs.adopt(kb.name)
            if not coffer.kbs.list():
                await coffer.kbs.create(DEFAULT_KB, actor="system")
                log.info("created the default knowledge base %r", DEFAULT_KB)
            self.watcher = watcher = Watcher(
                coffer, reconcile_interval_s=self.settings.reconcile_interval_s
            )
            stack.push_async_callback(watcher.stop)
            inherited = systemd.inherited_socket()
            bound = (
                unix_socket.BoundSocket(inherited, None)
                if inherited
                else unix_socket.bind(self.locations.socket)
            )
            stack.callback(bound.remove)
            runner = web.AppRunner(
                create_app(coffer, watcher, self.status), access_log=None, handle_signals=False
            )
            await runner.setup()
            stack.push_async_callback(runner.cleanup)  # first out: stop accepting requests
            await web.SockSite(runner, bound.sock, shutdown_timeout=2.0).start()
            watcher.start(full_reconcile=True)
            coffer.embeddings.start()
            log.info(
                "cofferd %s serving on %s; data home %s",
                __version__,
                "an inherited socket" if inherited else self.locations.socket,
                self.locations.home,
            )
            systemd.notify("READY=1\nSTATUS=serving")
            await self._stop.wait()
            log.info("stopping")
            systemd.notify("STOPPING=1")
        log.info("stopped")

    async def status(self) -> dict[str, Any]:
        kbs = []
        for kb in self.coffer.kbs.list():
            counts = await self.coffer.store.metrics(kb.name)
            entry: dict[str, Any] = {
                "name": kb.name,
                "enabled": kb.enabled,
                "documents": counts["documents"],
                "documents_degraded": counts["documents_degraded"],
                "docs_path": str(self.locations.docs_dir(kb.name)),
            }
            if kb.config.vector_enabled and kb.config.embedding is not None:
                entry["vectors"] = {
                    "model": kb.config.embedding.model,
                    "provider": kb.config.embedding.provider,
                    "embed_pending": counts["embed_pending"],
                    **self.coffer.embeddings.status(kb.name),
                }
            kbs.append(entry)
        watcher = self.watcher.status()
        return {
            "version": __version__,
            "pid": os.getpid(),
            "uptime_s": round(time.time() - self.started_at, 1),
            "data_home": str(self.locations.home),
            "socket": str(self.locations.socket),
            "database": str(self.locations.db_path),
            "sqlite_version": SQLITE_VERSION,
            "vector_search": vec_index.load_error or "available",
            "knowledge_bases": kbs,
            "formats": self.coffer.ingest.supported_formats(),
            "watcher": watcher,
            "queue_depth": watcher["queue_depth"],
            "startup_reconcile_done": watcher["last_full_reconcile_at"] is not None,
        }


async def run(locations: Locations, settings: Settings) -> None:
    daemon = Daemon(locations, settings)
    with contextlib.suppress(asyncio.CancelledError):
        await daemon.run()
