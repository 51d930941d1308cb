"""A loopback TCP port that pipes every connection to cofferd's Unix socket.

HTTP tools that only speak TCP (schemathesis, requests) can then reach a real daemon:

    with Forwarder(daemon.socket) as fwd:
        requests.get(fwd.url + "/api/v1/health")

The server runs on its own event loop in a background thread; `stop()` (or leaving the
`with` block) closes the listener and every open connection, then joins the thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from pathlib import Path
from types import TracebackType

CHUNK = 64 * 1024


class Forwarder:
    def __init__(self, socket_path: Path | str, host: str = "127.0.0.1", port: int = 0) -> None:
        self.socket_path = str(socket_path)
        self.host = host
        self.port = port  # 0: an ephemeral port, known once started
        self.connections = 0  # accepted so far (a test can check the pipe was used)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def __enter__(self) -> Forwarder:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self, timeout: float = 10.0) -> Forwarder:
        if self._thread is not None:
            raise RuntimeError("forwarder already started")
        self._thread = threading.Thread(target=self._run, name="coffer-forwarder", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            self.stop()
            raise RuntimeError("forwarder did not start")
        if self._error is not None:
            self._thread.join()
            self._thread = None
            raise RuntimeError("forwarder could not listen") from self._error
        return self

    def stop(self, timeout: float = 10.0) -> None:
        loop, thread = self._loop, self._thread
        if thread is None:
            return
        if loop is not None and thread.is_alive():
            with contextlib.suppress(RuntimeError):  # the loop already finished
                asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout)
        thread.join(timeout)
        if thread.is_alive():
            raise RuntimeError("forwarder thread did not stop")
        self._thread = None

    # -- the event loop thread -------------------------------------------------------------

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            try:
                self._server = loop.run_until_complete(
                    asyncio.start_server(self._accept, self.host, self.port)
                )
                self.port = self._server.sockets[0].getsockname()[1]
            except BaseException as exc:  # noqa: BLE001 - handed to start()'s caller
                self._error = exc
                return
            finally:
                self._ready.set()
            loop.run_forever()
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _shutdown(self) -> None:
        assert self._loop is not None
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._loop.call_soon(self._loop.stop)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # served in a task of our own, so that stop() can cancel it (cancelling the task
        # asyncio.start_server runs this callback in logs a spurious error on Python 3.11)
        self.connections += 1
        task = asyncio.create_task(self._serve(reader, writer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream: asyncio.StreamWriter | None = None
        try:
            try:
                up_reader, upstream = await asyncio.open_unix_connection(self.socket_path)
            except OSError:
                return  # daemon gone: the client sees the connection close
            request = asyncio.create_task(_pipe(reader, upstream, half_close=True))
            try:
                # the daemon's side ending (response sent, connection closed) ends the exchange
                await _pipe(up_reader, writer, half_close=False)
            finally:
                request.cancel()
                await asyncio.gather(request, return_exceptions=True)
        finally:
            for w in (upstream, writer):
                if w is not None:
                    w.close()
                    with contextlib.suppress(Exception):
                        await w.wait_closed()


async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, *, half_close: bool) -> None:
    try:
        while data := await src.read(CHUNK):
            dst.write(data)
            await dst.drain()
        if half_close and dst.can_write_eof():
            dst.write_eof()  # the client finished sending; the answer may still be on its way
    except (ConnectionError, OSError):
        pass
