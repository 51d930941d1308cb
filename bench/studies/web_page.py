"""Issue 46 figures: the web page of a daemon holding tldr-pages (about 38,000 notes).

First page: a request to the search page's HTML (warm, median of 30), and in Chromium the
navigation with the key to the page loaded, then to the first results painted. Keystroke
to painted results: each query typed but for its last character, then the last key pressed
and the time until the page has painted the answer (fetch, search, paint; before d45e34d
a 40 ms debounce too; median and p95 over the queries). The daemon's memory before the
page and after the queries. With --screenshot PATH, the search page after a query, as a PNG.

Needs Playwright for Python and Debian's Chromium (/usr/bin/chromium).

    nice .venv/bin/python -m bench.studies.web_page [--screenshot docs/screenshots/search.png]
"""

from __future__ import annotations

import argparse
import http.client
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import (
    REPO,
    attach_and_index,
    extract_tldr,
    kb_status,
    machine,
    median,
    memory_mb,
    percentile,
    scratch_home,
    start_daemon,
    stop_daemon,
)
from cofferctl.client import Client
from tests.support.web_session import CHROMIUM, CHROMIUM_ARGS

QUERIES = [
    "tar", "extract archive", "list files", "git commit", "docker run", "network interface",
    "compress", "ssh key", "kill process", "disk usage", "change permissions", "rename",
    "python virtual environment", "http request", "search text", "download file",
    "copy directory recursively", "environment variable", "压缩", "文件", "ファイル", "파일",
]  # fmt: skip
WARM_REQUESTS = 30


def html_ms(address: str, cookie: str) -> list[float]:
    host, _, port = address.removeprefix("http://").rstrip("/").partition(":")
    times = []
    for _ in range(WARM_REQUESTS):
        started = time.perf_counter()
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        conn.request("GET", "/?kb=tldr", headers={"Cookie": cookie, "Host": f"{host}:{port}"})
        response = conn.getresponse()
        response.read()
        conn.close()
        times.append((time.perf_counter() - started) * 1000)
        assert response.status == 200, response.status
    return times


def trade_key(url: str) -> str:
    """The session cookie the key in `url` gives (`name=value`)."""
    rest = url.removeprefix("http://")
    where, _, path = rest.partition("/")
    host, _, port = where.partition(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("GET", "/" + path, headers={"Host": where})
    response = conn.getresponse()
    response.read()
    conn.close()
    return response.getheader("Set-Cookie", "").split(";")[0]


def browser_figures(client: Client, screenshot: Path | None) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1100, "height": 720})
        url = client.post("/api/v1/web", {"kb": "tldr"})["url"]
        started = time.perf_counter()
        page.goto(url, wait_until="load")
        loaded = (time.perf_counter() - started) * 1000
        page.locator("#q").fill("extract archive")
        page.wait_for_selector("body[data-state=painted]")
        painted = (time.perf_counter() - started) * 1000
        keystrokes = []
        for query in QUERIES * 2:
            page.locator("#q").fill(query[:-1])
            page.wait_for_timeout(150)  # its own search answered and painted
            page.evaluate("document.body.dataset.state = 'typing'")
            started = time.perf_counter()
            page.keyboard.type(query[-1])
            page.wait_for_selector("body[data-state=painted]", timeout=10_000)
            keystrokes.append((time.perf_counter() - started) * 1000)
        if screenshot:
            page.locator("#q").fill("extract archive")
            page.wait_for_timeout(400)
            page.screenshot(path=str(screenshot))
        browser.close()
    return {"load_ms": loaded, "painted_ms": painted, "keystrokes_ms": keystrokes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--screenshot", type=Path, help="save the search page here (PNG)")
    args = parser.parse_args()
    home = scratch_home("web")
    run = Path(tempfile.mkdtemp(prefix="cof", dir="/tmp"))
    corpus = extract_tldr(home / "src")
    daemon = start_daemon(REPO, home / "home", run / "s.sock")
    client = Client(run / "s.sock", timeout=120)
    try:
        indexed_s = attach_and_index(client, daemon, "tldr", corpus, 1800)
        notes = kb_status(client.get("/api/v1/status"), "tldr")["documents"]
        before = memory_mb(daemon.pid)[0]
        opened = client.post("/api/v1/web", {"kb": "tldr"})
        warm = html_ms(opened["address"], trade_key(opened["url"]))
        figures = browser_figures(client, args.screenshot)
        after = memory_mb(daemon.pid)[0]
    finally:
        stop_daemon(daemon)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(run, ignore_errors=True)
    keys = figures["keystrokes_ms"]
    print(f"machine: {machine()}")
    print(f"tldr-pages: {notes:,} notes indexed in {indexed_s:.0f} s")
    print(f"search page HTML (warm request): median {median(warm):.1f} ms, "
          f"p95 {percentile(warm, 95):.1f} ms")  # fmt: skip
    print(f"Chromium, URL with the key to the page loaded: {figures['load_ms']:.0f} ms; "
          f"to first results painted: {figures['painted_ms']:.0f} ms")  # fmt: skip
    print(f"keystroke to painted results ({len(keys)} keystrokes): "
          f"median {median(keys):.0f} ms, p95 {percentile(keys, 95):.0f} ms")  # fmt: skip
    print(f"daemon RSS: {before:.0f} MB before the page, {after:.0f} MB after "
          f"({after - before:+.0f} MB)")  # fmt: skip
    print(json.dumps({"warm_html_ms": warm, "keystrokes_ms": keys}, separators=(",", ":")))


if __name__ == "__main__":
    main()
