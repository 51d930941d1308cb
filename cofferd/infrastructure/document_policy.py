"""What is a document, decided once: the scanner, the watcher, grep and cofferctl all ask this.

A document is a regular file (never a symlink: a linked file is indexed where it really is,
so it is never found twice) whose name ends in `.md` or `.markdown` in any case, with no
part of its path that is noise (hidden names, the droppings of editors and sync tools,
`node_modules`) and that no ignore file of its tree excludes (`.gitignore`, `.ignore`,
`.cofferignore`: ignore_rules). The same rules become a watchfiles filter and ripgrep's
glob arguments plus a check of each hit, so what can be searched and what can be grepped
are the same files.

The formats `add` accepts, and the aliases of their extensions, are kept here too; the
daemon publishes them in `/api/v1/status` for cofferctl.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from pathlib import PurePath

import watchfiles

from cofferd.domain.conflicts import conflict_copy
from cofferd.infrastructure.ignore_rules import IGNORE_FILES, IgnoreRules
from cofferd.locations import Locations

MARKDOWN_SUFFIXES = (".md", ".markdown")
# Matched against each part of a path, in any case: hidden names (.swp, .#lock,
# .syncthing.*.tmp, .DS_Store), backups, vim's `4913` probe, emacs autosaves, Office owner
# files, partial downloads and temporary files.
NOISE_GLOBS = (
    ".*", "*~", "4913", "#*#", "~$*", "node_modules",
    "*.tmp", "*.temp", "*.swp", "*.swo", "*.swx", "*.part", "*.crdownload", "*.bak",
)  # fmt: skip
PASSTHROUGH_FORMATS = ("md", "txt")  # added as they are, with provenance frontmatter
ALIASES = {"markdown": "md", "htm": "html", "text": "txt"}


class DocumentPolicy(watchfiles.BaseFilter):
    """The rules, as one object. Called as a watchfiles filter over the knowledge root, it
    lets through what may concern a document or a KB's settings, and nothing in raw/."""

    def __init__(self, locations: Locations, converted_formats: Sequence[str] = ()) -> None:
        super().__init__()
        self.locations = locations
        self._noise = re.compile(
            "|".join(fnmatch.translate(g) for g in NOISE_GLOBS), re.IGNORECASE | re.DOTALL
        )
        self.formats = sorted({*PASSTHROUGH_FORMATS, *converted_formats})
        self._rules: dict[str, IgnoreRules] = {}

    # -- the rules ---------------------------------------------------------------------

    def is_noise(self, name: str) -> bool:
        return self._noise.match(name) is not None

    def is_markdown(self, name: str) -> bool:
        return self.has_markdown_suffix(name) and not self.is_noise(name)

    @staticmethod
    def has_markdown_suffix(name: str) -> bool:
        return name.lower().endswith(MARKDOWN_SUFFIXES)

    def in_noise(self, relpath: str) -> bool:
        """Whether any part of a path inside a docs tree is noise."""
        return any(self.is_noise(part) for part in relpath.split("/"))

    def is_document(self, relpath: str) -> bool:
        """Whether a path inside a docs tree names a document (by name; the scanner also
        requires a regular file). A sync tool's conflict copy is not one."""
        return (
            self.is_markdown(relpath.rsplit("/", 1)[-1])
            and not self.in_noise(relpath)
            and conflict_copy(relpath) is None
        )

    def is_kb_document(self, kb: str, relpath: str) -> bool:
        """is_document, and no ignore file of the KB's tree excludes it."""
        return self.is_document(relpath) and not self.ignore_rules(kb).excluded(relpath)

    @staticmethod
    def is_ignore_file(relpath: str) -> bool:
        return relpath.rsplit("/", 1)[-1] in IGNORE_FILES

    def ignore_rules(self, kb: str) -> IgnoreRules:
        """The KB's ignore files as last read."""
        rules = self._rules.get(kb)
        return rules if rules is not None else self.fresh_ignore_rules(kb)

    def fresh_ignore_rules(self, kb: str) -> IgnoreRules:
        """The KB's ignore files, read again as they are needed (a full scan starts so)."""
        rules = self._rules[kb] = IgnoreRules(lambda: self.locations.docs_dir(kb))
        return rules

    # -- formats for `add` ---------------------------------------------------------------

    def file_format(self, filename: str) -> str:
        ext = PurePath(filename).suffix.lower().lstrip(".")
        return ALIASES.get(ext, ext)

    def is_passthrough(self, fmt: str) -> bool:
        return fmt in PASSTHROUGH_FORMATS

    def supported_formats(self) -> list[str]:
        return self.formats

    def extensions(self) -> list[str]:
        """Every file extension `add` takes: the formats and their aliases."""
        return sorted({*self.formats, *(a for a, f in ALIASES.items() if f in self.formats)})

    # -- the same rules for other tools ---------------------------------------------------

    def __call__(self, change: watchfiles.Change, path: str) -> bool:
        where = self.locations.split(path)
        if where is None:
            return False
        kb, relpath = where
        if self.is_noise(kb):
            return False
        if relpath is None or not self.in_noise(relpath):
            return True
        folder, _, name = relpath.rpartition("/")
        return name in IGNORE_FILES and not self.in_noise(folder)

    def ripgrep_args(self) -> list[str]:
        """ripgrep's glob arguments for documents (it never follows symlinks by default)."""
        args = []
        for suffix in MARKDOWN_SUFFIXES:
            args += ["--iglob", f"*{suffix}"]
        for glob in NOISE_GLOBS:
            args += ["--iglob", f"!{glob}"]
        return args
