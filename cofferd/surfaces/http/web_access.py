"""Who may use the web page: the browser that brought a one-time key, and nobody else.

`cofferctl web` asks the daemon for a key (`Access.new_key`) and opens the URL that carries
it; the first request with it trades it for a session cookie (HttpOnly, SameSite=Strict)
and is sent on without it, and the key is spent. The guard refuses, in the envelope, a Host
other than this listener's loopback address (DNS rebinding), a request without a session
(another local user, another browser profile, a page that fetches localhost), and anything
but a read without a same-origin Origin. Every answer carries a strict Content-Security-
Policy and never a CORS header.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web

from cofferd.surfaces.http.error_envelope import Handler, error_response

KEY_PARAM = "key"
KEY_LIFETIME_S = 600.0  # a URL not opened in this time must be asked for again
MAX_KEYS = 32  # keys not yet used; the oldest goes first
MAX_SESSIONS = 64
SAFE_METHODS = frozenset({"GET", "HEAD"})
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
# a note shown with its remote images, as its reader asked (web_note): they may load
REMOTE_IMAGES = web.ResponseKey("remote_images", bool)
REMOTE_IMAGES_POLICY = CONTENT_SECURITY_POLICY.replace(
    "img-src 'self'", "img-src 'self' https: http:"
)
# a file of a KB (an SVG, an attachment) opened on its own: a document of no origin that runs
# nothing and loads nothing (its own inline styles only), whatever it holds
KB_FILE = web.ResponseKey("kb_file", bool)
KB_FILE_POLICY = "sandbox; default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'"
HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


@dataclass
class Access:
    """The keys not yet used and the sessions they became, for one listener's port."""

    port: int = 0
    keys: dict[str, float] = field(default_factory=dict)  # key: when it stops working
    sessions: set[str] = field(default_factory=set)

    @property
    def cookie(self) -> str:
        """The session cookie's name: a browser sends cookies of 127.0.0.1 to every port."""
        return f"coffer_{self.port}"

    def hosts(self) -> frozenset[str]:
        """The Host a request must name: a loopback address of the listener, with its port
        (any other name, one that resolves to 127.0.0.1 included, is DNS rebinding)."""
        return frozenset(f"{name}:{self.port}" for name in ("127.0.0.1", "[::1]", "localhost"))

    def new_key(self) -> str:
        now = time.monotonic()
        self.keys = {k: until for k, until in self.keys.items() if until > now}
        while len(self.keys) >= MAX_KEYS:
            del self.keys[next(iter(self.keys))]
        key = secrets.token_urlsafe(32)
        self.keys[key] = now + KEY_LIFETIME_S
        return key

    def spend(self, given: str) -> str | None:
        """A new session for a key not yet used nor expired (the key is spent), else None."""
        found = next((k for k in self.keys if secrets.compare_digest(k, given)), None)
        if found is None:
            return None
        if self.keys.pop(found) < time.monotonic():
            return None
        while len(self.sessions) >= MAX_SESSIONS:
            self.sessions.pop()
        session = secrets.token_urlsafe(32)
        self.sessions.add(session)
        return session

    def has_session(self, given: str | None) -> bool:
        if not given:
            return False
        return any(secrets.compare_digest(s, given) for s in self.sessions)


def refused(status: int, code: str, message: str) -> web.Response:
    response = error_response(status, code, message)
    response.headers.update(HEADERS)
    response.headers["Cache-Control"] = "no-store"
    return response


def guard_middleware(
    access: Access,
) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.headers.get("Host", "") not in access.hosts():
            return refused(421, "HOST_REFUSED", "the web page answers on its loopback address only")
        if request.method not in SAFE_METHODS:
            origin = request.headers.get("Origin", "")
            if origin.removeprefix("http://") not in access.hosts():
                return refused(403, "ORIGIN_REFUSED", "a change must come from the page itself")
        if KEY_PARAM in request.query:
            return _trade_key(request, access)
        if not access.has_session(request.cookies.get(access.cookie)):
            return refused(
                403, "FORBIDDEN", "open the web page with the URL `cofferctl web` prints"
            )
        return await handler(request)

    return guard


def _trade_key(request: web.Request, access: Access) -> web.Response:
    if request.method not in SAFE_METHODS:
        return refused(403, "FORBIDDEN", "a key opens the page, nothing else")
    session = access.spend(request.query[KEY_PARAM])
    if session is None:
        return refused(
            403, "FORBIDDEN", "this key was used already or is not known: run `cofferctl web`"
        )
    kept = [(name, value) for name, value in request.query.items() if name != KEY_PARAM]
    rest = request.rel_url.with_query(kept)
    response = web.Response(status=303, headers={"Location": str(rest)})
    response.set_cookie(
        access.cookie, session, httponly=True, samesite="Strict", path="/", secure=False
    )
    _with_headers(response, html=True)
    return response


def _with_headers(response: web.StreamResponse, *, html: bool) -> None:
    response.headers.update(HEADERS)
    if response.get(REMOTE_IMAGES):
        response.headers["Content-Security-Policy"] = REMOTE_IMAGES_POLICY
    if response.get(KB_FILE):
        response.headers["Content-Security-Policy"] = KB_FILE_POLICY
    if html or response.content_type in ("text/html", "application/json"):
        response.headers["Cache-Control"] = "no-store"


async def add_headers(request: web.Request, response: web.StreamResponse) -> None:
    """on_response_prepare: every answer of the page, refusals and files included."""
    _with_headers(response, html=False)
    for name in [h for h in response.headers if h.lower().startswith("access-control-")]:
        del response.headers[name]
