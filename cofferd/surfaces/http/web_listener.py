"""The web page's listener: off until asked for, on loopback only (127.0.0.1, and ::1 on
the same port where the machine has it), in the daemon's loop.

`open` starts it (a free port unless one is given; a port asked for that differs from the
one it is on moves it) and answers a URL with a new one-time key; `close` stops it and
forgets every session. A machine without IPv6's loopback, or whose ::1 has the port taken,
gets the page on 127.0.0.1 alone, and `state` and the log say why. The application it
serves is made by `make_app` (web_page), over the daemon's own services.
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
HOST_V6 = "::1"
SHUTDOWN_S = 1.0
FREE_PORT_TRIES = 5  # a free port of 127.0.0.1 that ::1 has taken: another one is tried


class WebListener:
    def __init__(self, make_app: Callable[[Access], web.Application]) -> None:
        self._make_app = make_app
        self._runner: web.AppRunner | None = None
        self.access = Access()
        self._v6 = False  # also on ::1
        self._without_v6: str | None = None  # why not

    @property
    def address(self) -> str | None:
        return f"http://{HOST}:{self.access.port}/" if self._runner else None

    def state(self) -> dict[str, Any]:
        """What `status` says of it."""
        if self._runner is None:
            return {"on": False, "address": None, "addresses": [], "without_ipv6": None}
        addresses = [self.address, *([f"http://[{HOST_V6}]:{self.access.port}/"] * self._v6)]
        return {
            "on": True,
            "address": self.address,
            "addresses": addresses,
            "without_ipv6": self._without_v6,
        }

    async def open(self, port: int | None = None, kb: str | None = None) -> dict[str, Any]:
        started = self._runner is None or port not in (None, self.access.port)
        if started:
            socks = _bound_both(port)  # a port that cannot be had leaves the page where it is
            await self.close()
            await self._start(socks)
        key = self.access.new_key()
        query = f"?{KEY_PARAM}={key}" + (f"&kb={_quoted(kb)}" if kb else "")
        return {**self.state(), "url": f"{self.address}{query}", "started": started}

    async def _start(self, socks: tuple[socket.socket, socket.socket | str]) -> None:
        v4, v6 = socks
        self.access = Access(port=v4.getsockname()[1])
        runner = web.AppRunner(self._make_app(self.access), access_log=None, handle_signals=False)
        opened = [v4] if isinstance(v6, str) else [v4, v6]
        try:
            await runner.setup()
            for sock in opened:
                await web.SockSite(runner, sock, shutdown_timeout=SHUTDOWN_S).start()
        except BaseException:
            for sock in opened:
                sock.close()
            await runner.cleanup()
            raise
        self._runner = runner
        self._v6, self._without_v6 = not isinstance(v6, str), v6 if isinstance(v6, str) else None
        log.info(
            "web page on %s (`cofferctl web` opens it)", " and ".join(self.state()["addresses"])
        )
        if self._without_v6:
            log.info("web page not on [%s]: %s", HOST_V6, self._without_v6)

    async def close(self) -> bool:
        """Stop it; False when it was not on."""
        runner, self._runner = self._runner, None
        if runner is None:
            return False
        self.access = Access()
        await runner.cleanup()
        log.info("web page stopped")
        return True


def _bound_both(port: int | None) -> tuple[socket.socket, socket.socket | str]:
    """Listening sockets on 127.0.0.1's `port` (None: a free one) and on ::1's same port,
    or why there is none on ::1 (the page is then on 127.0.0.1 alone)."""
    tries = 1
    while True:
        v4 = _bound(socket.AF_INET, HOST, port or 0)
        try:
            return v4, _bound(socket.AF_INET6, HOST_V6, v4.getsockname()[1])
        except PortUnavailable as exc:
            if port or tries == FREE_PORT_TRIES:
                return v4, str(exc)
            v4.close()  # ::1 has this free port of 127.0.0.1 taken: another one
            tries += 1
        except OSError as exc:  # no IPv6 here, or no ::1
            return v4, f"this machine has no IPv6 loopback ({exc.strerror or exc})"


def _bound(family: socket.AddressFamily, host: str, port: int) -> socket.socket:
    """A listening socket on `host`'s `port` (0: a free one)."""
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((host, port))
        sock.listen(128)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        if exc.errno in (errno.EADDRINUSE, errno.EACCES):
            raise PortUnavailable(
                f"port {port} of {host} cannot be used: {exc.strerror}", port=port
            ) from None
        raise
    return sock


def _quoted(value: str) -> str:
    return urllib.parse.quote(value, safe="")
