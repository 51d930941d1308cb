"""The first conversion is not kept waiting (issue 35 §6): the converter's process starts
while a pass prepares the files it converts, not once one of them is queued; saves are
indexed while a backlog converts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cofferd.domain.events import UnconvertedFound
from cofferd.domain.models import KnowledgeBase
from cofferd.surfaces.core import Coffer
from tests.support.samples import make_docx


def converter_at_each_queued(coffer: Coffer) -> list[dict[str, Any]]:
    """The converter's status each time a document is queued for conversion."""
    seen: list[dict[str, Any]] = []

    def queued(found: UnconvertedFound) -> None:
        seen.append(dict(coffer.conversions.status()["converter"]))  # type: ignore[call-overload]

    coffer.events.subscribe(UnconvertedFound, queued)  # told after the queue is
    return seen


async def test_the_converter_starts_before_the_first_file_is_queued(
    coffer: Coffer, kb: KnowledgeBase, docs: Path
) -> None:
    (docs / "memo.docx").write_bytes(make_docx("zqmemo budget"))
    seen = converter_at_each_queued(coffer)
    await coffer.reindexer.reconcile(kb)
    assert len(seen) == 1
    assert seen[0]["starting"] + seen[0]["running"] == 1  # started by the pass, not the queue


async def test_a_pass_over_notes_alone_starts_no_converter(
    coffer: Coffer, kb: KnowledgeBase, docs: Path
) -> None:
    (docs / "note.md").write_text("# Note\n\nzqnote\n", encoding="utf-8")
    (docs / "plain.txt").write_text("zqplain\n", encoding="utf-8")  # read as text
    await coffer.reindexer.reconcile(kb)
    status = coffer.conversions.status()["converter"]
    assert status["starting"] == status["running"] == 0  # type: ignore[index]
