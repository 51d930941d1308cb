"""What every command shares: its signature, its failures and the exit codes they give."""

from __future__ import annotations

import argparse
import sys
import urllib.parse
from collections.abc import Callable
from typing import Any

from cofferctl.client import Client
from cofferctl.output import Output, visible

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3
RESULT_FAILED = object()  # a command's result when it printed its own failures

Command = Callable[[Client, argparse.Namespace, Output], Any]


class UsageError(Exception):
    """The command line asks for something that cannot be done: exit 2."""


class CommandFailed(Exception):
    """The command ran and failed outside the daemon (an editor, say): exit 1."""


def quote(value: str) -> str:
    return urllib.parse.quote(value, safe="")


def ask(question: str) -> bool:
    """A yes/no question on the terminal (stderr: stdout may be a pipe); no is the default,
    and so is the end of input."""
    print(f"{visible(question)} [y/N] ", end="", file=sys.stderr, flush=True)
    return sys.stdin.readline().strip().lower() in ("y", "yes")
