"""The web page's listener: off until asked for, on 127.0.0.1 only, in the daemon's loop.

`open` starts it (a free port unless one is given; a port asked for that differs from the
one it is on moves it) and answers a URL with a new one-time key; `close` stops it and
forgets every session. The application it serves is made by `make_app` (web_page), over
the daemon's own services.
"""

from __future__ import annotations

import errno
import logging
import socket
import urllib.parse
from collections.abc import Callable
from typing import Any

from aiohttp import web

from cofferd.domain.errors import PortUnavailable
from cofferd.surfaces.http.web_access import KEY_PARAM, Access

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
SHUTDOWN_S = 1.0


class WebListener:
    def __init__(self, make_app: Callable[[Access], web.Application]) -> None:
        self._make_app = make_app
        self._runner: web.AppRunner | None = None
        self.access = Access()

    @property
    def address(self) -> str | None:
        return f"http://{HOST}:{self.access.port}/" if self._runner else None

    def state(self) -> dict[str, Any]:
        """What `status` says of it."""
        return {"on": self._runner is not None, "address": self.address}

    async def open(self, port: int | None = None, kb: str | None = None) -> dict[str, Any]:
        started = self._runner is None or port not in (None, self.access.port)
        if started:
            sock = _bound(port or 0)  # a port that cannot be had leaves the page where it is
            await self.close()
            await self._start(sock)
        key = self.access.new_key()
        query = f"?{KEY_PARAM}={key}" + (f"&kb={_quoted(kb)}" if kb else "")
        return {**self.state(), "url": f"{self.address}{query}", "started": started}

    async def _start(self, sock: socket.socket) -> None:
        self.access = Access(port=sock.getsockname()[1])
        runner = web.AppRunner(self._make_app(self.access), access_log=None, handle_signals=False)
        try:
            await runner.setup()
            await web.SockSite(runner, sock, shutdown_timeout=SHUTDOWN_S).start()
        except BaseException:
            sock.close()
            await runner.cleanup()
            raise
        self._runner = runner
        log.info("web page on %s (`cofferctl web` opens it)", self.address)

    async def close(self) -> bool:
        """Stop it; False when it was not on."""
        runner, self._runner = self._runner, None
        if runner is None:
            return False
        self.access = Access()
        await runner.cleanup()
        log.info("web page stopped")
        return True


def _bound(port: int) -> socket.socket:
    """A listening socket on loopback's `port` (0: a free one)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, port))
        sock.listen(128)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        if exc.errno in (errno.EADDRINUSE, errno.EACCES):
            raise PortUnavailable(
                f"port {port} of {HOST} cannot be used: {exc.strerror}", port=port
            ) from None
        raise
    return sock


def _quoted(value: str) -> str:
    return urllib.parse.quote(value, safe="")
