"""The native CJK tokenizer (storage/native/cjk_tokens.c) gives SQLite's own tokens: the same
terms at the same positions, the same byte offsets (highlights), the same matches, on every
character and on hostile text; and a daemon installed with it uses it."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
import sqlean

from cofferd.infrastructure.storage import cjk_tokens, fts_index, fts_text, native
from cofferd.infrastructure.storage.native import build
from tests.support.helpers import Daemon

COFFERS = fts_index.TOKENIZER


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built from this checkout's source (what an install builds), whatever is installed."""
    target = tmp_path_factory.mktemp("native") / native.LIBRARY_NAME
    why = build.compile_library(target)
    if why is not None:
        pytest.skip(f"the tokenizer cannot be built here: {why}")
    return target


def connection(library: Path | None) -> sqlean.Connection:
    conn = sqlean.connect(":memory:", isolation_level=None)
    if library is not None:
        conn.enable_load_extension(True)
        conn.execute("SELECT load_extension(?, ?)", (str(library), native.ENTRY_POINT))
        conn.enable_load_extension(False)
    return conn


def readings(
    library: Path | None, texts: Sequence[str | bytes], tokenizer: str
) -> tuple[list[tuple[object, ...]], list[object]]:
    """Every token (term, row, position) and every row highlighted by each token's offsets."""
    conn = connection(library)
    conn.execute(f'CREATE VIRTUAL TABLE t USING fts5(body, tokenize = "{tokenizer}")')
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
    conn.executemany("INSERT INTO t (rowid, body) VALUES (?, CAST(? AS TEXT))", enumerate(texts, 1))
    tokens = conn.execute(
        "SELECT CAST(term AS BLOB), doc, offset FROM v ORDER BY doc, offset"
    ).fetchall()
    terms = sorted({term.decode(errors="replace") for term, _, _ in tokens})
    marked = [
        conn.execute(
            "SELECT rowid, CAST(highlight(t, 0, '[', ']') AS BLOB) FROM t"
            " WHERE t MATCH ? ORDER BY rowid",
            ('"' + term.replace('"', '""') + '"',),
        ).fetchall()
        for term in terms[:: max(1, len(terms) // 300)]
    ]
    conn.close()
    return tokens, marked


def assert_same(library: Path, texts: Sequence[str | bytes], tokenizer: str = COFFERS) -> None:
    ours, theirs = readings(library, texts, tokenizer), readings(None, texts, tokenizer)
    assert ours[0] == theirs[0]
    assert ours[1] == theirs[1]


def every_character() -> Iterator[str]:
    for code in (*range(0x80, 0xD800), *range(0xE000, 0x10000), *range(0x20000, 0x31350)):
        yield chr(code)


def test_every_character_between_separators_and_letters(library: Path) -> None:
    chars = list(every_character())
    contexts = ("{} ", "\x1f{}\x1f", "a{}b", "中\x1f{}", "{}中", "é{}\u0301")
    texts = ["".join(ctx.format(c) for c in chars[i : i + 64]) for ctx in contexts for i in
             range(0, len(chars), 64)]  # fmt: skip
    assert_same(library, texts)


def random_texts(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    pieces = [
        "中", "文", "한", "국", "あ", "ア", "ｱ", "ー", "𠀀", "\U0002a6d6", "\x1f", "\u200b", " ",
        "\n", "，", "。", "、", "「", "」", "・", "—", "a", "Z", "9", "é", "\u0301", "ß", "İ",
        "Ａ", "ｚ", "_", "-", "'", "\u3000", "🙂", "\ufeff", "\u309b", "\u2e80", "\u9fff",
    ]  # fmt: skip
    return ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 80))) for _ in range(count)]


@pytest.mark.parametrize(
    "tokenizer",
    [
        COFFERS,
        "unicode61",
        "unicode61 remove_diacritics 0",
        "unicode61 remove_diacritics 1",
        "unicode61 tokenchars '中_'",  # other options: SQLite's own reading throughout
        "unicode61 separators 'a'",
    ],
)
def test_random_text_reads_alike(library: Path, tokenizer: str) -> None:
    assert_same(library, random_texts(36, 4000), tokenizer)


def test_text_as_coffer_stores_it_and_broken_utf8(library: Path) -> None:
    texts: list[str | bytes] = [fts_text.index_text(t) for t in random_texts(7, 2000)]
    texts += [
        b"\xe4\xb8\x1f\xe4\xb8\xad\x1f",  # a character cut short
        b"\xe4\xb8\xad\xff\xe4\xb8\xad",
        b"\xed\xa0\x80\x1f\xe4\xb8\xad",  # an encoded surrogate
        b"\xf4\x90\x80\x80 \xe4\xb8\xad",  # past U+10FFFF
        b"\xc0\xaf\x1f\xe4\xb8\xad\x1f\xe4",  # overlong, then cut at the end
        "\x1f".join(chr(c) for c in range(0x4E00, 0x4E00 + 20000)).encode(),  # one long text
    ]
    assert_same(library, texts)


def test_byte_soup_reads_alike(library: Path) -> None:
    """Bytes that are no UTF-8 read as SQLite reads them: a lead byte takes every
    continuation byte after it (`中。` then a stray continuation byte is one token), an
    overlong or cut character is U+FFFD, a stray continuation byte a character of its own."""
    rng = random.Random(35)
    pieces = [
        b"\xe4\xb8\xad", b"\x1f", b" ", b"a", b"\xe4", b"\xb8", b"\xad", b"\xf0\xa0\x80\x80",
        b"\xf0", b"\xc3\xa9", b"\xcc\x81", b"\xff", b"\x00", b"\xe3\x80\x82", b"\xed\xa0\x80",
        b"\xef\xbc\x8c", b"\xc0\x80", b"\xe0\x80\x80", b"\xf8", b"\x80\x80\x80", b"\xef\xbf\xbe",
        b"\xe3\x81\x82", b"\xea\xb0\x80", b"\xe2\x80\x94", b"\xc2\xaa", b"\xc2\xad",
    ]  # fmt: skip
    texts = [b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 30))) for _ in range(6000)]
    assert_same(library, texts)


def test_queries_find_the_same_rows(library: Path) -> None:
    texts = [fts_text.index_text(t) for t in random_texts(11, 1500)]
    queries = ['"中 文"', '"한"', "a*", '"あ" OR "ア"', '"文" NOT "中"', "e*"]
    found = []
    for lib in (library, None):
        conn = connection(lib)
        conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(body, tokenize = '{COFFERS}')")
        conn.executemany("INSERT INTO t (rowid, body) VALUES (?, ?)", enumerate(texts, 1))
        found.append(
            [conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (q,)).fetchall() for q in queries]
        )
        conn.close()
    assert found[0] == found[1]
    assert all(found[0])


def test_loaded_twice_on_a_connection_is_loaded_once(library: Path) -> None:
    conn = connection(library)
    conn.enable_load_extension(True)
    conn.execute("SELECT load_extension(?, ?)", (str(library), native.ENTRY_POINT))
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(body, tokenize = '{COFFERS}')")
    conn.execute("INSERT INTO t VALUES (?)", ("中\x1f文\x1f",))
    assert conn.execute("SELECT count(*) FROM t WHERE t MATCH '\"中 文\"'").fetchone() == (1,)


def test_index_text_in_c_is_index_text(library: Path) -> None:
    """The workers' `index_text` in C writes what the Python one writes, to the byte."""
    native_text = fts_text.native_index_text(library)
    assert native_text is not None
    chars = list(every_character())
    texts = [ctx.format(c) for c in chars for ctx in ("{}", "a{}", "{}a", "中{}文", "。{}")]
    texts += random_texts(5, 4000)
    texts += ["x\u200b中", "\0中\0", "中" * 3100, "a" + "中" * 1024 + "b"]
    texts += ["é" + "中a" * 300_000, "中" * 10]  # past the kept buffer, then within it again
    texts += ["中\ud800文", "\udfff"]  # lone surrogates: no UTF-8 (Python's reading)
    for text in texts:
        assert native_text(text) == fts_text.python_index_text(text), repr(text[:40])


def test_the_installed_daemon_uses_it(shared_daemon: Daemon) -> None:
    """An install on a machine with a C compiler builds it, and every connection loads it."""
    if build.compiler() is None:
        pytest.skip("no C compiler here: the install built no tokenizer")
    status = shared_daemon.client.get("/api/v1/status")
    assert status["cjk_tokenizer"] == "native", status
    assert cjk_tokens.load(connection(None))
