"""What arrives in a folder is data, not authority; what is ours stays private.

Real daemons: a synced KB folder naming a URL and a credential, files added by path
(links, secret places, agents), the data home under a permissive umask."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import pytest
import yaml

from cofferctl.client import ApiError
from tests.support.daemon import Daemon, cleanup, new_daemon, wait_for
from tests.support.fake_embeddings import FakeEmbeddings
from tests.support.helpers import status_entry, write
from tests.support.processes import family, peak_kb


def search(d: Daemon, kb: str, query: str) -> list[dict[str, object]]:
    found: list[dict[str, object]] = d.client.post(d.client.kb(kb, "/search"), {"query": query})[
        "passages"
    ]
    return found


async def test_a_synced_folder_cannot_send_secrets_anywhere(tmp_path: Path) -> None:
    server = await FakeEmbeddings().start()
    d = new_daemon(tmp_path)
    try:
        d.start(COFFER_TEST_SECRET="sk-do-not-leak", COFFER_TEST_EMBED_KEY="sk-test")
        folder = d.home / "knowledge" / "synced"
        write(folder / "docs" / "a.md", "# Arrived\n\nthe synced note about otters")
        settings = {
            "kind": "knowledge_base",
            "config": {
                "enabled_modes": ["keyword", "grep", "vector"],
                "auto_update_sources": True,
                "embedding": {**server.config()["embedding"],
                              "credential_ref": "env:COFFER_TEST_SECRET"},
            },
        }  # fmt: skip
        write(folder / "kb.yaml", yaml.safe_dump(settings))
        await asyncio.to_thread(wait_for, lambda: search(d, "synced", "otters"))
        await asyncio.sleep(1.0)  # the embedding queue would have called by now
        assert server.requests == 0 and "Bearer sk-do-not-leak" not in server.keys
        entry = status_entry(d, "synced")
        ignored = set(entry["ignored_settings"])  # type: ignore[call-overload]
        assert {
            "auto_update_sources", "embedding.provider", "embedding.base_url",
            "embedding.credential_ref",
        } <= ignored  # fmt: skip
        kb = d.client.get(d.client.kb("synced"))
        assert kb["config"]["auto_update_sources"] is False
        assert kb["config"]["embedding"].get("base_url") is None

        # this machine's user opts in: the provider is kept in the data home, not the folder
        mine = server.config()["embedding"]
        d.client.request("PATCH", d.client.kb("synced"), {"config": {"embedding": mine}})
        local = d.home / "local" / "synced.yaml"
        assert stat.S_IMODE(local.stat().st_mode) == 0o600
        assert mine["base_url"] in local.read_text()
        assert "base_url" not in (folder / "kb.yaml").read_text()
        await asyncio.to_thread(wait_for, lambda: server.requests > 0)
        await asyncio.to_thread(
            wait_for, lambda: d.client.get(d.client.kb("synced", "/metrics"))["embed_pending"] == 0
        )
    finally:
        cleanup(d)
        await server.stop()


def test_files_are_added_by_path_only_from_ordinary_places(
    shared_daemon: Daemon, tmp_path: Path
) -> None:
    d = shared_daemon
    kb = "paths-" + os.urandom(3).hex()
    d.client.post("/api/v1/knowledge_bases", {"name": kb})

    def add(path: Path | str, actor: str = "tests") -> object:
        client = type(d.client)(d.socket, actor=actor, timeout=60)
        return client.post(client.kb(kb, "/documents"), {"source_path": str(path)})

    def refused(path: Path | str, actor: str = "tests") -> str:
        with pytest.raises(ApiError) as err:
            add(path, actor)
        assert err.value.code == "PATH_REFUSED", err.value.message
        return err.value.message

    (tmp_path / "shadow.txt").symlink_to("/etc/passwd")
    assert "symlink" in refused(tmp_path / "shadow.txt")
    refused("/etc/hostname")
    refused("/proc/self/environ")
    write(tmp_path / ".ssh" / "id_ed25519.txt", "-----BEGIN OPENSSH PRIVATE KEY-----")
    refused(tmp_path / ".ssh" / "id_ed25519.txt")
    write(tmp_path / ".env.txt", "TOKEN=secret")
    refused(tmp_path / ".env.txt")
    refused(d.home / "coffer.db")
    plain = write(tmp_path / "notes.txt", "an ordinary note about herons")
    assert add(plain)
    # agents: only from the folders opened to them
    refused(plain, actor="agent:some-agent")
    opened = write(d.agent_root / "for-agents.txt", "a note an agent may add")
    assert add(opened, actor="agent:some-agent")


def test_the_data_home_is_private_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    d = new_daemon(tmp_path)
    try:
        d.start()
        d.client.post("/api/v1/knowledge_bases/notes/documents", {"content": "# N\n\ntext"})
        mode = lambda p: stat.S_IMODE(p.stat().st_mode)  # noqa: E731
        assert mode(d.home) == 0o700
        for name in ("coffer.db", "coffer.db-wal", "coffer.db-shm"):
            assert mode(d.home / name) == 0o600, name
        for path in d.docs("notes").iterdir():
            assert mode(path) & 0o077 == 0, path
    finally:
        os.umask(old)
        cleanup(d)


def test_knowledge_base_names_windows_cannot_hold_are_refused(shared_daemon: Daemon) -> None:
    for name in ("con", "nul", "aux", "prn", "com1", "lpt9"):
        with pytest.raises(ApiError) as err:
            shared_daemon.client.post("/api/v1/knowledge_bases", {"name": name})
        assert err.value.code == "VALIDATION_ERROR" and "Windows" in err.value.message


def test_frontmatter_that_expands_is_read_as_text(daemon: Daemon) -> None:
    d = daemon  # its own: a peak read from a daemon other tests share measures them too
    layers = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
    for prev, name in zip("abcdef", "bcdefg", strict=True):
        layers.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    bomb = "---\n" + "\n".join(layers) + "\n---\n# Bomb\n\nexpanding words"
    assert len(bomb) < 400
    assert d.proc is not None
    before = {pid: peak_kb(pid) for pid in family(d.proc.pid)}
    write(d.docs("notes") / "bomb.md", bomb)
    doc_id = wait_for(lambda: search(d, "notes", "expanding"))[0]["document_id"]
    doc = d.client.get(d.client.kb("notes", f"/documents/{doc_id}"))
    assert doc["frontmatter"] == {} and "*f" in doc["content"]
    for pid in family(d.proc.pid):  # the daemon read it back; a worker prepared it
        assert peak_kb(pid) - before.get(pid, 0) < 100_000, pid  # 9^7 values: gigabytes


def test_one_bad_knowledge_base_folder_stops_nothing(tmp_path: Path) -> None:
    d = new_daemon(tmp_path)
    try:
        knowledge = d.home / "knowledge"
        write(knowledge / "broken" / "kb.yaml", "kind: knowledge_base\nconfig: {}\n")
        write(knowledge / "broken" / "docs", "a file where a folder belongs")
        write(knowledge / "rawfile" / "raw", "a file named raw")
        write(knowledge / "rawfile" / "docs" / "r.md", "# R\n\nraw is a file here")
        write(knowledge / "good" / "docs" / "g.md", "# G\n\ngood pelicans")
        d.start()
        wait_for(lambda: search(d, "good", "pelicans") and search(d, "rawfile", "raw"))
        broken = wait_for(lambda: (s := status_entry(d, "broken")).get("problem") and s)
        assert broken["state"] == "unavailable"
        status = d.client.get("/api/v1/status")
        assert status["watcher"]["running"]
        write(knowledge / "good" / "docs" / "later.md", "# Later\n\nlater gannets")
        wait_for(lambda: search(d, "good", "gannets"))
    finally:
        cleanup(d)


def test_the_umask_is_read_without_being_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Setting the umask to read it back changes it for every thread a moment: a file made
    meanwhile by another thread would get the wrong permissions."""
    from cofferd.infrastructure.files import durable

    current = os.umask(0o027)
    os.umask(current)

    def changed(mask: int) -> int:
        raise AssertionError("the umask was changed")

    monkeypatch.setattr(os, "umask", changed)
    assert durable.umask_mode() == 0o666 & ~current
