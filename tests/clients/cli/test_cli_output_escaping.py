"""cofferctl never lets a name or a document's text drive the terminal, against a real
daemon and real files with hostile names and content: control characters (C0, DEL, C1,
bidi controls) are shown escaped (`\\x1b`, `\\u202e`) in every command's output and on
stderr, and as JSON escapes with --json; cofferctl's own colours and links still work."""

from __future__ import annotations

import contextlib
import io
import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cofferctl import cli
from cofferctl.output import Output
from tests.support.cli import ctl, on_terminal, run
from tests.support.daemon import Daemon, wait_for
from tests.support.helpers import write

HOSTILE = "evil\x1b]0;PWNED\x07\x1b[2J"  # retitles the terminal, then clears it
SHOWN = r"evil\x1b]0;PWNED\x07\x1b[2J"
OTHERS = "cr\rbs\x08del\x7fc1\x9b31m"  # \x9b: CSI on a terminal reading C1 controls
OTHERS_SHOWN = r"cr\rbs\x08del\x7fc1\x9b31m"
TITLE_SHOWN = r"Title \x1b[31mred\x07 \u202e"
LINE_SHOWN = r"needle \x1b]0;PWNED\x07 \r over \x08 \x7f \x9b31m \u202e end"
TARGET_SHOWN = r"gone\x1bc\x07\x9b2J\u202etarget"
PADDING = "plain words, so that the controls stay a small share of the text. " * 20
NOTE = (
    '---\ntags: ["red\\e[31m", "bidi\\u202e"]\n---\n'
    "# Title \x1b[31mred\x07 \u202e\n\n"
    "needle \x1b]0;PWNED\x07 \r over \x08 \x7f \x9b31m \u202e end\n\n"
    f"[[gone\x1bc\x07\x9b2J\u202etarget]]\n\n{PADDING}"
)

# what may never reach the output raw; the newline is layout
UNSAFE = re.compile(
    r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
    r"\ud800-\udfff]"
)
# cofferctl's own sequences on a terminal: colours (SGR) and links to files (OSC 8)
OURS = re.compile(r"\x1b\[[0-9;]*m|\x1b\]8;;(?:file://[!-~]*)?\x1b\\")


class Terminal(io.StringIO):
    """A stream that says it is a terminal: colours, links and progress bars switch on."""

    def isatty(self) -> bool:
        return True


def cofferctl(d: Daemon, *argv: str, tty: bool = False) -> tuple[int, str, str]:
    """cofferctl in this process: (exit code, stdout, stderr), both on a terminal or not."""
    out, err = (Terminal(), Terminal()) if tty else (io.StringIO(), io.StringIO())
    with contextlib.redirect_stderr(err):
        code = cli.main(["--socket", str(d.socket), *argv], stdout=out)
    return code, out.getvalue(), err.getvalue()


def assert_no_raw_controls(text: str, *, ours: bool = False) -> str:
    """`text` without cofferctl's own sequences (when `ours`) holds no control character
    but the newline; returns that text."""
    bare = OURS.sub("", text) if ours else text
    bare = re.sub(r"\r(?=(?:adding|reindexing) \[)", "", bare)  # a progress bar redrawn
    found = UNSAFE.search(bare)
    assert found is None, f"raw {found[0]!r}: {bare[max(0, found.start() - 60) :][:120]!r}"
    return bare


def strings(data: Any) -> Iterator[str]:
    if isinstance(data, str):
        yield data
    elif isinstance(data, dict):
        for key, value in data.items():
            yield key
            yield from strings(value)
    elif isinstance(data, list):
        for item in data:
            yield from strings(item)


@pytest.fixture(autouse=True)
def colour_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)


@dataclass
class Hostile:
    kb: str
    attached: str
    sources: Path


@pytest.fixture(scope="module")
def hostile(shared_daemon: Daemon, tmp_path_factory: pytest.TempPathFactory) -> Hostile:
    d = shared_daemon
    tmp = tmp_path_factory.mktemp("hostile")
    kb = "esc-" + uuid.uuid4().hex[:6]
    assert run(d, "kb", "create", kb)[0] == 0
    docs = d.docs(kb)
    write(docs / f"{HOSTILE}.md", NOTE)
    write(docs / "two\nlines.md", "# Two\n\nneedle two\n")  # a newline forging a line
    write(docs / f"{OTHERS}.md", "# Others\n\nneedle others\n")
    write(docs / f"{HOSTILE}.sync-conflict-20261130-101500-ABCDEFG.md", "# Copy\n\ncopy\n")
    (docs / f"bin{HOSTILE}.md").write_bytes(b"\0" * 64)  # skipped: binary content
    write(docs / f"gone{HOSTILE}.md", "# Gone\n\nto the trash\n")
    source = write(tmp / f"src{HOSTILE}" / "source.md", "# Source\n\nsource words\n")
    assert run(d, "add", kb, str(source))[0] == 0
    source.unlink()  # check-sources: missing
    vault = tmp / f"vault{HOSTILE}\u202edir"  # KB names are plain; folder names are not
    write(vault / "plain.md", "# Plain\n\nwords\n")
    attached = kb + "-attached"
    assert run(d, "kb", "create", attached, "--path", str(vault))[0] == 0

    c = d.client
    wait_for(lambda: c.get(c.kb(kb, "/documents"))["total"] == 5)
    wait_for(lambda: c.get(c.kb(kb, "/skipped"))["items"])
    wait_for(lambda: c.get(c.kb(kb, "/conflicts"))["conflicts"])
    gone = c.get(c.document(kb, f"gone{HOSTILE}.md"))
    c.request("DELETE", c.document(kb, gone["id"]))
    return Hostile(kb, attached, tmp)


# command: (its arguments, what its human output shows escaped); each runs in a pipe, on a
# terminal and with --json
COMMANDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "status": (("status",), (rf"vault{SHOWN}\u202edir",)),
    "kb list": (("kb", "list"), ()),
    "kb show": (("kb", "show", "{attached}"), ()),
    "docs": (("docs", "{kb}"), (rf"{SHOWN}.md", r"two\nlines.md", rf"{OTHERS_SHOWN}.md")),
    "search": (("search", "{kb}", "needle"), (TITLE_SHOWN, rf"{SHOWN}.md", "two\\nlines")),
    "search --all": (("search", "--all", "needle"), (TITLE_SHOWN,)),
    "grep": (("grep", "{kb}", "needle"), (LINE_SHOWN, rf"{SHOWN}.md", rf"{OTHERS_SHOWN}.md")),
    "tags": (("tags", "{kb}"), (r"#red\x1b[31m", r"#bidi\u202e")),
    "links --broken": (("links", "{kb}", "--broken"), (TARGET_SHOWN, rf"{SHOWN}.md")),
    "links": (("links", "{kb}", f"{HOSTILE}.md"), (TARGET_SHOWN, rf"links from {SHOWN}.md")),
    "conflicts": (("conflicts", "{kb}"), (rf"{SHOWN}.sync-conflict-", rf"copy of {SHOWN}.md")),
    "skipped": (("skipped", "{kb}"), (rf"bin{SHOWN}.md: binary content",)),
    "reindex": (("reindex", "{kb}"), (rf"skipped bin{SHOWN}.md: binary content",)),
    "trash": (("trash", "{kb}"), (rf"gone{SHOWN}.md",)),
    "check-sources": (("check-sources", "{kb}"), (rf"src{SHOWN}/source.md",)),
    "log": (("log", "--limit", "200"), ()),
}


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_escapes_names_and_content(
    shared_daemon: Daemon, hostile: Hostile, command: str
) -> None:
    template, visible = COMMANDS[command]
    argv = [a.format(kb=hostile.kb, attached=hostile.attached) for a in template]
    for tty in (False, True):
        code, out, err = cofferctl(shared_daemon, *argv, tty=tty)
        assert code == 0, err
        shown = assert_no_raw_controls(out, ours=tty)
        assert_no_raw_controls(err, ours=tty)
        for text in visible:
            assert text in shown, f"{text!r} not in {shown!r}"
    code, out, err = cofferctl(shared_daemon, *argv, "--json")
    assert code == 0 and err == ""
    assert_no_raw_controls(out)
    # the data came through whole: JSON escapes, not something lost or replaced
    assert any(UNSAFE.search(s) for s in strings(json.loads(out)))


def test_show_prints_the_file_raw_into_a_pipe_and_escaped_on_a_terminal(
    shared_daemon: Daemon, hostile: Hostile
) -> None:
    d = shared_daemon
    file = (d.docs(hostile.kb) / f"{HOSTILE}.md").read_bytes().decode()
    code, out, _ = cofferctl(d, "show", hostile.kb, f"{HOSTILE}.md")
    assert code == 0 and out == file  # a pipe gets the file, frontmatter too, as cat gives it

    code, out, _ = cofferctl(d, "show", hostile.kb, f"{HOSTILE}.md", tty=True)
    shown = assert_no_raw_controls(out, ours=True)
    assert code == 0 and r"needle \x1b]0;PWNED\x07" in shown and TARGET_SHOWN in shown
    assert shown.startswith('---\ntags: ["red\\e[31m"') and out.count("\n") == file.count("\n")

    doc = d.client.get(d.client.document(hostile.kb, f"{HOSTILE}.md"))
    code, out, _ = cofferctl(d, "show", hostile.kb, f"{HOSTILE}.md", "--header")
    assert code == 0 and out.endswith(doc["content"])  # the text without its frontmatter
    head = assert_no_raw_controls(out[: -len(doc["content"])])
    assert head.startswith(f"{TITLE_SHOWN}  (") and rf"{SHOWN}.md)" in head
    assert r"#red\x1b[31m #bidi\u202e" in head

    code, out, _ = cofferctl(d, "show", hostile.kb, f"{HOSTILE}.md", "--json")
    with_file = d.client.get(d.client.document(hostile.kb, f"{HOSTILE}.md"), file_text="true")
    assert code == 0 and json.loads(assert_no_raw_controls(out)) == with_file
    assert with_file["file_text"] == file


def test_colours_and_links_still_work_on_a_terminal(
    shared_daemon: Daemon, hostile: Hostile
) -> None:
    code, out, _ = cofferctl(shared_daemon, "grep", hostile.kb, "needle", tty=True)
    assert code == 0 and "\x1b[1;31mneedle\x1b[0m \\x1b]0;PWNED\\x07" in out
    targets = re.findall(r"\x1b\]8;;(.*?)\x1b\\", out)
    assert any("%1B%5D0%3BPWNED%07%1B%5B2J.md" in t for t in targets)
    assert all(re.fullmatch(r"(file://[!-~]+)?", t) for t in targets)  # printable ASCII only
    assert f"\x1b[35m{SHOWN}.md\x1b[0m" in out  # the escaped name, in our colour
    code, out, _ = cofferctl(shared_daemon, "search", hostile.kb, "needle", tty=True)
    assert code == 0 and "\x1b[1;33mneedle\x1b[0m" in out and f"\x1b[1m{TITLE_SHOWN}" in out


def test_errors_on_stderr_are_escaped(shared_daemon: Daemon, hostile: Hostile) -> None:
    d = shared_daemon
    source = d.client.get(d.client.kb(hostile.kb, "/documents"), q="Source")["documents"][0]
    for json_flag in ((), ("--json",)):  # the real stderr of the real cofferctl
        proc = ctl(d, "update-source", hostile.kb, source["id"], *json_flag)
        assert proc.returncode == 1 and "SOURCE_MISSING" in proc.stderr
        assert rf"the source {hostile.sources}/src{SHOWN}/source.md is gone" in (
            assert_no_raw_controls(proc.stderr)
        )
        assert_no_raw_controls(proc.stdout)
        proc = ctl(d, "show", hostile.kb, f"nothere{HOSTILE}", *json_flag)
        assert proc.returncode == 1 and "DOCUMENT_NOT_FOUND" in proc.stderr
        assert rf"nothere{SHOWN}" in assert_no_raw_controls(proc.stderr)
        assert_no_raw_controls(proc.stdout)
    proc = ctl(d, "rm", hostile.kb, f"{OTHERS}.md")  # not asked on a pipe: needs --yes
    assert proc.returncode == 2 and "--yes" in assert_no_raw_controls(proc.stderr)


def test_add_and_rm_and_restore_escape_names(
    shared_daemon: Daemon, hostile: Hostile, tmp_path: Path
) -> None:
    d = shared_daemon
    source = write(tmp_path / f"in{HOSTILE}" / f"{OTHERS}\u202e.md", "# Added\n\nadded words\n")
    code, out, err = cofferctl(d, "add", hostile.kb, str(source), tty=True)  # with a bar
    assert code == 0 and "adding [" in err
    assert rf"{OTHERS_SHOWN}\u202e.md" in assert_no_raw_controls(err, ours=True)
    shown = assert_no_raw_controls(out, ours=True)
    assert rf"(from {tmp_path}/in{SHOWN}/{OTHERS_SHOWN}\u202e.md)" in shown
    code, out, _ = cofferctl(d, "add", hostile.kb, str(source), "--json")
    added = json.loads(assert_no_raw_controls(out))["results"][0]
    assert code == 0 and added["path"] == str(source)

    write(d.docs(hostile.kb) / f"rm{HOSTILE}.md", "# Removed \x1b[31mtitle\n\nwords\n")
    wait_for(lambda: d.client.get(d.client.document(hostile.kb, f"rm{HOSTILE}.md")))
    code, _, shown = on_terminal(d, "rm", hostile.kb, f"rm{HOSTILE}.md", answer="n\n")
    shown = assert_no_raw_controls(shown.replace("\r\n", "\n"))  # the question, on a terminal
    assert code == 0 and rf"Delete rm{SHOWN}.md (Removed \x1b[31mtitle) from " in shown
    code, out, _ = cofferctl(d, "rm", hostile.kb, f"rm{HOSTILE}.md", "--yes")
    assert code == 0 and rf"deleted rm{SHOWN}.md" in assert_no_raw_controls(out)
    trash_id = out.rsplit(" ", 1)[1].strip()
    code, out, _ = cofferctl(d, "restore", hostile.kb, trash_id)
    shown = assert_no_raw_controls(out)
    assert code == 0 and rf"restored rm{SHOWN}.md (Removed \x1b[31mtitle)" in shown


def test_json_escapes_what_json_dumps_leaves_raw() -> None:
    stream = io.StringIO()
    data = {"name": "del\x7f c1\x9b bidi\u202e\u2066 lone\udce9 cjk 知识库 é", "esc": "\x1b"}
    Output(stream, as_json=True).json(data)
    text = stream.getvalue()
    assert_no_raw_controls(text)
    assert r"del\u007f c1\u009b bidi\u202e\u2066 lone\udce9 cjk 知识库 é" in text
    assert json.loads(text) == data
    stream = io.StringIO()
    Output(stream, as_json=False).line(f"lone\udce9 {HOSTILE}")
    assert stream.getvalue() == rf"lone\udce9 {SHOWN}" + "\n"
