"""cofferctl's first minute against a real daemon: version, help, did-you-mean, help
texts, kb create/set/delete messages, search score labels, service without a user bus."""

from __future__ import annotations

import argparse
import ast
import json
import re
import shlex
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest

from coffer_kernel import __version__
from cofferctl import cli
from cofferctl.client import ApiError
from cofferctl.parser_help import Bounded
from tests.support.cli import ctl, ctl_env, run
from tests.support.daemon import BIN, Daemon, wait_for
from tests.support.helpers import write


def test_version_and_bare_call(shared_daemon: Daemon) -> None:
    version = ctl(shared_daemon, "--version")
    assert version.returncode == 0 and version.stdout == f"cofferctl {__version__}\n"
    bare = ctl(shared_daemon)
    assert bare.returncode == 2  # git prints its help and a non-zero status too
    assert bare.stdout.startswith("usage: cofferctl") and "search" in bare.stdout
    code, out = run(shared_daemon, "status")
    assert code == 0 and out.startswith(f"cofferd {__version__} (pid ")


@pytest.mark.parametrize("package", ["cofferd", "cofferctl"])
def test_python_dash_m_runs_each_program(package: str) -> None:
    """`python -m cofferd` and `python -m cofferctl` are the programs their scripts are."""
    ran = subprocess.run(
        [sys.executable, "-m", package, "--version"], capture_output=True, text=True, timeout=60
    )
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, f"{package} {__version__}\n", "")


def test_did_you_mean(shared_daemon: Daemon) -> None:
    typo = ctl(shared_daemon, "serach", "notes", "x")
    assert typo.returncode == 2 and "unknown command 'serach'; did you mean search" in typo.stderr
    sub = ctl(shared_daemon, "kb", "lsit")
    assert sub.returncode == 2 and "did you mean list?" in sub.stderr
    option = ctl(shared_daemon, "kb", "delete", "notes", "--ys")
    assert option.returncode == 2 and "--ys: did you mean --yes?" in option.stderr
    assert shared_daemon.docs("notes").is_dir()
    nothing_close = ctl(shared_daemon, "zzzzzz")
    assert nothing_close.returncode == 2 and "one of status, kb" in nothing_close.stderr
    assert "Traceback" not in typo.stderr + sub.stderr + nothing_close.stderr


def test_did_you_mean_a_knowledge_base_everywhere_one_is_named(
    shared_daemon: Daemon, fresh_kb: str
) -> None:
    """A mistyped knowledge base is named back, close names first, by the API (so by the
    CLI and MCP too), whichever command took it."""
    d = shared_daemon
    d.client.post("/api/v1/knowledge_bases", {"name": fresh_kb})
    typo = fresh_kb[:-1] + ("x" if fresh_kb[-1] != "x" else "y")
    for args in (("search", typo, "bread"), ("docs", typo), ("kb", "show", typo)):
        found = ctl(d, *args)
        assert found.returncode == 1, (args, found.stderr)
        assert f"did you mean {fresh_kb}" in found.stderr, (args, found.stderr)
    with pytest.raises(ApiError) as err:
        d.client.post(d.client.kb(typo, "/search"), {"query": "bread"})
    assert err.value.code == "KB_NOT_FOUND"
    assert fresh_kb in err.value.details["suggestions"]


def test_search_takes_limit_and_a_suggested_command_runs_as_printed(
    shared_daemon: Daemon, fresh_kb: str
) -> None:
    d = shared_daemon
    d.client.post("/api/v1/knowledge_bases", {"name": fresh_kb})
    write(d.docs(fresh_kb) / "bread.md", "# Bread\n\nsourdough bread rises")
    wait_for(lambda: "bread.md" in run(d, "search", fresh_kb, "sourdough")[1])
    code, out = run(d, "search", fresh_kb, "--limit", "1", "sourdough")
    assert code == 0 and "bread.md" in out
    typo = ctl(d, "search", fresh_kb, "--limt", "1", "sourdough")
    assert typo.returncode == 2
    suggested = typo.stderr.rsplit("as in: ", 1)[1].strip()
    again = ctl(d, *shlex.split(suggested)[1:])
    assert again.returncode == 0 and "bread.md" in again.stdout, again.stderr
    code, out = run(d, "search", fresh_kb, "--mode", "keyword", "sourdough")
    assert code == 0 and "keyword search" in out and "bread.md" in out
    refused = ctl(d, "search", fresh_kb, "--mode", "hybrid", "sourdough")
    assert refused.returncode != 0 and "hybrid" in refused.stderr, refused.stderr


def _parsers(
    parser: argparse.ArgumentParser, path: str = "cofferctl"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


def test_every_argument_and_option_has_help() -> None:
    missing = [
        f"{path}: {'/'.join(action.option_strings) or action.dest}"
        for path, parser in _parsers(cli.build_parser())
        for action in parser._actions
        if not isinstance(action, argparse._SubParsersAction) and not action.help
    ]
    assert missing == []


def test_every_bounded_option_states_its_range_in_its_help() -> None:
    """`docs --limit 1000` was refused with a range the help did not state: every option
    that takes a number takes it within bounds (the API's, coffer_kernel.bounds) that its
    help states, and is refused before asking the daemon with those same words."""
    unstated = []
    for path, parser in _parsers(cli.build_parser()):
        for action in parser._actions:
            if action.type in (int, float):
                unstated.append(f"{path} {action.option_strings}: no bounds")
            elif isinstance(action.type, Bounded) and action.type.stated() not in str(action.help):
                unstated.append(f"{path} {action.option_strings}: {action.help}")
    assert unstated == []
    refused = subprocess.run(
        [sys.executable, "-m", "cofferctl", "docs", "notes", "--limit", "1000"],
        capture_output=True, text=True, env=ctl_env(), timeout=60, check=False,
    )  # fmt: skip
    shown = subprocess.run(
        [sys.executable, "-m", "cofferctl", "docs", "--help"],
        capture_output=True, text=True, env=ctl_env(), timeout=60, check=False,
    )  # fmt: skip
    assert refused.returncode == 2 and "1000 is not 1 to 500" in refused.stderr
    assert "at most this many: 1 to 500 (default 50)" in " ".join(shown.stdout.split())


@pytest.fixture
def fresh_kb(shared_daemon: Daemon) -> str:
    return "cli-" + uuid.uuid4().hex[:6]


def test_kb_create_names_the_folder(shared_daemon: Daemon, fresh_kb: str) -> None:
    code, out = run(shared_daemon, "kb", "create", fresh_kb)
    assert code == 0
    assert f"drop Markdown files into {shared_daemon.docs(fresh_kb)}" in out


def test_kb_set_lists_sizes_and_messages(shared_daemon: Daemon, fresh_kb: str) -> None:
    d = shared_daemon
    assert run(d, "kb", "create", fresh_kb)[0] == 0
    code, out = run(d, "kb", "set", fresh_kb, "enabled_modes=keyword", "max_document_bytes=10MiB")
    assert code == 0 and "chunking changed" not in out
    config = d.client.get(d.client.kb(fresh_kb))["config"]
    assert config["enabled_modes"] == ["keyword"] and config["max_document_bytes"] == 10 * 2**20
    assert (
        run(d, "kb", "set", fresh_kb, "enabled_modes=keyword,grep", "max_document_bytes=25 MB")[0]
        == 0
    )
    config = d.client.get(d.client.kb(fresh_kb))["config"]
    assert config["enabled_modes"] == ["keyword", "grep"]
    assert config["max_document_bytes"] == 25_000_000

    write(d.docs(fresh_kb) / "a.md", "# A\n\nsome words to chunk")
    wait_for(lambda: d.client.get(d.client.kb(fresh_kb, "/documents"))["total"] == 1)
    code, out = run(d, "kb", "set", fresh_kb, "chunk_size=128")
    assert code == 0 and "chunking changed: every document is indexed again" in out

    bad = ctl(d, "kb", "set", fresh_kb, "enabled_modes=keyword,sonar")
    assert bad.returncode == 1 and "enabled_modes" in bad.stderr and "Traceback" not in bad.stderr
    unknown = ctl(d, "kb", "set", fresh_kb, "chunk_sise=128")
    assert unknown.returncode == 1 and "chunk_size" in unknown.stderr  # the valid keys


def test_kb_set_warns_of_a_credential_the_daemon_lacks(
    shared_daemon: Daemon, fresh_kb: str
) -> None:
    d = shared_daemon
    assert run(d, "kb", "create", fresh_kb)[0] == 0
    variable = "COFFER_TEST_NO_SUCH_KEY_" + uuid.uuid4().hex[:6].upper()
    code, out = run(
        d, "kb", "set", fresh_kb,
        "embedding.provider=openai", "embedding.model=text-embedding-3-small",
        "embedding.dimensions=8", "embedding.base_url=http://127.0.0.1:9/v1",
        f"embedding.credential_ref=env:{variable}",
    )  # fmt: skip
    assert code == 0 and "warning" in out and variable in out


def test_kb_set_changes_only_what_it_names_and_kb_show_says_where_values_come_from(
    shared_daemon: Daemon, fresh_kb: str
) -> None:
    d = shared_daemon
    assert run(d, "kb", "create", fresh_kb)[0] == 0
    remote = {
        "provider": "openai", "model": "text-embedding-3-small", "dimensions": 8,
        "base_url": "http://127.0.0.1:9/v1", "credential_ref": "env:COFFER_TEST_KEY",
    }  # fmt: skip
    assert run(d, "kb", "set", fresh_kb, f"embedding={json.dumps(remote)}")[0] == 0
    bigger = 'embedding={"model": "text-embedding-3-large", "dimensions": 16}'
    assert run(d, "kb", "set", fresh_kb, bigger)[0] == 0
    embedding = d.client.get(d.client.kb(fresh_kb))["config"]["embedding"]
    kept = ("provider", "base_url", "credential_ref")  # merged into what was set
    assert {key: embedding[key] for key in kept} == {key: remote[key] for key in kept}
    assert (embedding["model"], embedding["dimensions"]) == ("text-embedding-3-large", 16)
    assert run(d, "kb", "set", fresh_kb, "embedding.base_url=null")[0] == 0  # one key removed
    embedding = d.client.get(d.client.kb(fresh_kb))["config"]["embedding"]
    assert embedding["base_url"] is None and embedding["provider"] == "openai"
    code, out = run(d, "kb", "show", fresh_kb)
    assert code == 0
    assert '  embedding.provider: "openai"  (this machine\'s settings)' in out
    assert '  embedding.model: "text-embedding-3-large"  (kb.yaml)' in out
    assert "  embedding.base_url: null  (default)" in out
    assert "  chunk_size: 512  (default)" in out

    assert run(d, "kb", "set", fresh_kb, "embedding=null")[0] == 0  # all of it removed
    assert run(d, "kb", "set", fresh_kb, 'embedding={"provider": "local"}')[0] == 0
    out = run(d, "kb", "show", fresh_kb)[1]
    assert "  embedding.min_similarity: 0.3  (the model's default)" in out
    assert '  embedding.model: "all-MiniLM-L6-v2"  (default)' in out
    assert "credential_ref: null" in out


def test_kb_delete_of_a_missing_kb_says_so_first(shared_daemon: Daemon) -> None:
    missing = ctl(shared_daemon, "kb", "delete", "nosuch")  # no --yes, not a terminal
    assert missing.returncode == 1 and "KB_NOT_FOUND" in missing.stderr
    assert "--yes" not in missing.stderr


def test_search_labels_its_scores(shared_daemon: Daemon, fresh_kb: str) -> None:
    d = shared_daemon
    assert run(d, "kb", "create", fresh_kb)[0] == 0
    write(d.docs(fresh_kb) / "owl.md", "# Owl\n\nThe owl hunts at night.")
    wait_for(lambda: "owl.md" in run(d, "search", fresh_kb, "owl")[1])
    out = run(d, "search", fresh_kb, "owl")[1]
    assert "keyword search; score: bm25" in out
    assert " 1. Owl  bm25 " in out
    out = run(d, "search", "--kb", fresh_kb, "owl")[1]
    assert "score: reciprocal rank fusion" in out and " 1. Owl  rrf " in out


def test_service_without_a_user_bus_explains(tmp_path: object) -> None:
    proc = subprocess.run(
        [str(BIN / "cofferctl"), "service", "status"],
        env=ctl_env(XDG_RUNTIME_DIR="/nonexistent", HOME=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert "Failed to connect to bus" not in proc.stdout + proc.stderr
    assert "no systemd user session" in proc.stdout or "systemctl is not installed" in proc.stdout


def test_json_errors_stay_json(shared_daemon: Daemon) -> None:
    code, out = run(shared_daemon, "kb", "show", "nosuch", "--json")
    assert code == 1 and json.loads(out)["error"]["code"] == "KB_NOT_FOUND"


def test_options_may_come_between_the_kb_and_the_query(
    shared_daemon: Daemon, fresh_kb: str
) -> None:
    d = shared_daemon
    assert run(d, "kb", "create", fresh_kb)[0] == 0
    write(d.docs(fresh_kb) / "todo.md", "---\ntags: [todo]\n---\n# Todo\n\nthe next action\n")
    write(d.docs(fresh_kb) / "done.md", "# Done\n\nan action taken\n")
    write(d.docs(fresh_kb) / "cpp.md", "# Cpp\n\nthe C++ compiler\n")
    wait_for(lambda: d.client.get(d.client.kb(fresh_kb, "/documents"))["total"] == 3)
    code, out = run(d, "search", fresh_kb, "--tag", "todo", "action")
    assert code == 0 and "todo.md" in out and "done.md" not in out
    code, out = run(d, "search", "-k", "1", fresh_kb, "action", "--tag", "todo")
    assert code == 0 and "todo.md" in out and "done.md" not in out
    code, out = run(d, "search", fresh_kb, "-k", "3", "--", "C++ compiler")
    assert code == 0 and "cpp.md" in out


def test_text_that_starts_with_a_dash_says_how_to_write_it(
    shared_daemon: Daemon, fresh_kb: str
) -> None:
    d = shared_daemon
    assert run(d, "kb", "create", fresh_kb)[0] == 0
    write(d.docs(fresh_kb) / "plan.md", "# Plan\n\nthe plan for the house\n")
    write(d.docs(fresh_kb) / "garden.md", "# Garden\n\nthe plan for the garden\n")
    write(d.docs(fresh_kb) / "arrow.md", "# Arrow\n\nstate -> next\n")
    wait_for(lambda: d.client.get(d.client.kb(fresh_kb, "/documents"))["total"] == 3)
    dashed = ctl(d, "search", fresh_kb, "plan", "-garden")
    assert dashed.returncode == 2 and "usage: cofferctl search" in dashed.stderr
    assert (
        "-garden: not an option; text that starts with - goes after --, as in: "
        f"cofferctl search {fresh_kb} plan -- -garden"
    ) in dashed.stderr
    code, out = run(d, "search", fresh_kb, "plan", "--", "-garden")
    assert code == 0 and "plan.md" in out and "garden.md" not in out

    arrow = ctl(d, "grep", fresh_kb, "->")
    assert arrow.returncode == 2 and f"cofferctl grep {fresh_kb} -- '->'" in arrow.stderr
    code, out = run(d, "grep", fresh_kb, "--", "->")
    assert code == 0 and out == "arrow.md:3:state -> next\n"
    typo = ctl(d, "search", fresh_kb, "plan", "--tagg", "x")
    assert typo.returncode == 2 and "--tagg: did you mean --tag?" in typo.stderr
    assert "Traceback" not in dashed.stderr + arrow.stderr + typo.stderr


def test_every_hint_runs_as_printed(shared_daemon: Daemon, fresh_kb: str) -> None:
    """`search foam graph -filter`: `--folder` with nothing after it would not run; the
    excluded word goes after `--`, and that hint runs and excludes it."""
    d = shared_daemon
    assert run(d, "kb", "create", fresh_kb)[0] == 0
    write(d.docs(fresh_kb) / "graph.md", "# Graph\n\nthe foam graph view\n")
    write(d.docs(fresh_kb) / "filter.md", "# Filter\n\nthe foam graph filter\n")
    wait_for(lambda: d.client.get(d.client.kb(fresh_kb, "/documents"))["total"] == 2)
    for words in (["foam", "graph", "-filter"], ["foam", "--limt", "2", "graph"]):
        typo = ctl(d, "search", fresh_kb, *words)
        assert typo.returncode == 2
        printed = re.findall(r"as in: (cofferctl [^;\n]*)", typo.stderr)
        assert printed, typo.stderr
        for hint in printed:
            again = ctl(d, *shlex.split(hint)[1:])
            assert again.returncode == 0, (hint, again.stderr)
    hint = ctl(d, "search", fresh_kb, "foam", "graph", "-filter").stderr
    assert "--folder" not in hint.split("error:")[1]
    assert f"cofferctl search {fresh_kb} foam graph -- -filter" in hint
    code, out = run(d, "search", fresh_kb, "foam", "graph", "--", "-filter")
    assert code == 0 and "graph.md" in out and "filter.md" not in out


def test_a_command_loads_only_what_it_runs() -> None:
    # each command's module is imported when it runs; nothing that only others need
    code = (
        "import sys; from cofferctl import cli; "
        "cli.main(['--socket', '/nonexistent/cofferd.sock', 'search', 'notes', 'words']); "
        "print(sorted(sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    loaded = set(ast.literal_eval(out.stdout))
    commands = {m for m in loaded if m.startswith("cofferctl.commands.")}
    assert commands == {"cofferctl.commands.searching"}
    heavy = {"dataclasses", "tempfile", "hashlib", "difflib", "shutil", "inspect"}
    assert loaded & heavy == set()


def test_every_set_applies_and_a_setting_given_twice_is_refused_naming_it(
    shared_daemon: Daemon, fresh_kb: str
) -> None:
    d = shared_daemon
    made = ctl(d, "kb", "create", fresh_kb, "--set", "chunk_size=256", "--set", "chunk_overlap=32")
    assert made.returncode == 0, made.stderr
    config = d.client.get(d.client.kb(fresh_kb))["config"]
    assert (config["chunk_size"], config["chunk_overlap"]) == (256, 32)

    other = fresh_kb + "-2"
    refusals = [
        (("kb", "create", other, "--set", "chunk_size=256", "--set", "chunk_size=128"),
         "chunk_size is set twice"),
        (("kb", "create", other, "--set", "embedding.model=x", "embedding={}"),
         "embedding is set with embedding.model"),
        (("kb", "create", other, "--formats", "pdf", "--set", "index_formats=docx"),
         "index_formats is set twice (--formats and --set)"),
        (("kb", "set", fresh_kb, "chunk_size=300", "chunk_size=200"), "chunk_size is set twice"),
    ]  # fmt: skip
    for argv, message in refusals:
        refused = ctl(d, *argv)
        assert refused.returncode == 2 and message in refused.stderr, (argv, refused.stderr)
    assert other not in [
        kb["name"] for kb in d.client.get("/api/v1/knowledge_bases")["knowledge_bases"]
    ]
    assert d.client.get(d.client.kb(fresh_kb))["config"]["chunk_size"] == 256


def test_vectors_turned_on_as_the_readme_says_turn_off_without_a_default_in_the_way(
    shared_daemon: Daemon, fresh_kb: str
) -> None:
    d = shared_daemon
    assert ctl(d, "kb", "create", fresh_kb).returncode == 0
    on = ctl(d, "kb", "set", fresh_kb, 'enabled_modes=["keyword","grep","vector"]',
             'embedding={"provider":"local"}')  # fmt: skip
    assert on.returncode == 0, on.stderr
    assert d.client.get(d.client.kb(fresh_kb))["config"]["default_mode"] == "hybrid"
    off = ctl(d, "kb", "set", fresh_kb, "enabled_modes=keyword,grep")
    assert off.returncode == 0, off.stderr  # the mode it never chose follows
    assert d.client.get(d.client.kb(fresh_kb))["config"]["default_mode"] == "keyword"
    assert "default_mode" not in (d.home / "knowledge" / fresh_kb / "kb.yaml").read_text()

    chosen = ctl(d, "kb", "set", fresh_kb, "default_mode=grep")  # a mode the user chose
    assert chosen.returncode == 0, chosen.stderr
    blocked = ctl(d, "kb", "set", fresh_kb, "enabled_modes=keyword")
    assert blocked.returncode == 1 and "default_mode 'grep'" in blocked.stderr


def test_changes_at_once_say_each_reason_for_their_pass_once(
    shared_daemon: Daemon, fresh_kb: str
) -> None:
    d = shared_daemon
    assert ctl(d, "kb", "create", fresh_kb).returncode == 0
    for n in range(600):
        write(d.docs(fresh_kb) / f"note{n}.md", f"# Note {n}\n\n" + "the avocet wades. " * 80)
    wait_for(lambda: d.client.get(d.client.kb(fresh_kb, "/metrics"))["documents"] == 600, 120)
    changes = [
        "chunk_size=256", "max_document_bytes=10MiB", "chunk_size=300",
        "max_document_bytes=12MiB", "chunk_overlap=16", "max_document_bytes=11MiB",
    ]  # fmt: skip
    env = ctl_env(COFFER_SOCKET=str(d.socket))
    running = [
        subprocess.Popen([str(BIN / "cofferctl"), "kb", "set", fresh_kb, change], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for change in changes
    ]  # fmt: skip
    said = []
    for proc in running:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        said += [line.split(":")[0] for line in out.splitlines() if "indexed again" in line]
    assert said
    for reasons in said:
        parts = [part.removesuffix(" changed") for part in re.split("; | and ", reasons)]
        assert len(parts) == len(set(parts)), reasons
