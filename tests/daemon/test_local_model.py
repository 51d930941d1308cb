"""The bundled local model (all-MiniLM-L6-v2, int8) run for real: the vectors fastembed gave
(to int8 precision), in a small share of the memory."""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cofferd.domain.config import EmbeddingConfig
from cofferd.infrastructure.models import embedders
from cofferd.infrastructure.models.embedders import (
    BUNDLED_FASTEMBED_NAME,
    LEAN_MODEL,
    LocalEmbedder,
    bundled_model_dir,
)
from cofferd.infrastructure.models.onnx_graph import _model_class, int8_model
from tests.support.daemon import cleanup, new_daemon, wait_for
from tests.support.helpers import write

SENTENCE = "The daemon watches every folder and indexes each note a moment after it is saved. "
TEXTS = [
    "A man is eating food.",
    SENTENCE * 30,  # past the 256 tokens the model reads
    "x",
    "東京都は日本の首都です。",
    SENTENCE * 3,
    "   ",
    "cats",
    SENTENCE * 12,
    "How do I restore a deleted note?",
    "ownership and borrowing in the rust compiler",
    SENTENCE * 6,
]  # lengths mixed: the model runs the shortest together


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("models")
    bundled_model_dir(root, int8_model)
    return root


async def test_the_bundled_model_gives_the_vectors_fastembed_gave(models: Path) -> None:
    from fastembed import TextEmbedding

    folder = bundled_model_dir(models, int8_model)
    reference = TextEmbedding(  # the path every vector was made on before issue 22
        BUNDLED_FASTEMBED_NAME, specific_model_path=str(folder), threads=1, local_files_only=True
    )
    expected = [v.tolist() for v in reference.embed(TEXTS, batch_size=32)]
    embedder = LocalEmbedder(EmbeddingConfig(provider="local"), models)
    try:
        got = await embedder.embed(TEXTS)
        alone = await embedder.embed([TEXTS[1]])  # a batch of one: no padding at all
    finally:
        await embedder.close()
    pairs = list(zip(got, expected, strict=True))
    # int8 arithmetic (onnx_graph.integer_matmuls): close, not equal; farthest for "   "
    assert min(cosine(a, b) for a, b in pairs) > 0.99
    assert sum(cosine(a, b) for a, b in pairs) / len(pairs) > 0.998
    assert cosine(alone[0], got[1]) > 0.9999  # batched with others or alone: the same


def test_the_word_table_stays_quantized_in_the_model_coffer_runs(models: Path) -> None:
    folder = bundled_model_dir(models, int8_model)
    original = _model_class().FromString((folder / "model.onnx").read_bytes())
    lean = _model_class().FromString((folder / LEAN_MODEL).read_bytes())

    def lookups_in_a_widened_table(model: Any) -> int:
        graph = model.graph
        widened = {out for node in graph.node if node.op_type == "Mul" for out in node.output}
        return sum(1 for n in graph.node if n.op_type == "Gather" and n.input[0] in widened)

    assert lookups_in_a_widened_table(original) == 2  # words, positions: widened at load
    assert lookups_in_a_widened_table(lean) == 0
    assert {t.name for t in original.graph.initializer} <= {t.name for t in lean.graph.initializer}


async def test_an_idle_model_is_unloaded_and_loaded_again_when_used(
    models: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedders, "IDLE_UNLOAD_S", 0.05)
    embedder = LocalEmbedder(EmbeddingConfig(provider="local"), models)
    try:
        first = await embedder.embed(["someone having a meal"])
        assert embedder.loaded
        deadline = time.monotonic() + 10
        while embedder.loaded and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert not embedder.loaded
        assert await embedder.embed(["someone having a meal"]) == first
    finally:
        await embedder.close()


MEASURE = """
import asyncio, json, sys
from pathlib import Path
from cofferd.domain.config import EmbeddingConfig
from cofferd.infrastructure.models.embedders import LocalEmbedder

def rss(pid="self"):
    status = dict(l.split(":", 1) for l in open(f"/proc/{pid}/status"))
    return {k: int(status[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM")}

async def main():
    texts = json.loads(sys.argv[2])
    before = rss()
    embedder = LocalEmbedder(EmbeddingConfig(provider="local"), Path(sys.argv[1]))
    await embedder.embed(texts)  # as the embedding queue does: 16 documents' chunks at once
    for text in texts[:20]:
        await embedder.embed([text[:40]])  # as searches do
    after, model = rss(), rss(embedder._process.pid)
    await embedder.close()
    print(json.dumps({"grown": after["VmRSS"] - before["VmRSS"],
                      "model": model["VmRSS"], "model_peak": model["VmHWM"]}))

asyncio.run(main())
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_the_bundled_model_holds_little_memory(models: Path) -> None:
    texts = [f"{i} {SENTENCE * 14}" for i in range(32)]  # 32 chunks of 256 tokens
    found = subprocess.run(
        [sys.executable, "-c", MEASURE, str(models), json.dumps(texts)],
        capture_output=True, text=True, check=True, timeout=300,
    )  # fmt: skip
    memory = json.loads(found.stdout)
    # fastembed as it was: 851 MB kept (a memory arena sized for 32 long chunks at once)
    assert memory["grown"] < 20, memory  # the model runs in a process of its own
    assert memory["model"] < 150, memory  # Python ~10 MB, libraries ~37 MB, the model ~30 MB
    assert memory["model_peak"] < 200, memory


def test_two_knowledge_bases_on_the_bundled_model_share_one_process(tmp_path: Path) -> None:
    """One model process serves every knowledge base that uses the bundled model."""
    d = new_daemon(tmp_path).start()
    try:
        for kb in ("one", "two"):
            d.client.post(
                "/api/v1/knowledge_bases",
                {
                    "name": kb,
                    "config": {
                        "enabled_modes": ["keyword", "grep", "vector", "hybrid"],
                        "default_mode": "hybrid",
                        "embedding": {"provider": "local"},
                    },
                },
            )
            write(d.docs(kb) / "a.md", f"# A\n\nsomeone having a meal in {kb}")
        wait_for(
            lambda: all(
                k["vectors"]["embed_pending"] == 0 and k["documents"] == 1
                for k in d.client.get("/api/v1/status")["knowledge_bases"]
                if k["name"] in ("one", "two")
            ),
            timeout=120,
        )
        for kb in ("one", "two"):
            d.client.post(d.client.kb(kb, "/search"), {"query": "a meal"})
        children = subprocess.run(
            ["pgrep", "-P", str(d.proc.pid), "-f", "models.model_main"],
            capture_output=True, text=True, check=False,
        ).stdout.split()  # fmt: skip
        assert len(children) == 1, children
    finally:
        cleanup(d)
