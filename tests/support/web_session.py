"""The web page of a test daemon, as a browser reaches it: its URL with a one-time key, an
aiohttp session that traded the key for the cookie, and how Debian's Chromium is started
for it (tests and benches alike: never a browser of Playwright's own)."""

from __future__ import annotations

import shutil
from typing import Any

import aiohttp
from yarl import URL

from tests.support.daemon import Daemon

WEB_ROUTE = "/api/v1/web"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# headless as root, and nothing fetched in the background (this machine's network is closed)
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def script_errors(page: Any) -> list[str]:
    """The errors the page's scripts raise and log from now on, gathered as they come."""
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    return errors


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
