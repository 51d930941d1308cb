"""What a person sees of a knowledge base's state, from the real daemon: its version, what
was skipped and why, progress, why it is degraded, settings changes, and grep's modes."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from coffer_kernel import __version__
from cofferctl.client import ApiError
from tests.support.daemon import Daemon, wait_for
from tests.support.helpers import write


def new_kb(d: Daemon, **config: Any) -> str:
    name = "kb-" + uuid.uuid4().hex[:8]
    d.client.post("/api/v1/knowledge_bases", {"name": name, "config": config})
    return name


def kb_status(d: Daemon, name: str) -> dict[str, Any]:
    (entry,) = [k for k in d.client.get("/api/v1/status")["knowledge_bases"] if k["name"] == name]
    return entry  # type: ignore[no-any-return]


def error_of(call: Any) -> ApiError:
    with pytest.raises(ApiError) as err:
        call()
    return err.value


def test_status_names_the_daemon_version(shared_daemon: Daemon) -> None:
    assert shared_daemon.client.get("/api/v1/status")["version"] == __version__


def test_skipped_files_are_listed_with_their_reason_until_fixed(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d, max_document_bytes=1024)
    docs = d.docs(kb)
    (docs / "binary.md").write_bytes(bytes(range(256)) * 8)
    write(docs / "big.md", "word " * 1000)
    write(docs / "fine.md", "# Fine\n\nwords")
    expected = [("big.md", "too_large"), ("binary.md", "binary content")]

    def listed() -> list[tuple[str, str]]:
        items = d.client.get(d.client.kb(kb, "/skipped"))["items"]
        return [(i["relative_path"], i["reason"]) for i in items]

    wait_for(lambda: listed() == expected)  # the watcher's path
    items = d.client.get(d.client.kb(kb, "/skipped"))["items"]
    assert items[1]["path"] == str(docs / "binary.md")
    assert kb_status(d, kb)["skipped"] == 2
    # a reindex lists them too, although they are not read again (unchanged since)
    result = d.client.post(d.client.kb(kb, "/reindex"))
    assert result["documents_skipped"] == 2
    assert [(s["relative_path"], s["reason"]) for s in result["skipped"]] == expected

    write(docs / "binary.md", "# Text now")
    (docs / "big.md").unlink()
    wait_for(lambda: listed() == [])
    assert kb_status(d, kb)["skipped"] == 0
    assert d.client.post(d.client.kb(kb, "/reindex"))["skipped"] == []


def test_skipped_of_an_unknown_kb_is_not_found(shared_daemon: Daemon) -> None:
    err = error_of(lambda: shared_daemon.client.get(shared_daemon.client.kb("nosuch", "/skipped")))
    assert (err.status, err.code) == (404, "KB_NOT_FOUND")


def test_progress_is_null_when_idle_and_problems_empty_when_well(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d)
    write(d.docs(kb) / "a.md", "# A")
    wait_for(lambda: kb_status(d, kb)["documents"] == 1)
    entry = wait_for(lambda: (e := kb_status(d, kb))["progress"] is None and e)
    assert entry["problems"] == []


def test_settings_answer_rechunked_only_when_chunking_changed(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d)
    write(d.docs(kb) / "a.md", "# A\n\nsome words")
    wait_for(lambda: kb_status(d, kb)["documents"] == 1)
    changed = d.client.request("PATCH", d.client.kb(kb), {"config": {"chunk_size": 256}})
    assert changed["rechunked"] is True and changed["warnings"] == []
    assert changed["reindexing"] == "chunking changed"  # in the background
    same = d.client.request("PATCH", d.client.kb(kb), {"config": {"auto_update_sources": True}})
    assert (same["rechunked"], same["reindex"], same["warnings"]) == (False, None, [])


def test_an_unresolvable_credential_warns_and_degrades_without_its_secret(
    shared_daemon: Daemon, tmp_path: Any
) -> None:
    d = shared_daemon
    kb = new_kb(d)
    variable = "COFFER_TEST_NO_SUCH_KEY_" + uuid.uuid4().hex[:6].upper()
    embedding = {
        "provider": "openai",
        "model": "text-embedding-3-small",
        "dimensions": 8,
        "base_url": "http://127.0.0.1:9/v1",
        "credential_ref": f"env:{variable}",
    }
    answer = d.client.request(
        "PATCH",
        d.client.kb(kb),
        {"config": {"enabled_modes": ["keyword", "vector"], "embedding": embedding}},
    )
    (warning,) = answer["warnings"]
    assert variable in warning and "environment" in warning
    assert any(variable in p for p in kb_status(d, kb)["problems"])

    secret = tmp_path / "key"
    secret.write_text("sk-very-secret")
    secret.chmod(0o644)
    embedding["credential_ref"] = f"file:{secret}"
    answer = d.client.request("PATCH", d.client.kb(kb), {"config": {"embedding": embedding}})
    (warning,) = answer["warnings"]
    assert "private" in warning and "sk-very-secret" not in warning
    secret.chmod(0o600)
    answer = d.client.request("PATCH", d.client.kb(kb), {"config": {"embedding": embedding}})
    assert answer["warnings"] == []


def test_a_missing_docs_folder_is_named_as_the_problem(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d)
    d.docs(kb).rename(d.docs(kb).with_name("docs-away"))
    try:
        entry = wait_for(lambda: (e := kb_status(d, kb))["state"] == "unavailable" and e)
        assert any("docs folder" in p and "missing" in p for p in entry["problems"])
    finally:
        d.docs(kb).with_name("docs-away").rename(d.docs(kb))


def test_grep_answers_in_path_then_line_order(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d)
    names = ["b.md", "a-b.md", "a/z.md", "a/b/c.md", "A.md", "c.md"]
    for name in names:
        write(d.docs(kb) / name, "needle one\nhay\nneedle two\n")
    body = {"pattern": "needle"}
    hits = wait_for(  # every file found, and indexed (a hit names its document then)
        lambda: (
            len(h := d.client.post(d.client.kb(kb, "/grep"), body)["hits"]) == 12
            and all(hit["document_id"] for hit in h)
            and h
        )
    )
    order = [(h["relative_path"], h["line_number"]) for h in hits]
    assert order == [(name, line) for name in sorted(names) for line in (1, 3)]
    first = d.client.post(d.client.kb(kb, "/grep"), {**body, "max_matches": 3})
    again = d.client.post(d.client.kb(kb, "/grep"), {**body, "max_matches": 3})
    assert first == again and first["truncated"] is True


def test_modes_not_enabled_are_refused_with_mode_disabled(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d, enabled_modes=["keyword"])
    err = error_of(lambda: d.client.post(d.client.kb(kb, "/grep"), {"pattern": "x"}))
    assert (err.status, err.code) == (409, "MODE_DISABLED")
    assert "grep" in err.message and "enabled_modes" in err.message
    assert d.client.post(d.client.kb(kb, "/search"), {"query": "x"})["passages"] == []
    err = error_of(
        lambda: d.client.post(d.client.kb(kb, "/search"), {"query": "x", "mode": "vector"})
    )
    assert (err.status, err.code) == (409, "MODE_DISABLED") and "vector" in err.message
    too_long = {"query": "x" * 2001, "mode": "vector"}  # no KB searched in it: still refused
    assert error_of(lambda: d.client.post("/api/v1/search", too_long)).code == "VALIDATION_ERROR"
    asked = {"query": "x", "mode": "hybrid", "knowledge_bases": [kb]}
    assert error_of(lambda: d.client.post("/api/v1/search", asked)).code == "MODE_DISABLED"
    err = error_of(
        lambda: d.client.post(d.client.kb(kb, "/search"), {"query": "x", "mode": "grep"})
    )
    assert (err.status, err.code) == (400, "VALIDATION_ERROR")  # grep has its own route

    only_grep = new_kb(d, enabled_modes=["grep"], default_mode="grep")
    assert d.client.post(d.client.kb(only_grep, "/grep"), {"pattern": "x"})["hits"] == []
    err = error_of(lambda: d.client.post(d.client.kb(only_grep, "/search"), {"query": "x"}))
    assert (err.status, err.code) == (409, "MODE_DISABLED")
    named = {"query": "x", "knowledge_bases": [only_grep]}
    assert error_of(lambda: d.client.post("/api/v1/search", named)).code == "MODE_DISABLED"
    # searching every KB leaves out those that cannot be searched
    assert only_grep not in d.client.post("/api/v1/search", {"query": "x"})["knowledge_bases"]


JARGON = ("Input should", "type=", "pydantic", "http", "Value error", "String should")


@pytest.mark.parametrize(
    ("route", "body", "says"),
    [
        ("/search", {"query": ""}, ["query must not be empty"]),
        ("/search", {}, ["query is required"]),
        ("/search", {"query": "x", "top_k": "5"}, ["top_k", '"5"', "whole number"]),
        ("/search", {"query": "x", "filters": {"colour": 1}}, ["unknown key", "folder, tags"]),
        ("/search", {"query": "x", "filters": {"tags": "a"}}, ["filters.tags", "not a list"]),
        ("/search", ["query"], ["must be an object"]),
        ("/grep", {"pattern": "x", "ignore_case": 1}, ["ignore_case", "true or false"]),
        ("/grep", {"patern": "x"}, ["pattern is required", '"patern"', "valid keys: pattern"]),
        ("/documents", {"content": "x", "title": "t" * 600}, ["title", "at most 500"]),
        ("", {"config": {"chunk_size": 10}}, ["chunk_size", "10", "64 to 2048"]),
        ("", {"config": {"enabled_modes": ["fast"]}}, ['"fast"', "'keyword'", "'grep'"]),
        ("", {"config": {"colour": "blue"}}, ['unknown key "colour"', "chunk_size", "embedding"]),
        ("", {"config": {"embedding": {"provider": "nope"}}}, ["provider", "'openai'"]),
        ("", {"config": {"max_document_bytes": "x" * 100}}, ["max_document_bytes", "…"]),
        (
            "",
            {"config": {"embedding": {"provider": "local", "credential_ref": "KEY"}}},
            ["credential_ref", "env:NAME or file:/absolute/path"],
        ),
    ],
)
def test_bad_bodies_get_messages_a_person_understands(
    shared_daemon: Daemon, route: str, body: Any, says: list[str]
) -> None:
    d = shared_daemon
    kb = "notes"
    method = "PATCH" if route == "" else "POST"
    err = error_of(lambda: d.client.request(method, d.client.kb(kb, route), body))
    assert (err.status, err.code) == (400, "VALIDATION_ERROR")
    for words in says:
        assert words in err.message
    for word in JARGON:
        assert word not in err.message
    assert len(err.message) < 400


def samples_until_ok(d: Daemon, kb: str, timeout: float = 120.0) -> list[tuple[str, int]]:
    """(state, documents) of the KB at every poll, until it says ok with its notes in."""
    seen: list[tuple[str, int]] = []

    def ok() -> bool:
        entry = kb_status(d, kb)
        seen.append((entry["state"], entry["documents"]))
        return bool(entry["state"] == "ok")

    wait_for(ok, timeout=timeout, interval=0.01)
    return seen


def test_status_never_says_ok_before_every_note_is_in(
    shared_daemon: Daemon, tmp_path: Path
) -> None:
    d = shared_daemon
    folder = tmp_path / "field-notes"
    for i in range(300):
        write(folder / f"note{i:03}.md", f"# Note {i}\n\n" + f"the godwit's note {i}. " * 30)
    kb = "kb-" + uuid.uuid4().hex[:8]
    d.client.post("/api/v1/knowledge_bases", {"name": kb, "path": str(folder)})
    seen = samples_until_ok(d, kb)
    assert seen[-1] == ("ok", 300)
    assert {documents for state, documents in seen if state == "ok"} == {300}
    assert "indexing" in {state for state, _ in seen}

    # a folder of 300 more moved in: one event, indexed as one piece of work
    staging = folder / ".arriving"  # hidden: not indexed until it is moved in
    for i in range(300):
        write(staging / f"more{i:03}.md", f"# More {i}\n\n" + f"the dunlin's note {i}. " * 30)
    staging.rename(folder / "arrived")
    wait_for(lambda: (e := kb_status(d, kb))["state"] != "ok" or e["documents"] == 600)
    seen = samples_until_ok(d, kb)
    assert {documents for state, documents in seen if state == "ok"} == {600}
