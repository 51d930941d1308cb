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
which reads every folder's files afresh; a change to an ignore file asks for one.
"""

from __future__ import annotations

import errno
import logging
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pathspec
import re2

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
        try:
            spec = _Spec(lines)
        except re2.error as exc:  # a pattern beyond RE2's memory: not one a person wrote
            log.warning("ignore files in %s skipped: too large to match (%s)", folder or ".", exc)
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


class _Spec:
    """One folder's patterns, for files and for folders (where `name/` means `name`)."""

    def __init__(self, lines: list[str]) -> None:
        self.files = linear_spec(lines)
        folder_lines = [line.rstrip() for line in lines]
        self.folders = linear_spec(
            [
                line[:-1] if line.endswith("/") and line.strip("!/") else line
                for line in folder_lines
            ]
        )
        self.loose_dropped = max(self.files.loose_dropped, self.folders.loose_dropped)


_RE2_QUIET = re2.Options()
_RE2_QUIET.log_errors = False
_RE2_SET = re2.Options()
_RE2_SET.log_errors = False
_RE2_SET.never_capture = True
_RE2_SET.max_mem = 64 * 1024 * 1024
_DIR_MARK = "(?P<ps_d>/)"
_QUANTIFIERS = "*+?{"


class IgnoreMatcher:
    """Patterns of one folder's ignore files, with pathspec's GitIgnoreSpec semantics (the
    last matching pattern wins, a name's own match before its folder's), matched at a cost
    that does not grow with the number of patterns.

    Every pattern that holds a literal run of text (`build`, `.log.md`, the `3f2a` of
    `*3f2a*.tmp`) can only match a path holding that text: one RE2 set of those literals,
    an automaton run once over the path, names the few patterns worth trying. The
    patterns without one (`*`, `?.md`) are tried together in one RE2 set, kept small by
    MAX_LOOSE_RULES. Only the patterns a path may match are then run, each by RE2, in
    time linear in the path.
    """

    __slots__ = (
        "_by_literal",
        "_compiled",
        "_literals",
        "_loose",
        "_loose_ids",
        "_patterns",
        "loose_dropped",
    )

    def __init__(self, lines: list[str]) -> None:
        try:
            spec = pathspec.GitIgnoreSpec.from_lines(lines, backend="simple")
        except (re.error, ValueError):  # a line git matches nothing with (`[?-.]`, a
            # lone `\\` or `!`): left out, the others apply
            spec = pathspec.GitIgnoreSpec.from_lines(
                [line for line in lines if _compiles(line)], backend="simple"
            )
        self._patterns: list[pathspec.RegexPattern] = []
        self._compiled: dict[int, Any] = {}
        literals: dict[str, list[int]] = {}
        loose: list[int] = []
        self._patterns = [
            p
            for p in spec.patterns
            if isinstance(p, pathspec.RegexPattern) and p.include is not None and p.regex
        ]
        for index, pattern in enumerate(self._patterns):
            literal = _literal(_source(pattern))
            if len(literal) >= MIN_LITERAL:
                literals.setdefault(literal, []).append(index)
            else:
                loose.append(index)
        self.loose_dropped = max(0, len(loose) - MAX_LOOSE_RULES)
        if self.loose_dropped:
            loose = loose[:MAX_LOOSE_RULES]
        self._by_literal = list(literals.values())
        self._literals = _set([re2.escape(lit) for lit in literals]) if literals else None
        self._loose_ids = loose
        self._loose = (
            _set([_source(self._patterns[i]).replace(_DIR_MARK, "/") for i in loose])
            if loose
            else None
        )

    def include(self, path: str) -> bool | None:
        """True: the path is ignored; False: taken back by `!`; None: no pattern matches."""
        candidates: set[int] = set()
        if self._literals is not None:
            for found in self._literals.Match(path) or ():
                candidates.update(self._by_literal[found])
        if self._loose is not None:
            candidates.update(self._loose_ids[found] for found in self._loose.Match(path) or ())
        out: bool | None = None
        priority = 0
        for index in sorted(candidates):
            match = self._regex(index).search(path)
            if match is None:
                continue
            # as pathspec's GitIgnoreSpec: a match of the whole name outranks a match of a
            # folder above it; among equals, the last pattern wins
            level = 1 if match.groupdict().get("ps_d") else 2
            if level >= priority:
                out, priority = bool(self._patterns[index].include), level
        return out

    def _regex(self, index: int) -> Any:
        regex = self._compiled.get(index)
        if regex is None:
            regex = self._compiled[index] = re2.compile(_source(self._patterns[index]), _RE2_QUIET)
        return regex


def _source(pattern: pathspec.RegexPattern) -> str:
    regex = pattern.regex
    assert regex is not None
    source = regex.pattern
    return source if isinstance(source, str) else source.decode("utf-8", "surrogateescape")


def _set(regexes: list[str]) -> Any:
    found = re2.Set.SearchSet(_RE2_SET)
    for regex in regexes:
        found.Add(regex)
    found.Compile()
    return found


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
    return IgnoreMatcher(lines)


def _compiles(line: str) -> bool:
    try:
        pathspec.GitIgnoreSpec.from_lines([line], backend="simple")
    except (re.error, ValueError):
        return False
    return True
