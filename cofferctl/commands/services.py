"""`service`, `mcp` and `completion`: cofferctl beside the daemon, agents and shells."""

from __future__ import annotations

import argparse
from typing import Any

from cofferctl.client import Client
from cofferctl.command import RESULT_FAILED, UsageError
from cofferctl.output import Output


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
