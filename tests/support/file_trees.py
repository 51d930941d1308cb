"""Trees of files the tests write and compare: one holding ignore files of every kind, with
what each of its paths should be (kept or ignored), and the state of a tree, to check that
nothing in it was written."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from tests.support.helpers import write

IGNORES = {
    ".gitignore": "build/\n*.log.md\n!keep.log.md\n/top-only.md\nPrivate\n!build/keep.md\n",
    ".cofferignore": "drafts/**\n!drafts/published.md\n",
    "sub/.ignore": "!*.log.md\nlocal.md\n",
    "sub/deeper/.gitignore": "/*.md\n!wanted.md\n",
}
TREE = {
    "plain.md": True,
    "build/out.md": False,  # a folder pattern
    "src/build/out.md": False,  # ... at any depth
    "x.log.md": False,
    "keep.log.md": True,  # taken back by `!`
    "top-only.md": False,  # anchored to the file's folder
    "sub/top-only.md": True,
    "Private/notes.md": False,
    "private/notes.md": True,  # patterns are case-sensitive, as in git
    "drafts/a.md": False,
    "drafts/published.md": True,  # `drafts/**` ignores what is inside, not the folder
    "build/keep.md": False,  # but inside an ignored folder nothing comes back (git)
    "sub/x.log.md": True,  # a deeper ignore file overrides a shallower one
    "sub/local.md": False,
    "local.md": True,  # sub/.ignore applies only below sub/
    "sub/deeper/any.md": False,
    "sub/deeper/wanted.md": True,
    "sub/deeper/nested/any.md": True,  # `/*.md` is anchored to sub/deeper/
    "node_modules/pkg/readme.md": False,  # a default
}


def make_tree(docs: Path) -> list[str]:
    """TREE and its ignore files written below `docs`; the paths kept, sorted."""
    for path, text in IGNORES.items():
        write(docs / path, text)
    for path in TREE:
        write(docs / path, f"# {path}\n\nplatypus in {path}\n")
    return sorted(p for p, kept in TREE.items() if kept)


def tree_state(folder: Path) -> dict[str, str]:
    """Every entry below the folder, links not followed: content hash, 'dir' or the link."""
    found = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(root, name)
            if path.is_symlink():
                found[str(path)] = f"-> {os.readlink(path)}"
            elif path.is_file():
                found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                found[str(path)] = "dir"
    return found
