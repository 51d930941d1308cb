"""Writing systems, as far as search needs them: which characters are Chinese, Japanese or
Korean (written without spaces, so each character counts as a word of its own)."""

from __future__ import annotations

CJK_RANGES = (
    "\u1100-\u11ff"  # Hangul Jamo
    "\u2e80-\u2fdf"  # CJK radicals
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3100-\u312f"  # Bopomofo
    "\u3130-\u318f"  # Hangul compatibility Jamo
    "\u31f0-\u31ff"  # Katakana extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\ua960-\ua97f"  # Hangul Jamo extended A
    "\uac00-\ud7af"  # Hangul syllables
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff66-\uff9f"  # halfwidth Katakana
    "\U00020000-\U0003134f"  # CJK extensions B-G
)
"""A regular-expression character class body (use inside `[...]`)."""

WIDE_RANGES = (
    "\u1100-\u115f"  # Hangul Jamo initials
    "\u231a\u231b\u2329\u232a"  # watch, hourglass, angle brackets
    "\u2e80-\u303e"  # CJK radicals, ideographic description, CJK symbols and punctuation
    "\u3041-\u33ff"  # Kana, Bopomofo, Hangul compatibility Jamo, CJK strokes, enclosed
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\ua000-\ua4cf"  # Yi
    "\ua960-\ua97f"  # Hangul Jamo extended A
    "\uac00-\ud7a3"  # Hangul syllables
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\ufe10-\ufe19\ufe30-\ufe6f"  # vertical and small forms
    "\uff00-\uff60\uffe0-\uffe6"  # fullwidth forms
    "\U00016fe0-\U00018d08"  # Tangut, Khitan
    "\U0001aff0-\U0001b2ff"  # Kana supplements
    "\U0001f200-\U0001f265"  # enclosed ideographic supplement
    "\U0001f300-\U0001f64f\U0001f680-\U0001f6ff"  # pictographs, emoji, transport
    "\U0001f900-\U0001f9ff\U0001fa70-\U0001faff"  # more pictographs
    "\U00020000-\U0003fffd"  # CJK extensions B-H
)
"""The characters a terminal draws two columns wide (Unicode's East Asian Wide and
Fullwidth, their main blocks): a character-class body, as CJK_RANGES."""
