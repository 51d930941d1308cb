"""What every command shares: its signature, its failures and the exit codes they give."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from cofferctl.client import Client
from cofferctl.output import Output, visible

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3
EXIT_INTERRUPTED = 130  # as shells report a Ctrl-C
RESULT_FAILED = object()  # a command's result when it printed its own failures

# what it returns: the data --json prints, None, or RESULT_FAILED
Command = Callable[[Client, argparse.Namespace, Output], object]


def load(reference: str) -> Command:
    """The command `module.function` names in `cofferctl.commands`, imported now: a run
    loads the module of its own command only."""
    import importlib

    module, _, function = reference.rpartition(".")
    command: Command = getattr(importlib.import_module(f"cofferctl.commands.{module}"), function)
    return command


class UsageError(Exception):
    """The command line asks for something that cannot be done: exit 2."""


class CommandFailed(Exception):
    """The command ran and failed outside the daemon (an editor, say): exit 1."""


def ask(question: str) -> bool:
    """A yes/no question on the terminal (stderr: stdout may be a pipe); no is the default,
    and so is the end of input."""
    print(f"{visible(question)} [y/N] ", end="", file=sys.stderr, flush=True)
    return sys.stdin.readline().strip().lower() in ("y", "yes")
