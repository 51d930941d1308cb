"""The bundled local model (all-MiniLM-L6-v2, int8) run for real: the vectors fastembed gave
(to int8 precision), in a small share of the memory."""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cofferd.domain.config import EmbeddingConfig
from cofferd.domain.index_records import EmbedLane
from cofferd.infrastructure.models import embedders
from cofferd.infrastructure.models.embedders import (
    BUNDLED_FASTEMBED_NAME,
    LEAN_MODEL,
    LocalEmbedder,
    bundled_model_dir,
)
from cofferd.infrastructure.models.onnx_graph import _model_class, int8_model
from tests.support.daemon import Daemon, cleanup, new_daemon, wait_for
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
        got = await embedder.embed(TEXTS, lane=EmbedLane.BULK)
        alone = await embedder.embed(
            [TEXTS[1]], lane=EmbedLane.BULK
        )  # a batch of one: no padding at all
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
        first = await embedder.embed(["someone having a meal"], lane=EmbedLane.BULK)
        assert embedder.loaded
        deadline = time.monotonic() + 10
        while embedder.loaded and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert not embedder.loaded
        assert await embedder.embed(["someone having a meal"], lane=EmbedLane.BULK) == first
    finally:
        await embedder.close()


MEASURE = """
import asyncio, json, sys
from pathlib import Path
from cofferd.domain.config import EmbeddingConfig
from cofferd.domain.index_records import EmbedLane
from cofferd.infrastructure.models.embedders import LocalEmbedder

def rss(pid="self"):
    status = dict(l.split(":", 1) for l in open(f"/proc/{pid}/status"))
    return {k: int(status[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM")}

async def main():
    texts = json.loads(sys.argv[2])
    before = rss()
    embedder = LocalEmbedder(EmbeddingConfig(provider="local"), Path(sys.argv[1]))
    await embedder.embed(texts, lane=EmbedLane.BULK)  # as the embedding queue: 16 documents
    for text in texts[:20]:
        await embedder.embed([text[:40]], lane=EmbedLane.QUERY)  # as searches do
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


def local_kb(d: Daemon, kb: str, **embedding: Any) -> None:
    d.client.post(
        "/api/v1/knowledge_bases",
        {
            "name": kb,
            "config": {
                "enabled_modes": ["keyword", "grep", "vector", "hybrid"],
                "default_mode": "hybrid",
                "chunk_size": 64,
                "chunk_overlap": 0,
                "embedding": {"provider": "local", **embedding},
            },
        },
    )


def kb_status(d: Daemon, kb: str) -> dict[str, Any]:
    (found,) = [k for k in d.client.get("/api/v1/status")["knowledge_bases"] if k["name"] == kb]
    return found  # type: ignore[no-any-return]


def model_processes(d: Daemon) -> list[int]:
    assert d.proc is not None
    found = subprocess.run(
        ["pgrep", "-P", str(d.proc.pid), "-f", "models.model_main"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return [int(pid) for pid in found.stdout.split()]


def cpu_seconds(pid: int) -> float:
    """The CPU time a process has used (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_knowledge_bases_on_the_bundled_model_with_other_threads_share_one_process(
    tmp_path: Path,
) -> None:
    """One model process per model, whatever the threads each knowledge base asks for
    (it runs with the most any asks for); both are searched by vector."""
    d = new_daemon(tmp_path).start()
    try:
        for kb, threads in (("one", 1), ("two", 2)):
            local_kb(d, kb, threads=threads)
            write(d.docs(kb) / "a.md", f"# A\n\nsomeone having a meal in {kb}")
        wait_for(
            lambda: all(
                kb_status(d, kb)["vectors"]["embed_pending"] == 0
                and kb_status(d, kb)["documents"] == 1
                for kb in ("one", "two")
            ),
            timeout=120,
        )
        for kb in ("one", "two"):
            found = d.client.post(d.client.kb(kb, "/search"), {"query": "a meal"})
            assert found["mode"] == "hybrid" and not found["fallback"], found
            assert found["passages"], found
        assert len(model_processes(d)) == 1
        logged = d.log.read_text(errors="replace")
        assert "asking for [1, 2] threads: its one process runs with 2" in logged  # said
    finally:
        cleanup(d)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_the_model_process_killed_or_stopped_mid_batch_costs_nothing(tmp_path: Path) -> None:
    """The model process killed (SIGKILL) while it embeds a batch, then stopped (SIGSTOP)
    past its time on the next: every chunk ends embedded, nothing is marked failed, a
    query meanwhile is answered, and in hybrid mode after (issue 42)."""
    d = new_daemon(tmp_path).start()
    words = " ".join(f"w{i}" for i in range(64))
    try:
        local_kb(d, "faults", timeout_s=2)  # a piece of 32 texts has ~8 s
        for fault in ("kill", "stop"):
            before = {pid: cpu_seconds(pid) for pid in model_processes(d)}
            for n in range(16):  # one batch: 16 documents of 40 chunks
                body = "\n\n".join(f"{fault} {n} part {p} {words}" for p in range(40))
                write(d.docs("faults") / f"{fault}{n:02}.md", f"# {fault} {n}\n\n{body}")
            pid = wait_for(
                lambda before=before: [
                    pid
                    for pid in model_processes(d)
                    if cpu_seconds(pid) - before.get(pid, 0.0) > 1.0  # loaded, embedding
                ],
                timeout=60,
            )[0]
            assert kb_status(d, "faults")["vectors"]["embed_pending"] > 0
            if fault == "kill":
                os.kill(pid, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGSTOP)  # the pool finds it stopped past its time
                found = d.client.post(d.client.kb("faults", "/search"), {"query": "kill 3"})
                assert found["passages"], found  # hybrid by the other process, or keyword
                wait_for(lambda pid=pid: not Path(f"/proc/{pid}").exists(), timeout=60)
            wait_for(
                lambda documents=16 * (1 + (fault == "stop")): (
                    kb_status(d, "faults")["documents"] == documents
                    and kb_status(d, "faults")["vectors"]["embed_pending"] == 0
                ),
                timeout=180,
            )
        status = kb_status(d, "faults")
        assert status["documents_degraded"] == 0, status
        assert status["vectors"]["consecutive_failures"] == 0, status
        found = d.client.post(d.client.kb("faults", "/search"), {"query": "stop 3 part 7"})
        assert found["mode"] == "hybrid" and not found["fallback"], found
        logged = d.log.read_text(errors="replace")
        assert "faults: embedding failed" not in logged  # no batch failed
        assert "Unknown child process pid" not in logged
    finally:
        cleanup(d)
