"""The HTML every page of the web page is drawn in: its head (the page's own style sheets
and scripts, nothing inline: the Content-Security-Policy allows none) around a body."""

from __future__ import annotations

import html
from collections.abc import Sequence

from aiohttp import web


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
