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
    seen: set[tuple[str, ...]] = set()

    def add(term: list[str]) -> None:
        if term and tuple(term) not in seen:
            seen.add(tuple(term))
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
        return all(_Phrase(p).found_in(text) for p in self.phrases)

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
    seen: set[tuple[bool, tuple[str, ...]]] = set()
    for minus, inner in _QUOTED.findall(text):
        tokens = tokenize(inner)
        if tokens and (bool(minus), tuple(tokens)) not in seen:
            seen.add((bool(minus), tuple(tokens)))
            (excluded if minus else phrases).append(tokens)
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


class _Phrase:
    r"""Finds tokens word for word in a text as ``(?<![^\W_])t1(?![^\W_])\W*(?<![^\W_])t2...``
    finds them (ignoring case; a CJK token without the lookarounds), in one pass over the
    text, where that pattern can try the same places again for every place it starts from.

    The pattern's states are the bits of an integer (shift-and): for each token, one bit per
    character (ready to read it), then one bit for the token read (the last token's is the
    match; the others' is the `\W*` gap, ready to start the next token)."""

    def __init__(self, tokens: list[str]) -> None:
        self._bits_of: dict[str, int] = {}  # a character of the tokens -> where it is read
        self._gaps = self._word_ends = self._word_starts = 0
        bit = 1
        for token in tokens:
            word = not _CJK_ONE.match(token)  # only a whole word matches it
            self._word_starts |= bit if word else 0
            for ch in token:
                self._bits_of[ch] = self._bits_of.get(ch, 0) | bit
                bit <<= 1
            self._word_ends |= bit if word else 0
            self._gaps |= bit
            bit <<= 1
        self._match = bit >> 1
        self._gaps &= ~self._match
        word_start = r"(?<![^\W_])" if self._word_starts & 1 else ""  # one place tried per word
        self._first = re.compile(word_start + re.escape(tokens[0]), re.IGNORECASE)
        self._by_key: dict[str, list[str]] = {}
        for ch in self._bits_of:
            for key in _case_keys(ch):
                self._by_key.setdefault(key, []).append(ch)
        self._reads: dict[str, int] = {}

    def _read_by(self, ch: str) -> int:
        """The bits whose character `ch` matches, case ignored as `re` ignores it."""
        bits = self._reads.get(ch)
        if bits is None:
            bits = 0
            for c in {c for key in _case_keys(ch) for c in self._by_key.get(key, ())}:
                if re.fullmatch(re.escape(c), ch, re.IGNORECASE):
                    bits |= self._bits_of[c]
            self._reads[ch] = bits
        return bits

    def found_in(self, text: str) -> bool:
        state = 0  # the bits ready at `at`
        at = 0
        while at < len(text):
            if not state:  # nothing under way: on to where the first token is
                first = self._first.search(text, at)
                if first is None:
                    return False
                at = first.start()
            if not (self._word_starts & 1 and at and text[at - 1].isalnum()):
                state |= 1
            ch = text[at]
            read = (state & self._read_by(ch)) << 1
            if at + 1 < len(text) and text[at + 1].isalnum():
                read &= ~self._word_ends
            if read & self._match:
                return True
            state = read | (0 if ch.isalnum() or ch == "_" else state & self._gaps)
            state |= ((state & self._gaps) << 1) & ~(self._word_starts if ch.isalnum() else 0)
            at += 1
        return False


def _case_keys(ch: str) -> set[str]:
    """Strings that `ch` shares with every character that `re.IGNORECASE` matches it with
    (checked for every character in tests/test_linear_time.py)."""
    lower = "i" if ch == "\u0130" else ch.lower()  # re lowers İ to i
    return {lower, lower.upper(), ch.upper(), ch.casefold()}


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
