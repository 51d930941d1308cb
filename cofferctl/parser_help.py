"""argparse, friendlier: "did you mean" for a mistyped command or choice, and the marks
shell completion reads (which arguments name a knowledge base or a file)."""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Iterator
from typing import Any, NoReturn

COMPLETE_KB, COMPLETE_FILE, COMPLETE_DIR = "kb", "file", "dir"


class Parser(argparse.ArgumentParser):
    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if action.choices is None or value in action.choices:
            return
        choices = [str(c) for c in action.choices]
        close = difflib.get_close_matches(str(value), choices, n=3, cutoff=0.6)
        what = "command" if isinstance(action, argparse._SubParsersAction) else "choice"
        hint = f"did you mean {' or '.join(close)}?" if close else f"one of {', '.join(choices)}"
        raise argparse.ArgumentError(action, f"unknown {what} {value!r}; {hint}")

    def error(self, message: str) -> NoReturn:
        unrecognized = "unrecognized arguments: "
        if message.startswith(unrecognized):
            options = sorted(set(_options(self)))
            hints = [
                f"{word}: did you mean {close[0]}?"
                for word in message.removeprefix(unrecognized).split()
                if word.startswith("-")
                and (close := difflib.get_close_matches(word.partition("=")[0], options, n=1))
            ]
            message = "; ".join([message, *hints])
        super().error(message)


def _options(parser: argparse.ArgumentParser) -> Iterator[str]:
    """Every option string of a parser and of the commands under it."""
    for action in parser._actions:
        yield from action.option_strings
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _options(sub)


def completes(action: argparse.Action, kind: str) -> argparse.Action:
    """Mark what an argument's values are, for the completion scripts."""
    action.complete = kind  # type: ignore[attr-defined]
    return action


def completion_kind(action: argparse.Action) -> str:
    kind: str = getattr(action, "complete", "")
    return kind
