"""Where hybrid search loses on SciFact, and a floor for vector-only hits.

Part 1: hybrid (reciprocal rank fusion, K = 60 fixed) swept offline. The SciFact corpus is
indexed by Coffer in-process (keyword rows only); its chunks are embedded once with the
project's own embedder (LocalEmbedder, bundled all-MiniLM-L6-v2 int8) from the texts that
`vector_store.embedding_text` produces, and two other ways (without the title; with a
`title: ` line), plus the titles alone (short, cheap). Vectors are cached as .npy under
/tmp/hybrid-sweep; vector search is then exact cosine KNN in numpy (what sqlite-vec
computes) and the keyword lists come from the real `keyword_search`, re-run with other
bm25 column weights. Swept: candidates per list, keyword/vector weight, embedded text,
document aggregation, bm25 weights; nDCG@10 of the 300 test claims as
`bench.guards.scifact_vectors` measures it, with a held-out estimate of what picking the best
configuration is worth. A check runs the search through Coffer itself (a vector KB
drained and searched with `Retrieval.search`, the cached vectors served to it); until
issue 36 it matched the offline RRF figures, language guard and similarity floor
included. Hybrid search now fuses by score (`fusion.blend`): its Coffer figure is that
fusion's, the offline column still RRF's (bench.studies.fusion_offline sweeps the new one).

Part 2: a minimum cosine similarity for vector hits no keyword candidate shares:
similarity of relevant documents' best chunk (SciFact claims; tldr descriptions against
1,000 tldr pages) against the top hit of queries with no relevant document (tldr
descriptions, everyday questions, emoji and punctuation against SciFact; SciFact claims
against tldr), and what the floor does to SciFact hybrid nDCG@10.

    .venv/bin/python -m bench.studies.hybrid_sweep

The first run embeds about 5,300 SciFact chunks three ways and 1,000 tldr pages (40-60
minutes on 2 slow cores); later runs read the cache and take under two minutes.
`HYBRID_SWEEP_DIR` moves the working folder.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import re
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from bench.common import embed_as, extract_tldr, machine
from bench.guards.scifact_keyword import load_scifact, ndcg_at, ranked_documents
from coffer_kernel.locations import Locations
from cofferd.application.search import retrieval
from cofferd.domain.config import LOCAL_MIN_SIMILARITY, EmbeddingConfig
from cofferd.domain.models import Passage
from cofferd.domain.query_syntax import parse_query
from cofferd.infrastructure.models.embedders import LocalEmbedder
from cofferd.infrastructure.storage import fts_index, fts_text
from cofferd.infrastructure.storage.sqlite import Connection
from cofferd.infrastructure.storage.vector_store import embedding_text
from cofferd.surfaces.core import Coffer

Matrix = npt.NDArray[np.float32]
Name = tuple[str, str, int, int, float]  # vector text, bm25 weights, depths k/v, w_kw

WORK = Path(os.environ.get("HYBRID_SWEEP_DIR", "/tmp/hybrid-sweep"))
RRF_K = retrieval.RRF_K  # 60, fixed by design
TOP_K = 10
DEPTH = 100  # candidates fetched per list; sweeps cut them shorter
EMBED_THREADS = 2  # vectors do not depend on it; the daemon uses 1
BLOCK = 256  # texts per cached block of vectors
TLDR_PAGES = 1000
OFF_TOPIC_DESCRIPTIONS = 200
ON_TOPIC_DESCRIPTIONS = 200
THRESHOLDS = (0.2, 0.25, 0.3, 0.35, 0.4)
# bm25 weights of the FTS columns (text, heading path, meta = title, aliases, tags); the
# first is the project's own (fts_text.RANK)
TODAY_RANK = tuple(float(w) for w in fts_text.RANK.removeprefix("bm25(").rstrip(")").split(","))
BM25_WEIGHTS = tuple(
    dict.fromkeys(
        (
            TODAY_RANK,
            (1.0, 0.5, 0.0),
            (1.0, 0.5, 1.0),
            (1.0, 0.5, 4.0),
            (1.0, 0.0, 2.0),
            (1.0, 1.0, 2.0),
        )
    )
)
# RRF as hybrid search ranked until issue 36 (10 keyword / 30 vector candidates); it now
# fuses by score (cofferd/application/search/fusion.py, swept by bench.studies.fusion_offline)
BASELINE = (10, 30, 1.0)
DEPTHS = (10, 15, 20, 30, 40, 50, 75, 100)
SWEEP = tuple(sorted({10, 15, 20, 30, 50, 100, BASELINE[0]}))  # crossed with everything
WEIGHTS = (0.5, 0.67, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0)  # keyword weight; vector weight 1

EVERYDAY = (
    "how do I reset my router",
    "best way to cook pasta al dente",
    "how long should I boil an egg",
    "recipe for chocolate chip cookies",
    "who won the world cup in 2018",
    "rules of cricket for beginners",
    "how many players are on a basketball team",
    "cheap flights from London to Rome",
    "what to pack for a beach holiday",
    "do I need a visa to visit Japan",
    "how to change a flat tyre",
    "what time does the train to Paris leave",
    "how do I fix a leaking tap",
    "best hiking trails near Seattle",
    "how to tie a tie",
    "what is the capital of Australia",
    "how to make sourdough bread at home",
    "my wifi keeps disconnecting",
    "how to clean a cast iron pan",
    "which phone has the best camera",
    "how to learn to play the guitar",
    "what is a good name for a cat",
    "how do I unclog a drain",
    "tips for a job interview",
    "how to write a cover letter",
    "when is the next full moon",
    "how to grow tomatoes on a balcony",
    "how much should I tip in a restaurant",
    "what movies are playing tonight",
    "how to paint a bedroom wall",
    "how to knit a scarf",
    "how do I get to the airport by bus",
    "best pizza toppings",
    "how to improve my chess openings",
    "football match results from yesterday",
    "how to fold a fitted sheet",
    "what is the weather like in Barcelona in May",
    "how to set up a printer",
    "how to back up photos from my phone",
    "ideas for a birthday party",
)
SYMBOLS = (
    "?",
    "!",
    ".",
    "...",
    "#",
    "-",
    "@",
    "😀",
    "👍🏽",
    "🍕🍕🍕",
    "🙂🙃",
    "❤️🔥",
    "🎉✨🎂",
    "🤔",
)
DESCRIPTION_LINK = re.compile(r"^More information:")


# -- data ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Chunk:
    seq: int
    doc: str  # the file's stem: a SciFact id, a tldr command
    position: int
    heading: tuple[str, ...]
    text: str
    title: str


@dataclass
class Hits:
    """One ranked list: chunk indices, best first, with the list's own scores."""

    chunks: list[int] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)


@dataclass
class Corpus:
    kb: str
    chunks: list[Chunk]
    index: dict[tuple[str, int], int]  # (doc, position) -> chunk index

    def docs(self) -> list[str]:
        return [c.doc for c in self.chunks]


async def read_chunks(coffer: Coffer, kb: str) -> Corpus:
    def run(conn: Connection) -> tuple[list[Any], dict[int, str]]:
        rows = conn.execute(
            "SELECT c.seq, c.position, c.heading, d.path, d.title FROM chunks c"
            " JOIN documents d ON d.kind = c.kind AND d.resource_name = c.resource_name"
            " AND d.id = c.document_id WHERE c.resource_name = ? ORDER BY d.path, c.position",
            (kb,),
        ).fetchall()
        return rows, fts_index.texts(conn, kb, [r[0] for r in rows])

    rows, texts = await coffer.stores.db.read(run)
    chunks = [
        Chunk(seq, stem(path), position, tuple(json.loads(heading)), texts[seq], title)
        for seq, position, heading, path, title in rows
        if seq in texts
    ]
    return Corpus(kb, chunks, {(c.doc, c.position): i for i, c in enumerate(chunks)})


def stem(path: str) -> str:
    return path.rsplit("/", 1)[-1].removesuffix(".md")


def description(page: Path) -> str | None:
    """A tldr page's first `>` line: what the command does, in one sentence."""
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("> ") and not DESCRIPTION_LINK.match(line[2:]):
            return line[2:].strip().rstrip(".")
    return None


async def keyword_lists(
    coffer: Coffer, corpus: Corpus, queries: Sequence[str], rank: str = fts_text.RANK
) -> list[Hits]:
    """The real keyword list of each query (`keyword_search`, DEPTH deep) under these bm25
    column weights."""
    saved = fts_text.RANK
    fts_text.RANK = rank  # read by fts_index.ranked at each call
    try:
        out = []
        for query in queries:
            passages = await coffer.stores.keywords.keyword_search(
                corpus.kb, parse_query(query), DEPTH
            )
            hits = Hits()
            for p in passages:
                hits.chunks.append(corpus.index[(stem(p.path), p.position)])
                hits.scores.append(p.score)
            out.append(hits)
        return out
    finally:
        fts_text.RANK = saved


async def keyword_matches(coffer: Coffer, corpus: Corpus, queries: Sequence[str]) -> list[set[int]]:
    """The chunks each query matches in FTS at all (any of its words; as prefixes when no
    word matches anywhere, as `keyword_search` then does)."""
    table = fts_index.table_name(corpus.kb)
    seqs = {c.seq: i for i, c in enumerate(corpus.chunks)}

    def run(conn: Connection) -> list[set[int]]:
        out = []
        for query in queries:
            parsed = parse_query(query)
            found: set[int] = set()
            for expr in (fts_text.match(parsed), fts_text.match(parsed, prefix=True)):
                if expr is None or found:
                    continue
                rows = conn.execute(f"SELECT rowid FROM {table} WHERE {table} MATCH ?", [expr])
                found = {seqs[int(r[0])] for r in rows if int(r[0]) in seqs}
                if parsed.phrases:  # no prefix retry for quoted phrases
                    break
            out.append(found)
        return out

    return await coffer.stores.db.read(run)


# -- vectors -------------------------------------------------------------------------------


class Vectors:
    """The project's LocalEmbedder, with every vector cached on disk by block."""

    def __init__(self) -> None:
        config = EmbeddingConfig(provider="local", threads=EMBED_THREADS, batch_size=32)
        self.embedder = LocalEmbedder(config, WORK / "models")

    async def embed(self, tag: str, texts: Sequence[str]) -> Matrix:
        """Unit vectors of these texts (one row each), embedded once per distinct text."""
        unique = list(dict.fromkeys(texts))
        key = hashlib.sha256(json.dumps(unique).encode()).hexdigest()[:16]
        folder = WORK / "cache" / f"{tag}-{key}"
        folder.mkdir(parents=True, exist_ok=True)
        blocks = []
        started, done = time.perf_counter(), 0
        for n, start in enumerate(range(0, len(unique), BLOCK)):
            path = folder / f"{n:04d}.npy"
            if not path.is_file():
                batch = unique[start : start + BLOCK]
                got = await self.embedder.embed(batch, **embed_as(self.embedder, False))
                vectors = np.asarray(got, dtype=np.float32)
                np.save(path.with_suffix(".tmp.npy"), vectors)
                path.with_suffix(".tmp.npy").rename(path)
                done += len(batch)
                rate = done / (time.perf_counter() - started)
                print(f"  {tag}: {start + len(batch)}/{len(unique)} ({rate:.1f} texts/s)")
            blocks.append(np.load(path))
        matrix = np.concatenate(blocks) if blocks else np.zeros((0, 384), np.float32)
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        row = {text: i for i, text in enumerate(unique)}
        picked: Matrix = matrix[[row[t] for t in texts]]
        return picked

    async def close(self) -> None:
        await self.embedder.close()


def unit(matrix: Matrix) -> Matrix:
    norms: Matrix = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / norms


def vector_lists(sims: Matrix, depth: int = DEPTH) -> list[Hits]:
    """Exact KNN over (query x chunk) cosine similarities, as sqlite-vec answers it
    (similarity = 1 - cosine distance)."""
    out = []
    for row in sims:
        top = np.argpartition(-row, depth)[:depth]
        top = top[np.argsort(-row[top], kind="stable")]
        out.append(Hits([int(i) for i in top], [float(row[i]) for i in top]))
    return out


# -- texts that are embedded ---------------------------------------------------------------


def body(chunk: Chunk) -> str:
    """The chunk without its document's title; a chunk that is only the title stays it."""
    first, _, rest = chunk.text.lstrip().partition("\n")
    if chunk.heading and first.startswith("#") and first.lstrip("#").strip() == chunk.heading[-1]:
        return rest.strip() or chunk.title
    return chunk.text.strip()


TEXT_VARIANTS: dict[str, Callable[[Chunk], str]] = {
    "current": lambda c: embedding_text(list(c.heading), c.text),  # '# title\n\ntext'
    "no title": body,
    "title: prefix": lambda c: f"title: {c.title}\n\n{body(c)}",
}


# -- fusion and scoring --------------------------------------------------------------------


def fuse(
    lists: Sequence[tuple[float, Hits, int]],
    docs: Sequence[str],
    agg: str = "chunk",
    drop: set[int] | None = None,
) -> list[str]:
    """Weighted RRF (K = 60) of (weight, hits, depth) lists, as `retrieval.fuse` ranks them
    (ties by the first list's own score), then documents in the order of their best
    chunk. agg "doc": each list collapsed to documents before fusion, ten documents out;
    "sum": a document scores the sum of its chunks' fused scores. `drop`: chunks taken
    out of the fused ranking (agg "chunk")."""
    scores: dict[int | str, float] = {}
    first: dict[int | str, float] = {}
    for weight, hits, depth in lists:
        seen: set[str] = set()
        rank = 0
        for i, own in zip(hits.chunks[:depth], hits.scores[:depth], strict=True):
            key: int | str = i
            if agg == "doc":
                if docs[i] in seen:
                    continue
                seen.add(key := docs[i])
            scores[key] = scores.get(key, 0.0) + weight / (RRF_K + rank + 1)
            first.setdefault(key, own)
            rank += 1
    if agg == "sum":
        summed: dict[int | str, float] = {}
        for key, score in scores.items():
            doc = docs[int(key)]
            summed[doc] = summed.get(doc, 0.0) + score
            first.setdefault(doc, first[key])
        scores = summed
    ranked = sorted(scores, key=lambda key: (scores[key], first[key]), reverse=True)
    if drop:
        ranked = [key for key in ranked if key not in drop]
    if agg == "chunk":
        return list(dict.fromkeys(docs[int(key)] for key in ranked[:TOP_K]))
    return [str(key) for key in ranked[:TOP_K]]


def floor(
    lists: list[Hits], protect: list[set[int]], minimum: float, depth: int = BASELINE[1]
) -> list[Hits]:
    """Vector lists cut to `depth`, then without the hits below `minimum` except the
    protected chunks (as retrieval.py filters the candidates it fetched)."""
    out = []
    for hits, kept in zip(lists, protect, strict=True):
        pairs = [
            (i, s)
            for i, s in zip(hits.chunks[:depth], hits.scores[:depth], strict=True)
            if s >= minimum or i in kept
        ]
        out.append(Hits([i for i, _ in pairs], [s for _, s in pairs]))
    return out


def weak_hits(
    lists: list[Hits], protect: list[set[int]], minimum: float = LOCAL_MIN_SIMILARITY,
    depth: int = BASELINE[1],
) -> list[set[int]]:  # fmt: skip
    """The vector hits below `minimum` that no keyword candidate shares: what retrieval.py
    drops from the fused list."""
    return [
        {i for i, s in zip(v.chunks[:depth], v.scores[:depth], strict=True) if s < minimum} - kept
        for v, kept in zip(lists, protect, strict=True)
    ]


def ranked_docs(hits: Hits, docs: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(docs[i] for i in hits.chunks[:TOP_K]))


@dataclass
class Eval:
    """The 300 SciFact test claims and what each scores."""

    qids: list[str]
    qrels: dict[str, dict[str, int]]
    docs: list[str]

    def ndcg(self, ranked: Sequence[list[str]]) -> npt.NDArray[np.float64]:
        return np.array(
            [ndcg_at(r, self.qrels[q], TOP_K) for q, r in zip(self.qids, ranked, strict=True)]
        )

    def hybrid(
        self,
        keyword: list[Hits],
        vector: list[Hits],
        dk: int = BASELINE[0],
        dv: int = BASELINE[1],
        wk: float = BASELINE[2],
        agg: str = "chunk",
        drops: list[set[int]] | None = None,
    ) -> npt.NDArray[np.float64]:
        return self.ndcg(
            [
                fuse([(wk, k, dk), (1.0, v, dv)], self.docs, agg, drops[n] if drops else None)
                for n, (k, v) in enumerate(zip(keyword, vector, strict=True))
            ]
        )

    def alone(self, lists: list[Hits]) -> npt.NDArray[np.float64]:
        return self.ndcg([ranked_docs(h, self.docs) for h in lists])


def check_fusion(ev: Eval, keyword: list[Hits], vector: list[Hits]) -> None:
    """The offline fusion ranks exactly as retrieval.fuse does at today's settings."""

    def passages(hits: Hits, depth: int) -> list[Passage]:
        return [
            Passage(ev.docs[i], "", "", s, i, ev.docs[i])
            for i, s in zip(hits.chunks[:depth], hits.scores[:depth], strict=True)
        ]

    dk, dv, _ = BASELINE
    for k, v in zip(keyword, vector, strict=True):
        real = retrieval.fuse([(1.0, passages(k, dk)), (1.0, passages(v, dv))], TOP_K)
        assert list(dict.fromkeys(p.path for p in real)) == fuse([(1, k, dk), (1, v, dv)], ev.docs)


class Fused:
    """`Eval.hybrid` with agg "chunk" for all claims at once (numpy), for the sweeps: the
    two lists of each claim laid out as one row of their union, in `fuse`'s order."""

    def __init__(self, ev: Eval, keyword: list[Hits], vector: list[Hits]) -> None:
        n, width = len(keyword), 2 * DEPTH
        self.rk = np.full((n, width), np.inf)
        self.rv = np.full((n, width), np.inf)
        self.sk = np.zeros((n, width))
        self.sv = np.zeros((n, width))
        self.doc = np.full((n, width), -1)
        self.gain = np.zeros((n, width))
        numbers: dict[str, int] = {}
        for q, (k, v) in enumerate(zip(keyword, vector, strict=True)):
            union = list(dict.fromkeys(k.chunks + v.chunks))
            at = {c: j for j, c in enumerate(union)}
            for r, (c, score) in enumerate(zip(k.chunks, k.scores, strict=True)):
                self.rk[q, at[c]], self.sk[q, at[c]] = r, score
            for r, (c, score) in enumerate(zip(v.chunks, v.scores, strict=True)):
                self.rv[q, at[c]], self.sv[q, at[c]] = r, score
            rels = ev.qrels[ev.qids[q]]
            for j, c in enumerate(union):
                self.doc[q, j] = numbers.setdefault(ev.docs[c], len(numbers))
                self.gain[q, j] = rels.get(ev.docs[c], 0)
        self.idcg = np.array(
            [
                sum(
                    r / np.log2(i + 2)
                    for i, r in enumerate(sorted(ev.qrels[q].values())[::-1][:TOP_K])
                )
                for q in ev.qids
            ]
        )
        self.earlier = np.tril(np.ones((TOP_K, TOP_K), dtype=bool), k=-1)

    def ndcg(self, dk: int, dv: int, wk: float) -> npt.NDArray[np.float64]:
        ink, inv = self.rk < dk, self.rv < dv
        with np.errstate(divide="ignore"):
            score = np.where(ink, wk / (RRF_K + 1 + self.rk), 0.0) + np.where(
                inv, 1.0 / (RRF_K + 1 + self.rv), 0.0
            )
        score = np.where(ink | inv, score, -np.inf)
        tie = np.where(ink, self.sk, self.sv)
        order = np.lexsort((-tie, -score), axis=1)[:, :TOP_K]
        rows = np.arange(len(order))[:, None]
        docs, valid = self.doc[rows, order], np.isfinite(score[rows, order])
        dup = ((docs[:, :, None] == docs[:, None, :]) & self.earlier).any(axis=2)
        keep = valid & ~dup
        position = np.cumsum(keep, axis=1) - 1
        dcg = (keep * self.gain[rows, order] / np.log2(position + 2)).sum(axis=1)
        result: npt.NDArray[np.float64] = dcg / self.idcg
        return result


@dataclass
class Grid:
    """Every (vector text, keyword variant, depths, weight) scored per query."""

    names: list[Name] = field(default_factory=list)
    rows: list[npt.NDArray[np.float64]] = field(default_factory=list)

    def add(self, name: Name, scores: npt.NDArray[np.float64]) -> None:
        self.names.append(name)
        self.rows.append(scores)

    def best(self, where: Callable[[tuple[str, str, int, int, float]], bool]) -> int:
        picks = [i for i, n in enumerate(self.names) if where(n)]
        return max(picks, key=lambda i: float(self.rows[i].mean()))


def held_out(
    grid: Grid, picks: Sequence[int], baseline: int, rounds: int = 200
) -> tuple[float, float, float]:
    """Two-fold cross-validation of picking the best of these configurations: chosen on
    one half of the claims, scored on the other. (mean held-out gain over today's
    settings, its 5th and 95th percentile over random halves)."""
    matrix = np.vstack([grid.rows[i] for i in picks])
    base = grid.rows[baseline]
    rng = np.random.default_rng(7)
    gains = []
    n = matrix.shape[1]
    for _ in range(rounds):
        order = rng.permutation(n)
        for pick, test in ((order[: n // 2], order[n // 2 :]), (order[n // 2 :], order[: n // 2])):
            best = int(np.argmax(matrix[:, pick].mean(axis=1)))
            gains.append(matrix[best, test].mean() - base[test].mean())
    return float(np.mean(gains)), float(np.percentile(gains, 5)), float(np.percentile(gains, 95))


def paired_gain(
    a: npt.NDArray[np.float64], b: npt.NDArray[np.float64], rounds: int = 2000
) -> tuple[float, float]:
    """90 % bootstrap interval of mean(a - b) over the claims."""
    rng = np.random.default_rng(3)
    diff = a - b
    means = [diff[rng.integers(0, len(diff), len(diff))].mean() for _ in range(rounds)]
    return float(np.percentile(means, 5)), float(np.percentile(means, 95))


# -- printing ------------------------------------------------------------------------------


def table(header: Sequence[object], rows: Sequence[Sequence[object]]) -> None:
    cells = [[str(h) for h in header]] + [[fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    for n, row in enumerate(cells):
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
        if n == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    print()


def fmt(value: object) -> str:
    if isinstance(value, float | np.floating):
        number = float(value)
        return f"{number:.4f}" if abs(number) < 1 else f"{number:.2f}"
    return str(value)


def share(values: Sequence[float], floor: float) -> object:
    return float(np.mean(np.array(values) < floor)) if values else "-"


def quantiles(values: Sequence[float]) -> list[object]:
    if not values:
        return ["-"] * 5
    return [float(np.percentile(values, q)) for q in (5, 25, 50, 75, 95)]


class Remembered:
    """An Embedder for Coffer's own path (drain, embed_query) that answers from vectors
    already computed for the same texts by the same model, embedding only the rest."""

    def __init__(self, vectors: Vectors, known: dict[str, npt.NDArray[np.float32]]) -> None:
        self.vectors = vectors
        self.known = known
        self.misses = 0
        self.dimensions = vectors.embedder.dimensions

    async def embed(
        self, texts: Sequence[str], *, query: bool = False, lane: Any = None
    ) -> list[list[float]]:
        missing = list(dict.fromkeys(t for t in texts if t not in self.known))
        if missing:
            self.misses += len(missing)
            inner = self.vectors.embedder
            got = await inner.embed(missing, **embed_as(inner, False))
            self.known.update(
                (t, np.asarray(v, np.float32)) for t, v in zip(missing, got, strict=True)
            )
        return [[float(x) for x in self.known[t]] for t in texts]

    async def close(self) -> None:
        pass


async def real_path(
    locations: Locations,
    files: dict[str, str],
    claims: dict[str, str],
    qrels: dict[str, dict[str, int]],
    known: dict[str, npt.NDArray[np.float32]],
    vectors: Vectors,
) -> tuple[dict[str, float], int]:
    """nDCG@10 of today's search through Coffer itself, as bench.guards.scifact_vectors measures
    it, with the vectors the sweeps used."""
    remembered = Remembered(vectors, known)
    embedding: dict[str, Any] = {"provider": "local", "threads": 1, "batch_size": 32}
    config = {"enabled_modes": ["keyword", "grep", "vector"], "embedding": embedding}
    async with await Coffer.open(locations) as coffer:
        coffer.embeddings.make_embedder = lambda _config: remembered
        kb = await coffer.kbs.create("scifact-vec", config)
        docs = locations.docs_dir("scifact-vec")
        for name, text in files.items():
            (docs / name).write_text(text, encoding="utf-8")
        await coffer.reindexer.reconcile(kb)
        await coffer.embeddings.drain("scifact-vec")
        results = {}
        for label, mode, minimum in (
            ("vector only, no floor", "vector", -1.0),
            ("vector only, today's floor", "vector", None),
            ("hybrid, no floor", "hybrid", -1.0),
            ("hybrid, today's floor", "hybrid", None),
        ):
            settings = {**embedding, "min_similarity": minimum}
            await coffer.kbs.update_config(
                "scifact-vec", {"default_mode": mode, "embedding": settings}
            )
            scores = []
            for qid, rels in sorted(qrels.items()):
                found = await coffer.retrieval.search("scifact-vec", claims[qid], top_k=TOP_K)
                scores.append(ndcg_at(ranked_documents(found.passages), rels, TOP_K))
            results[label] = sum(scores) / len(scores)
    return results, remembered.misses - 1  # the KB's check embeds "ready"


# -- the run -------------------------------------------------------------------------------


def slug(name: str) -> str:
    return re.sub(r"\W+", "-", name).strip("-")


def tldr_pages() -> Path:
    pages = WORK / "tldr" / "corpus-tldr" / "pages" / "common"
    if not pages.is_dir():
        extract_tldr(WORK / "tldr")
    return pages


async def index(coffer: Coffer, locations: Locations, kb: str, files: dict[str, str]) -> Corpus:
    """A keyword-only KB of these Markdown files, indexed by the real reconcile."""
    created = await coffer.kbs.create(kb)
    docs = locations.docs_dir(kb)
    for name, text in files.items():
        (docs / name).write_text(text, encoding="utf-8")
    await coffer.reindexer.reconcile(created)
    return await read_chunks(coffer, kb)


def top1(sims: Matrix) -> list[float]:
    return [float(x) for x in sims.max(axis=1)]


def best_chunk(sims: Matrix, chunks: Sequence[int]) -> float:
    return float(sims[chunks].max())


async def main() -> None:
    started = time.perf_counter()
    corpus, queries, qrels = load_scifact()
    qids = sorted(qrels)
    claims = [queries[q] for q in qids]
    pages = tldr_pages()
    english = sorted(pages.glob("*.md"))[:TLDR_PAGES]
    rng = random.Random(5)
    described = [(p, d) for p in sorted(pages.glob("*.md")) if (d := description(p))]
    off_descriptions = [d for _, d in rng.sample(described, OFF_TOPIC_DESCRIPTIONS)]
    in_kb = set(english)
    on_topic = rng.sample([(p.stem, d) for p, d in described if p in in_kb], ON_TOPIC_DESCRIPTIONS)

    files = {  # as bench.guards.scifact_vectors writes them
        f"{d['_id']}.md": f"# {d['title']}\n\n{d['text']}\n" if d["title"] else d["text"] + "\n"
        for d in corpus
    }
    home = WORK / "home"
    shutil.rmtree(home, ignore_errors=True)
    locations = Locations(home=home, socket=home / "cofferd.sock")
    vectors = Vectors()
    async with await Coffer.open(locations) as coffer:
        sci = await index(coffer, locations, "scifact", files)
        tldr = await index(coffer, locations, "tldr", {p.name: p.read_text() for p in english})
        keyword = {w: await keyword_lists(coffer, sci, claims, f"bm25{w}") for w in BM25_WEIGHTS}
        off_sets = {
            "tldr descriptions": off_descriptions,
            "everyday questions": list(EVERYDAY),
            "emoji, punctuation": list(SYMBOLS),
        }
        off_sci_kw = {n: await keyword_lists(coffer, sci, q) for n, q in off_sets.items()}
        claims_tldr_kw = await keyword_lists(coffer, tldr, claims)
        everyday_tldr_kw = await keyword_lists(coffer, tldr, list(EVERYDAY) + list(SYMBOLS))
        claim_matches = await keyword_matches(coffer, sci, claims)

    print(f"machine: {machine()}")
    print(
        f"project settings: {fts_text.RANK}, candidates {BASELINE[0]} keyword /"
        f" {BASELINE[1]} vector (RRF, before issue 36),"
        f" floor {LOCAL_MIN_SIMILARITY}"
    )
    print(f"SciFact: {len(sci.chunks)} chunks; tldr: {len(tldr.chunks)} chunks of {len(english)}")
    print("embedding (cached under", WORK / "cache", ")")
    embedded: dict[str, Matrix] = {
        name: await vectors.embed(f"scifact-{slug(name)}", [make(c) for c in sci.chunks])
        for name, make in TEXT_VARIANTS.items()
    }
    titles = await vectors.embed("scifact-title", [c.title for c in sci.chunks])
    tldr_vectors = await vectors.embed(
        "tldr-current", [embedding_text(list(c.heading), c.text) for c in tldr.chunks]
    )
    q_claims = await vectors.embed("q-claims", claims)
    q_off = {n: await vectors.embed(f"q-{slug(n)}", q) for n, q in off_sets.items()}
    tldr_docs = tldr.docs()
    on_topic = [(page, d) for page, d in on_topic if page in tldr_docs]  # pages with text
    q_on = await vectors.embed("q-tldr-on-topic", [d for _, d in on_topic])

    # -- part 1 ----------------------------------------------------------------------------
    ev = Eval(qids, qrels, sci.docs())
    sims: dict[str, Matrix] = {name: q_claims @ m.T for name, m in embedded.items()}
    for a in (0.2, 0.3, 0.4, 0.5):  # title weight in the chunk's vector (a proxy)
        mixed = unit(a * titles + (1 - a) * embedded["no title"])
        sims[f"mix {a:.1f} title + {1 - a:.1f} no-title"] = q_claims @ mixed.T
    for a in (0.2, 0.3):
        mixed = unit(a * titles + (1 - a) * embedded["current"])
        sims[f"mix {a:.1f} title + {1 - a:.1f} current"] = q_claims @ mixed.T
    sims["max(current, title)"] = np.maximum(sims["current"], q_claims @ titles.T)
    vec = {name: vector_lists(s) for name, s in sims.items()}
    today_kw = keyword[BM25_WEIGHTS[0]]
    kw_top0 = [set(k.chunks[: BASELINE[0]]) for k in today_kw]
    check_fusion(ev, today_kw, vec["current"])

    fused = {(v, w): Fused(ev, keyword[w], vec[v]) for v in vec for w in keyword}
    for dk, dv, wk in (BASELINE, (50, 10, 1.25), (10, 100, 0.67)):
        fast_scores = fused["current", BM25_WEIGHTS[0]].ndcg(dk, dv, wk)
        slow_scores = ev.hybrid(today_kw, vec["current"], dk, dv, wk)
        assert np.allclose(fast_scores, slow_scores, rtol=0, atol=1e-12), (
            (dk, dv, wk),
            np.flatnonzero(~np.isclose(fast_scores, slow_scores, rtol=0, atol=1e-12)),
            np.abs(fast_scores - slow_scores).max(),
        )
    grid = Grid()
    for (vname, w), fast in fused.items():
        for dk in SWEEP:
            for dv in SWEEP:
                for wk in WEIGHTS:
                    grid.add((vname, str(w), dk, dv, wk), fast.ndcg(dk, dv, wk))
    base = grid.names.index(("current", str(BM25_WEIGHTS[0]), *BASELINE))
    base_scores = grid.rows[base]

    def best_of(vname: str, kw: str) -> tuple[float, str]:
        i = grid.best(lambda n: n[0] == vname and n[1] == kw)
        _, _, dk, dv, wk = grid.names[i]
        return float(grid.rows[i].mean()), f"{dk}/{dv}, w_kw {wk}"

    print("\n## Part 1: hybrid nDCG@10 on SciFact (300 claims), RRF K = 60\n")
    print("Offline fusion only (no language guard, no floor) until the check against Coffer.\n")
    print("Embedded text (keyword list as today). 'mix' rows are vector sums of a title-only")
    print("and a chunk embedding (a proxy for title weight, no re-embedding):\n")
    rows: list[Sequence[object]] = []
    for vname, vlists in vec.items():
        today = fused[vname, BM25_WEIGHTS[0]].ndcg(*BASELINE).mean()
        best, where = best_of(vname, str(BM25_WEIGHTS[0]))
        rows.append((vname, ev.alone(vlists).mean(), today, best, where))
    table(("vector text", "vector only", "hybrid today", "best hybrid", "at depth k/v"), rows)

    print(
        "Keyword list: bm25 column weights (text, heading, meta); for SciFact the heading"
        " and\nthe meta column both hold the title; the first row is fts_text.RANK:\n"
    )
    rows = []
    for w, klists in keyword.items():
        today = fused["current", w].ndcg(*BASELINE).mean()
        best, where = best_of("current", str(w))
        rows.append((f"bm25{w}", ev.alone(klists).mean(), today, best, where))
    table(("keyword list", "keyword only", "hybrid today", "best hybrid", "at depth k/v"), rows)

    print("Candidates per list (today's lists, equal weights); rows keyword, columns vector:\n")
    now = fused["current", BM25_WEIGHTS[0]]
    rows = []
    for dk in DEPTHS:
        rows.append((dk, *(now.ndcg(dk, dv, 1.0).mean() for dv in DEPTHS)))
    table(("kw \\ vec", *DEPTHS), rows)

    minimum = LOCAL_MIN_SIMILARITY
    print(f"The same with today's floor ({minimum}) on vector hits outside the keyword list:\n")
    rows = []
    for dk in DEPTHS:
        protect = [set(k.chunks[:dk]) for k in today_kw]
        scored = [
            Fused(ev, today_kw, floor(vec["current"], protect, minimum, dv)).ndcg(dk, dv, 1.0)
            for dv in DEPTHS
        ]
        rows.append((dk, *(c.mean() for c in scored)))
    table(("kw \\ vec", *DEPTHS), rows)

    print("Keyword weight (vector weight 1), today's lists:\n")
    rows = []
    for wk in WEIGHTS:
        rows.append(
            (
                str(wk),
                *(now.ndcg(d, d, wk).mean() for d in (10, 20, 30, 50)),
            )
        )
    table(("w_kw", "depth 10", "depth 20", "depth 30", "depth 50"), rows)

    overall = grid.best(lambda n: True)
    bv, bk, bdk, bdv, bwk = grid.names[overall]
    bkey = next(w for w in BM25_WEIGHTS if str(w) == bk)
    print("Document aggregation (today's settings; best configuration):\n")
    rows = []
    for agg, label in (
        ("chunk", "best chunk, top 10 chunks (today)"),
        ("doc", "lists cut to documents, 10 documents"),
        ("sum", "sum of a document's chunks"),
    ):
        rows.append(
            (
                label,
                ev.hybrid(today_kw, vec["current"], agg=agg).mean(),
                ev.hybrid(keyword[bkey], vec[bv], bdk, bdv, bwk, agg).mean(),
            )
        )
    table(("aggregation", "today", "best config"), rows)

    print(
        "Choosing a configuration (gains over today's settings): the best in-sample, and"
        " picked\non half the claims then scored on the other half (2-fold, 200 splits):\n"
    )
    today_lists = str(BM25_WEIGHTS[0])
    families: list[tuple[str, Callable[[Name], bool]]] = [
        ("depths", lambda n: n[0] == "current" and n[1] == today_lists and n[4] == 1.0),
        ("depths, w_kw", lambda n: n[0] == "current" and n[1] == today_lists),
        ("+ bm25 weights", lambda n: n[0] == "current"),
        ("+ embedded text", lambda n: n[0] in TEXT_VARIANTS),
        ("+ mix proxies", lambda n: True),
    ]
    rows = []
    for label, chosen in families:
        picks = [i for i, n in enumerate(grid.names) if chosen(n)]
        i = max(picks, key=lambda i: float(grid.rows[i].mean()))
        lo, hi = paired_gain(grid.rows[i], base_scores)
        gain, glo, ghi = held_out(grid, picks, base)
        vname, kname, dk, dv, wk = grid.names[i]
        rows.append(
            (
                label,
                len(picks),
                f"{vname}, bm25{kname}, {dk}/{dv}, w_kw {wk}",
                grid.rows[i].mean(),
                f"{grid.rows[i].mean() - base_scores.mean():+.4f} [{lo:+.4f}, {hi:+.4f}]",
                f"{gain:+.4f} [{glo:+.4f}, {ghi:+.4f}]",
            )
        )
    table(
        ("choosing", "configs", "best", "nDCG@10", "gain [90% bootstrap]", "held-out gain"),
        rows,
    )

    texts = [TEXT_VARIANTS["current"](c) for c in sci.chunks]
    known = dict(zip(texts, embedded["current"], strict=True))
    known.update(zip(claims, q_claims, strict=True))
    by_id = dict(zip(qids, claims, strict=True))
    real, misses = await real_path(locations, files, by_id, qrels, known, vectors)
    await vectors.close()
    print(
        "Check through Coffer's own path (a vector KB, Embeddings.drain, Retrieval.search, "
        f"top_k 10;\nvectors served from the cache, {misses} texts missing from it):"
    )
    # the language guard answers a query with letters beyond Latin from keywords alone
    greek = np.array([retrieval.beyond_latin(c) for c in claims])
    keyword_only = ev.alone(today_kw)

    def guarded(scores: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        out: npt.NDArray[np.float64] = np.where(greek, keyword_only, scores)
        return out

    no_floor = [set[int]() for _ in qids]
    offline = {
        "vector only, no floor": ev.alone(vec["current"]).mean(),
        "vector only, today's floor": ev.alone(
            floor(vec["current"], no_floor, LOCAL_MIN_SIMILARITY)
        ).mean(),
        "hybrid, no floor": guarded(base_scores).mean(),
        "hybrid, today's floor": guarded(  # dropped after fusion, as retrieval.py does
            ev.hybrid(today_kw, vec["current"], drops=weak_hits(vec["current"], kw_top0))
        ).mean(),
    }
    table(
        ("today's settings", "Retrieval.search", "offline, guard as today"),
        [(label, score, offline.get(label, "-")) for label, score in real.items()],
    )
    print(
        f"{int(greek.sum())} claims hold Greek letters (TNF-α, IFN-γ, αvβ8): the language"
        " guard answers them\nfrom keywords alone (as today, but in the column 'Greek"
        " fused'). Hybrid at K = 60, today's\ntexts and lists, offline; the floor taken"
        " before fusion (today: the vector list shortens)\nor after it (the fused list"
        " loses the same hits, the others keep their ranks):\n"
    )
    rows = []
    minimum = LOCAL_MIN_SIMILARITY
    now_scores = guarded(
        ev.hybrid(today_kw, vec["current"], drops=weak_hits(vec["current"], kw_top0))
    )
    for dk, dv in (BASELINE[:2], (10, 15), (10, 20), (10, 30), (10, 50)):
        protect = [set(k.chunks[:dk]) for k in today_kw]
        before = ev.hybrid(today_kw, floor(vec["current"], protect, minimum, dv), dk, dv)
        low = [
            {i for i, s in zip(v.chunks[:dv], v.scores[:dv], strict=True) if s < minimum} - kept
            for v, kept in zip(vec["current"], protect, strict=True)
        ]
        after = ev.hybrid(today_kw, vec["current"], dk, dv, drops=low)
        lo, hi = paired_gain(after, now_scores)
        rows.append(
            (
                f"{dk}/{dv}",
                guarded(ev.hybrid(today_kw, vec["current"], dk, dv)).mean(),
                guarded(before).mean(),
                guarded(after).mean(),
                after.mean(),
                f"{after.mean() - now_scores.mean():+.4f} [{lo:+.4f}, {hi:+.4f}]",
            )
        )
    table(
        (
            "candidates kw/vec",
            "no floor",
            f"floor {minimum} before fusion",
            "floor after fusion",
            "same, Greek fused",
            "last vs today [90% CI]",
        ),
        rows,
    )

    # -- part 2 ----------------------------------------------------------------------------
    print("\n## Part 2: cosine similarity of vector hits (today's embedded text)\n")
    current = sims["current"]
    chunks_of: dict[str, list[int]] = {}
    for i, doc in enumerate(ev.docs):
        chunks_of.setdefault(doc, []).append(i)
    relevant = [best_chunk(current[n], chunks_of[d]) for n, q in enumerate(qids) for d in qrels[q]]
    # relevant documents the vector list brings (top 20) but the keyword list does not
    # (top 20: what today's floor may drop), or the keyword query does not match at all
    dk0, dv0, _ = BASELINE
    kw_top = [set(k.chunks[:dk0]) for k in today_kw]
    outside: list[float] = []
    unmatched: list[float] = []
    for n, q in enumerate(qids):
        top = vec["current"][n].chunks[:dv0]
        for d in qrels[q]:
            hits = [i for i in top if ev.docs[i] == d]
            if hits and not kw_top[n] & set(chunks_of[d]):
                outside.append(float(current[n, hits[0]]))
                if not claim_matches[n] & set(chunks_of[d]):
                    unmatched.append(float(current[n, hits[0]]))
    tldr_sims_on = q_on @ tldr_vectors.T
    own = [
        best_chunk(tldr_sims_on[n], [i for i, d in enumerate(tldr_docs) if d == page])
        for n, (page, _) in enumerate(on_topic)
    ]
    groups: list[tuple[str, str, list[float]]] = [
        ("SciFact", "relevant doc's best chunk (339)", relevant),
        ("SciFact", "relevant, vector top-20 only", outside),
        ("SciFact", "relevant, vector top-20, no keyword match", unmatched),
        ("SciFact", "top-1 of the claims", top1(current)),
        *(
            ("SciFact", f"top-1, off-topic: {n}", top1(q_off[n] @ embedded["current"].T))
            for n in off_sets
        ),
        ("tldr 1000", "own page, description as query", own),
        ("tldr 1000", "top-1 of those descriptions", top1(tldr_sims_on)),
        ("tldr 1000", "top-1, off-topic: SciFact claims", top1(q_claims @ tldr_vectors.T)),
        (
            "tldr 1000",
            "top-1: everyday questions",
            top1(q_off["everyday questions"] @ tldr_vectors.T),
        ),
        (
            "tldr 1000",
            "top-1: emoji, punctuation",
            top1(q_off["emoji, punctuation"] @ tldr_vectors.T),
        ),
    ]
    table(
        ("corpus", "similarity of", "n", "p5", "p25", "p50", "p75", "p95"),
        [(c, label, len(v), *quantiles(v)) for c, label, v in groups],
    )
    print("Share below each floor:\n")
    table(
        ("corpus", "similarity of", *(f"< {t}" for t in THRESHOLDS)),
        [(c, label, *(share(v, t) for t in THRESHOLDS)) for c, label, v in groups],
    )

    print(
        "Dropping vector hits below the floor before fusion: (A) unless their chunk is in the"
        " keyword\ncandidates (as retrieval.py does), (B) unless the keyword query matches"
        " their chunk at all.\nOff-topic: what is left of the 20 vector candidates no keyword"
        " candidate shares, and the\nshare of queries answered with nothing (no keyword match"
        " either):\n"
    )
    rows = []
    best_vec = vec[bv]
    best_top = [set(k.chunks[:bdk]) for k in keyword[bkey]]
    off_sims = {name: q_off[name] @ embedded["current"].T for name in off_sets}
    claims_on_tldr = q_claims @ tldr_vectors.T
    for t in (-1.0, *THRESHOLDS, 0.45, 0.5):
        left, empty = [], []
        for name in off_sets:
            for kw, row in zip(off_sci_kw[name], off_sims[name], strict=True):
                mine = set(kw.chunks[:dk0])
                nearest = np.argsort(-row)[:dv0]
                left.append(sum(1 for i in nearest if row[i] >= t and int(i) not in mine))
                empty.append(not kw.chunks and float(row.max()) < t)
        rev = [
            not kw.chunks and float(row.max()) < t
            for kw, row in zip(claims_tldr_kw, claims_on_tldr, strict=True)
        ]
        rows.append(
            (
                "none" if t < 0 else str(t),
                ev.hybrid(today_kw, floor(vec["current"], kw_top, t)).mean(),
                ev.hybrid(today_kw, floor(vec["current"], claim_matches, t)).mean(),
                ev.hybrid(keyword[bkey], floor(best_vec, best_top, t, bdv), bdk, bdv, bwk).mean(),
                share(outside, t),
                f"{np.mean(left):.1f}",
                float(np.mean(empty)),
                float(np.mean(rev)),
            )
        )
    table(
        (
            "floor",
            "today (A)",
            "today (B)",
            "best config (A)",
            "relevant vector-only lost",
            "off-topic: left of 20",
            "off-topic: empty",
            "claims on tldr: empty",
        ),
        rows,
    )
    no_kw = sum(not k.chunks for ks in off_sci_kw.values() for k in ks)
    print(
        f"off-topic queries on SciFact with no keyword match at all: {no_kw} of"
        f" {sum(len(q) for q in off_sets.values())}; SciFact claims on tldr:"
        f" {sum(not k.chunks for k in claims_tldr_kw)} of {len(claims)};"
        f" everyday + symbols on tldr: {sum(not k.chunks for k in everyday_tldr_kw)}"
        f" of {len(everyday_tldr_kw)}"
    )
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    asyncio.run(main())
