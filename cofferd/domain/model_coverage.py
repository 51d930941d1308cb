"""Which writing systems an embedding model reads, and how much of a text is in the others.

A model that cannot read a script gives its text vectors that mean nothing (the bundled
MiniLM on Chinese: 0.19 nDCG@10), so such text is not embedded and a query in it is
answered by keywords alone. Words are counted as the chunker counts them: a run of letters,
or one CJK character (written without spaces, each stands for about a word).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cofferd.domain.scripts import CJK_RANGES

# Latin (with its extensions and the IPA), and Greek, which science writes in English
LATIN_AND_GREEK = (
    "A-Za-z\u00aa\u00b5\u00ba\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u0250-\u02af"
    "\u0370-\u03ff\u1d00-\u1dbf\u1e00-\u1fff\u2c60-\u2c7f\ua720-\ua7ff\uff21-\uff3a\uff41-\uff5a"
    "\u2160-\u2188"  # Roman numerals (Ⅱ)
)
# The scripts beside Latin and Greek of the ~100 languages XLM-RoBERTa (multilingual-e5's
# base) was trained on, by the name people know them by
OTHER_SCRIPTS = (
    (
        "Chinese/Japanese/Korean",
        CJK_RANGES + "\u3005-\u3007\u303b",  # iteration marks, ideographic zero: letters
    ),
    ("Cyrillic", "\u0400-\u052f\u1c80-\u1c8f\u2de0-\u2dff\ua640-\ua69f"),
    ("Armenian", "\u0530-\u058f"),
    ("Hebrew", "\u0590-\u05ff\ufb1d-\ufb4f"),
    ("Arabic", "\u0600-\u06ff\u0750-\u077f\u08a0-\u08ff\ufb50-\ufdff\ufe70-\ufeff"),
    # Devanagari, Bengali, Gurmukhi, Gujarati, Oriya, Tamil, Telugu, Kannada, Malayalam, Sinhala
    ("an Indic script", "\u0900-\u0dff"),
    ("Thai or Lao", "\u0e00-\u0eff"),
    ("Myanmar", "\u1000-\u109f"),
    ("Georgian", "\u10a0-\u10ff\u1c90-\u1cbf"),
    ("Ethiopic", "\u1200-\u139f\u2d80-\u2ddf"),
    ("Khmer", "\u1780-\u17ff\u19e0-\u19ff"),
)
XLMR_SCRIPTS = LATIN_AND_GREEK + "".join(letters for _, letters in OTHER_SCRIPTS)

_WORDS = re.compile(f"[{CJK_RANGES}]|[^\\W\\d_{CJK_RANGES}]+")


@dataclass(frozen=True)
class ModelCoverage:
    """The languages a model reads, as said to people, and the letters of their scripts."""

    languages: str
    letters: str | None  # a character-class body; None: every script

    def words(self, text: str) -> tuple[int, int]:
        """(words in a script the model does not read, all words) of `text`."""
        if self.letters is None:
            return 0, sum(1 for _ in _WORDS.finditer(text))
        known = _letter_class(self.letters)
        total = unread = 0
        for word in _WORDS.finditer(text):
            total += 1
            if not known.match(word.group()):
                unread += 1
        return unread, total

    def reads(self, text: str) -> bool:
        """Whether the model reads most of `text` (a chunk worth embedding): at least half
        its words; text without letters (numbers, code symbols) counts as read."""
        unread, total = self.words(text)
        return unread * 2 <= total

    def reads_word(self, word: str) -> bool:
        """Whether the model reads `word` (one of `words_of`)."""
        return self.letters is None or bool(_letter_class(self.letters).match(word))

    def reads_all(self, text: str) -> bool:
        """Whether the model reads every word of `text` (a query it can answer)."""
        return self.words(text)[0] == 0


def words_of(text: str) -> list[str]:
    """The words of `text`, as the chunker counts them."""
    return [word.group() for word in _WORDS.finditer(text)]


def script_of(word: str) -> str:
    """The script `word` is written in, by its name in OTHER_SCRIPTS ("another script")."""
    for name, letters in OTHER_SCRIPTS:
        if _letter_class(letters).match(word):
            return name
    return "another script"


_CLASSES: dict[str, re.Pattern[str]] = {}


def _letter_class(body: str) -> re.Pattern[str]:
    if body not in _CLASSES:
        _CLASSES[body] = re.compile(f"[{body}]")
    return _CLASSES[body]


ENGLISH = ModelCoverage("English (and other languages in Latin script, less well)", LATIN_AND_GREEK)
XLMR = ModelCoverage(
    "about 100 languages: Chinese, Japanese, Korean, English, the languages of Europe, "
    "Arabic, Hebrew, Hindi and the other Indic scripts, Thai, Vietnamese, Indonesian, ...",
    XLMR_SCRIPTS,
)
EVERY_SCRIPT = ModelCoverage("every language (as the model's provider says)", None)
