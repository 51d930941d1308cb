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
they compile to (ignore_patterns) is kept by the digest of their text.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable
from pathlib import Path

from cofferd.infrastructure.files.confined_read import inside
from cofferd.infrastructure.files.confinement import ControlFileRefused, read_control_file
from cofferd.infrastructure.files.ignore_patterns import COMPILED, MAX_LOOSE_RULES, Spec

log = logging.getLogger(__name__)

IGNORE_FILES = (".gitignore", ".ignore", ".cofferignore")
MAX_IGNORE_BYTES = 1024 * 1024  # a larger ignore file is not one people wrote
# Rules of one folder's ignore files; beyond, the rest are not applied, and that is said.
MAX_IGNORE_RULES = 10_000


class IgnoreRules:
    """The ignore files of one docs tree."""

    def __init__(self, root: Callable[[], Path | None]) -> None:
        self._root = root  # the tree's root, checked (None: not known, so no rules)
        self._specs: dict[str, Spec | None] = {}
        self._unreadable: set[str] = set()  # folders with an ignore file that cannot be read
        self.problems: dict[str, str] = {}  # ignore file -> why it is not (wholly) applied
        # folder -> the ignore files that apply in it, deepest first, with their depth
        self._chains: dict[str, list[tuple[int, Spec]]] = {}

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

    def _chain(self, folder_parts: list[str]) -> list[tuple[int, Spec]]:
        folder = "/".join(folder_parts)
        chain = self._chains.get(folder)
        if chain is None:
            above = self._chain(folder_parts[:-1]) if folder_parts else []
            spec = self.spec(folder)
            chain = self._chains[folder] = [(len(folder_parts), spec), *above] if spec else above
        return chain

    def spec(self, folder: str) -> Spec | None:
        if folder not in self._specs:
            self._specs[folder] = self._compile(folder)
        return self._specs[folder]

    def _compile(self, folder: str) -> Spec | None:
        lines, files = self._read(folder)
        if not lines:
            return None
        spec = COMPILED.spec(lines)
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

    def __init__(self, chain: list[tuple[str, Spec]]) -> None:
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
