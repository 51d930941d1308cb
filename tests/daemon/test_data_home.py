"""The data home's own folders are inside the boundary (issue 33 §4): derived/, incoming/,
trash/ and local/ are used only while they are folders, never through a link (status says
which is refused); a converted text is indexed only when it is the one converted from its
original (a text edited by hand is converted again), and a FIFO there never holds a save.

Real daemons and real files; after each case nothing outside the data home was written
or removed (the folder a link leads to is compared before and after) and /health answers
at once."""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from cofferctl.client import ApiError
from cofferd.infrastructure.conversion.derived_texts import CONVERTED_BY
from cofferd.surfaces.http.error_envelope import status_of
from tests.support.daemon import Daemon, new_daemon, upload, wait_for
from tests.support.file_trees import tree_state
from tests.support.helpers import found_in, new_kb, skipped, write
from tests.support.samples import make_pdf

HEALTH_S = 0.5  # /health is answered in milliseconds; this bound leaves room for a busy CI


def health_is_fast(d: Daemon) -> None:
    worst = 0.0
    for _ in range(5):
        started = time.monotonic()
        assert d.client.get("/api/v1/health")
        worst = max(worst, time.monotonic() - started)
    assert worst < HEALTH_S, worst


def problems(d: Daemon) -> list[str]:
    found: list[str] = d.client.get("/api/v1/status")["problems"]
    return found


def digest_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def plant(folder: Path, digest: str, text: str) -> None:
    """A converted text filed under `digest`, with the digest of itself beside it (as
    Coffer writes them): only the folder it is in says it is not Coffer's."""
    write(folder / digest[:2] / f"{digest}.md", text)
    write(folder / digest[:2] / f"{digest}.sha256", f"{digest_of(text.encode())} {CONVERTED_BY}")


def swap_for_link(folder: Path, target: Path) -> None:
    """`folder` (made if missing) replaced by a link to `target`."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.symlink_to(target, target_is_directory=True)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    return folder


def test_derived_as_a_link_is_refused_and_nothing_planted_is_indexed(
    daemon: Daemon, outside: Path
) -> None:
    d = daemon
    kb = new_kb(d, ["pdf"])
    write(d.docs(kb) / "a.pdf", make_pdf("zqfirsttoken"))
    wait_for(lambda: found_in(d, kb, "zqfirsttoken") == ["a.pdf"], 60)
    second = make_pdf("zqsecondtoken")
    plant(outside / kb, digest_of(second), "# Planted\n\nzqplantedtoken\n")
    swap_for_link(d.home / "derived", outside)
    before = tree_state(outside)

    write(d.docs(kb) / "b.pdf", second)
    wait_for(lambda: "b.pdf" in skipped(d, kb), 60)
    assert "link" in skipped(d, kb)["b.pdf"]
    assert found_in(d, kb, "zqplantedtoken") == []
    assert any("derived" in p and "link" in p for p in problems(d))
    d.client.post(d.client.kb(kb, "/reindex"))  # a full pass prunes: nothing outside goes
    assert tree_state(outside) == before
    health_is_fast(d)


def test_deleting_a_kb_removes_nothing_through_a_linked_derived(
    daemon: Daemon, outside: Path
) -> None:
    d = daemon
    kb = new_kb(d, ["pdf"])
    write(outside / kb / "ab" / "keep.md", "someone else's file")
    write(outside / "other" / "keep.md", "someone else's file")
    swap_for_link(d.home / "derived", outside)
    before = tree_state(outside)
    d.client.request("DELETE", d.client.kb(kb))
    wait_for(lambda: kb not in [k["name"] for k in d.client.get("/api/v1/knowledge_bases")[
        "knowledge_bases"]])  # fmt: skip
    assert tree_state(outside) == before
    health_is_fast(d)


def test_start_up_removes_nothing_through_a_linked_incoming(tmp_path: Path, outside: Path) -> None:
    d = new_daemon(tmp_path)
    try:
        d.home.mkdir(parents=True)
        write(outside / "upload-precious", "not an upload of Coffer's")
        write(outside / "converting" / "copy.pdf", "not a copy of Coffer's")
        swap_for_link(d.home / "incoming", outside)
        before = tree_state(outside)
        d.start()
        wait_for(lambda: d.client.get("/api/v1/status")["startup_reconcile_done"], 30)
        assert tree_state(outside) == before  # its uploads and copies are someone else's
        assert any("incoming" in p and "link" in p for p in problems(d))
        status, reply = upload(d, "notes", "x.md", b"# X\n\nzqupload\n")
        assert status == 507 and "link" in reply["error"]["message"]
        assert tree_state(outside) == before
        health_is_fast(d)
    finally:
        if d.proc is not None and d.proc.poll() is None:
            d.stop()
        shutil.rmtree(d.socket.parent, ignore_errors=True)


def test_a_linked_trash_is_refused_and_nothing_is_moved_outside(
    daemon: Daemon, outside: Path
) -> None:
    d = daemon
    write(d.docs("notes") / "gone.md", "# Gone\n\nzqgonetoken\n")
    wait_for(lambda: found_in(d, "notes", "zqgonetoken") == ["gone.md"])
    swap_for_link(d.home / "trash", outside)
    before = tree_state(outside)
    with pytest.raises(ApiError) as refused:
        d.client.request("DELETE", d.client.document("notes", "gone.md"))
    assert status_of(refused.value) == 507 and "link" in refused.value.message
    assert (d.docs("notes") / "gone.md").exists()
    assert d.client.get(d.client.kb("notes", "/trash"))["items"] == []
    assert any("trash" in p and "link" in p for p in problems(d))
    assert tree_state(outside) == before
    health_is_fast(d)


def test_a_linked_local_folder_is_neither_read_nor_written(
    daemon: Daemon, outside: Path, tmp_path: Path
) -> None:
    d = daemon
    vault = tmp_path / "vault"
    write(vault / "a.md", "# A\n\nzqvaulttoken\n")
    swap_for_link(d.home / "local", outside)
    before = tree_state(outside)
    with pytest.raises(ApiError) as refused:  # attaching records the folder in local/
        d.client.post("/api/v1/knowledge_bases", {"name": "vault", "path": str(vault)})
    assert status_of(refused.value) == 507 and "link" in refused.value.message
    assert any("local" in p and "link" in p for p in problems(d))
    assert tree_state(outside) == before
    health_is_fast(d)


def converted_text(d: Daemon, kb: str, data: bytes) -> Path:
    digest = digest_of(data)
    return d.home / "derived" / kb / digest[:2] / f"{digest}.md"


def test_a_converted_text_edited_by_hand_is_converted_again(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d, ["pdf"])
    pdf = make_pdf("zqtruetoken")
    write(d.docs(kb) / "a.pdf", pdf)
    wait_for(lambda: found_in(d, kb, "zqtruetoken") == ["a.pdf"], 60)
    text = converted_text(d, kb, pdf)
    text.write_text("# Forged\n\nzqforgedtoken\n")
    write(d.docs(kb) / "copy.pdf", pdf)  # the same bytes: they look for the same text
    wait_for(lambda: found_in(d, kb, "zqtruetoken") == ["a.pdf", "copy.pdf"], 60)
    assert found_in(d, kb, "zqforgedtoken") == []
    assert "zqtruetoken" in text.read_text()  # converted again over the forgery
    health_is_fast(d)


def test_a_converted_text_replaced_by_a_fifo_never_holds_a_save(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d, ["pdf"])
    pdf = make_pdf("zqfifotoken")
    write(d.docs(kb) / "a.pdf", pdf)
    wait_for(lambda: found_in(d, kb, "zqfifotoken") == ["a.pdf"], 60)
    text = converted_text(d, kb, pdf)
    text.unlink()
    os.mkfifo(text)
    started = time.monotonic()
    write(d.docs(kb) / "copy.pdf", pdf)
    wait_for(lambda: found_in(d, kb, "zqfifotoken") == ["a.pdf", "copy.pdf"], 15)
    assert time.monotonic() - started < 15
    assert text.is_file()  # a text converted again took its place
    health_is_fast(d)


def test_status_lists_no_problem_for_a_plain_data_home(shared_daemon: Daemon) -> None:
    status: dict[str, Any] = shared_daemon.client.get("/api/v1/status")
    assert status["problems"] == []


def test_a_linked_models_folder_is_neither_written_nor_emptied(
    tmp_path: Path, outside: Path
) -> None:
    from cofferd.domain.config import LOCAL_DEFAULT_MODEL
    from cofferd.domain.errors import EngineUnavailable
    from cofferd.infrastructure.models.embedders import bundled_model_dir

    home = tmp_path / "home"
    write(outside / LOCAL_DEFAULT_MODEL / "theirs.txt", "someone else's file")
    swap_for_link(home / "models", outside)
    before = tree_state(outside)
    with pytest.raises(EngineUnavailable, match="link"):
        bundled_model_dir(home / "models", lambda model: model)
    assert tree_state(outside) == before
