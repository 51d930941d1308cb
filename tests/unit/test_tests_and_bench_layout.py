"""Tests and benches keep apart: no test imports a bench, a bench imports only tests.support
of the tests, and every bench is a guard (a target an issue set) or a study, beside the
code they share. Tests keep apart from each other too: what two test modules share lives in
tests.support, and no test module imports another."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH_SUPPORT = {"bench/__init__.py", "bench/common.py", "bench/cold_start.py"}


def imported(path: Path) -> set[str]:
    """Every module `path` imports, at the top or inside a function; a relative import by
    the name it has from the repository's root."""
    package = path.relative_to(REPO).parent.parts
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - node.level + 1]
            found.add(".".join([*base, *filter(None, [node.module])]))
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def of_the_tests_support(name: str) -> bool:
    return name == "tests.support" or name.startswith("tests.support.")


def modules(folder: str) -> list[Path]:
    return sorted((REPO / folder).rglob("*.py"))


def test_no_test_imports_a_bench() -> None:
    wrong = [
        f"{path.relative_to(REPO)} imports {name}"
        for path in modules("tests")
        for name in sorted(imported(path))
        if name == "bench" or name.startswith("bench.")
    ]
    assert not wrong, "\n".join(wrong)


def test_benches_import_only_the_tests_support() -> None:
    wrong = [
        f"{path.relative_to(REPO)} imports {name}"
        for path in modules("bench")
        for name in sorted(imported(path))
        if (name == "tests" or name.startswith("tests.")) and not of_the_tests_support(name)
    ]
    assert not wrong, "\n".join(wrong)


def test_a_test_module_imports_no_other_test_module() -> None:
    """Of the tests, a test module or conftest imports only tests.support, in its folder
    or another (a helper two of them use is moved there); tests.support imports only itself."""
    wrong = [
        f"{path.relative_to(REPO)} imports {name}"
        for path in modules("tests")
        for name in sorted(imported(path))
        if (name == "tests" or name.startswith("tests.")) and not of_the_tests_support(name)
    ]
    assert not wrong, "\n".join(wrong)


def test_every_bench_is_a_guard_or_a_study() -> None:
    loose = [
        str(path.relative_to(REPO))
        for path in modules("bench")
        if path.parent.name not in ("guards", "studies")
        and str(path.relative_to(REPO)) not in BENCH_SUPPORT
    ]
    assert not loose, f"neither in bench/guards nor in bench/studies: {loose}"
    assert (REPO / "bench" / "guards").is_dir() and (REPO / "bench" / "studies").is_dir()
