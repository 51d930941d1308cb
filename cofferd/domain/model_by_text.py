"""The bundled model a knowledge base's own text calls for, when its settings name none.

MiniLM is fast and reads English (and Latin script); multilingual-e5-small reads about a
hundred languages, 5-7 times slower. A KB whose words are mostly in scripts MiniLM does not
read gets the multilingual model; the others keep MiniLM. Two thresholds keep a KB near the
line from switching back and forth as its text changes (each switch embeds it again).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from cofferd.domain.config import LOCAL_DEFAULT_MODEL, LOCAL_MULTILINGUAL_MODEL
from cofferd.domain.model_coverage import ENGLISH, XLMR, script_of, words_of

# MiniLM reads less than this share of the words: the multilingual model is chosen ...
MULTILINGUAL_BELOW = 0.5
# ... and kept until MiniLM reads at least this share again
ENGLISH_AGAIN_FROM = 0.7
# Fewer words than this say too little to choose by: the model in use stays
DECIDING_WORDS = 20


@dataclass(frozen=True)
class TextShares:
    """What a sample of a KB's text is written in, in words (each CJK character one)."""

    words: int = 0
    read: dict[str, int] = field(default_factory=dict)  # bundled model -> words it reads
    not_english: dict[str, int] = field(default_factory=dict)  # script -> words MiniLM skips

    def share(self, model: str) -> float:
        """The share of the words `model` (a bundled one) reads; 1 without words."""
        return self.read.get(model, 0) / self.words if self.words else 1.0

    def as_dict(self) -> dict[str, float]:
        """The share each bundled model reads, rounded to the percent's tenth."""
        return {model: round(self.share(model), 3) for model in self.read}


def measure(texts: Iterable[str]) -> TextShares:
    """The shares of `texts` (a sample of a KB's chunks) each bundled model reads."""
    words = english = multilingual = 0
    scripts: Counter[str] = Counter()
    for text in texts:
        for word in words_of(text):
            words += 1
            if ENGLISH.reads_word(word):
                english += 1
                multilingual += 1
                continue
            scripts[script_of(word)] += 1
            multilingual += XLMR.reads_word(word)
    return TextShares(
        words,
        {LOCAL_DEFAULT_MODEL: english, LOCAL_MULTILINGUAL_MODEL: multilingual},
        dict(scripts.most_common()),
    )


def model_for_text(shares: TextShares, current: str) -> str:
    """The bundled model for a KB whose text is `shares`, embedded with `current` now."""
    if shares.words < DECIDING_WORDS:
        return current
    english = shares.share(LOCAL_DEFAULT_MODEL)
    if current == LOCAL_MULTILINGUAL_MODEL:
        return LOCAL_DEFAULT_MODEL if english >= ENGLISH_AGAIN_FROM else LOCAL_MULTILINGUAL_MODEL
    return LOCAL_MULTILINGUAL_MODEL if english < MULTILINGUAL_BELOW else LOCAL_DEFAULT_MODEL


def why(shares: TextShares, model: str) -> str:
    """Why the text chose `model`, in words."""
    if model == LOCAL_MULTILINGUAL_MODEL:
        scripts = ", ".join(_script_names(shares)) or "other scripts"
        return f"most of its text is in {scripts}, which {LOCAL_DEFAULT_MODEL} does not read"
    if shares.words < DECIDING_WORDS:
        return "too little text to choose by yet: the default"
    return f"most of its text is in Latin script, which {LOCAL_DEFAULT_MODEL} reads (and faster)"


def reads_line(shares: TextShares) -> str | None:
    """What share each bundled model reads (None when MiniLM reads it all, or no text):
    `all-MiniLM-L6-v2 reads 62 % of its words; multilingual-e5-small 100 %`."""
    if not shares.words or shares.share(LOCAL_DEFAULT_MODEL) >= 1.0:
        return None
    first, *others = shares.read
    said = [f"{first} reads {_percent(shares.share(first))} of its words"]
    said += [f"{model} {_percent(shares.share(model))}" for model in others]
    return "; ".join(said)


def _script_names(shares: TextShares) -> list[str]:
    """The scripts MiniLM does not read that make up a tenth or more of those words."""
    skipped = sum(shares.not_english.values())
    return [name for name, n in shares.not_english.items() if n * 10 >= skipped]


def _percent(share: float) -> str:
    percent = share * 100
    return f"{percent:.1f} %" if 0 < percent < 1 or 99 < percent < 100 else f"{percent:.0f} %"
