"""The web page of a test daemon, as a browser reaches it: its URL with a one-time key, and
an aiohttp session that traded the key for the cookie."""

from __future__ import annotations

from typing import Any

import aiohttp
from yarl import URL

from tests.support.daemon import Daemon

WEB_ROUTE = "/api/v1/web"


def open_web(d: Daemon, **body: Any) -> dict[str, Any]:
    """The page on (it stays on), and a URL with a key not yet used."""
    answer: dict[str, Any] = d.client.post(WEB_ROUTE, body)
    return answer


def origin(url: str) -> str:
    parsed = URL(url)
    return f"http://{parsed.host}:{parsed.port}"


def session() -> aiohttp.ClientSession:
    """A client that keeps cookies of 127.0.0.1 (aiohttp's jar refuses an IP's by default)."""
    return aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))


async def signed_in(url: str) -> aiohttp.ClientSession:
    """A session whose cookie the key in `url` gave."""
    client = session()
    async with client.get(url, allow_redirects=False) as response:
        assert response.status == 303, await response.text()
    return client
