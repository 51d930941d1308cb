"""What a search query says, whatever answers it (keyword, vector, hybrid): the one parser.

`"exact phrase"` must be in a passage word for word, `-word` and `-"a phrase"` must not be
there, the rest is text to rank by. Words are split as SQLite's unicode61 tokenizer splits
them (letters, digits, private-use characters), and each Chinese, Japanese or Korean
character is a word of its own (CJK is written without spaces).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field

from cofferd.domain.scripts import CJK_RANGES

_CJK_ONE = re.compile(f"[{CJK_RANGES}]")
_QUOTED = re.compile(r'(?:(?<=\s)|^)(-?)"([^"]*)"')

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


# A query's budget: its terms (words, phrases and excluded ones, CJK bigrams counted one by
# one) and the tokens of one phrase; beyond, the rest is not searched for, and `cut` says
# so (a 2,000-character CJK query was 4,000 terms and took seconds).
MAX_QUERY_TERMS = 64
MAX_PHRASE_TOKENS = 32


@dataclass(frozen=True)
class Query:
    """A query parsed: each term a list of tokens (a phrase when longer than one). `cut`:
    the query held more than its budget (MAX_QUERY_TERMS, MAX_PHRASE_TOKENS) and only its
    first terms are searched for."""

    phrases: list[list[str]]
    words: list[list[str]]
    excluded: list[list[str]]
    meaning: str  # what a model embeds: the words and phrases in order, no operators
    cut: bool = False

    def holds_phrases(self, text: str) -> bool:
        """Whether the text holds every quoted phrase word for word (an index that stems
        finds "sockets activate" for `"socket activation"` too)."""
        return all(_Phrase(p).found_in(text) for p in self.phrases)

    def constrains(self) -> bool:
        """Whether the query says what a passage must or must not hold."""
        return bool(self.phrases or self.excluded)


def parse_query(text: str) -> Query:
    parts = _Parts()
    at = 0
    for quoted in _QUOTED.finditer(text):
        parts.read_plain(text[at : quoted.start()])
        parts.read_quoted(quoted.group(2), excluded=bool(quoted.group(1)))
        at = quoted.end()
    parts.read_plain(text[at:])
    return parts.query()


@dataclass
class _Parts:
    """A query read piece by piece, in order."""

    phrases: list[list[str]] = field(default_factory=list)
    excluded: list[list[str]] = field(default_factory=list)
    pieces: list[str] = field(default_factory=list)  # the words to rank by, as typed
    meant: list[str] = field(default_factory=list)
    seen: set[tuple[bool, tuple[str, ...]]] = field(default_factory=set)

    def read_quoted(self, inner: str, *, excluded: bool) -> None:
        if not excluded:
            self.meant.append(inner.strip())
        self._constraint(tokenize(inner), excluded=excluded)

    def read_plain(self, segment: str) -> None:
        for piece in segment.replace('"', " ").split():
            if piece.startswith("-") and len(piece) > 1:
                # the piece as a whole: `-東京大学` leaves a passage that has 大学 alone
                self._constraint(tokenize(piece[1:]), excluded=True)
            else:
                self.pieces.append(piece)
                self.meant.append(piece)

    def _constraint(self, tokens: list[str], *, excluded: bool) -> None:
        if tokens and (excluded, tuple(tokens)) not in self.seen:
            self.seen.add((excluded, tuple(tokens)))
            (self.excluded if excluded else self.phrases).append(tokens)

    def query(self) -> Query:
        words = query_terms(" ".join(self.pieces))
        content = [w for w in words if not (len(w) == 1 and w[0].lower() in STOPWORDS)]
        if content or self.phrases:
            words = content
        meaning = " ".join(m for m in self.meant if m)
        cut = False
        budget = MAX_QUERY_TERMS
        kept: list[list[list[str]]] = []
        for terms in (self.phrases, self.excluded, words):
            fits = [t[:MAX_PHRASE_TOKENS] for t in terms[: max(0, budget)]]
            cut = cut or len(fits) < len(terms) or any(len(t) > MAX_PHRASE_TOKENS for t in terms)
            budget -= len(fits)
            kept.append(fits)
        phrases, excluded, words = kept
        return Query(phrases, words, excluded, meaning, cut)


def _is_token_char(ch: str) -> bool:
    category = unicodedata.category(ch)
    return category[0] in "LN" or category == "Co"


def is_cjk(token: str) -> bool:
    return _CJK_ONE.match(token) is not None


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
    (checked for every character in tests/unit/test_linear_time.py)."""
    lower = "i" if ch == "\u0130" else ch.lower()  # re lowers İ to i
    return {lower, lower.upper(), ch.upper(), ch.casefold()}
