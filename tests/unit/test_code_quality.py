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


def _assigned_attributes(tree: ast.AST) -> list[tuple[int, ast.Attribute, ast.expr | None]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets, value = [node.target], node.value
        else:
            continue
        for target in targets:
            for each in target.elts if isinstance(target, ast.Tuple) else [target]:
                if isinstance(each, ast.Attribute):
                    found.append((node.lineno, each, value))
    return found


def test_no_callback_is_assigned_onto_another_object() -> None:
    """Who tells whom is wired in one place (surfaces.core._wire, through the events hub)
    or handed to a constructor: no module sets a callback on an object it did not make
    itself (`reindexer.on_change = ...`), which only a search for the assignment finds.
    A callback here: an attribute some class of cofferd types as Callable, any `on_...`,
    or a lambda; assigned to anything but `self`."""
    daemon = [(p, ast.parse(p.read_text(encoding="utf-8"))) for p in SOURCES]
    daemon = [(p, tree) for p, tree in daemon if p.is_relative_to(REPO / "cofferd")]
    callables = {
        target.attr if isinstance(target, ast.Attribute) else target.id
        for _, tree in daemon
        for node in ast.walk(tree)
        if isinstance(node, ast.AnnAssign) and "Callable" in ast.unparse(node.annotation)
        for target in [node.target]
        if isinstance(target, ast.Attribute | ast.Name)
    }
    set_from_outside = [
        f"{path.relative_to(REPO)}:{line}: {ast.unparse(target)} = ..."
        for path, tree in daemon
        for line, target, value in _assigned_attributes(tree)
        if not (isinstance(target.value, ast.Name) and target.value.id == "self")
        and (
            target.attr in callables
            or target.attr.startswith("on_")
            or isinstance(value, ast.Lambda)
        )
    ]
    assert not set_from_outside, "\n".join(set_from_outside)
