"""What people call a document besides its id and its path: the path without `.md` (any
case: `projects/coffer/plan`), the end of its path when no other document's path ends so
(`plan`), or its title (`Boiler service`). And, when a reference names no document, the
documents whose titles or file names are close to it, to suggest.

They run only when the id, the path (with `.md` added too) and an id prefix named nothing:
`named` over the few documents SQL finds for the reference, else over every document of
the knowledge base, `near` over every one. Suggesting is bounded: difflib compares the
reference's last part with titles and file names only (not whole paths, which share long
beginnings and make difflib slow), and a long reference is no one's typo. Figures for
38,000 documents: docs/benchmarks.md.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from coffer_kernel.link_targets import key_of

Name = tuple[str, str, str]  # (id, path, title)

SUGGESTIONS = 5
SUGGEST_MAX_CHARS = 100
SUGGEST_CUTOFF = 0.6


def last_part(ref: str) -> str:
    """What a document's path must hold to answer to `ref` by its path or its end."""
    return key_of(ref).rsplit("/", 1)[-1]


def named(names: Sequence[Name], ref: str) -> list[Name]:
    """The documents `ref` names, by the first of these rules that any document answers
    to: its path without `.md` (any case), the end of its path (`plan`, `coffer/plan`),
    its title (any case). Several: the reference is ambiguous."""
    key = key_of(ref)
    # only a path that holds the key's last part can answer to the first two: key_of for
    # these few, not for every path
    last = last_part(ref)
    keyed = [(key_of(n[1]), n) for n in names if last in n[1].casefold()]
    title = ref.casefold()
    found = (
        [name for path_key, name in keyed if path_key == key]
        or [name for path_key, name in keyed if path_key.endswith("/" + key)]
        or [name for name in names if name[2].casefold() == title]
    )
    return sorted(found, key=lambda name: name[1])


def near(names: Sequence[Name], ref: str) -> list[Name]:
    """The documents whose title or file name is closest to `ref`'s last part, best first."""
    wanted = last_part(ref)
    if not wanted or len(wanted) > SUGGEST_MAX_CHARS:
        return []
    by_text: dict[str, list[Name]] = {}
    for name in names:
        by_text.setdefault(name[2].casefold(), []).append(name)
        by_text.setdefault(_stem(name[1]), []).append(name)
    close = difflib.get_close_matches(wanted, by_text, n=SUGGESTIONS, cutoff=SUGGEST_CUTOFF)
    found: dict[str, Name] = {}
    for text in close:  # the closest first; documents of one name by path
        for name in sorted(by_text[text], key=lambda name: name[1]):
            found.setdefault(name[0], name)
    return list(found.values())[:SUGGESTIONS]


def _stem(path: str) -> str:
    """A file's name without its extension, in lower case: what a suggestion compares."""
    file_name = path.rpartition("/")[2]
    stem, dot, _ = file_name.rpartition(".")
    return (stem if dot else file_name).casefold()


def listed(pairs: Sequence[tuple[str, str]]) -> str:
    """`a (what a is), b (...)`: the candidates an error message names."""
    return ", ".join(f"{first} ({second})" for first, second in pairs)


def described(names: Sequence[Name]) -> list[dict[str, str]]:
    """Documents as an error's details name them."""
    return [{"id": i, "relative_path": path, "title": title} for i, path, title in names]
