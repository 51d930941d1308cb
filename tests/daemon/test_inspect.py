"""What an editor is told of a note while it is written (`POST .../inspect`): its links in
the unsaved text, where each is and what it leads to, merge markers and conflict copies."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from cofferctl.client import ApiError
from cofferd.application.reading.note_names import LinkStyle, NameIndex
from cofferd.surfaces.http.error_envelope import status_of
from tests.support.daemon import Daemon, wait_for
from tests.support.helpers import add_note, new_vault, write


def inspect(d: Daemon, kb: str, relpath: str, text: str) -> dict[str, Any]:
    body = {"relative_path": relpath, "text": text}
    found: dict[str, Any] = d.client.post(d.client.kb(kb, "/inspect"), body)
    return found


@pytest.fixture
def vault(shared_daemon: Daemon) -> tuple[Daemon, str]:
    notes = {
        relpath: f"# {relpath}\n\ntext\n"
        for relpath in ["projects/計画.md", "projects/plan.md", "archive/plan.md", "people/ana.md"]
    }
    return shared_daemon, new_vault(shared_daemon, "v", notes)


def test_links_of_unsaved_text_are_placed_and_resolved(vault: tuple[Daemon, str]) -> None:
    d, kb = vault
    text = (
        "# Notes\n"
        "見て [[計画#予算|the plan]] and [[plan]], [[nowhere]]\n"
        "`[[in code]]` [ana](../people/ana.md) [gone](gone.md)\n"
    )
    found = inspect(d, kb, "projects/today.md", text)
    by_target = {link["target"]: link for link in found["links"]}
    assert set(by_target) == {"計画#予算", "plan", "nowhere", "../people/ana.md", "gone.md"}
    plan_link = by_target["計画#予算"]
    line = text.split("\n")[plan_link["line"] - 1]
    assert line[plan_link["start"] : plan_link["end"]] == "[[計画#予算|the plan]]"
    assert plan_link["relative_path"] == "projects/計画.md" and not plan_link["ambiguous"]
    ambiguous = by_target["plan"]
    # the note's own folder first, as Obsidian takes it
    assert ambiguous["ambiguous"] and ambiguous["relative_path"] == "projects/plan.md"
    assert ambiguous["candidates"] == ["projects/plan.md", "archive/plan.md"]
    assert by_target["nowhere"]["relative_path"] is None
    assert by_target["../people/ana.md"]["relative_path"] == "people/ana.md"
    assert by_target["gone.md"]["relative_path"] is None
    assert found["merge_markers"] == [] and found["conflict_copies"] == []


def test_merge_markers_and_conflict_copies_are_named(vault: tuple[Daemon, str]) -> None:
    d, kb = vault
    copy = "projects/plan.sync-conflict-20261130-101500-ABCDEFG.md"  # listed, never indexed
    write(d.docs(kb) / copy, "# copy\n")
    wait_for(lambda: d.client.get(d.client.kb(kb, "/conflicts"))["conflicts"])
    text = "# Plan\n<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> branch\n"
    found = inspect(d, kb, "projects/plan.md", text)
    assert found["merge_markers"] == [2, 4, 6]
    assert found["conflict_copies"] == ["projects/plan.sync-conflict-20261130-101500-ABCDEFG.md"]
    half = inspect(d, kb, "projects/plan.md", "<<<<<<< HEAD\nonly the start\n")
    assert half["merge_markers"] == []


def test_a_document_written_meanwhile_is_found_at_once(vault: tuple[Daemon, str]) -> None:
    d, kb = vault
    assert inspect(d, kb, "a.md", "[[later]]")["links"][0]["relative_path"] is None
    write(d.docs(kb) / "deep/er/Later.md", "# Later\n")
    wait_for(lambda: inspect(d, kb, "a.md", "[[later]]")["links"][0]["relative_path"])


@pytest.mark.parametrize("relpath", ["", "/abs.md", "../out.md", "a/../b.md", "a//b.md"])
def test_a_path_outside_the_knowledge_base_is_refused(
    vault: tuple[Daemon, str], relpath: str
) -> None:
    d, kb = vault
    with pytest.raises(ApiError) as refused:
        inspect(d, kb, relpath, "[[plan]]")
    assert status_of(refused.value) == 400


def test_hostile_text_is_answered_in_linear_time(vault: tuple[Daemon, str]) -> None:
    d, kb = vault
    text = "[" * 200_000 + "[[" * 100_000 + "](" * 100_000 + "\n<<<<<<<\n=======\n" * 20_000
    found = inspect(d, kb, "h.md", text + ">>>>>>>\n")
    assert len(found["merge_markers"]) == 1000  # named up to a budget


PLAIN = LinkStyle()


def names(d: Daemon, kb: str, typed: str, limit: int = 50) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = d.client.get(d.client.kb(kb, "/names"), q=typed, limit=limit)[
        "names"
    ]
    return found


def test_completion_ranks_names_titles_words_cjk_and_letters(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = "c-" + uuid.uuid4().hex[:8]
    d.client.post("/api/v1/knowledge_bases", {"name": kb})
    docs = d.docs(kb)
    write(docs / "projects/plan.md", "# Budget plan\n")
    write(docs / "archive/plan.md", "# Old plan\n")
    write(docs / "planets.md", "---\naliases: [Worlds]\n---\n# Planets\n")
    write(docs / "deep/日本語の計画書.md", "# 計画書\n")
    write(docs / "travel.md", "# Trip to Lisbon\n")
    write(docs / "explanations.md", "# Notes\n")
    wait_for(lambda: len(names(d, kb, "")) == 6)
    # file names that start so first, then a title's word (`Budget plan`'s is its own file's)
    ranked = [n["relative_path"] for n in names(d, kb, "pla")]
    assert set(ranked[:3]) == {"planets.md", "archive/plan.md", "projects/plan.md"}
    assert ranked[3:] == ["explanations.md"]  # its letters in order, last
    old = [n["relative_path"] for n in names(d, kb, "old")]
    assert old == ["archive/plan.md", "planets.md"]  # a title; then `Worlds`, letters in order
    by_path = {n["relative_path"]: n for n in names(d, kb, "plan")}
    assert by_path["projects/plan.md"]["link"] == "projects/plan"  # another note has its name
    assert by_path["planets.md"]["link"] == "planets"
    assert [n["relative_path"] for n in names(d, kb, "worl")] == ["planets.md"]  # an alias
    assert [n["relative_path"] for n in names(d, kb, "lisbon")] == ["travel.md"]  # a word
    assert [n["relative_path"] for n in names(d, kb, "計画")] == ["deep/日本語の計画書.md"]
    fuzzy = [n["relative_path"] for n in names(d, kb, "xpns")]
    assert fuzzy == ["explanations.md"]  # letters in order
    assert len(names(d, kb, "", limit=2)) == 2
    with pytest.raises(ApiError):
        names(d, kb, "x" * 201)


def test_completion_by_letters_in_order_takes_linear_time() -> None:
    """An alias of a million `a` and `ab` typed: each text is read once, not once from
    every `a` (a lazy pattern's search did that: 16k letters took 1.7 s)."""
    took = []
    for n in (250_000, 500_000, 1_000_000):
        index = NameIndex([("x.md", "x", json.dumps(["a" * n, "zzb"]), "2026-12-04")], PLAIN)
        started = time.perf_counter()
        assert index.complete("ab", 50) == []  # `b` is in another text of the note
        took.append(time.perf_counter() - started)
    assert took[-1] < 0.5 and took[-1] < 8 * took[0] + 0.05
    found = NameIndex([("deep/explanations.md", "Notes", "[]", "2026-12-04")], PLAIN).complete(
        "xpns", 5
    )
    assert [n.path for n in found] == ["deep/explanations.md"]


@pytest.mark.parametrize(
    ("links", "expected"),
    [
        ([], PLAIN),
        ([("wiki", "a"), ("wiki", "b.md#x"), ("wiki", "c.md")], LinkStyle(extension=True)),
        ([("wiki", "f/a"), ("wiki", "f/b"), ("wiki", "c")], LinkStyle(whole_path=True)),
        ([("markdown", "a.md"), ("markdown", "../b.md#h"), ("wiki", "c")], LinkStyle(True)),
        # links to pictures and PDFs say nothing of how notes are linked
        ([("markdown", "a.png"), ("markdown", "b.pdf"), ("wiki", "c")], PLAIN),
        ([("wiki", "#heading"), ("wiki", "#other"), ("wiki", "a.md")], LinkStyle(extension=True)),
    ],
)
def test_a_kb_link_style_is_what_most_of_its_links_do(
    links: list[tuple[str, str]], expected: LinkStyle
) -> None:
    assert LinkStyle.learn(links) == expected


def test_completion_writes_links_as_the_kb_does(shared_daemon: Daemon) -> None:
    d = shared_daemon
    notes = {
        "a/plan.md": "# Plan\n\n[[a/notes.md]] and [[b/notes.md#x]]\n",
        "a/notes.md": "# A notes\n\n[[a/plan.md]]\n",
        "b/notes.md": "# B notes\n",
    }
    kb = new_vault(d, "style", notes)
    answer = d.client.get(d.client.kb(kb, "/names"), q="pla")
    assert answer["link_style"] == {"markdown": False, "extension": True, "whole_path": True}
    assert answer["names"][0]["link"] == "a/plan.md"
    markdown = new_vault(d, "md", {"a.md": "[b](sub/b.md) [c](c.md)\n", "sub/b.md": "# B\n"})
    style = d.client.get(d.client.kb(markdown, "/names"), q="b")["link_style"]
    assert style == {"markdown": True, "extension": False, "whole_path": False}


def test_names_answer_at_once_after_a_save_and_are_current_soon(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_vault(d, "fresh", {f"n{i}.md": f"# Note {i}\n" for i in range(20)})
    assert d.client.get(d.client.kb(kb, "/names"), q="n")["fresh"]
    add_note(d, kb, "zebra.md", "# Zebra\n")

    def current() -> bool:
        answer = d.client.get(d.client.kb(kb, "/names"), q="zebra")
        assert answer["fresh"] or not answer["names"]  # an answer from before says so
        return bool(answer["fresh"] and answer["names"])

    wait_for(current)


def test_document_changes_count_what_completion_and_links_read(shared_daemon: Daemon) -> None:
    """The count grows with a note made, renamed or removed, and is what inspect says."""
    d = shared_daemon
    kb = new_vault(d, "count", {"a.md": "# A\n"})

    def count() -> int:
        kbs = d.client.get("/api/v1/document_changes")["knowledge_bases"]
        (entry,) = [k for k in kbs if k["name"] == kb]
        assert entry["docs_path"] == str(d.docs(kb))
        return int(entry["document_changes"])

    first = count()
    assert inspect(d, kb, "x.md", "")["document_changes"] == first
    add_note(d, kb, "b.md", "# B\n")
    second = count()
    assert second > first
    (d.docs(kb) / "b.md").rename(d.docs(kb) / "c.md")
    wait_for(lambda: count() > second)
