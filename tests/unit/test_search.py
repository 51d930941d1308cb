from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cofferd.domain.errors import KBDisabled, KBNotFound, ValidationFailed
from cofferd.domain.models import KnowledgeBase
from cofferd.domain.query_syntax import query_terms
from cofferd.infrastructure.storage import fts_index, sqlite
from cofferd.infrastructure.storage.fts_text import (
    HIGHLIGHT_END,
    HIGHLIGHT_START,
    SEPARATOR,
    SPLIT_ANYWAY,
    display_text,
    index_text,
)
from cofferd.surfaces.core import Coffer
from tests.support.helpers import write

CORPUS = {
    "tokyo.md": "# 東京\n\n東京都は日本の首都です。",
    "beijing.md": "# 北京\n\n北京是中国的首都，有很多人。",
    "seoul.md": "# 서울\n\n서울은 한국의 수도입니다.",
    "config.md": "# Settings\n\nEdit config.yaml and restart; io errors go to the log.",
    "k8s.md": "# Cluster\n\nDeploy with k8s and kubectl apply.",
    "running.md": "# Runner\n\nThe runner keeps running jobs.",
}


async def indexed(
    coffer: Coffer, kb: KnowledgeBase, docs: Path, files: dict[str, str]
) -> KnowledgeBase:
    for name, text in files.items():
        write(docs / name, text)
    await coffer.reindexer.reconcile(kb)
    return kb


@pytest.fixture
async def corpus(coffer: Coffer, kb: KnowledgeBase, docs: Path) -> KnowledgeBase:
    return await indexed(coffer, kb, docs, CORPUS)


async def paths(coffer: Coffer, query: str, kb: str = "notes") -> list[str]:
    return [p.path for p in (await coffer.retrieval.search(kb, query)).passages]


@pytest.mark.parametrize(
    ("query", "path"),
    [
        ("京", "tokyo.md"),  # 1 character
        ("首都", "tokyo.md"),  # 2 characters, in two documents
        ("東京都", "tokyo.md"),  # 3 characters
        ("中国", "beijing.md"),
        ("서울", "seoul.md"),
        ("한국", "seoul.md"),
        ("config.yaml", "config.md"),
        ("io", "config.md"),
        ("k8s", "k8s.md"),
        ("run", "running.md"),  # stemming
        ("kube", "k8s.md"),  # no whole word matches: prefix fallback
    ],
)
async def test_finds_cjk_short_terms_and_identifiers(
    coffer: Coffer, corpus: KnowledgeBase, query: str, path: str
) -> None:
    assert path in await paths(coffer, query)


def test_cjk_characters_are_split_by_one_byte_separators() -> None:
    # one byte a character: the index of a Chinese corpus stays under 3x its text
    assert index_text("Python東京 tower") == "Python\x1f東\x1f京 tower"
    assert len(index_text("北京是中国的首都。").encode()) == len("北京是中国的首都。".encode()) + 7
    for text in ("東京 tower", "plain", "서울은 한국", "a\x1fb"):
        assert display_text(index_text(text)) == text.replace("\x1f", "")
    assert display_text(index_text("a\u200bb")) == "ab"  # a ZWSP typed: a separator, unseen


def test_no_separator_is_left_out_where_unicode61_would_not_split() -> None:
    conn = sqlite.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(x, tokenize = '{fts_index.TOKENIZER}')")
    for ch in SPLIT_ANYWAY:
        conn.execute("INSERT INTO t (x) VALUES (?)", (f"a{ch}b",))
    # each row two tokens: `a` alone, beside each of the characters left unseparated
    (found,) = conn.execute("SELECT count(*) FROM t WHERE t MATCH 'a'").fetchone()
    assert found == len(SPLIT_ANYWAY)


async def test_cjk_phrase_does_not_match_scattered_characters(
    coffer: Coffer, corpus: KnowledgeBase
) -> None:
    assert await paths(coffer, "京首") == []


async def test_passages_carry_ids_titles_snippets(coffer: Coffer, corpus: KnowledgeBase) -> None:
    (p,) = (await coffer.retrieval.search("notes", "kubectl")).passages
    assert p.title == "Cluster" and p.path == "k8s.md" and p.position == 0
    assert p.heading == ("Cluster",) and p.score > 0 and "kubectl" in p.text
    assert f"{HIGHLIGHT_START}kubectl{HIGHLIGHT_END}" in p.snippet
    cjk = (await coffer.retrieval.search("notes", "首都")).passages[0]
    assert SEPARATOR not in cjk.text + cjk.snippet and "\u200b" not in cjk.text + cjk.snippet
    assert f"{HIGHLIGHT_START}首都{HIGHLIGHT_END}" in cjk.snippet


@pytest.mark.parametrize(
    "query",
    [
        '"',
        '"unbalanced',
        "(",
        "a)",
        "AND",
        "OR NOT",
        "*",
        "-",
        "x:",
        ":",
        "col:val",
        "^",
        "NEAR(a b)",
        "a + b",
        "{x}",
        "''",
        "\\",
        "🙂",
        "\u200b",
        "%",
        "_",
    ],
)
async def test_any_text_is_a_valid_query(coffer: Coffer, corpus: KnowledgeBase, query: str) -> None:
    await coffer.retrieval.search("notes", query)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(query=st.text(min_size=1, max_size=40).filter(str.strip))
async def test_random_text_never_raises(coffer: Coffer, corpus: KnowledgeBase, query: str) -> None:
    await coffer.retrieval.search("notes", query)


@pytest.mark.parametrize("query", ["", "   ", "\n\t"])
async def test_empty_query_is_a_validation_error(
    coffer: Coffer, corpus: KnowledgeBase, query: str
) -> None:
    with pytest.raises(ValidationFailed) as err:
        await coffer.retrieval.search("notes", query)
    assert err.value.details["field"] == "query"


@pytest.mark.parametrize("top_k", [0, -1, 101, True])
async def test_top_k_is_bounded(coffer: Coffer, corpus: KnowledgeBase, top_k: int) -> None:
    with pytest.raises(ValidationFailed):
        await coffer.retrieval.search("notes", "k8s", top_k)


async def test_top_k_limits_results(coffer: Coffer, kb: KnowledgeBase, docs: Path) -> None:
    for i in range(30):
        write(docs / f"{i}.md", f"common word {i}")
    await coffer.reindexer.reconcile(kb)
    assert len((await coffer.retrieval.search("notes", "common", 7)).passages) == 7


async def test_search_is_scoped_to_one_kb(coffer: Coffer, corpus: KnowledgeBase) -> None:
    other = await coffer.kbs.create("other")
    write(coffer.locations.docs_dir("other") / "k.md", "k8s in another base")
    await coffer.reindexer.reconcile(other)
    assert await paths(coffer, "k8s", "other") == ["k.md"]
    assert await paths(coffer, "k8s") == ["k8s.md"]


async def test_unknown_and_disabled_kbs(coffer: Coffer, corpus: KnowledgeBase) -> None:
    with pytest.raises(KBNotFound):
        await coffer.retrieval.search("nope", "x")
    await coffer.kbs.set_enabled("notes", False)
    with pytest.raises(KBDisabled):
        await coffer.retrieval.search("notes", "x")


def test_query_terms_keep_pieces_as_phrases() -> None:
    assert query_terms("config.yaml 东京 foo-bar AND") == [
        ["config", "yaml"],
        ["东", "京"],
        ["foo", "bar"],
        ["AND"],
    ]
    assert query_terms("!!! ---") == []


MIXED = {
    "python.md": "# パス\n\nPythonファイルパスを扱う方法。",
    "pid.md": "# 프로세스\n\npid파일을 확인하세요.",
    "tidb.md": "# 部署\n\nTiDB集群的部署步骤。",
    "osaka.md": "# 大阪\n\n大阪は日本の商業の中心地で、食べ物が有名です。",
    "kyoto.md": "# 京都\n\n京都には千年の都の寺がたくさんあります。",
}


@pytest.fixture
async def mixed(coffer: Coffer, kb: KnowledgeBase, docs: Path) -> KnowledgeBase:
    return await indexed(coffer, kb, docs, MIXED)


@pytest.mark.parametrize(
    ("query", "path"),
    [
        ("Pythonファイルパス", "python.md"),  # the exact text of the file
        ("ファイル", "python.md"),  # CJK right after Latin letters
        ("python", "python.md"),
        ("파일", "pid.md"),
        ("pid", "pid.md"),
        ("TiDB", "tidb.md"),
        ("集群", "tidb.md"),
    ],
)
async def test_latin_against_cjk_is_split_at_the_script_boundary(
    coffer: Coffer, mixed: KnowledgeBase, query: str, path: str
) -> None:
    assert await paths(coffer, query) == [path]


@pytest.mark.parametrize(
    ("question", "path"),
    [
        ("大阪はどんな町として有名ですか", "osaka.md"),  # shares words, not the whole question
        ("京都にある古い寺について", "kyoto.md"),
        ("TiDB集群怎么部署", "tidb.md"),
    ],
)
async def test_questions_written_without_spaces_find_their_passage(
    coffer: Coffer, mixed: KnowledgeBase, question: str, path: str
) -> None:
    assert (await paths(coffer, question))[0] == path


SYNTAX = {
    "exact.md": "# Units\n\nSocket activation starts the daemon on the first connection.",
    "stemmed.md": "# Sockets\n\nActive sockets activate activation of sockets; sockets are active.",
    "other.md": "# Other\n\nWho created the subdirectory for the notes?",
}


@pytest.fixture
async def syntax(coffer: Coffer, kb: KnowledgeBase, docs: Path) -> KnowledgeBase:
    return await indexed(coffer, kb, docs, SYNTAX)


async def test_quotes_match_the_exact_phrase(coffer: Coffer, syntax: KnowledgeBase) -> None:
    assert await paths(coffer, '"socket activation"') == ["exact.md"]
    assert "exact.md" in await paths(coffer, '"socket activation" daemon')


async def test_a_minus_excludes_a_word(coffer: Coffer, syntax: KnowledgeBase) -> None:
    assert set(await paths(coffer, "sockets")) == {"exact.md", "stemmed.md"}
    assert await paths(coffer, "sockets -daemon") == ["stemmed.md"]
    assert await paths(coffer, 'sockets -"first connection"') == ["stemmed.md"]


async def test_no_filler_results_for_stopwords(coffer: Coffer, syntax: KnowledgeBase) -> None:
    assert await paths(coffer, "who created the xyzzy") == ["other.md"]  # `created`
    assert await paths(coffer, "who is the xyzzy") == []  # only stopwords match
    hits = (await coffer.retrieval.search("notes", "who created the subdirectory")).passages
    marked = hits[0].snippet
    assert f"{HIGHLIGHT_START}the{HIGHLIGHT_END}" not in marked
    assert f"{HIGHLIGHT_START}created{HIGHLIGHT_END}" in marked
    assert "other.md" in await paths(coffer, "the")  # a query of stopwords only still works


async def test_passages_say_where_they_are_in_the_file(
    coffer: Coffer, kb: KnowledgeBase, docs: Path
) -> None:
    text = (
        "---\ntitle: Plan\ntags: [a]\n---\n# Plan\n\nintro words\n\n## Later\n\n"
        "the pelican section\n"
    )
    write(docs / "sub" / "plan.md", text)
    await coffer.reindexer.reconcile(kb)
    (hit,) = (await coffer.retrieval.search("notes", "pelican")).passages
    lines = text.split("\n")
    assert "pelican" in "\n".join(lines[hit.line_start - 1 : hit.line_end])
    assert lines[hit.line_start - 1].startswith("## Later")
    assert hit.file == str(docs / "sub" / "plan.md") and hit.path == "sub/plan.md"
    (first,) = (await coffer.retrieval.search("notes", "intro")).passages
    assert (first.line_start, first.line_end) == (5, 7)  # after the frontmatter
    (grepped,) = (await coffer.retrieval.grep("notes", "pelican")).hits
    assert grepped.file == hit.file and grepped.line_number == 11


async def test_a_long_cjk_run_is_found_across_its_pieces(
    coffer: Coffer, kb: KnowledgeBase, docs: Path
) -> None:
    """fts splits a CJK run in pieces of 1,024 characters: a phrase across a piece's end
    is found as anywhere else."""
    run = "东" * 1022 + "京都大" + "东" * 2000  # 京都大 spans characters 1023-1025
    await indexed(coffer, kb, docs, {"long.md": run})
    assert await paths(coffer, "京都大") == ["long.md"]
