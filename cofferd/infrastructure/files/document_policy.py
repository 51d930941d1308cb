"""What is a document, decided once: the scanner, the watcher, grep and cofferctl all ask
`classify(kb, relpath, is_dir)`.

A document is a regular file (never a symlink: a linked file is indexed where it really is,
so it is never found twice) whose name ends in `.md` or `.markdown` in any case, or in the
suffix of a format its KB indexes in place (`index_formats`: domain.formats), with no
part of its path that is noise (hidden names, the droppings of editors and sync tools,
`node_modules`) and that no ignore file of its tree excludes (`.gitignore`, `.ignore`,
`.cofferignore`: ignore_rules). A sync tool's conflict copy of a document is listed, not
indexed. The same rules become ripgrep's glob arguments, and each grep hit is classified
too, so what can be searched and what can be grepped are the same files.

The formats `add` accepts, and the aliases of their extensions, are kept here too; the
daemon publishes them in `/api/v1/status` for cofferctl.
"""

from __future__ import annotations

import enum
import fnmatch
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from coffer_kernel.locations import Locations
from cofferd.domain.conflicts import conflict_copy
from cofferd.domain.formats import ALIASES, TEXT_FORMATS, format_of, suffixes
from cofferd.infrastructure.files.confinement import Boundary
from cofferd.infrastructure.files.ignore_rules import IGNORE_FILES, FolderRules, IgnoreRules

# Matched against each part of a path, in any case: hidden names (.swp, .#lock,
# .syncthing.*.tmp, .DS_Store), backups, vim's `4913` probe, emacs autosaves, Office owner
# files, partial downloads and temporary files.
NOISE_GLOBS = (
    ".*", "*~", "4913", "#*#", "~$*", "node_modules",
    "*.tmp", "*.temp", "*.swp", "*.swo", "*.swx", "*.part", "*.crdownload", "*.bak",
)  # fmt: skip
PASSTHROUGH_FORMATS = ("md", "txt")  # added as they are, with provenance frontmatter


class Kind(enum.Enum):
    DOCUMENT = "document"  # indexed
    CONFLICT_COPY = "conflict_copy"  # a sync tool's copy of a document: listed, not indexed
    IGNORE_FILE = "ignore_file"  # changes which files are documents
    FOLDER = "folder"  # a folder (or, when it is not known, a path that may be one) to look in
    FILE = "file"  # any other file of the tree (an image, a canvas): not indexed, a link target
    OTHER = "other"  # noise or ignored


class DocumentPolicy:
    """The rules, as one object."""

    def __init__(
        self,
        locations: Locations,
        converted_formats: Sequence[str] = (),
        boundary: Boundary | None = None,
        formats_of: Callable[[str], tuple[str, ...]] = lambda kb: (),
    ) -> None:
        """`formats_of(kb)`: the formats the KB indexes where they lie, besides Markdown."""
        self.locations = locations
        self.formats_of = formats_of
        self.boundary = boundary or Boundary(locations)
        self._noise = re.compile(
            "|".join(fnmatch.translate(g) for g in NOISE_GLOBS), re.IGNORECASE | re.DOTALL
        )
        self.formats = sorted({*PASSTHROUGH_FORMATS, *converted_formats})
        self._rules: dict[str, IgnoreRules] = {}
        # KB -> folder -> whether documents may be in it (its path is not noise or ignored)
        self._folders: dict[str, dict[str, bool]] = {}

    # -- the rules ---------------------------------------------------------------------

    def classify(self, kb: str, relpath: str, is_dir: bool | None = False) -> Kind:
        """What a path inside a KB's docs tree is, by its name and the KB's ignore files
        (the scanner also requires a document to be a regular file). `is_dir` None: not
        known (a path that is gone); a Markdown name is taken for a file."""
        folder, _, name = relpath.rpartition("/")
        names = self.in_folder(kb, folder)
        if names is None:
            return Kind.OTHER
        if is_dir is None:
            if name in IGNORE_FILES:
                return Kind.IGNORE_FILE
            is_dir = not names.has_document_suffix(name)
        return names.classify(relpath, name, is_dir)

    def in_folder(self, kb: str, folder: str) -> FolderNames | None:
        """`classify` for the names in one folder ("": the top), what they share looked
        at once (a scan asks of every file); None when nothing in it is indexed (its path
        is noise or ignored)."""
        if folder and not self._open(kb, folder):
            return None
        parts = folder.split("/") if folder else []
        return FolderNames(self._noise, self.ignore_rules(kb).in_folder(parts), self.suffixes(kb))

    def suffixes(self, kb: str) -> tuple[str, ...]:
        """The name suffixes of the KB's documents, lower case."""
        return suffixes(self.formats_of(kb))

    def is_document(self, kb: str, relpath: str) -> bool:
        return self.classify(kb, relpath) is Kind.DOCUMENT

    def _open(self, kb: str, folder: str) -> bool:
        """Whether documents may be inside `folder`: no part of its path is noise or
        ignored (remembered per folder until the rules change)."""
        known = self._folders.setdefault(kb, {})
        found = known.get(folder)
        if found is not None:
            return found
        parts = folder.split("/")
        judged, found = 0, True  # from the deepest folder above it already judged
        for above in range(len(parts) - 1, 0, -1):
            seen = known.get("/".join(parts[:above]))
            if seen is not None:
                judged, found = above, seen
                break
        rules = self.ignore_rules(kb)
        for depth in range(judged + 1, len(parts) + 1):
            found = (
                found
                and not self.is_noise(parts[depth - 1])
                and not rules.decides(parts[:depth], True)
            )
            known["/".join(parts[:depth])] = found
        return found

    def is_noise(self, name: str) -> bool:
        return self._noise.match(name) is not None

    def ignore_rules(self, kb: str) -> IgnoreRules:
        """The KB's ignore files as last read."""
        rules = self._rules.get(kb)
        return rules if rules is not None else self.fresh_ignore_rules(kb)

    def fresh_ignore_rules(self, kb: str) -> IgnoreRules:
        """The KB's ignore files, read again as they are needed (a full scan starts so)."""
        rules = self._rules[kb] = IgnoreRules(lambda: self.boundary.known_root(kb))
        self._folders.pop(kb, None)
        return rules

    def locate(self, path: str | Path) -> tuple[str, str | None] | None:
        """(KB, path inside its docs tree, or None for the KB's own folder, docs/ or
        settings) for a path under knowledge/; None for anything else, raw/ included."""
        where = self.locations.split(path)
        if where is None or self.is_noise(where[0]):
            return None
        return where

    # -- formats for `add` ---------------------------------------------------------------

    def file_format(self, filename: str) -> str:
        return format_of(filename)

    def is_passthrough(self, fmt: str) -> bool:
        return fmt in PASSTHROUGH_FORMATS

    def supported_formats(self) -> list[str]:
        return self.formats

    def extensions(self) -> list[str]:
        """Every file extension `add` takes: the formats and their aliases."""
        return sorted({*self.formats, *(a for a, f in ALIASES.items() if f in self.formats)})

    # -- the same rules for other tools ---------------------------------------------------

    def ripgrep_args(self, kb: str) -> list[str]:
        """ripgrep's glob arguments for the documents of a KB it can read as they are (it
        never follows symlinks by default); each hit is classified again, for the ignore
        files. Converted documents are grepped in their converted text."""
        args = []
        as_they_are = tuple(f for f in self.formats_of(kb) if f in TEXT_FORMATS)
        for suffix in suffixes(as_they_are):  # Markdown's with them
            args += ["--iglob", f"*{suffix}"]
        for glob in NOISE_GLOBS:
            args += ["--iglob", f"!{glob}"]
        return args


class FolderNames:
    """What the names in one folder are, by the DocumentPolicy's rules (its folders above
    already looked at)."""

    __slots__ = ("_noise", "_rules", "_suffixes")

    def __init__(
        self, noise: re.Pattern[str], rules: FolderRules, suffixes: tuple[str, ...]
    ) -> None:
        self._noise = noise.match
        self._rules = rules if rules else None  # most folders have no ignore file above
        self._suffixes = suffixes

    def has_document_suffix(self, name: str) -> bool:
        return name.lower().endswith(self._suffixes)

    def classify(self, relpath: str, name: str, is_dir: bool) -> Kind:
        """The Kind of `name`, a file or folder of this folder at `relpath`."""
        if name in IGNORE_FILES and not is_dir:
            return Kind.IGNORE_FILE
        if self._noise(name) is not None or (
            self._rules is not None and self._rules.excludes(name, is_dir)
        ):
            return Kind.OTHER
        if is_dir:
            return Kind.FOLDER
        if not self.has_document_suffix(name):
            return Kind.FILE
        return Kind.DOCUMENT if conflict_copy(relpath) is None else Kind.CONFLICT_COPY
