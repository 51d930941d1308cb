"""argparse, friendlier: a command's options anywhere among its words, "did you mean" for
a mistyped command, choice or option, how to write free text that starts with `-`, and the
marks shell completion reads (which arguments name a knowledge base or a file)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator, Sequence

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: ~3 ms of each start
if TYPE_CHECKING:
    from typing import Any, NoReturn

COMPLETE_KB, COMPLETE_FILE, COMPLETE_DIR = "kb", "file", "dir"
UNRECOGNIZED = "unrecognized arguments: "


class _Refused(Exception):
    """A command line tried for a hint does not parse."""


class Formatter(argparse.HelpFormatter):
    """argparse's, measuring the terminal as shutil.get_terminal_size() does without
    importing shutil: argparse makes a formatter for every argument it adds, and shutil
    would cost each start of cofferctl ~3 ms."""

    def __init__(self, prog: str, *, width: int | None = None) -> None:
        super().__init__(prog, width=_terminal_columns() - 2 if width is None else width)


def _terminal_columns() -> int:
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns > 0:
        return columns
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):  # no stdout, or not a terminal
        return 80


class Parser(argparse.ArgumentParser):
    _intermixing = False
    _trying = False  # parsing a hint's command line: an error refuses it, printing nothing
    _words: Sequence[str] | None = None  # what a command's parser was given

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", Formatter)
        super().__init__(*args, **kwargs)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """A command's options may come anywhere among its words (`search vault --tag todo
        plan`: parse_intermixed_args), and what it does not know it refuses itself, with its
        own usage. Parsers of commands with subcommands parse as argparse does."""
        if self._intermixing or _subcommands(self):
            return super().parse_known_args(args, namespace)
        self._words = list(args or ())
        self._intermixing = True  # parse_known_intermixed_args calls back in here
        try:
            parsed, unknown = self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False
        if unknown:
            self.error(UNRECOGNIZED + " ".join(unknown))
        return parsed, []

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if action.choices is None or value in action.choices:
            return
        import difflib

        choices = [str(c) for c in action.choices]
        close = difflib.get_close_matches(str(value), choices, n=3, cutoff=0.6)
        what = "command" if isinstance(action, argparse._SubParsersAction) else "choice"
        hint = f"did you mean {' or '.join(close)}?" if close else f"one of {', '.join(choices)}"
        raise argparse.ArgumentError(action, f"unknown {what} {value!r}; {hint}")

    def error(self, message: str) -> NoReturn:
        if self._trying:
            raise _Refused(message)
        super().error("; ".join([message, *self._hints(message)]))

    def _runs(self, words: Sequence[str]) -> bool:
        """Whether a hint's command line parses: a hint is printed only if it runs."""
        saved, self._trying = self._words, True
        try:
            self.parse_known_args(words)
        except (_Refused, argparse.ArgumentError):
            return False
        finally:
            self._words, self._trying = saved, False
        return True

    def _hints(self, message: str) -> list[str]:
        """For each word that looks like an option and is none: the option it may mean, or
        how to give it as text."""
        import difflib

        if self._words is not None:
            before_dashes = self._words[: _index(self._words, "--")]
            words = [w for w in before_dashes if _looks_like_option(w) and not self._knows(w)]
        elif message.startswith(UNRECOGNIZED):
            words = [w for w in message.removeprefix(UNRECOGNIZED).split() if w.startswith("-")]
        else:
            return []
        options = sorted(set(_options(self)))
        hints, text = [], []
        for word in words:
            name, equals, value = word.partition("=")
            close = difflib.get_close_matches(name, options, n=1)
            if close and self._words is not None:
                import shlex

                fixed = [close[0] + equals + value if w == word else w for w in self._words]
                if self._runs(fixed):  # `-filter` is no `--folder` with nothing after it
                    hints.append(
                        f"{word}: did you mean {close[0]}? as in: {self.prog} {shlex.join(fixed)}"
                    )
                if not self._runs(fixed) or not word.startswith("--"):
                    text.append(word)  # `-word` may be text: a search's excluded word
            elif close:
                hints.append(f"{word}: did you mean {close[0]}?")
            else:
                text.append(word)
        if text and self._words is not None and _takes_text(self):
            as_text = _text_after_dashes(self._words, text)
            if self._runs(_split(as_text)):
                hints.append(
                    f"{' '.join(text)}: not an option; text that starts with - goes after --, "
                    f"as in: {self.prog} {as_text}"
                )
        return hints

    def _knows(self, word: str) -> bool:
        """Whether argparse reads `word` as one of this parser's options (or a start of one,
        or a short option with its value attached: `-k3`)."""
        name = word.partition("=")[0]
        known = self._option_string_actions
        if name in known:
            return True
        if name.startswith("--"):
            return any(option.startswith(name) for option in known)
        return name[:2] in known


def _looks_like_option(word: str) -> bool:
    return word.startswith("-") and word != "--" and len(word) > 1


def _index(words: Sequence[str], word: str) -> int:
    """Where `word` is in `words`, or their end."""
    return list(words).index(word) if word in words else len(words)


def _text_after_dashes(words: Sequence[str], text: Sequence[str]) -> str:
    """`words` as a command line again, with `text` moved just after `--`."""
    import shlex

    kept = [w for w in words if w not in text]
    at = _index(kept, "--")
    return shlex.join([*kept[:at], "--", *text, *kept[at + 1 :]])


def _split(line: str) -> list[str]:
    import shlex

    return shlex.split(line)


def _subcommands(parser: argparse.ArgumentParser) -> bool:
    return any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)


def _takes_text(parser: argparse.ArgumentParser) -> bool:
    return any(getattr(action, "free_text", False) for action in parser._actions)


def _options(parser: argparse.ArgumentParser) -> Iterator[str]:
    """Every option string of a parser and of the commands under it."""
    for action in parser._actions:
        yield from action.option_strings
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _options(sub)


class Bounded:
    """An option's whole number within the API's bounds: checked before asking, and stated
    in the option's help (`stated`), so that no range is refused that the help left out."""

    def __init__(self, low: int, high: int | None = None) -> None:
        self.low, self.high = low, high
        self.__name__ = "whole number"  # argparse's "invalid whole number value: 'x'"

    def __call__(self, text: str) -> int:
        value = int(text)
        if value < self.low or (self.high is not None and value > self.high):
            raise argparse.ArgumentTypeError(f"{value} is not {self.stated()}")
        return value

    def stated(self) -> str:
        """As the help says it: `1 to 500`, `0 or more`."""
        if self.high is None:
            return f"{self.low} or more"
        return f"{self.low} to {self.high}"


def completes(action: argparse.Action, kind: str) -> argparse.Action:
    """Mark what an argument's values are, for the completion scripts."""
    action.complete = kind  # type: ignore[attr-defined]
    return action


def free_text(action: argparse.Action) -> argparse.Action:
    """Mark an argument that is text people type (a query, a pattern): a word of it that
    starts with `-` is read as an option, and the error says how to write it instead."""
    action.free_text = True  # type: ignore[attr-defined]
    return action


def completion_kind(action: argparse.Action) -> str:
    kind: str = getattr(action, "complete", "")
    return kind
