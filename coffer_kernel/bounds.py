"""The API's bounds on what a request may ask for, shared so that the daemon enforces them
and the clients state them in their help (and check them before asking)."""

from __future__ import annotations

LIST_LIMIT_MAX = 500  # a page of a list: documents, conflict copies, links, tags, the trash...
LIST_LIMIT_DEFAULT = 50
PATHS_LIMIT_MAX = 10_000  # a page of paths (short, read by editors to resolve links)
PATHS_LIMIT_DEFAULT = 1000
NAMES_LIMIT_MAX = 200  # note names offered to the editor
AUDIT_LIMIT_MAX = 1000  # audit entries and MCP tool calls
TOP_K_MAX = 100  # passages a search answers
MAX_MATCHES_MAX = 10_000  # lines a grep answers
OFFSET_MAX = 2**31 - 1
