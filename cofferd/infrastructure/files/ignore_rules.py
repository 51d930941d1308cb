"""Ignore files, as people already write them: `.gitignore`, `.ignore` and `.cofferignore`.

Each applies to the folder it is in and everything below, with gitignore semantics
(pathspec's GitIgnoreSpec): the last matching pattern wins, `!pattern` takes a path back,
a deeper file overrides a shallower one, and nothing inside an ignored folder can be taken
back (as in git). The three files of one folder are read as one, in that order.

A folder is matched as git matches it: by its name, where a pattern ending in `/` matches
folders only (so `drafts/**` excludes what is in drafts/, not drafts/ itself, and
`!drafts/keep.md` can take a file back; after `drafts/` it cannot).

Ignore files are control files (confinement.read_control_file): a link, a folder or a FIFO
by that name is not applied and is reported; one over 1 MB is applied up to there and
reported; one that cannot be read leaves its folder's documents as they were.

Rules are read lazily, once per folder, and kept until the next full scan of the tree,
which reads every folder's files afresh; a change to an ignore file asks for one. What
they compile to is kept by the digest of their text, so an unchanged file is compiled
once, and compiling is cheap and never holds the daemon's other threads long: each line
is translated by pathspec (never compiled by Python's `re`), and RE2 compiles its sets a
few thousand expressions at a time (it holds the GIL while it does).
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import re2
from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

from cofferd.infrastructure.files.confined_read import inside
from cofferd.infrastructure.files.confinement import ControlFileRefused, read_control_file

log = logging.getLogger(__name__)

IGNORE_FILES = (".gitignore", ".ignore", ".cofferignore")
MAX_IGNORE_BYTES = 1024 * 1024  # a larger ignore file is not one people wrote
# Rules of one folder's ignore files; beyond, the rest are not applied, and that is said.
MAX_IGNORE_RULES = 10_000
# Rules without a literal of MIN_LITERAL characters (`*`, `?.md`, `[ab]*`) are matched as
# one RE2 set, whose cost grows with their number: beyond these, the rest are not applied.
MAX_LOOSE_RULES = 1_000
MIN_LITERAL = 2
# Lines of ignore files kept compiled after their pass (those of two folders at the cap).
CACHED_RULES = 20_000


class IgnoreRules:
    """The ignore files of one docs tree."""

    def __init__(self, root: Callable[[], Path | None]) -> None:
        self._root = root  # the tree's root, checked (None: not known, so no rules)
        self._specs: dict[str, _Spec | None] = {}
        self._unreadable: set[str] = set()  # folders with an ignore file that cannot be read
        self.problems: dict[str, str] = {}  # ignore file -> why it is not (wholly) applied
        # folder -> the ignore files that apply in it, deepest first, with their depth
        self._chains: dict[str, list[tuple[int, _Spec]]] = {}

    def excluded(self, relpath: str, is_dir: bool = False) -> bool:
        """Whether the path, or a folder it is in, is ignored."""
        parts = relpath.split("/")
        for depth in range(1, len(parts)):
            if self.decides(parts[:depth], True):
                return True
        return self.decides(parts, is_dir)

    def decides(self, parts: list[str], is_dir: bool) -> bool:
        """Whether the ignore files above this path (its folders not looked at) exclude it:
        the deepest file with a matching pattern decides."""
        return self.in_folder(parts[:-1]).excludes(parts[-1], is_dir)

    def in_folder(self, folder_parts: list[str]) -> FolderRules:
        """The ignore files that apply to the names in one folder (`[]`: the top)."""
        below = len(folder_parts)
        return FolderRules(
            [
                ("/".join(folder_parts[depth:]) + "/" if depth < below else "", spec)
                for depth, spec in self._chain(folder_parts)
            ]
        )

    def _chain(self, folder_parts: list[str]) -> list[tuple[int, _Spec]]:
        folder = "/".join(folder_parts)
        chain = self._chains.get(folder)
        if chain is None:
            above = self._chain(folder_parts[:-1]) if folder_parts else []
            spec = self.spec(folder)
            chain = self._chains[folder] = [(len(folder_parts), spec), *above] if spec else above
        return chain

    def spec(self, folder: str) -> _Spec | None:
        if folder not in self._specs:
            self._specs[folder] = self._compile(folder)
        return self._specs[folder]

    def _compile(self, folder: str) -> _Spec | None:
        lines, files = self._read(folder)
        if not lines:
            return None
        spec = _COMPILED.spec(lines)
        if spec is None:  # a pattern beyond RE2's memory: not one a person wrote
            log.warning("ignore files in %s skipped: too large to match", folder or ".")
            for where in files:
                self.problems[where] = "its rules are too large to match: they are not applied"
            return None
        if spec.loose_dropped:
            self.problems[files[-1]] = (
                f"the ignore files of its folder hold over {MAX_LOOSE_RULES:,} rules without a "
                f"word of text to look for (such as `*` or `?.md`): {spec.loose_dropped:,} of "
                "them are not applied"
            )
        return spec

    def none_in(self, folder: str) -> None:
        """The folder holds no ignore file (a scan listed it): nothing to read there."""
        self._specs.setdefault(folder, None)

    def unreadable(self, folder: str) -> bool:
        """Whether an ignore file of the folder exists but cannot be read: what is in the
        folder is then not known to be a document or not, and is left as it was."""
        self.spec(folder)
        return folder in self._unreadable

    def _read(self, folder: str) -> tuple[list[str], list[str]]:
        """The rules of the folder's ignore files, in order (at most MAX_IGNORE_RULES), and
        the ignore files they came from."""
        lines: list[str] = []
        files: list[str] = []
        root = self._root()
        if root is None:
            return lines, files
        base = root / folder if folder else root
        if folder and not inside(os.path.realpath(base), str(root)):
            return lines, files  # reached through a link: not a folder of this tree
        rules = 0
        for name in IGNORE_FILES:
            where = f"{folder}/{name}" if folder else name
            try:
                found = read_control_file(base / name, MAX_IGNORE_BYTES)
            except ControlFileRefused as exc:
                self.problems[where] = f"{exc}: its rules are not applied"
                continue
            except OSError as exc:
                if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                    continue
                self.problems[where] = (
                    f"it cannot be read ({exc.strerror}): the documents of its folder are "
                    "left as they were until it can"
                )
                self._unreadable.add(folder)
                continue
            if found is None:
                continue
            files.append(where)
            if found.cut:
                self.problems[where] = (
                    f"it is over {MAX_IGNORE_BYTES // 1024 // 1024} MB: only the rules in its "
                    "first MB are applied"
                )
            for line in found.data.decode("utf-8", errors="replace").splitlines():
                if rules >= MAX_IGNORE_RULES:
                    self.problems[where] = (
                        f"the ignore files of its folder hold over {MAX_IGNORE_RULES:,} rules: "
                        f"only the first {MAX_IGNORE_RULES:,} are applied"
                    )
                    break
                stripped = line.strip()
                rules += bool(stripped) and not stripped.startswith("#")
                lines.append(line)
        return lines, files


class FolderRules:
    """The ignore files above one folder, deepest first, each with the path from its
    folder down to this one."""

    __slots__ = ("_chain",)

    def __init__(self, chain: list[tuple[str, _Spec]]) -> None:
        self._chain = chain

    def __bool__(self) -> bool:
        return bool(self._chain)

    def excludes(self, name: str, is_dir: bool) -> bool:
        """Whether they exclude the file or folder `name` of this folder: the deepest
        file with a matching pattern decides."""
        for below, spec in self._chain:
            matcher = spec.folders if is_dir else spec.files
            decision = matcher.include(below + name)
            if decision is not None:
                return decision
        return False


class _SpecCache:
    """Compiled rules by the digest of their text, for every tree and pass: an unchanged
    ignore file is compiled once. The least recently used are let go past CACHED_RULES
    lines in all."""

    def __init__(self) -> None:
        self._specs: OrderedDict[bytes, tuple[_Spec | None, int]] = OrderedDict()
        self._lines = 0
        self._lock = threading.Lock()

    def spec(self, lines: list[str]) -> _Spec | None:
        """The rules of these lines; None when RE2 cannot hold them."""
        digest = hashlib.sha256("\n".join(lines).encode()).digest()
        with self._lock:  # one compile at a time: a scan and the watcher may ask together
            found = self._specs.get(digest)
            if found is not None:
                self._specs.move_to_end(digest)
                return found[0]
            spec: _Spec | None
            try:
                spec = _Spec(lines)
            except re2.error:
                spec = None
            self._specs[digest] = (spec, len(lines))
            self._lines += len(lines)
            while self._lines > CACHED_RULES and len(self._specs) > 1:
                _, (_, count) = self._specs.popitem(last=False)
                self._lines -= count
            return spec


_COMPILED = _SpecCache()


class _Spec:
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
