"""`service`, `web`, `mcp` and `completion`: cofferctl beside the daemon, the browser, agents
and shells."""

from __future__ import annotations

import argparse
from typing import Any

from cofferctl import api
from cofferctl.client import Client
from cofferctl.command import RESULT_FAILED, UsageError
from cofferctl.output import Output, complain


def cmd_mcp(c: Client, a: argparse.Namespace, out: Output) -> Any:
    from cofferctl.mcp import server  # loaded only for this command

    server.run(c.socket_path)
    return None


def cmd_lsp(c: Client, a: argparse.Namespace, out: Output) -> Any:
    from cofferctl.lsp import server  # loaded only for this command

    return RESULT_FAILED if server.run(c) else None


def cmd_service(c: Client, a: argparse.Namespace, out: Output) -> Any:
    from cofferctl import service_units as service

    def write(text: str) -> None:  # a unit file of --dry-run: its lines, each escaped
        for piece in text.split("\n"):
            out.line(piece)

    try:
        code = service.execute(a.action, a.dry_run, write)
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from None
    return RESULT_FAILED if code else None


def cmd_completion(c: Client, a: argparse.Namespace, out: Output) -> Any:
    """`completion SHELL`: the script that completes every command of cofferctl."""
    from cofferctl.shell_completion import script  # only this command pays for its templates

    out.stream.write(script(a.shell, a.whole_parser()))
    return None


def cmd_web(c: Client, a: argparse.Namespace, out: Output) -> Any:
    """`web [KB]`: the page on (a new one-time key each time), its URL printed and opened;
    `web --stop`: off."""
    if a.stop:
        if a.kb or a.port is not None:
            raise UsageError("--stop takes no knowledge base and no --port")
        stopped = api.close_web(c)
        if not out.as_json:
            out.line("web page stopped" if stopped["stopped"] else "the web page was not on")
        return stopped
    if a.port is not None and not 1 <= a.port <= 65535:
        raise UsageError("--port must be between 1 and 65535")
    body = {k: v for k, v in (("port", a.port), ("kb", a.kb)) if v is not None}
    answer = api.open_web(c, body)
    if not out.as_json:
        out.line(answer["url"])
    if not a.no_open and not _open_browser(answer["url"]):
        complain("no browser could be opened: open the URL above (it works once)")
    return answer


def _open_browser(url: str) -> bool:
    """Open `url` through a page of this user's only (0600) that sends the browser on: the
    key never appears on a command line, which other users of the machine can read."""
    import html
    import os
    import tempfile
    import webbrowser

    fd, path = tempfile.mkstemp(prefix="coffer-web-", suffix=".html")
    with os.fdopen(fd, "w", encoding="utf-8") as page:
        page.write(
            '<!doctype html><meta charset="utf-8">'
            f'<meta http-equiv="refresh" content="0;url={html.escape(url)}">'
            f'<a href="{html.escape(url)}">Coffer</a>'
        )
    return webbrowser.open(f"file://{path}")
