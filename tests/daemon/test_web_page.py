"""The web page (issue 46) of a real daemon, over its loopback listener: who gets in (the
one-time key, the cookie, Host, Origin), the headers of every answer, paths that leave the
knowledge base, notes that hold markup, and turning it on and off."""

from __future__ import annotations

import io
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from yarl import URL

from cofferctl import cli
from cofferctl.client import ApiError
from tests.support.daemon import Daemon, cleanup, new_daemon, wait_for
from tests.support.helpers import write
from tests.support.web_session import WEB_ROUTE, open_web, origin, session, signed_in

HOSTILE_NAME = "<img src=x onerror=alert(1)>.md"
HOSTILE_TEXT = (
    "# <script>window.pwned = 1</script> rhubarb\n\n"
    "[click](javascript:window.pwned=2) and <img src=x onerror=window.pwned=3>\n"
    "rhubarb crumble\n"
)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Daemon, Path]]:
    """A daemon with a `web` KB holding a plain note, a hostile one, a link out of the KB,
    and a secret beside the KB."""
    tmp = tmp_path_factory.mktemp("web")
    d = new_daemon(tmp)
    try:
        d.start()
        d.client.post("/api/v1/knowledge_bases", {"name": "web", "config": {}})
        docs = d.docs("web")
        secret = write(tmp / "secret.md", "# secret\n\nthe password is swordfish\n")
        (tmp / "secret.png").write_bytes(b"\x89PNG\r\n\x1a\nswordfish")
        write(docs / "plain.md", "# Plain\n\nrhubarb grows in spring\n")
        write(docs / HOSTILE_NAME, HOSTILE_TEXT)
        (docs / "out.md").symlink_to(secret)
        (docs / "out.png").symlink_to(tmp / "secret.png")
        (docs / "pic.png").write_bytes(b"\x89PNG\r\n\x1a\n")
        wait_for(lambda: _documents(d) >= 2)
        yield d, secret
    finally:
        cleanup(d)


def _documents(d: Daemon) -> int:
    status = d.client.get("/api/v1/status")
    return int(next(k["documents"] for k in status["knowledge_bases"] if k["name"] == "web"))


def _checked(response: aiohttp.ClientResponse) -> None:
    """What every answer of the page carries, and what none does."""
    headers = response.headers
    assert "default-src 'none'" in headers["Content-Security-Policy"], response.url
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Referrer-Policy"] == "no-referrer"
    assert not [h for h in headers if h.lower().startswith("access-control-")], response.url


async def _get(client: aiohttp.ClientSession, url: str, **kw: Any) -> tuple[int, Any]:
    async with client.get(url, allow_redirects=False, **kw) as response:
        _checked(response)
        if response.content_type == "application/json":
            return response.status, await response.json()
        return response.status, await response.text()


async def _post(client: aiohttp.ClientSession, url: str, body: Any, **kw: Any) -> tuple[int, Any]:
    async with client.post(url, json=body, allow_redirects=False, **kw) as response:
        _checked(response)
        return response.status, await response.json()


def _refused(answer: tuple[int, Any], status: int, code: str) -> None:
    got, body = answer
    assert got == status, body
    assert set(body["error"]) == {"code", "message", "details"} and body["error"]["code"] == code


async def test_the_key_opens_the_page_once_and_becomes_a_strict_cookie(site: Any) -> None:
    d, _ = site
    url = open_web(d, kb="web")["url"]
    assert URL(url).host == "127.0.0.1" and "key=" in url
    client = session()
    async with client:
        async with client.get(url, allow_redirects=False) as response:
            _checked(response)
            assert response.status == 303
            assert response.headers["Location"] == "/?kb=web"  # the key left the URL
            cookie = response.headers["Set-Cookie"].lower()
            for part in ("httponly", "samesite=strict", "path=/"):
                assert part in cookie, cookie
        status, page = await _get(client, origin(url) + "/?kb=web")
        assert status == 200 and '<option value="web" selected>' in page
    async with session() as other:  # the key is spent: another browser gets nothing
        _refused(await _get(other, url), 403, "FORBIDDEN")
        _refused(await _get(other, origin(url) + "/?key=not-a-key"), 403, "FORBIDDEN")


async def test_no_cookie_no_page_no_search(site: Any) -> None:
    d, _ = site
    base = origin(open_web(d)["url"])
    async with session() as client:
        _refused(await _get(client, base + "/"), 403, "FORBIDDEN")
        _refused(await _get(client, base + "/static/search.js"), 403, "FORBIDDEN")
        _refused(await _get(client, base + "/note/web/plain.md"), 403, "FORBIDDEN")
        search = base + "/api/v1/knowledge_bases/web/search"
        answer = await _post(client, search, {"query": "rhubarb"}, headers={"Origin": base})
        _refused(answer, 403, "FORBIDDEN")
        forged = {"Cookie": f"coffer_{URL(base).port}=forged"}
        _refused(await _get(client, base + "/", headers=forged), 403, "FORBIDDEN")


async def test_a_foreign_host_or_origin_is_refused(site: Any) -> None:
    d, _ = site
    url = open_web(d)["url"]
    base = origin(url)
    search = base + "/api/v1/knowledge_bases/web/search"
    async with await signed_in(url) as client:
        port = URL(base).port
        rebinding = ("evil.example", "127.0.0.1.evil.example", "localhost.evil.example", "[::2]")
        hosts = ["127.0.0.1", "[::1]", "localhost", *(f"{h}:{port}" for h in rebinding)]
        for host in [*rebinding, *hosts, f"127.0.0.1:{port + 1}", f"[::1]:{port}.evil.example"]:
            _refused(await _get(client, base + "/", headers={"Host": host}), 421, "HOST_REFUSED")
        for host in (f"127.0.0.1:{port}", f"[::1]:{port}", f"localhost:{port}"):
            status, _ = await _get(client, base + "/", headers={"Host": host})
            assert status == 200, host
        for foreign in ("http://evil.example", "null", f"https://127.0.0.1:{URL(base).port}"):
            answer = await _post(client, search, {"query": "rhubarb"}, headers={"Origin": foreign})
            _refused(answer, 403, "ORIGIN_REFUSED")
        _refused(await _post(client, search, {"query": "rhubarb"}), 403, "ORIGIN_REFUSED")
        status, found = await _post(client, search, {"query": "rhubarb"}, headers={"Origin": base})
        assert status == 200 and found["passages"], found
        async with client.options(
            search,
            headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"},
        ) as preflight:
            _checked(preflight)
            assert preflight.status >= 400


async def test_the_page_calls_only_the_apis_reads(site: Any) -> None:
    d, _ = site
    url = open_web(d)["url"]
    base = origin(url)
    same = {"Origin": base}
    async with await signed_in(url) as client:
        status, kbs = await _get(client, base + "/api/v1/knowledge_bases")
        assert status == 200 and "web" in [k["name"] for k in kbs["knowledge_bases"]]
        status, found = await _post(
            client, base + "/api/v1/search", {"query": "rhubarb"}, headers=same
        )
        assert status == 200 and {p["relative_path"] for p in found["passages"]} >= {"plain.md"}
        grep = base + "/api/v1/knowledge_bases/web/grep"
        status, hits = await _post(client, grep, {"pattern": "crumble"}, headers=same)
        assert status == 200 and [h["relative_path"] for h in hits["hits"]] == [HOSTILE_NAME]
        for method, path in (("DELETE", "/api/v1/knowledge_bases/web"), ("POST", WEB_ROUTE)):
            async with client.request(method, base + path, headers=same) as response:
                _checked(response)
                assert response.status in (404, 405)
        assert d.client.get("/api/v1/knowledge_bases/web")["name"] == "web"


@pytest.mark.parametrize(
    "path",
    [
        "/note/web/../../secret.md",
        "/note/web/%2e%2e/%2e%2e/secret.md",
        "/note/web/%2E%2E%2F%2E%2E%2Fsecret.md",
        "/note/web/..%2fsecret.md",
        "/note/web//etc/passwd",
        "/note/web/%2Fetc%2Fpasswd",
        "/note/web/out.md",  # a link in the KB to the secret beside it
        "/note/nope/plain.md",
        "/note/web/plain.md%00",
        "/note/web/%00/../../secret.md",
        "/note/web/%2Ftmp%2F..%2Fetc%2Fpasswd",
        "/note/..%2F..%2Fetc/passwd",
        "/file/web/../../secret.png",
        "/file/web/%2e%2e%2f%2e%2e%2fsecret.png",
        "/file/web/..%2F..%2Fsecret.png",
        "/file/web//etc/passwd",
        "/file/web/%2Fetc%2Fpasswd",
        "/file/web/pic.png%00.md",
        "/file/web/out.png",  # a link in the KB to a file beside it
        "/file/..%2F..%2F/etc/passwd",
        "/static/../web_page.py",
        "/static/%2e%2e%2fweb_page.py",
        "/static/vendor/..%2F..%2Fweb_access.py",
        "/static/%2Fetc%2Fpasswd",
        "/api/v1/knowledge_bases/web/graph?note=..%2F..%2Fsecret.md",
        "/api/v1/knowledge_bases/web/graph?note=%2Fetc%2Fpasswd",
        "/api/v1/knowledge_bases/web/graph?note=out.md",
        "/api/v1/knowledge_bases/web/graph?note=plain.md%00",
        "/api/v1/knowledge_bases/..%2F..%2Fetc/graph",
    ],
)
async def test_a_path_out_of_the_knowledge_base_is_refused(site: Any, path: str) -> None:
    d, _ = site
    url = open_web(d)["url"]
    async with await signed_in(url) as client:
        target = URL(origin(url) + path, encoded=True)
        async with client.get(target, allow_redirects=False) as response:
            _checked(response)
            text = await response.text()
            assert response.status in (400, 403, 404), (response.status, text)
            assert "swordfish" not in text and "root:" not in text and "import" not in text
            assert response.content_type == "application/json", (response.status, text)
            error = (await response.json())["error"]
            assert set(error) == {"code", "message", "details"}, error


async def test_a_note_with_markup_in_its_name_and_text_shows_as_text(site: Any) -> None:
    d, _ = site
    url = open_web(d)["url"]
    async with await signed_in(url) as client:
        path = "/note/web/" + HOSTILE_NAME.replace("<", "%3C").replace(">", "%3E")
        status, page = await _get(client, URL(origin(url) + path.replace(" ", "%20"), encoded=True))
        assert status == 200, page
        assert "<script>window" not in page and "<img src=x" not in page
        assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in page
        assert "&lt;img src=x onerror=alert(1)&gt;.md" in page
        assert 'href="javascript' not in page
        status, plain = await _get(client, origin(url) + "/note/web/plain.md")
        assert status == 200 and "rhubarb grows in spring" in plain


def test_cofferctl_web_prints_the_url_status_says_where_and_stop_ends_it(site: Any) -> None:
    d, _ = site
    out = io.StringIO()
    argv = ["--socket", str(d.socket), "web", "web", "--no-open"]
    assert cli.main(argv, stdout=out) == 0
    url = out.getvalue().strip()
    assert url.startswith("http://127.0.0.1:") and "key=" in url and url.endswith("&kb=web")
    web = d.client.get("/api/v1/status")["web"]
    assert web["on"] and web["address"] == origin(url) + "/" == web["addresses"][0]
    out = io.StringIO()
    assert cli.main(["--socket", str(d.socket), "status"], stdout=out) == 0
    assert f"web page   {origin(url)}/" in out.getvalue()
    assert cli.main(["--socket", str(d.socket), "web", "--stop"], stdout=io.StringIO()) == 0
    web = d.client.get("/api/v1/status")["web"]
    assert web == {"on": False, "address": None, "addresses": [], "without_ipv6": None}
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", URL(url).port), timeout=2).close()
    assert d.client.request("DELETE", WEB_ROUTE) == {"stopped": False}


def _ipv6_loopback() -> str | None:
    """Why this machine cannot listen on ::1, or None when it can."""
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError as exc:
        return f"no IPv6 loopback on this machine: {exc}"
    return None


async def test_the_page_answers_on_ipv6_loopback_as_on_127_0_0_1(site: Any) -> None:
    """The same port on ::1, the same guard: a key traded there, `[::1]:PORT` as Host,
    any other name refused."""
    missing = _ipv6_loopback()
    if missing:
        pytest.skip(missing)
    d, _ = site
    url = open_web(d, kb="web")["url"]
    port = URL(url).port
    web = d.client.get("/api/v1/status")["web"]
    v6 = f"http://[::1]:{port}"
    assert web["addresses"] == [f"http://127.0.0.1:{port}/", v6 + "/"], web
    assert web["without_ipv6"] is None
    async with session() as client:
        key = URL(url).query["key"]
        async with client.get(f"{v6}/?key={key}&kb=web", allow_redirects=False) as response:
            _checked(response)
            assert (
                response.status == 303
                and "samesite=strict" in response.headers["Set-Cookie"].lower()
            )
        status, page = await _get(client, v6 + "/?kb=web")
        assert status == 200 and '<option value="web" selected>' in page
        status, note = await _get(client, v6 + "/note/web/plain.md")
        assert status == 200 and "rhubarb grows in spring" in note
        search = v6 + "/api/v1/knowledge_bases/web/search"
        status, found = await _post(client, search, {"query": "rhubarb"}, headers={"Origin": v6})
        assert status == 200 and found["passages"]
        for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1.evil.example:{port}",
                     "[::1]", f"[::1]:{port + 1}"):  # fmt: skip
            _refused(await _get(client, v6 + "/", headers={"Host": host}), 421, "HOST_REFUSED")
        answer = await _post(
            client, search, {"query": "x"}, headers={"Origin": "http://evil.example"}
        )
        _refused(answer, 403, "ORIGIN_REFUSED")
    async with session() as stranger:  # no key, no cookie: nothing on ::1 either
        _refused(await _get(stranger, v6 + "/"), 403, "FORBIDDEN")


async def test_a_port_taken_on_ipv6_loopback_leaves_the_page_on_127_0_0_1_and_says_so(
    site: Any,
) -> None:
    missing = _ipv6_loopback()
    if missing:
        pytest.skip(missing)
    d, _ = site
    port = _free_port()
    with socket.socket(socket.AF_INET6) as taken:
        taken.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        taken.bind(("::1", port))
        taken.listen()
        answer = d.client.post(WEB_ROUTE, {"port": port})
        assert answer["started"] and answer["addresses"] == [f"http://127.0.0.1:{port}/"]
        assert f"port {port} of ::1 cannot be used" in answer["without_ipv6"]
        assert d.client.get("/api/v1/status")["web"]["without_ipv6"] == answer["without_ipv6"]
        async with await signed_in(answer["url"]) as client:
            status, page = await _get(client, origin(answer["url"]) + "/")
            assert status == 200 and "<form" in page
    moved = d.client.post(WEB_ROUTE, {"port": _free_port()})  # free on both now
    assert moved["started"] and len(moved["addresses"]) == 2 and moved["without_ipv6"] is None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_cofferd_web_port_keeps_it_on_from_the_start(tmp_path: Path) -> None:
    d = new_daemon(tmp_path)
    port = _free_port()
    try:
        d.start("--web-port", str(port))
        web = d.client.get("/api/v1/status")["web"]
        assert (web["on"], web["address"]) == (True, f"http://127.0.0.1:{port}/")
        answer = open_web(d)
        assert not answer["started"] and answer["url"].startswith(f"http://127.0.0.1:{port}/?key=")
        with socket.socket() as taken, pytest.raises(ApiError) as error:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            d.client.post(WEB_ROUTE, {"port": taken.getsockname()[1]})  # a port in use
        assert error.value.code == "PORT_UNAVAILABLE"
        assert d.client.get("/api/v1/status")["web"]["on"]  # still on where it was
    finally:
        cleanup(d)
