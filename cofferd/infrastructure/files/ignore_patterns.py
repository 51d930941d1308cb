"""gitignore patterns compiled for matching in time linear in the path and about constant
in their number (ignore_rules reads the files; this matches what they say).

Each line is translated to a regular expression by pathspec's GitIgnoreSpec (never
compiled by Python's `re`, which took 90% of the time); the expressions are matched by
RE2 sets, compiled a few thousand at a time (RE2 holds the GIL while it compiles); what a
folder's lines compile to is kept by their digest, so an unchanged file is compiled once.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any, NamedTuple

import re2
from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

# Rules without a literal of MIN_LITERAL characters (`*`, `?.md`, `[ab]*`) are matched as
# one RE2 set, whose cost grows with their number: beyond these, the rest are not applied.
MAX_LOOSE_RULES = 1_000
MIN_LITERAL = 2
# Lines of ignore files kept compiled after their pass (those of two folders at the cap).
CACHED_RULES = 20_000


class _SpecCache:
    """Compiled rules by the digest of their text, for every tree and pass: an unchanged
    ignore file is compiled once. The least recently used are let go past CACHED_RULES
    lines in all."""

    def __init__(self) -> None:
        self._specs: OrderedDict[bytes, tuple[Spec | None, int]] = OrderedDict()
        self._lines = 0
        self._lock = threading.Lock()

    def spec(self, lines: list[str]) -> Spec | None:
        """The rules of these lines; None when RE2 cannot hold them."""
        digest = hashlib.sha256("\n".join(lines).encode()).digest()
        with self._lock:  # one compile at a time: a scan and the watcher may ask together
            found = self._specs.get(digest)
            if found is not None:
                self._specs.move_to_end(digest)
                return found[0]
            spec: Spec | None
            try:
                spec = Spec(lines)
            except re2.error:
                spec = None
            self._specs[digest] = (spec, len(lines))
            self._lines += len(lines)
            while self._lines > CACHED_RULES and len(self._specs) > 1:
                _, (_, count) = self._specs.popitem(last=False)
                self._lines -= count
            return spec


COMPILED = _SpecCache()


class Spec:
    """One folder's patterns, for files and for folders (where `name/` means `name`)."""

    def __init__(self, lines: list[str]) -> None:
        translated: dict[str, _Rule | None] = {}  # a line is translated once for both

        def rules(of: list[str]) -> list[_Rule]:
            for line in of:
                if line not in translated:
                    translated[line] = _rule(line)
            return [rule for rule in map(translated.__getitem__, of) if rule is not None]

        files = rules(lines)
        folders = rules(
            [
                line[:-1] if line.endswith("/") and line.strip("!/") else line
                for line in map(str.rstrip, lines)
            ]
        )
        self.files = IgnoreMatcher(files)
        self.folders = self.files if folders == files else IgnoreMatcher(folders)
        self.loose_dropped = max(self.files.loose_dropped, self.folders.loose_dropped)


class _Rule(NamedTuple):
    """One pattern, as pathspec's GitIgnoreSpec reads it."""

    regex: str
    ignores: bool  # False: `!pattern`, taking back what it matches
    literal: str  # the longest text every path it matches holds ("": none)


def _rule(line: str) -> _Rule | None:
    """The rule of one line of an ignore file, translated as pathspec's GitIgnoreSpec does
    (without compiling it with Python's `re`, which took 90% of the time); None for a
    blank line, a comment, or a line git matches nothing with (a lone `\\` or `!`)."""
    try:
        regex, include = GitIgnoreSpecPattern.pattern_to_regex(line)
    except ValueError:
        return None
    if regex is None or include is None:
        return None
    return _Rule(regex, include, _literal(regex))


_RE2_QUIET = re2.Options()
_RE2_QUIET.log_errors = False
_RE2_SET = re2.Options()
_RE2_SET.log_errors = False
_RE2_SET.never_capture = True
_RE2_SET.max_mem = 64 * 1024 * 1024
# RE2 compiles a set holding the GIL: sets of this many expressions take a few ms each,
# so the daemon's other threads are never held up long by one.
SET_CHUNK = 2_000
_DIR_MARK = "(?P<ps_d>/)"
_QUANTIFIERS = "*+?{"
_NEVER = object()  # a pattern RE2 cannot compile (`[?-.]`): it matches nothing, as in git


class IgnoreMatcher:
    """Rules of one folder's ignore files, with pathspec's GitIgnoreSpec semantics (the
    last matching pattern wins, a name's own match before its folder's), matched at a cost
    that does not grow with the number of patterns.

    Every pattern that holds a literal run of text (`build`, `.log.md`, the `3f2a` of
    `*3f2a*.tmp`) can only match a path holding that text: RE2 sets of those literals,
    automata run once over the path, name the few patterns worth trying. The patterns
    without one (`*`, `?.md`) are tried together in RE2 sets, kept small by
    MAX_LOOSE_RULES. Only the patterns a path may match are then run, each by RE2, in
    time linear in the path.
    """

    __slots__ = (
        "_by_literal",
        "_compiled",
        "_literals",
        "_loose",
        "_loose_ids",
        "_rules",
        "loose_dropped",
    )

    def __init__(self, rules: list[_Rule]) -> None:
        self._rules = rules
        self._compiled: dict[int, Any] = {}
        literals: dict[str, list[int]] = {}
        loose: list[int] = []
        for index, rule in enumerate(rules):
            if len(rule.literal) >= MIN_LITERAL:
                literals.setdefault(rule.literal, []).append(index)
            else:
                loose.append(index)
        self.loose_dropped = max(0, len(loose) - MAX_LOOSE_RULES)
        if self.loose_dropped:
            loose = loose[:MAX_LOOSE_RULES]
        self._literals = _Sets([re2.escape(literal) for literal in literals])
        self._by_literal = list(literals.values())
        self._loose_ids = loose
        self._loose = _Sets([rules[i].regex.replace(_DIR_MARK, "/") for i in loose])

    def include(self, path: str) -> bool | None:
        """True: the path is ignored; False: taken back by `!`; None: no pattern matches."""
        candidates = {self._loose_ids[found] for found in self._loose.found_in(path)}
        for found in self._literals.found_in(path):
            candidates.update(self._by_literal[found])
        out: bool | None = None
        priority = 0
        for index in sorted(candidates):
            regex = self._regex(index)
            match = None if regex is _NEVER else regex.search(path)
            if match is None:
                continue
            # as pathspec's GitIgnoreSpec: a match of the whole name outranks a match of a
            # folder above it; among equals, the last pattern wins
            level = 1 if match.groupdict().get("ps_d") else 2
            if level >= priority:
                out, priority = self._rules[index].ignores, level
        return out

    def _regex(self, index: int) -> Any:
        regex = self._compiled.get(index)
        if regex is None:
            try:
                regex = re2.compile(self._rules[index].regex, _RE2_QUIET)
            except re2.error:
                regex = _NEVER
            self._compiled[index] = regex
        return regex


class _Sets:
    """Regular expressions in RE2 sets of at most SET_CHUNK each: `found_in(text)` gives
    the positions of those found in the text. One RE2 cannot compile matches nothing."""

    __slots__ = ("_sets",)

    def __init__(self, regexes: list[str]) -> None:
        self._sets: list[tuple[list[int], Any]] = []
        for start in range(0, len(regexes), SET_CHUNK):
            found = re2.Set.SearchSet(_RE2_SET)
            positions: list[int] = []  # of the set's expressions, numbered from 0 as added
            for position, regex in enumerate(regexes[start : start + SET_CHUNK], start):
                try:
                    found.Add(regex)
                except re2.error:
                    continue
                positions.append(position)
            if positions:
                found.Compile()
                self._sets.append((positions, found))

    def found_in(self, text: str) -> list[int]:
        return [
            positions[index]
            for positions, found in self._sets
            for index in found.Match(text) or ()  # None when none is found
        ]


def _literal(regex: str) -> str:
    """The longest run of text that every string the regular expression (as pathspec
    writes them: escaped text, classes, groups, quantifiers) matches must hold; "" when
    there is none (or the expression has a top-level alternative)."""
    runs: list[str] = []
    run: list[str] = []
    depth = 0
    i, n = 0, len(regex)

    def cut() -> None:
        if run:
            runs.append("".join(run))
            run.clear()

    while i < n:
        ch = regex[i]
        if ch == "\\" and i + 1 < n:
            nxt = regex[i + 1]
            i += 2
            if depth == 0 and not nxt.isalnum():
                run.append(nxt)
                continue
            cut()
            continue
        if ch == "[":
            cut()
            i += 1
            if i < n and regex[i] == "^":
                i += 1
            if i < n and regex[i] == "]":
                i += 1
            while i < n and regex[i] != "]":
                i += 2 if regex[i] == "\\" else 1
            i += 1
            continue
        if ch == "(":
            cut()
            depth += 1
            i += 1
            if i < n and regex[i] == "?":
                close = regex.find(">", i) if regex.startswith("?P<", i) else i + 1
                i = close + 1
            continue
        if ch == ")":
            cut()
            depth -= 1
            i += 1
            continue
        if ch in _QUANTIFIERS:
            if run:
                run.pop()  # the quantified character is not required
            cut()
            if ch == "{":
                i = regex.find("}", i) + 1 or n
            else:
                i += 1
            if i < n and regex[i] == "?":
                i += 1
            continue
        if ch == "|" and depth == 0:
            return ""
        if depth == 0 and ch not in ".^$|":
            run.append(ch)
        else:
            cut()
        i += 1
    cut()
    return max(runs, key=len, default="")


def linear_spec(lines: list[str]) -> IgnoreMatcher:
    """The patterns, matched by RE2 in time linear in the path (Python's `re` takes seconds
    for `*a*a*a*a*a*a*b` against an 81-character name) and about constant in their number."""
    return IgnoreMatcher([rule for rule in map(_rule, lines) if rule is not None])
