"""`cofferctl lsp` from a real editor: Neovim's own LSP client, headless, on a note of an
attached-style vault with CJK names and nested folders (`make test` installs Neovim from
Debian's packages where it can)."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.support.daemon import BIN, Daemon, wait_for
from tests.support.helpers import write

NVIM = shutil.which("nvim")
SCRIPT = Path(__file__).parent / "editors" / "nvim_lsp.lua"


@pytest.mark.skipif(NVIM is None, reason="Neovim is not installed: apt install neovim")
def test_neovim_shows_diagnostics_jumps_to_a_heading_and_completes(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = "nvim-" + uuid.uuid4().hex[:8]
    d.client.post("/api/v1/knowledge_bases", {"name": kb})
    docs = d.docs(kb)
    write(docs / "deep" / "er" / "計画.md", "# 計画\n\n## 予算\n\nnumbers\n")
    wait_for(lambda: d.client.get(d.client.kb(kb, "/metrics"))["documents"] == 1)
    note = write(docs / "today.md", "# Today\n\n見て [[計画#予算]] and [[nowhere]]\nsee [[計\n")
    line = note.read_text().split("\n")[2]
    done = subprocess.run(
        [str(NVIM), "--headless", "--clean", "-u", str(SCRIPT)],
        env=d.env(
            COFFERCTL=str(BIN / "cofferctl"),
            LSP_NOTE=str(note),
            LSP_LINE="2",
            LSP_CHARACTER=str(len(line[: line.index("予算")].encode("utf-16-le")) // 2),
            LSP_COMPLETE_LINE="3",
            LSP_COMPLETE_CHARACTER=str(len("see [[計")),
        ),
        cwd=docs,
        capture_output=True,
        timeout=60,
    )
    said = [json.loads(x) for x in done.stdout.decode().splitlines() if x.startswith("{")]
    assert done.returncode == 0, (said, done.stderr.decode()[-2000:])
    (diagnostics,) = [x["diagnostics"] for x in said if "diagnostics" in x]
    assert [(x["line"], "nowhere" in x["message"]) for x in diagnostics] == [(2, True)]
    (definition,) = [x["definition"] for x in said if "definition" in x]
    assert definition == {"uri": (docs / "deep" / "er" / "計画.md").as_uri(), "line": 2}
    (completion,) = [x["completion"] for x in said if "completion" in x]
    assert completion == ["計画"]


@pytest.mark.skipif(NVIM is None, reason="Neovim is not installed: apt install neovim")
def test_neovim_jumps_to_an_image_a_link_embeds(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = "nvim-" + uuid.uuid4().hex[:8]
    d.client.post("/api/v1/knowledge_bases", {"name": kb})
    docs = d.docs(kb)
    image = docs / "Attachments" / "Header.PNG"
    image.parent.mkdir(parents=True)
    image.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    write(docs / "plan.md", "# Plan\n")
    wait_for(lambda: d.client.get(d.client.kb(kb, "/metrics"))["documents"] == 1)
    note = write(docs / "today.md", "# Today\n\n![[header.png#interface]] [[nowhere]]\n[[pla\n")
    done = subprocess.run(
        [str(NVIM), "--headless", "--clean", "-u", str(SCRIPT)],
        env=d.env(
            COFFERCTL=str(BIN / "cofferctl"),
            LSP_NOTE=str(note),
            LSP_LINE="2",
            LSP_CHARACTER="5",
            LSP_COMPLETE_LINE="3",
            LSP_COMPLETE_CHARACTER="5",
        ),
        cwd=docs,
        capture_output=True,
        timeout=60,
    )
    said = [json.loads(x) for x in done.stdout.decode().splitlines() if x.startswith("{")]
    assert done.returncode == 0, (said, done.stderr.decode()[-2000:])
    (diagnostics,) = [x["diagnostics"] for x in said if "diagnostics" in x]
    assert [("nowhere" in x["message"]) for x in diagnostics] == [True]  # not the image
    (definition,) = [x["definition"] for x in said if "definition" in x]
    assert definition == {"uri": image.as_uri(), "line": 0}


README = Path(__file__).parents[3] / "README.md"
CHECK = Path(__file__).parent / "editors" / "nvim_readme_check.lua"
SETUP_SAYS = "Neovim, every version from 0.7"


def readme_setup(cofferctl: Path) -> str:
    """The README's Neovim setup as it is printed there, with this venv's cofferctl."""
    text = README.read_text()
    after = text[text.index(SETUP_SAYS) :]
    snippet = after[after.index("```lua\n") + len("```lua\n") : after.index("\n```\n")]
    assert "/absolute/path/to/.venv/bin/cofferctl" in snippet
    return snippet.replace("/absolute/path/to/.venv/bin/cofferctl", str(cofferctl)) + "\n"


@pytest.mark.skipif(NVIM is None, reason="Neovim is not installed: apt install neovim")
def test_the_readmes_neovim_setup_runs_with_a_root_for_an_attached_sub_folder(
    shared_daemon: Daemon, tmp_path: Path
) -> None:
    """The README's snippet, taken from it, on the Neovim installed (Debian's 0.7.2 where
    `make test` installs it): a note of an attached sub-folder of a git repository gets the
    repository as its root, a note with no marker above it its own folder; both get the
    server's diagnostics."""
    d = shared_daemon
    init = write(tmp_path / "init.lua", readme_setup(BIN / "cofferctl"))
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "notes").mkdir()
    kb = "nvim-" + uuid.uuid4().hex[:8]
    d.client.post("/api/v1/knowledge_bases", {"name": kb, "path": str(repo / "notes")})
    inside = write(repo / "notes" / "sub" / "today.md", "# Today\n\nsee [[nowhere]]\n")
    bare = "nvim-" + uuid.uuid4().hex[:8]
    d.client.post("/api/v1/knowledge_bases", {"name": bare})
    alone = write(d.docs(bare) / "deep" / "plan.md", "# Plan\n\nsee [[elsewhere]]\n")
    for note, root, missing in ((inside, repo, "nowhere"), (alone, alone.parent, "elsewhere")):
        done = subprocess.run(
            [str(NVIM), "--headless", "--clean", "-u", str(init), "-c", f"luafile {CHECK}"],
            env=d.env(LSP_NOTE=str(note)),
            cwd=tmp_path,
            capture_output=True,
            timeout=60,
        )
        said = [json.loads(x) for x in done.stdout.decode().splitlines() if x.startswith("{")]
        assert done.returncode == 0, (said, done.stderr.decode()[-2000:])
        (found,) = said
        assert found["roots"] == [str(root)]
        assert any(missing in message for message in found["diagnostics"]), found
