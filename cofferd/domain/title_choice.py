"""The title a converted document goes by when the title it gives itself (its format's
title property: a deck's docProps title) is another document's too: two decks made from
one template both say "Lecture 11". Each is then titled by its own first heading (a deck's
first slide's title) where it has one that no other document goes by, so that a title
names one document; when the other document goes, it is titled as it says again.

Pure: the storage's writer (infrastructure.storage.document_rows.retitle) runs it in the
transaction that writes the documents, over the few documents that share a title."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Titled:
    id: str
    own: str  # the title it gives itself
    heading: str | None  # its first heading, when that says something else


def folded(title: str) -> str:
    """A title as two titles are compared: any case, runs of spaces as one."""
    return " ".join(title.split()).casefold()


def chosen(owners: Sequence[Titled], taken: Callable[[str, str], bool]) -> dict[str, str]:
    """The title of each of `owners`, the documents that give themselves one title: it,
    when only one does; else each one's first heading where it has one that neither
    another owner's heading nor another document's own title is (`taken(heading, id)`),
    else the title it gives itself."""
    if len(owners) < 2:
        return {owner.id: owner.own for owner in owners}
    headings = Counter(folded(owner.heading) for owner in owners if owner.heading)
    return {
        owner.id: owner.heading
        if owner.heading
        and headings[folded(owner.heading)] == 1
        and not taken(owner.heading, owner.id)
        else owner.own
        for owner in owners
    }
