"""How text meets FTS5: one `porter unicode61` table that also finds CJK and short terms.

`unicode61` splits words on anything that is not a letter, digit or private-use character,
and it sees a run of Chinese/Japanese/Korean characters as one long "word". Before indexing
we put a ZERO WIDTH SPACE (a separator to unicode61, invisible to people) after every CJK
character, so each becomes a token of its own; a CJK query becomes a phrase of single
characters, which finds any 1-, 2- or 3-character substring through the index. Stored text
and FTS5 snippets keep the original look once the ZWSPs are removed again.

User text never reaches FTS5 syntax: every term is rebuilt as a quoted phrase and the
phrases are OR-ed, which ranks English as well as plain BM25 over words (SciFact: see
docs/benchmarks.md) and cannot raise a syntax error.
"""

from __future__ import annotations

import re
import unicodedata

from cofferd.domain.scripts import CJK_RANGES

ZWSP = "\u200b"
HIGHLIGHT_START = "\x02"
HIGHLIGHT_END = "\x03"

_CJK_RUN = re.compile(f"[{CJK_RANGES}]+")
_CJK_ONE = re.compile(f"[{CJK_RANGES}]")


def _split_run(match: re.Match[str]) -> str:
    return ZWSP.join(match.group()) + ZWSP


def index_text(text: str) -> str:
    """Text as stored in FTS5: CJK characters split into single-character tokens."""
    if _CJK_ONE.search(text) is None:
        return text
    return _CJK_RUN.sub(_split_run, text)


def display_text(text: str) -> str:
    return text.replace(ZWSP, "")


def _is_token_char(ch: str) -> bool:
    category = unicodedata.category(ch)
    return category[0] in "LN" or category == "Co"


def query_terms(query: str) -> list[list[str]]:
    """Split user text the way unicode61 will, keeping each whitespace-separated piece whole.

    `config.yaml` -> [["config", "yaml"]] (a phrase), `东京` -> [["东", "京"]],
    `foo AND (bar)` -> [["foo"], ["AND"], ["bar"]].
    """
    terms: list[list[str]] = []
    for piece in query.split():
        tokens: list[str] = []
        word: list[str] = []
        for ch in piece:
            if _CJK_ONE.match(ch):
                if word:
                    tokens.append("".join(word))
                    word = []
                tokens.append(ch)
            elif _is_token_char(ch):
                word.append(ch)
            elif word:
                tokens.append("".join(word))
                word = []
        if word:
            tokens.append("".join(word))
        if tokens and tokens not in terms:
            terms.append(tokens)
    return terms


def _phrase(tokens: list[str], prefix: bool = False) -> str:
    quoted = '"' + " ".join(t.replace('"', '""') for t in tokens) + '"'
    return quoted + " *" if prefix else quoted


def match_expression(terms: list[list[str]], *, prefix: bool = False) -> str:
    """An FTS5 MATCH string: any of the terms."""
    return " OR ".join(_phrase(t, prefix=prefix and not _CJK_ONE.match(t[-1])) for t in terms)


# bm25 weights for (text, heading).
RANK = "bm25(1.0, 0.5)"
