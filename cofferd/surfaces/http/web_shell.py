"""The HTML every page of the web page is drawn in: its head (the page's own style sheets
and scripts, nothing inline: the Content-Security-Policy allows none) around a body."""

from __future__ import annotations

import html
import urllib.parse
from collections.abc import Sequence

from aiohttp import web

PAGES = (("search", "/"), ("graph", "/graph"), ("status", "/status"))


def header(kb: str = "", *, title: bool = True) -> str:
    """The bar atop every page: the name (the page's <h1> when `title`, else the page has
    its own) and a link to each page, on knowledge base `kb` when one is chosen."""
    on = f"?kb={urllib.parse.quote(kb, safe='')}" if kb else ""
    links = " ".join(f'<a href="{html.escape(path + on)}">{name}</a>' for name, path in PAGES)
    brand = "<h1>Coffer</h1>" if title else '<p class="brand">Coffer</p>'
    return f"<header>{brand}<nav>{links}</nav></header>"


def options(values: list[tuple[str, str]], chosen: str) -> str:
    """`<option>`s of (value, label), the `chosen` value selected, every text escaped."""
    return "".join(
        f'<option value="{html.escape(value)}"{" selected" if value == chosen else ""}>'
        f"{html.escape(label)}</option>"
        for value, label in values
    )


def page(
    title: str,
    body: str,
    *,
    scripts: Sequence[str] = (),
    styles: Sequence[str] = (),
    body_class: str = "",
) -> web.Response:
    """`body` (HTML made by the caller, every value escaped) under `title`, with these of
    the page's files (web_static/ names) loaded."""
    sheets = "".join(
        f'<link rel="stylesheet" href="/static/{name}">' for name in ("page.css", *styles)
    )
    loaded = "".join(f'<script src="/static/{name}" defer></script>' for name in scripts)
    opening = f'<body class="{html.escape(body_class)}">' if body_class else "<body>"
    text = (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)} · Coffer</title>{sheets}"
        f'<link rel="icon" href="/static/icon.svg">{loaded}</head>'
        f"{opening}{body}</body></html>"
    )
    return web.Response(text=text, content_type="text/html")
