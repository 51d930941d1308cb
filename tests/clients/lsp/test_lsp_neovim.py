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
