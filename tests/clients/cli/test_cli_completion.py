"""Shell completion generated from the parser: the scripts parse, and bash completes
commands, options, files and knowledge base names asked of the real daemon."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.support.cli import ctl, ctl_env, run
from tests.support.daemon import BIN, Daemon


def script(d: Daemon, shell: str, tmp_path: Path) -> Path:
    proc = ctl(d, "completion", shell)
    assert proc.returncode == 0, proc.stderr
    path = tmp_path / f"cofferctl.{shell}"
    path.write_text(proc.stdout)
    return path


def complete(d: Daemon, script_path: Path, *words: str) -> list[str]:
    """What bash proposes for the last of `words` (the word under the cursor)."""
    driver = (
        f"source {script_path}\n"
        'COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); _cofferctl\n'
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    proc = subprocess.run(
        ["bash", "-c", driver, "bash", "cofferctl", *words],
        env=ctl_env(COFFER_SOCKET=str(d.socket), PATH=f"{BIN}:/usr/bin:/bin"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    return proc.stdout.split()


def test_bash_script_parses(shared_daemon: Daemon, tmp_path: Path) -> None:
    proc = subprocess.run(["bash", "-n", str(script(shared_daemon, "bash", tmp_path))])
    assert proc.returncode == 0


def test_bash_completes_commands_options_files_and_kbs(
    shared_daemon: Daemon, tmp_path: Path
) -> None:
    d = shared_daemon
    name = "compl-" + uuid.uuid4().hex[:6]
    assert run(d, "kb", "create", name)[0] == 0
    bash = script(d, "bash", tmp_path)
    assert complete(d, bash, "sea") == ["search"]
    assert complete(d, bash, "kb", "s") == ["show", "set"]
    assert complete(d, bash, "kb", "delete", "--y") == ["--yes"]
    assert name in complete(d, bash, "search", "")
    assert complete(d, bash, "kb", "set", name[:-2]) == [name]
    assert complete(d, bash, "search", "--kb", name[:-2]) == [name]
    assert complete(d, bash, "--json", "trash", name[:-2]) == [name]  # after an option
    assert complete(d, bash, "search", name, "") == []  # the query: nothing to propose
    (tmp_path / "inbox-note.md").write_text("x")
    proposed = complete(d, bash, "add", name, str(tmp_path / "inbox-"))
    assert proposed == [str(tmp_path / "inbox-note.md")]
    assert complete(d, bash, "completion", "") == []  # choices are not KBs


def test_bash_completion_is_quiet_without_a_daemon(shared_daemon: Daemon, tmp_path: Path) -> None:
    bash = script(shared_daemon, "bash", tmp_path)
    driver = (
        f"source {bash}\nCOMP_WORDS=(cofferctl search ''); COMP_CWORD=2; _cofferctl\n"
        'echo "${#COMPREPLY[@]}"'
    )
    proc = subprocess.run(
        ["bash", "-c", driver],
        env=ctl_env(COFFER_SOCKET=str(tmp_path / "none.sock"), PATH=f"{BIN}:/usr/bin:/bin"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.stdout == "0\n" and proc.stderr == ""


@pytest.mark.parametrize(("shell", "check"), [("zsh", ["zsh", "-n"]), ("fish", ["fish", "-n"])])
def test_zsh_and_fish_scripts_parse(
    shared_daemon: Daemon, tmp_path: Path, shell: str, check: list[str]
) -> None:
    path = script(shared_daemon, shell, tmp_path)
    assert "kb list --names" in path.read_text()
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed here: its script is generated but not parsed")
    proc = subprocess.run([*check, str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def _shell(d: Daemon, argv: list[str]) -> list[str]:
    proc = subprocess.run(
        argv,
        env=ctl_env(COFFER_SOCKET=str(d.socket), PATH=f"{BIN}:/usr/bin:/bin"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    return proc.stdout.split()


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed here")
def test_fish_completes_commands_and_kbs(shared_daemon: Daemon, tmp_path: Path) -> None:
    d = shared_daemon
    name = "fish-" + uuid.uuid4().hex[:6]
    assert run(d, "kb", "create", name)[0] == 0
    fish = script(d, "fish", tmp_path)

    def complete_fish(line: str) -> list[str]:
        return _shell(d, ["fish", "--no-config", "-c", f"source {fish}; complete -C '{line}'"])

    assert complete_fish("cofferctl sea") == ["search"]
    assert complete_fish("cofferctl kb delete --y") == ["--yes"]
    assert complete_fish(f"cofferctl search --kb {name[:-2]}") == [name]
    assert complete_fish(f"cofferctl grep {name[:-2]}") == [name]


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed here")
def test_zsh_proposes_commands_and_kbs(shared_daemon: Daemon, tmp_path: Path) -> None:
    """zsh's completion system needs a terminal; compadd and _files stand in for it, so
    this checks what the script proposes under zsh's rules (arrays from 1, word splitting)."""
    d = shared_daemon
    name = "zsh-" + uuid.uuid4().hex[:6]
    assert run(d, "kb", "create", name)[0] == 0
    zsh = script(d, "zsh", tmp_path)

    def proposed(*words: str) -> list[str]:
        driver = (
            'compadd() { [[ $1 == -- ]] && shift; print -l -- "$@"; }\n'
            '_files() { print "<files>"; }\ncompdef() { :; }\n'
            f"source {zsh}\n"
            'words=(cofferctl "$@"); CURRENT=${#words}; _cofferctl\n'
        )
        return _shell(d, ["zsh", "-f", "-c", driver, "zsh", *words])

    assert "search" in proposed("sea") and "kb" in proposed("")
    assert proposed("kb", "delete", "--y") == ["-h", "--help", "--json", "--socket", "--yes"]
    assert name in proposed("search", "--kb", "")
    assert name in proposed("trash", "")
    assert proposed("add", name, "") == ["<files>"]
    assert proposed("search", name, "") == []
