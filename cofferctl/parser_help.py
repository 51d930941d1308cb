"""argparse, friendlier: "did you mean" for a mistyped command or choice, and the marks
shell completion reads (which arguments name a knowledge base or a file)."""

from __future__ import annotations

import argparse
import difflib
from typing import Any

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


def completes(action: argparse.Action, kind: str) -> argparse.Action:
    """Mark what an argument's values are, for the completion scripts."""
    action.complete = kind  # type: ignore[attr-defined]
    return action


def completion_kind(action: argparse.Action) -> str:
    kind: str = getattr(action, "complete", "")
    return kind
