"""cofferctl's document commands against a real daemon: edit's messages, rm asking and
the trash, add's report, grep's colours and exit status, on a terminal and in a pipe."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import threading
import uuid
from pathlib import Path

import pytest

from tests.daemon import BIN, Daemon, wait_for
from tests.helpers import write
from tests.test_cofferctl import ctl, ctl_env, run


def on_terminal(
    d: Daemon, *argv: str, answer: str = "", stdout_tty: bool = False, **env: str
) -> tuple[int, str, str]:
    """Run the real cofferctl with stdin and stderr (and stdout if asked) on a terminal;
    `answer` is typed in. Returns (exit code, stdout, what the terminal showed)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [str(BIN / "cofferctl"), *argv],
        env=ctl_env(COFFER_SOCKET=str(d.socket), **env),
        stdin=slave,
        stdout=slave if stdout_tty else subprocess.PIPE,
        stderr=slave,
    )
    os.close(slave)
    shown: list[bytes] = []

    def read_terminal() -> None:
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # EIO: every process let go of the terminal
                return
            if not data:
                return
            shown.append(data)

    reader = threading.Thread(target=read_terminal)
    reader.start()
    if answer:
        os.write(master, answer.encode())
    out = proc.stdout.read().decode() if proc.stdout else ""
    code = proc.wait(60)
    reader.join(10)
    os.close(master)
    return code, out, b"".join(shown).decode(errors="replace")


@pytest.fixture(scope="module")
def kb(shared_daemon: Daemon) -> str:
    name = "docs-" + uuid.uuid4().hex[:6]
    assert run(shared_daemon, "kb", "create", name)[0] == 0
    return name


def _doc(d: Daemon, kb: str, relpath: str, text: str) -> dict[str, object]:
    write(d.docs(kb) / relpath, text)
    return wait_for(lambda: d.client.get(d.client.kb(kb, f"/documents/{relpath}")))


def test_edit_explains_a_missing_or_failing_editor(
    shared_daemon: Daemon, kb: str, tmp_path: Path
) -> None:
    d = shared_daemon
    doc = _doc(d, kb, "edit.md", "# Edit\n\ntext")
    no_editor = ctl(d, "edit", kb, str(doc["id"]))
    assert (
        no_editor.returncode == 1 and "no editor set: export VISUAL or EDITOR" in no_editor.stderr
    )
    missing = ctl(d, "edit", kb, str(doc["id"]), EDITOR=str(tmp_path / "no-such-editor"))
    assert missing.returncode == 1 and "cannot run the editor" in missing.stderr
    failing = ctl(d, "edit", kb, str(doc["id"]), EDITOR="false")
    assert failing.returncode == 1 and "exited with 1" in failing.stderr
    unchanged = ctl(d, "edit", kb, str(doc["id"]), VISUAL="true", EDITOR="false")
    assert unchanged.returncode == 0 and unchanged.stdout == f"no change: {doc['path']}\n"
    for proc in (no_editor, missing, failing, unchanged):
        assert "Traceback" not in proc.stderr


def test_rm_asks_and_the_trash_gives_back(shared_daemon: Daemon, kb: str) -> None:
    d = shared_daemon
    doc = _doc(d, kb, "keep.md", "# Keep me\n\nprecious words")
    piped = ctl(d, "rm", kb, str(doc["id"]))
    assert piped.returncode == 2 and "--yes" in piped.stderr
    code, _, shown = on_terminal(d, "rm", kb, str(doc["id"]), answer="n\n")
    assert code == 0 and "Delete keep.md (Keep me)" in shown
    assert (d.docs(kb) / "keep.md").exists()

    code, out, shown = on_terminal(d, "rm", kb, str(doc["id"]), answer="y\n")
    assert code == 0 and not (d.docs(kb) / "keep.md").exists()
    assert "deleted keep.md" in out and f"restore it with: cofferctl restore {kb} " in out
    trash_id = out.rsplit(" ", 1)[1].strip()

    code, out = run(d, "trash", kb)
    assert code == 0 and trash_id in out and "keep.md" in out and "Keep me" in out
    listed = json.loads(run(d, "trash", kb, "--json")[1])
    assert listed["items"][0]["id"] == trash_id and listed["retention_days"] >= 1

    write(d.docs(kb) / "keep.md", "# Someone else\n\nnew words")  # the path is taken again
    occupied = ctl(d, "restore", kb, trash_id)
    assert occupied.returncode == 1 and "PATH_OCCUPIED" in occupied.stderr
    assert (d.docs(kb) / "keep.md").read_text() == "# Someone else\n\nnew words"
    (d.docs(kb) / "keep.md").unlink()
    code, out = run(d, "restore", kb, trash_id)
    assert code == 0 and "restored keep.md (Keep me)" in out
    assert (d.docs(kb) / "keep.md").read_text() == "# Keep me\n\nprecious words"
    gone = ctl(d, "restore", kb, trash_id)
    assert gone.returncode == 1 and "TRASH_ENTRY_NOT_FOUND" in gone.stderr

    code, out = run(d, "rm", kb, "keep.md", "--yes")
    assert code == 0 and "in the trash as " in out


def test_add_reports_documents_ignored_files_and_names(
    shared_daemon: Daemon, kb: str, tmp_path: Path
) -> None:
    from tests.samples import make_html

    d = shared_daemon
    folder = tmp_path / "inbox"
    folder.mkdir()
    (folder / "report.html").write_bytes(make_html("the heron census"))
    (folder / "photo.jpg").write_bytes(b"\xff\xd8 not a document")
    code, out = run(d, "add", kb, str(folder))
    assert code == 0
    added = d.client.get(d.client.kb(kb, "/documents"), q="heron")["documents"]
    added = added or d.client.get(d.client.kb(kb, "/documents"))["documents"]
    doc = next(x for x in added if x["source_mode"] == "converted")
    assert f"added {doc['title']}  {doc['id']}" in out and doc["path"] in out
    assert f"ignored {folder / 'photo.jpg'}: not a supported format (.jpg)" in out

    nothing = ctl(d, "add", kb, str(tmp_path / "*.pdf"))
    assert nothing.returncode == 2 and f"no files match '{tmp_path / '*.pdf'}'" in nothing.stderr
    code, out = run(d, "add", kb, str(folder / "report.html"))
    assert code == 0
    assert f"unchanged {folder / 'report.html'}: already here as {doc['title']}  {doc['id']}" in out
    (folder / "report.html").write_bytes(make_html("the heron census, revised"))
    code, out = run(d, "add", kb, str(folder / "report.html"))
    assert code == 1 and "add --replace to update it" in out and "pass replace" not in out


def test_add_shows_progress_on_a_terminal_only(
    shared_daemon: Daemon, kb: str, tmp_path: Path
) -> None:
    d = shared_daemon
    for i in range(3):
        write(tmp_path / "batch" / f"note{i}.md", f"# Note {i}\n\nbatch words {i}")
    code, _, shown = on_terminal(d, "add", kb, str(tmp_path / "batch"))
    assert code == 0 and "adding [" in shown and "3/3" in shown and "/s" in shown
    for i in range(3):
        write(tmp_path / "quiet" / f"other{i}.md", f"# Other {i}\n\nquiet words {i}")
    piped = ctl(d, "add", kb, str(tmp_path / "quiet"))
    assert piped.returncode == 0 and piped.stderr == ""


def test_grep_colours_orders_and_exits_1_on_nothing(shared_daemon: Daemon, kb: str) -> None:
    d = shared_daemon
    write(d.docs(kb) / "b" / "z.md", "# Z\n\nthe falcon\nno bird\nfalcon again")
    write(d.docs(kb) / "a.md", "# A\n\na falcon here")
    wait_for(lambda: run(d, "grep", kb, "falcon")[1].count("falcon") >= 3)
    code, out = run(d, "grep", kb, "falcon")
    assert code == 0
    lines = [line for line in out.splitlines() if line]
    assert lines[:3] == ["a.md:3:a falcon here", "b/z.md:3:the falcon", "b/z.md:5:falcon again"]

    code, _, out = on_terminal(d, "grep", kb, "fal?con", stdout_tty=True)
    assert code == 0 and "\x1b[1;31mfalcon\x1b[0m again" in out.replace("\r\n", "\n")
    _, _, out = on_terminal(d, "grep", kb, "falcon", stdout_tty=True, NO_COLOR="1")
    assert "falcon again" in out and "\x1b[" not in out

    missing = ctl(d, "grep", kb, "albatross")
    assert missing.returncode == 1 and missing.stdout == "" and missing.stderr == ""
    as_json = ctl(d, "grep", kb, "albatross", "--json")
    assert as_json.returncode == 1 and json.loads(as_json.stdout)["hits"] == []
