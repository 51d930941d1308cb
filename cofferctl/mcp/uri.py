"""Document URIs for MCP resources: coffer://KB/PATH (PATH percent-encoded, `/` kept)."""

from __future__ import annotations

import urllib.parse

SCHEME = "coffer"
TEMPLATE = "coffer://{kb}/{+path}"


def document_uri(kb: str, relative_path: str) -> str:
    return f"{SCHEME}://{kb}/{urllib.parse.quote(relative_path, safe='/')}"


def parse(uri: str) -> tuple[str, str] | None:
    """(kb, relative path) of a document URI, or None when it is not one."""
    try:
        parts = urllib.parse.urlsplit(uri)
    except ValueError:  # e.g. an unclosed `[` of an IPv6 host
        return None
    path = urllib.parse.unquote(parts.path.lstrip("/"))
    if parts.scheme != SCHEME or not parts.netloc or not path or parts.query or parts.fragment:
        return None
    return parts.netloc, path
