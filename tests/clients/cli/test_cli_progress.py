"""What cofferctl says of work and trouble, against a real daemon: skipped files and why,
problems in status, progress in status and as a bar on a terminal (quiet in a pipe)."""

from __future__ import annotations

import uuid
from pathlib import Path

from tests.support.cli import ctl, on_terminal, run
from tests.support.daemon import Daemon, wait_for
from tests.support.helpers import write

MANY = 3000  # files: indexing them takes long enough to be seen at work


def test_skipped_files_are_listed_with_reasons(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = "skip-" + uuid.uuid4().hex[:6]
    assert run(d, "kb", "create", kb, "--set", "max_document_bytes=1KiB")[0] == 0
    assert d.client.get(d.client.kb(kb))["config"]["max_document_bytes"] == 1024
    write(d.docs(kb) / "big.md", "word " * 1000)
    write(d.docs(kb) / "fine.md", "# Fine\n\nwords")
    code, out = wait_for(lambda: (r := run(d, "skipped", kb))[1].startswith("big.md") and r)
    assert code == 0 and out == "big.md: too_large\n1 files skipped\n"
    code, out = run(d, "reindex", kb)
    assert code == 0 and "1 skipped" in out and "  skipped big.md: too_large" in out
    code, out = run(d, "status")
    assert f"{kb}: 1 files skipped (cofferctl skipped {kb})" in out


def test_status_names_a_problem(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = "prob-" + uuid.uuid4().hex[:6]
    variable = "COFFER_TEST_NO_SUCH_KEY_" + uuid.uuid4().hex[:6].upper()
    assert run(d, "kb", "create", kb)[0] == 0
    settings = [
        "enabled_modes=keyword,vector", "embedding.provider=openai",
        "embedding.model=text-embedding-3-small", "embedding.dimensions=8",
        "embedding.base_url=http://127.0.0.1:9/v1", f"embedding.credential_ref=env:{variable}",
    ]  # fmt: skip
    assert run(d, "kb", "set", kb, *settings)[0] == 0
    out = run(d, "status")[1]
    assert any(
        line.startswith(f"{kb}: problem: ") and variable in line for line in out.splitlines()
    )


def _many_files(folder: Path) -> None:
    for i in range(MANY):
        write(folder / f"n{i // 100}" / f"note{i}.md", f"# Note {i}\n\nwords of note {i}\n")


def test_status_shows_progress_while_indexing(shared_daemon: Daemon, tmp_path: Path) -> None:
    d = shared_daemon
    kb = "prog-" + uuid.uuid4().hex[:6]
    _many_files(tmp_path / "vault")
    assert run(d, "kb", "create", kb, "--path", str(tmp_path / "vault"))[0] == 0
    line = wait_for(
        lambda: next(
            (x for x in run(d, "status")[1].splitlines() if x.startswith(f"{kb}: indexing ")),
            None,
        )
    )
    assert (
        f"/{MANY:,} files (" in line and "/s" in line and " since " in line
    )  # time left, or not yet
    wait_for(lambda: d.client.get(d.client.kb(kb, "/documents"))["total"] == MANY, timeout=120)


def test_reindex_shows_a_bar_on_a_terminal_only(shared_daemon: Daemon, tmp_path: Path) -> None:
    d = shared_daemon
    kb = "bar-" + uuid.uuid4().hex[:6]
    _many_files(tmp_path / "vault")
    assert run(d, "kb", "create", kb, "--path", str(tmp_path / "vault"))[0] == 0
    code, out, shown = on_terminal(d, "reindex", kb)
    assert code == 0 and "reindexing [" in shown and f"/{MANY:,} " in shown and "/s" in shown
    assert "files:" in out and "reindexing" not in out  # the bar is not in the output
    piped = ctl(d, "reindex", kb)
    assert piped.returncode == 0 and piped.stderr == "" and f"{MANY} files:" in piped.stdout
