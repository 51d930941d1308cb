"""Budgets for every control file and query (issue 33 §6): a YAML alias bomb in a synced
`kb.yaml` or a note's frontmatter, an ignore file of many thousands of wildcard patterns, a
note that is one 12 MB line, a query of 2,000 CJK characters. Each is answered within its
budget, says what was cut, and costs the daemon no stall; nothing is written outside the
test's data home."""

from __future__ import annotations

import itertools
import random
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pathspec
import pytest
from hypothesis import given, reject, settings
from hypothesis import strategies as st

from cofferd import safe_yaml
from cofferd.application.reading.markdown import split_frontmatter
from cofferd.domain.query_syntax import MAX_PHRASE_TOKENS, MAX_QUERY_TERMS, parse_query
from cofferd.domain.validation import SHOWN_CHARS, shown
from cofferd.infrastructure.files.ignore_patterns import linear_spec
from cofferd.infrastructure.files.ignore_rules import MAX_IGNORE_RULES, IgnoreRules
from tests.support.cli import run
from tests.support.daemon import Daemon, cleanup, new_daemon, wait_for
from tests.support.health_prober import Prober
from tests.support.helpers import status_entry, write
from tests.support.processes import family, peak_kb


def bomb(levels: int = 9) -> str:
    """Under 500 bytes of YAML that stand for 9**levels values."""
    layers = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
    names = "abcdefghijklmnop"
    for prev, name in itertools.pairwise(names[:levels]):
        layers.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    return "\n".join(layers) + "\n"


def snapshot(folder: Path, skip: set[Path]) -> dict[str, int]:
    """Every file under the folder but the daemon's own (data home, socket, log)."""
    found = {}
    for path in folder.rglob("*"):
        if any(path == s or path.is_relative_to(s) for s in skip):
            continue
        if path.is_file():
            found[str(path)] = path.stat().st_mtime_ns
    return found


@pytest.fixture
def daemon_here(tmp_path: Path) -> Iterator[Daemon]:
    """A daemon not started yet; after the test, nothing beside its data home, socket
    folder and log was written under the test's folder."""
    d = new_daemon(tmp_path)
    mine = {d.home, d.socket.parent, d.log}
    before = snapshot(tmp_path, mine)
    try:
        yield d
    finally:
        cleanup(d)
    assert snapshot(tmp_path, mine) == before


# -- YAML ------------------------------------------------------------------------------


def test_the_safe_loader_refuses_what_expands_and_reads_the_rest() -> None:
    text = bomb()
    assert len(text) < 500
    started = time.monotonic()
    with pytest.raises(safe_yaml.YamlTooLarge, match="aliases"):
        safe_yaml.load(text, max_nodes=10_000, max_depth=32)
    assert time.monotonic() - started < 0.5
    with pytest.raises(safe_yaml.YamlTooLarge, match="holds itself"):
        safe_yaml.load("a: &a [*a]\n", max_nodes=10_000, max_depth=32)
    with pytest.raises(safe_yaml.YamlTooLarge, match="levels deep"):
        nested = "a:\n" + "".join(f"{' ' * i} - \n" for i in range(1, 40))
        safe_yaml.load(nested, max_nodes=10_000, max_depth=32)
    assert safe_yaml.load("- &x a\n- *x\n- {<<: {k: 1}}\n", max_nodes=100, max_depth=8) == [
        "a",
        "a",
        {"k": 1},
    ]
    frontmatter, body, malformed = split_frontmatter("---\n" + text + "---\n# Bomb\n")
    assert (frontmatter, malformed) == ({}, True) and "*h" in body


def test_no_yaml_is_read_but_by_the_safe_loader() -> None:
    root = Path(__file__).resolve().parents[2] / "cofferd"
    for path in root.rglob("*.py"):
        if path.name == "safe_yaml.py":
            continue
        text = path.read_text().replace("safe_yaml.load(", "")
        for call in ("yaml.safe_load(", "yaml.load(", "yaml.full_load(", "yaml.unsafe_load("):
            assert call not in text, f"{path}: {call} (use cofferd.safe_yaml.load)"


def test_a_value_shown_in_an_error_is_rendered_only_as_far_as_it_is_shown() -> None:
    shared: list[object] = ["x"] * 9
    for _ in range(12):  # 9**13 values, as an expanded alias bomb would be
        shared = [shared] * 9
    started = time.monotonic()
    text = shown({"config": shared, "big": "y" * 10_000_000})
    assert len(text) == SHOWN_CHARS and text.endswith("…")
    assert time.monotonic() - started < 0.1


def test_an_alias_bomb_in_a_synced_kb_yaml_is_a_problem_not_a_stall(daemon_here: Daemon) -> None:
    d = daemon_here
    knowledge = d.home / "knowledge"
    write(knowledge / "synced" / "kb.yaml", "kind: knowledge_base\nconfig:\n  x:\n" + "".join(
        "    " + line + "\n" for line in bomb().splitlines()
    ))  # fmt: skip
    write(knowledge / "synced" / "docs" / "a.md", "# A\n\nsynced albatross")
    write(knowledge / "good" / "docs" / "g.md", "# G\n\ngood pelicans")
    d.start()
    assert d.proc is not None
    before = {pid: peak_kb(pid) for pid in family(d.proc.pid)}
    with Prober(d.socket) as probe:
        problem = wait_for(lambda: status_entry(d, "synced").get("settings_error"))
        # the KB is read again whenever the folder is looked at: a few more times
        for _ in range(3):
            d.client.post("/api/v1/knowledge_bases/good/reindex", {})
            status_entry(d, "synced")
    assert "aliases" in str(problem) and len(str(problem)) <= 500
    assert any("aliases" in p for p in status_entry(d, "synced")["problems"])  # type: ignore[attr-defined]
    assert max(probe.latencies) < 0.5, max(probe.latencies)
    for pid in family(d.proc.pid):
        assert peak_kb(pid) - before.get(pid, 0) < 100_000, pid  # 9**9 values: gigabytes


# -- ignore rules ----------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:Possible nested set:FutureWarning")
@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.text("ab.c*?/![]\\ -", max_size=8), min_size=1, max_size=8),
    st.lists(
        st.sampled_from(["a", "b", "ab", "ba", "a.c", "c-a", "*", "[a]", "!", "a b", ".c"]),
        min_size=1,
        max_size=4,
    ),
    st.booleans(),
)
def test_ignore_patterns_match_as_pathspec_does(
    lines: list[str], parts: list[str], trailing_slash: bool
) -> None:
    path = "/".join(parts) + ("/" if trailing_slash else "")
    ours = linear_spec(lines)  # whatever the lines hold: a bad bracket matches nothing
    try:
        simple = pathspec.GitIgnoreSpec.from_lines(lines, backend="simple")
    except (ValueError, re.error):
        reject()
    assert ours.include(path) == simple.check_file(path).include


def hostile_patterns(n: int, seed: int = 1) -> list[str]:
    rnd = random.Random(seed)
    return [
        f"*{rnd.randrange(16**6):x}*.tmp{i % 7}" if i % 3 else f"build{i}/**/x?y*" for i in range(n)
    ]


def test_many_patterns_answer_as_git_does(tmp_path: Path) -> None:
    lines = [*hostile_patterns(5_000), "*.log.md", "!keep*.md", "drafts/", "/top.md", "*7*"]
    rnd = random.Random(2)
    paths = [f"n{i % 5}/note{rnd.randrange(16**4):x}.md" for i in range(150)]
    paths += ["x.log.md", "keep.log.md", "drafts/a.md", "top.md", "n1/top.md", "build3/q/xzy1"]
    paths += [f"a/b{rnd.randrange(16**6):x}c.tmp{i % 7}" for i in range(30)]
    (tmp_path / ".gitignore").write_text("\n".join(lines) + "\n")
    simple = pathspec.GitIgnoreSpec.from_lines(lines, backend="simple")
    rules = IgnoreRules(lambda: tmp_path)
    for path in paths:
        parts = path.split("/")
        expected = any(
            simple.check_file("/".join(parts[:i]) + "/").include for i in range(1, len(parts))
        ) or bool(simple.check_file(path).include)
        assert rules.excluded(path) is expected, path
    assert not rules.problems


def test_rules_past_the_cap_are_not_applied_and_that_is_said(tmp_path: Path) -> None:
    lines = ["# a comment is no rule", *hostile_patterns(MAX_IGNORE_RULES), "secret*.md"]
    (tmp_path / ".gitignore").write_text("\n".join(lines) + "\n")
    rules = IgnoreRules(lambda: tmp_path)
    assert not rules.excluded("secret-plan.md")
    assert f"only the first {MAX_IGNORE_RULES:,}" in rules.problems[".gitignore"]


def _decide_time(tmp_path: Path, n: int) -> float:
    folder = tmp_path / str(n)
    folder.mkdir()
    (folder / ".gitignore").write_text("\n".join(hostile_patterns(n)) + "\n")
    rules = IgnoreRules(lambda: folder)
    rules.excluded("warm.md")  # compiled: what is measured is deciding
    paths = [f"notes/sub{i % 10}/note{i}-{i * 7919:x}.md" for i in range(300)]
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for path in paths:
            rules.excluded(path)
        best = min(best, time.perf_counter() - started)
    return best


def test_deciding_a_path_costs_the_same_whatever_the_number_of_patterns(tmp_path: Path) -> None:
    few, many = _decide_time(tmp_path, 500), _decide_time(tmp_path, MAX_IGNORE_RULES)
    assert many < 4 * few + 0.02, (few, many)  # one by one: 20 times as many, 20 times as long


def test_a_knowledge_base_with_thousands_of_ignore_patterns(daemon_here: Daemon) -> None:
    d = daemon_here.start()
    docs = d.docs("notes")
    lines = ["*.tmp1.md", *hostile_patterns(MAX_IGNORE_RULES + 10), "late.md"]
    write(docs / ".gitignore", "\n".join(lines))
    write(docs / "kept.md", "# Kept\n\nkept ocelot")
    write(docs / "out.tmp1.md", "# Out\n\nignored ocelot")
    write(docs / "late.md", "# Late\n\nlate ocelot (its rule is past the cap)")
    write(docs / "build3/q/xay1.md", "# Build\n\nignored ocelot")

    def found() -> list[str]:
        reply = d.client.post(d.client.kb("notes", "/search"), {"query": "ocelot"})
        return sorted(p["relative_path"] for p in reply["passages"])

    wait_for(lambda: found() == ["kept.md", "late.md"], timeout=60)

    def reason() -> str:  # said by the full pass the ignore file asks for (it may end later)
        skipped = d.client.get(d.client.kb("notes", "/skipped"))["items"]
        return str({item["relative_path"]: item["reason"] for item in skipped}.get(".gitignore"))

    wait_for(lambda: f"{MAX_IGNORE_RULES:,}" in reason(), timeout=30)


# -- grep ------------------------------------------------------------------------------


def test_a_note_of_one_12_mb_line_loses_no_other_hits(daemon_here: Daemon) -> None:
    d = daemon_here.start()
    docs = d.docs("notes")
    write(docs / "a.md", "# A\n\nthe walrus sings\n")
    write(docs / "m.md", "![x](data:image/png;base64," + "QUJD" * 3_000_000 + ") walrus\n")
    write(docs / "z.md", "# Z\n\nanother walrus\n")

    def grep() -> dict[str, str]:
        reply = d.client.post(d.client.kb("notes", "/grep"), {"pattern": "walrus"})
        return {h["relative_path"]: h["line"] for h in reply["hits"]}

    hits = wait_for(lambda: len(found := grep()) == 3 and found, timeout=30)
    assert hits
    assert hits["a.md"] == "the walrus sings" and hits["z.md"] == "another walrus"
    assert hits["m.md"].startswith("![x](data:image/png;base64,QUJD")
    assert hits["m.md"].endswith("…") and len(hits["m.md"]) <= 500


# -- queries ---------------------------------------------------------------------------


def test_a_query_past_its_budget_is_cut_and_says_so() -> None:
    long = parse_query("东京大学" * 500)
    assert long.cut and max(len(t) for t in long.words) <= MAX_PHRASE_TOKENS
    many = parse_query(" ".join(f"word{i}" for i in range(500)))
    assert many.cut and len(many.words) == MAX_QUERY_TERMS
    assert not parse_query('"a phrase" and words -not').cut


def test_a_long_cjk_query_across_all_knowledge_bases_answers_at_once(
    daemon_here: Daemon,
) -> None:
    d = daemon_here.start()
    write(d.docs("notes") / "tokyo.md", "# 东京\n\n东京大学在东京。\n")
    wait_for(lambda: d.client.post(d.client.kb("notes", "/search"), {"query": "东京大学"})[
        "passages"
    ])  # fmt: skip
    rnd = random.Random(3)
    query = "".join(chr(rnd.randrange(0x4E00, 0x9FA5)) for _ in range(1_990)) + "东京大学"
    started = time.monotonic()
    reply = d.client.post("/api/v1/search", {"query": query})
    assert time.monotonic() - started < 2.0
    assert "only its first ones were searched" in reply["query_cut"]
    one = d.client.post(d.client.kb("notes", "/search"), {"query": query})
    assert "only its first ones were searched" in one["query_cut"]
    short = d.client.post(d.client.kb("notes", "/search"), {"query": "东京大学"})
    assert "query_cut" not in short
    code, _ = run(d, "search", "notes", query)  # the CLI says so on stderr, and answers
    assert code == 0
