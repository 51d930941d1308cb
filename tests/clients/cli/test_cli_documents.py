"""cofferctl's document commands against a real daemon: edit's messages, rm asking and
the trash, add's report, grep's colours and exit status, on a terminal and in a pipe."""

from __future__ import annotations

import json
import unicodedata
import uuid
from pathlib import Path

import pytest

from tests.support.cli import ctl, on_terminal, run
from tests.support.daemon import Daemon, wait_for
from tests.support.helpers import write


@pytest.fixture(scope="module")
def kb(shared_daemon: Daemon) -> str:
    name = "docs-" + uuid.uuid4().hex[:6]
    assert run(shared_daemon, "kb", "create", name)[0] == 0
    return name


def _doc(d: Daemon, kb: str, relpath: str, text: str) -> dict[str, object]:
    write(d.docs(kb) / relpath, text)
    return wait_for(lambda: d.client.get(d.client.document(kb, relpath)))


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
    from tests.support.samples import make_html

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
    assert f"ignored {folder / 'photo.jpg'}: an image: this KB reads images only when" in out

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


def _columns(text: str) -> int:
    """Terminal columns, as an East Asian-aware terminal shows them."""
    return sum(
        0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
        for c in text
    )


def test_tables_stay_aligned_with_wide_and_combining_characters(
    shared_daemon: Daemon, tmp_path: Path
) -> None:
    d = shared_daemon
    kb = "wide-" + uuid.uuid4().hex[:6]
    assert run(d, "kb", "create", kb)[0] == 0
    titles = ["知识库的笔记", "ＦＵＬＬ width", "Cafe\u0301 noir", "plain", "tab\there"]
    for i, title in enumerate(titles):
        write(d.docs(kb) / f"n{i}.md", f"---\ntags: [标签{i}]\n---\n# {title}\n\nwords\n")
    wait_for(lambda: d.client.get(d.client.kb(kb, "/documents"))["total"] == len(titles))
    code, out = run(d, "docs", kb)
    rows = out.splitlines()[1:-1]
    assert code == 0 and len(rows) == len(titles)
    # the mode column starts at the same column on every row, whatever the title before it
    starts = {_columns(row[: row.index("edited")]) for row in rows}
    assert len(starts) == 1, out
    assert r"tab\there" in out  # escaped first, then measured
    code, out = run(d, "tags", kb)
    counts = {_columns(row[: row.rindex("1")]) for row in out.splitlines()[1:]}
    assert code == 0 and len(counts) == 1, out


def test_a_document_is_found_by_the_names_people_use(shared_daemon: Daemon, kb: str) -> None:
    d = shared_daemon
    _doc(d, kb, "projects/coffer/plan.md", "---\ntags: [p]\n---\n# The plan\n\nsteps\n")
    boiler = _doc(d, kb, "home/boiler-service.md", "# Boiler\n\nservice it in May\n")
    _doc(d, kb, "projects/house/plan.md", "# House plan\n\nrooms\n")
    code, out = run(d, "show", kb, "projects/coffer/plan")  # no .md
    assert code == 0 and out == "---\ntags: [p]\n---\n# The plan\n\nsteps\n"
    assert run(d, "show", kb, "PROJECTS/Coffer/Plan.MD")[1] == out  # any case
    assert run(d, "show", kb, "coffer/plan")[1] == out  # the end of its path
    for name in ("Boiler", "boiler", "boiler-service"):  # its title, its file name
        code, out = run(d, "show", kb, name, "--json")
        assert code == 0 and json.loads(out)["id"] == boiler["id"], name

    summer = _doc(d, kb, "voyages/ete.md", "# Été à Paris\n\nchaud\n")
    code, out = run(d, "show", kb, "ÉTÉ À PARIS", "--json")  # a title in any case
    assert code == 0 and json.loads(out)["id"] == summer["id"]

    several = ctl(d, "show", kb, "plan")
    assert several.returncode == 1 and "DOCUMENT_AMBIGUOUS" in several.stderr
    assert (
        "names 2 documents: projects/coffer/plan.md (The plan), projects/house/plan.md (House "
        "plan); give its path"
    ) in several.stderr

    typo = ctl(d, "show", kb, "Boilr")
    assert typo.returncode == 1 and "DOCUMENT_NOT_FOUND" in typo.stderr
    assert "did you mean home/boiler-service.md (Boiler)?" in typo.stderr
    code, out = run(d, "show", kb, "Boilr", "--json")
    details = json.loads(out)["error"]["details"]
    assert details["suggestions"] == [
        {"id": boiler["id"], "relative_path": "home/boiler-service.md", "title": "Boiler"}
    ]
    nothing = ctl(d, "show", kb, "zzzzqqqq")
    assert nothing.returncode == 1 and "did you mean" not in nothing.stderr


def test_restore_takes_a_start_of_the_trash_id(shared_daemon: Daemon, kb: str) -> None:
    d = shared_daemon
    ids = []
    for name in ("first", "second"):
        _doc(d, kb, f"trash/{name}.md", f"# {name}\n\nwords\n")
        code, out = run(d, "rm", kb, f"trash/{name}.md", "--yes")
        ids.append(out.split("in the trash as ")[1].split()[0])
    shared = next(i for i, (a, b) in enumerate(zip(*ids, strict=True)) if a != b)
    assert shared >= 4  # ULIDs of one minute share their start
    both = ctl(d, "restore", kb, ids[0][:shared])
    assert both.returncode == 1 and "DOCUMENT_AMBIGUOUS" in both.stderr
    assert "several trash ids" in both.stderr
    code, out = run(d, "restore", kb, ids[0][: shared + 1].lower())
    assert code == 0 and "restored trash/first.md (first)" in out
    code, out = run(d, "restore", kb, ids[1][:8])
    assert code == 0 and "restored trash/second.md (second)" in out
    short = ctl(d, "restore", kb, ids[0][:3])
    assert short.returncode == 1 and "TRASH_ENTRY_NOT_FOUND" in short.stderr
