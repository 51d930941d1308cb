"""The project's habits, checked with the tests: lint, format, types, layer contracts."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


@pytest.mark.parametrize(
    "command",
    [
        ["ruff", "check", "."],
        ["ruff", "format", "--check", "."],
        ["mypy"],
        ["lint-imports"],
    ],
    ids=lambda c: " ".join(c),
)
def test_tool_passes(command: list[str]) -> None:
    proc = subprocess.run(
        [str(BIN / command[0]), *command[1:]], cwd=REPO, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


SOURCES = [p for pkg in ("cofferd", "cofferctl") for p in sorted((REPO / pkg).rglob("*.py"))]
LONG_LINES = 420  # ~400: past it, a module says at its top why it is one module


def test_a_long_module_says_why_at_its_top() -> None:
    unexplained = []
    for path in SOURCES:
        text = path.read_text(encoding="utf-8")
        docstring = ast.get_docstring(ast.parse(text)) or ""
        if text.count("\n") > LONG_LINES and "Long on purpose" not in docstring:
            unexplained.append(f"{path.relative_to(REPO)}: {text.count(chr(10))} lines")
    assert not unexplained, "split these, or say why at the top:\n" + "\n".join(unexplained)


def test_no_two_modules_have_names_that_differ_by_a_suffix() -> None:
    """`conversion`/`conversions`, `tool`/`tools`: a newcomer cannot tell from such names
    where a change goes. Modules of one name in two places are fine only as the same role
    in two programs (each program's `cli`, each protocol's `server`)."""
    stems = {path.stem for path in SOURCES if path.stem != "__init__"}
    alike = sorted(
        (stem, stem + suffix)
        for stem in stems
        for suffix in ("s", "es", "er", "ers", "_worker")
        if stem + suffix in stems
    )
    assert not alike
    daemon = [p.stem for p in SOURCES if p.is_relative_to(REPO / "cofferd")]
    repeated = sorted({s for s in daemon if daemon.count(s) > 1} - {"__init__"})
    assert not repeated, f"cofferd modules of one name in two layers: {repeated}"
