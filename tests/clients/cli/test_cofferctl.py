"""cofferctl against a real daemon: commands, output, exit codes, start-up weight."""

from __future__ import annotations

import ast
import asyncio
import inspect
import io
import itertools
import json
import re
import shlex
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from cofferctl import api, cli
from cofferctl.client import Client
from tests.support.cli import ctl, ctl_env, run
from tests.support.daemon import BIN, REPO, Daemon, contract, wait_for
from tests.support.helpers import SHARED_WITH_CLI, write


@pytest.fixture(scope="module")
def kb(shared_daemon: Daemon) -> str:
    name = "ctl-" + uuid.uuid4().hex[:6]
    assert run(shared_daemon, "kb", "create", name, "--set", "chunk_size=256")[0] == 0
    write(shared_daemon.docs(name) / "tar.md", "# Tar\n\nArchive files with tar.\n")
    write(shared_daemon.docs(name) / "notes" / "k8s.md", "# Cluster\n\nkubectl apply k8s\n")
    wait_for(lambda: run(shared_daemon, "docs", name)[1].count(".md") == 2)
    return name


def test_one_shot_commands(shared_daemon: Daemon, kb: str) -> None:
    d = shared_daemon
    code, out = run(d, "status")
    assert code == 0 and str(d.home) in out and kb in out
    assert kb in run(d, "kb", "list")[1]
    assert "chunk_size: 256" in run(d, "kb", "show", kb)[1]
    code, out = run(d, "search", kb, "archive", "files")
    assert code == 0 and "tar.md" in out and "\x1b[" not in out  # no colour off a terminal
    code, out = run(d, "grep", kb, "kubectl")
    assert code == 0 and out.startswith("notes/k8s.md:3:kubectl apply k8s")
    assert "chunks" in run(d, "metrics", kb)[1]
    assert "2 files" in run(d, "reindex", kb)[1]
    assert "resource_created" in run(d, "log", "--kb", kb)[1]


def test_json_is_the_api_body(shared_daemon: Daemon, kb: str) -> None:
    code, out = run(shared_daemon, "search", kb, "tar", "--json")
    api = shared_daemon.client.post(shared_daemon.client.kb(kb, "/search"), {"query": "tar"})
    assert code == 0 and json.loads(out) == api
    code, out = run(shared_daemon, "--json", "docs", kb)
    assert json.loads(out)["total"] == 2


def test_show_edit_rm(shared_daemon: Daemon, kb: str, tmp_path: Path) -> None:
    d = shared_daemon
    write(d.docs(kb) / "edit-me.md", "# Edit me\n\nbefore")
    doc = wait_for(
        lambda: json.loads(run(d, "docs", kb, "-q", "edit me", "--json")[1])["documents"]
    )[0]
    assert run(d, "show", kb, doc["id"])[1].endswith("# Edit me\n\nbefore")
    editor = tmp_path / "editor.sh"
    editor.write_text('#!/bin/sh\nprintf "# Edit me\\n\\nafter the editor" > "$1"\n')
    editor.chmod(0o755)
    proc = subprocess.run(
        [str(BIN / "cofferctl"), "--socket", str(d.socket), "edit", kb, doc["id"]],
        env=ctl_env(EDITOR=str(editor)),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"saved {doc['path']} (sha256 ")
    wait_for(lambda: "edit-me.md" in run(d, "search", kb, "editor")[1])
    assert run(d, "rm", kb, doc["id"], "--yes")[0] == 0
    assert not (d.docs(kb) / "edit-me.md").exists()


def test_exit_codes(shared_daemon: Daemon, tmp_path: Path) -> None:
    d = shared_daemon
    missing = ctl(d, "search", "no-such-kb", "x")
    assert missing.returncode == 1 and "KB_NOT_FOUND" in missing.stderr
    assert ctl(d, "search").returncode == 2
    assert ctl(d, "kb", "set", "notes", "no-equals-sign").returncode == 2
    refused = ctl(d, "kb", "delete", "notes")  # not a terminal, no --yes: nothing deleted
    assert refused.returncode == 2 and d.docs("notes").is_dir()
    down = subprocess.run(
        [str(BIN / "cofferctl"), "status"],
        env=ctl_env(COFFER_SOCKET=str(tmp_path / "none.sock")),
        capture_output=True,
        text=True,
    )
    assert down.returncode == 3
    assert "not running" in down.stderr and "start it with `cofferd`" in down.stderr
    assert len(down.stderr.strip().splitlines()) == 1


def _commands() -> list[list[str]]:
    parser = cli.build_parser()
    found: list[list[str]] = []

    def walk(p: object, prefix: list[str]) -> None:
        for action in getattr(p, "_actions", []):
            if action.__class__.__name__ == "_SubParsersAction":
                for name, sub in action.choices.items():
                    found.append([*prefix, name])
                    walk(sub, [*prefix, name])

    walk(parser, [])
    return found


@pytest.mark.parametrize("command", _commands(), ids=" ".join)
def test_every_command_has_help_and_is_documented(command: list[str]) -> None:
    out = io.StringIO()
    with pytest.raises(SystemExit) as exit_:
        sys.stdout, saved = out, sys.stdout
        try:
            cli.main([*command, "--help"])
        finally:
            sys.stdout = saved
    assert exit_.value.code == 0 and "usage: cofferctl" in out.getvalue()
    assert f"cofferctl {' '.join(command)}" in (REPO / "README.md").read_text()


def test_the_readme_states_the_install_weight_last_measured() -> None:
    """The README said about 0.5 GB where the install was 653 MB: it states the figure the
    latest `bench.guards.install_weight` run wrote in docs/benchmarks.md."""
    measured = re.findall(
        r"install_weight`: `make run`'s venv (\d+) MB",
        (REPO / "docs" / "benchmarks.md").read_text(),
    )
    assert measured
    readme = " ".join((REPO / "README.md").read_text().split())
    assert f"`make run`'s venv weighs {measured[-1]} MB" in readme


def test_cofferctl_imports_nothing_heavy() -> None:
    code = (
        "import sys, cofferctl.cli, cofferctl.client; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'cofferd','aiohttp','pydantic','sqlean','aiosqlite','yaml','watchfiles','platformdirs'}"
        f" and m not in {SHARED_WITH_CLI!r}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


class Recording(Client):
    """A client that sends nothing: it keeps the method and path of each request that
    cofferctl.api makes, and answers with an empty object."""

    def __init__(self) -> None:
        super().__init__(Path("/nonexistent.sock"))
        self.asked: list[tuple[str, str]] = []

    def send(self, method: str, path: str, body: Any = None, query: Any = None) -> Any:
        self.asked.append((method, path))
        return 200, {}

    def upload(self, path: str, file: Path, fields: dict[str, str]) -> Any:
        self.asked.append(("POST", path))
        return {}


# what each kind of argument is given: segments holding `/`, blanks, `#` and `%`
SAMPLES: dict[str, list[Any]] = {
    "str": ["a b/c #1%.md"],
    "bool": [True, False],
    "JSON": [{}],
    "dict[str, str]": [{}],
    "Path": [Path("note.md")],
}


def _endpoints() -> dict[str, Any]:
    """cofferctl.api's functions that call the daemon: those taking the client first."""
    return {
        name: function
        for name, function in vars(api).items()
        if inspect.isfunction(function)
        and not name.startswith("_")
        and next(iter(inspect.signature(function).parameters), None) == "client"
    }


def _requests(function: Any) -> list[tuple[str, str, list[Any]]]:
    """(method, path, the arguments given) of every request `function` makes, for each
    combination of the arguments it requires (those with a default are left to it)."""
    required = [
        p for p in list(inspect.signature(function).parameters.values())[1:]
        if p.default is inspect.Parameter.empty
    ]  # fmt: skip
    made = []
    for values in itertools.product(*(SAMPLES[str(p.annotation)] for p in required)):
        client = Recording()
        function(client, *values)
        made += [(method, path, list(values)) for method, path in client.asked]
    return made


def test_every_path_the_api_client_makes_is_a_route_of_the_daemon_and_the_contract() -> None:
    """Each of cofferctl.api's functions asks for a route the daemon serves, with that
    method, and an operation docs/openapi.yaml lists; each argument stays one segment."""
    from aiohttp import web
    from aiohttp.test_utils import make_mocked_request

    from cofferd.surfaces.http import api as http_api

    app = web.Application()
    app.router.add_routes(http_api.routes)
    spec = contract()["paths"]

    async def check(name: str, method: str, path: str, given: list[Any]) -> None:
        found = await app.router.resolve(make_mocked_request(method, path, app=app))
        assert found.http_exception is None, f"api.{name}: {method} {path}: {found.http_exception}"
        template = found.route.resource.canonical  # type: ignore[union-attr]
        assert method.lower() in spec.get(template, {}), f"api.{name}: {method} {template}"
        segments = {v for v in given if isinstance(v, str)}
        assert segments <= set(found.values()), f"api.{name}: {path} cuts an argument"

    endpoints = _endpoints()
    assert len(endpoints) > 30
    for name, function in endpoints.items():
        made = _requests(function)
        assert made, f"api.{name} asks nothing of the daemon"
        for method, path, given in made:
            asyncio.run(check(name, method, path, given))


def test_cofferctl_spells_the_api_paths_in_one_module_and_uses_each_endpoint() -> None:
    """The CLI, the MCP server and the language server reach the daemon through
    cofferctl.api only, and each of its functions is called by one of them."""
    package = REPO / "cofferctl"
    used: set[str] = set()
    for source in package.rglob("*.py"):
        if source.parent == package and source.name == "api.py":
            continue
        text = source.read_text()
        assert "/api/" not in text, f"{source.relative_to(REPO)} spells an API path"
        if source.parent == package and source.name == "client.py":
            continue  # its kb() and document() are for scripts and tests
        used |= {
            node.attr
            for node in ast.walk(ast.parse(text))
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "api"
        }
    unused = set(_endpoints()) - used
    assert not unused, f"cofferctl.api functions nothing calls: {sorted(unused)}"


def test_add_files_folders_and_globs(shared_daemon: Daemon, tmp_path: Path) -> None:
    from tests.support.samples import make_docx, make_html, make_pdf

    d = shared_daemon
    kb = "add-" + uuid.uuid4().hex[:6]
    run(d, "kb", "create", kb)
    folder = tmp_path / "inbox"
    (folder / "nested").mkdir(parents=True)
    (folder / "a.docx").write_bytes(make_docx("docx swallow"))
    (folder / "nested" / "b.pdf").write_bytes(make_pdf("pdf sparrow"))
    (folder / "picture.png").write_bytes(b"\x89PNG not a document")
    (folder / ".hidden.html").write_bytes(make_html("never added"))
    (tmp_path / "c.html").write_bytes(make_html("html finch"))
    (tmp_path / "empty.txt").write_bytes(b"")

    code, out = run(d, "add", kb, str(folder), str(tmp_path / "*.html"))
    assert code == 0
    assert "3 added, 0 updated, 0 unchanged, 0 rejected; 2 files ignored" in out
    images_off = f"ignored {folder / 'picture.png'}: an image: this KB reads images only when "
    images_off += "it lists them ("
    assert images_off in out
    turn_on = out.split(images_off, 1)[1].split(")\n", 1)[0]  # the hint runs as printed
    assert run(d, *shlex.split(turn_on)[1:])[0] == 0
    assert "png" in json.loads(run(d, "kb", "show", kb, "--json")[1])["config"]["index_formats"]
    assert f"ignored {folder / '.hidden.html'}: hidden file" in out
    for word in ("swallow", "sparrow", "finch"):
        assert word in run(d, "search", kb, word)[1]
    assert "never" not in run(d, "search", kb, "never")[1]

    code, out = run(d, "add", kb, str(folder / "a.docx"), str(tmp_path / "empty.txt"), "--json")
    summary = json.loads(out)
    assert code == 1 and summary["counts"] == {
        "added": 0, "updated": 0, "unchanged": 1, "rejected": 1
    }  # fmt: skip
    assert summary["results"][1]["reason"] == "empty"

    code, out = run(d, "check-sources", kb)
    assert code == 0 and "3 unchanged, 0 changed, 0 missing, 0 unreachable, 0 updated" in out
    (folder / "nested" / "b.pdf").unlink()
    assert "1 missing" in run(d, "check-sources", kb)[1]
