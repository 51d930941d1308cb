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
from collections.abc import Callable
from dataclasses import dataclass

from cofferd.domain.scripts import CJK_RANGES

ZWSP = "\u200b"
HIGHLIGHT_START = "\x02"
HIGHLIGHT_END = "\x03"

_CJK_RUN = re.compile(f"[{CJK_RANGES}]+")
_CJK_ONE = re.compile(f"[{CJK_RANGES}]")


def _split_run(match: re.Match[str]) -> str:
    # before the run too: `Pythonファイル` is the word `python`, then CJK characters
    return ZWSP + ZWSP.join(match.group()) + ZWSP


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

    `config.yaml` -> [["config", "yaml"]] (a phrase). CJK is written without spaces, so a
    run of CJK characters becomes its overlapping bigrams (phrases of two characters),
    plus the whole run as a phrase, so that a question finds passages that share its
    words in any order and verbatim matches rank first: `东京大学` -> [["东", "京"],
    ["京", "大"], ["大", "学"], ["东", "京", "大", "学"]]; one character stays itself.
    Latin text against CJK is cut at the script boundary: `TiDB集群` -> [["tidb"]...].
    """
    terms: list[list[str]] = []

    def add(term: list[str]) -> None:
        if term and term not in terms:
            terms.append(term)

    for piece in query.split():
        words: list[str] = []  # a phrase of the piece's non-CJK words
        word: list[str] = []
        run: list[str] = []  # the CJK characters in a row
        for ch in piece + " ":
            if _CJK_ONE.match(ch):
                if word:
                    words.append("".join(word))
                    word = []
                if words:
                    add(words)
                    words = []
                run.append(ch)
                continue
            if run:
                _add_run(run, add)
                run = []
            if _is_token_char(ch):
                word.append(ch)
            elif word:
                words.append("".join(word))
                word = []
        add(words)
    return terms


def _add_run(run: list[str], add: Callable[[list[str]], None]) -> None:
    if len(run) <= 2:
        add(run)
        return
    for i in range(len(run) - 1):
        add(run[i : i + 2])
    add(run)


# Words too common to make a passage relevant on their own (English; other languages' are
# rarely so short that bm25 alone cannot tell).
STOPWORDS = frozenset(
    (
        "a", "about", "an", "and", "are", "as", "at", "be", "been", "but", "by", "can", "could",
        "did", "do", "does", "for", "from", "had", "has", "have", "how", "i", "if", "in", "into",
        "is", "it", "its", "me", "my", "no", "not", "of", "on", "or", "our", "so", "than", "that",
        "the", "their", "them", "then", "there", "these", "they", "this", "to", "us", "was", "we",
        "were", "what", "when", "where", "which", "who", "whom", "why", "will", "with", "would",
        "you", "your",
    )
)  # fmt: skip
_QUOTED = re.compile(r'(?:(?<=\s)|^)(-?)"([^"]*)"')


@dataclass(frozen=True)
class Query:
    """What people type: `"exact phrase"` must match, `-word` must not, the rest is text."""

    phrases: list[list[str]]
    words: list[list[str]]
    excluded: list[list[str]]

    def holds_phrases(self, text: str) -> bool:
        """Whether the text holds every quoted phrase word for word (the index stems, so
        `"socket activation"` also finds "sockets activate" there)."""
        return all(_literal(p).search(text) for p in self.phrases)

    def match(self, *, prefix: bool = False) -> str | None:
        """The FTS5 MATCH string, or None when nothing can match."""
        if self.phrases:
            required = " AND ".join(_phrase(p) for p in self.phrases)
            if self.words:
                required = f"({required}) AND ({match_expression(self.phrases + self.words)})"
        elif self.words:
            required = match_expression(self.words, prefix=prefix)
        else:
            return None
        if self.excluded:
            return f"({required}) NOT ({match_expression(self.excluded)})"
        return required


def parse_query(text: str) -> Query:
    phrases: list[list[str]] = []
    excluded: list[list[str]] = []
    for minus, inner in _QUOTED.findall(text):
        tokens = tokenize(inner)
        target = excluded if minus else phrases
        if tokens and tokens not in target:
            target.append(tokens)
    rest = _QUOTED.sub(" ", text).replace('"', " ")
    plain: list[str] = []
    for piece in rest.split():
        if piece.startswith("-") and len(piece) > 1:
            excluded += query_terms(piece[1:])
        else:
            plain.append(piece)
    words = query_terms(" ".join(plain))
    content = [w for w in words if not (len(w) == 1 and w[0].lower() in STOPWORDS)]
    if content or phrases:
        words = content
    return Query(phrases, words, excluded)


def _literal(tokens: list[str]) -> re.Pattern[str]:
    parts = [
        re.escape(t) if _CJK_ONE.match(t) else rf"(?<![^\W_]){re.escape(t)}(?![^\W_])"
        for t in tokens
    ]
    return re.compile(r"\W*".join(parts), re.IGNORECASE)


def tokenize(text: str) -> list[str]:
    """The tokens unicode61 sees, in order: words, and each CJK character alone."""
    tokens: list[str] = []
    word: list[str] = []
    for ch in text + " ":
        if _CJK_ONE.match(ch) or not _is_token_char(ch):
            if word:
                tokens.append("".join(word))
                word = []
            if _CJK_ONE.match(ch):
                tokens.append(ch)
        else:
            word.append(ch)
    return tokens


def _phrase(tokens: list[str], prefix: bool = False) -> str:
    quoted = '"' + " ".join(t.replace('"', '""') for t in tokens) + '"'
    return quoted + " *" if prefix else quoted


def match_expression(terms: list[list[str]], *, prefix: bool = False) -> str:
    """An FTS5 MATCH string: any of the terms."""
    return " OR ".join(_phrase(t, prefix=prefix and not _CJK_ONE.match(t[-1])) for t in terms)


# bm25 weights for (text, heading, meta): a match in the title, an alias or a tag counts
# twice a match in the text (measured best of 0-2 on SciFact, CMRC 2018 and JSQuAD, with
# titles as a heading and as frontmatter: docs/benchmarks.md).
RANK = "bm25(1.0, 0.5, 2.0)"
