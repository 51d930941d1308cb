"""The bundled model run fast (issue 23): int8 arithmetic, batches by tokens, in a process of
its own. The model and its process for real."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from cofferd.domain.config import EmbeddingConfig
from cofferd.domain.index_records import EmbedLane
from cofferd.infrastructure.models import embedders, model_lanes
from cofferd.infrastructure.models.embedders import LEAN_MODEL, LocalEmbedder, bundled_model_dir
from cofferd.infrastructure.models.onnx_graph import _model_class, gather_quantized_rows, int8_model
from cofferd.infrastructure.models.sentence_encoder import SentenceEncoder

SENTENCE = "The daemon watches every folder and indexes each note a moment after it is saved. "
TEXTS = [
    "A man is eating food.",
    SENTENCE * 30,
    "x",
    "東京都は日本の首都です。",
    "- Extract a (compressed) archive into the current directory:\n\n`tar xvf {{source.tar}}`",
    SENTENCE * 3,
    "How do I restore a deleted note?",
    "ownership and borrowing in the rust compiler",
    SENTENCE * 12,
]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("models")
    bundled_model_dir(root, int8_model)
    return root


def model_pid(embedder: LocalEmbedder) -> int:
    process = embedder._process
    assert process is not None and process.pid is not None
    return process.pid


def encoder(model: Path, tokenizer: Path, budget: int = 256) -> SentenceEncoder:
    return SentenceEncoder(
        model, tokenizer, threads=1, max_tokens=256, batch_size=64, token_budget=budget
    )


def test_int8_vectors_agree_with_the_widened_models(models: Path, tmp_path: Path) -> None:
    folder = models / "all-MiniLM-L6-v2"
    widened = tmp_path / "widened.onnx"  # the model Coffer ran before issue 23
    widened.write_bytes(gather_quantized_rows((folder / "model.onnx").read_bytes()))
    expected = encoder(widened, folder / "tokenizer.json").embed_array(TEXTS)
    got = encoder(folder / LEAN_MODEL, folder / "tokenizer.json").embed_array(TEXTS)
    cosines = (expected * got).sum(axis=1)
    assert cosines.min() > 0.995 and cosines.mean() > 0.998, cosines


def test_the_model_coffer_runs_multiplies_int8(models: Path) -> None:
    lean = _model_class().FromString((models / "all-MiniLM-L6-v2" / LEAN_MODEL).read_bytes())
    ops = [node.op_type for node in lean.graph.node]
    assert ops.count("MatMulInteger") == 30  # 6 layers: queries, keys, out, up, down
    assert ops.count("MatMul") == 18  # 6 layers: values, and attention's two, in float32
    assert ops.count("Gelu") == 6 and "Erf" not in ops
    assert "IsNaN" not in ops


def test_batches_hold_a_token_budget(models: Path) -> None:
    folder = models / "all-MiniLM-L6-v2"
    model = encoder(folder / LEAN_MODEL, folder / "tokenizer.json", budget=100)
    lengths = [50, 3, 120, 10, 10, 25, 30, 99, 2]
    batches = list(model._batches(lengths))
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    for batch in batches:
        longest = max(lengths[i] for i in batch)
        assert len(batch) == 1 or len(batch) * longest <= 100, batch
    assert len(batches[0]) > 1  # the short ones together
    alone = model.embed_array([TEXTS[1]])
    mixed = model.embed_array(TEXTS)
    assert float(np.dot(alone[0], mixed[1])) > 0.9999  # padding changes nothing


async def test_the_model_runs_in_a_process_stopped_on_close(models: Path) -> None:
    embedder = LocalEmbedder(EmbeddingConfig(provider="local"), models)
    try:
        await embedder.embed(["someone having a meal"], lane=EmbedLane.BULK)
        pid = model_pid(embedder)
        assert pid != os.getpid() and Path(f"/proc/{pid}").exists()
    finally:
        await embedder.close()
    assert not Path(f"/proc/{pid}").exists()


async def test_a_model_process_killed_from_outside_costs_no_call(models: Path) -> None:
    """A kill from outside (the OOM killer, a kill by hand) is no text's fault: the call
    is answered by the next process, with the same vectors."""
    embedder = LocalEmbedder(EmbeddingConfig(provider="local"), models)
    try:
        first = await embedder.embed(["someone having a meal"], lane=EmbedLane.BULK)
        pid = model_pid(embedder)
        os.kill(pid, signal.SIGKILL)
        again = await embedder.embed(["someone having a meal"], lane=EmbedLane.BULK)
        assert model_pid(embedder) != pid
        assert max(abs(a - b) for a, b in zip(first[0], again[0], strict=True)) < 1e-6
    finally:
        await embedder.close()


async def test_knowledge_bases_on_one_model_share_its_process_whatever_their_threads(
    models: Path,
) -> None:
    """One process per model: the batch size is each request's own, the threads the most
    any of them asks for."""
    shared = embedders.BundledModels()
    one = LocalEmbedder(EmbeddingConfig(provider="local", threads=1, batch_size=4), models, shared)
    two = LocalEmbedder(EmbeddingConfig(provider="local", threads=2, batch_size=64), models, shared)
    try:
        (a,) = await one.embed(["someone having a meal"], lane=EmbedLane.BULK)
        (b,) = await two.embed(["someone having a meal"], lane=EmbedLane.BULK)
        assert model_pid(one) == model_pid(two)
        assert len(shared.processes()) == 1 and shared.processes()[0].threads == 2
        assert max(abs(x - y) for x, y in zip(a, b, strict=True)) < 1e-5
        await two.close()
        assert shared.processes()[0].threads == 1  # the other one's, from its next request
        assert len(await one.embed(TEXTS, lane=EmbedLane.BULK)) == len(TEXTS)
    finally:
        await one.close()
        await two.close()
    assert shared.processes() == []


async def test_a_query_given_up_on_leaves_the_process_in_step(models: Path) -> None:
    embedder = LocalEmbedder(EmbeddingConfig(provider="local"), models)
    try:
        (meal,) = await embedder.embed(["someone having a meal"], lane=EmbedLane.BULK)
        pid = model_pid(embedder)
        long_batch = asyncio.ensure_future(
            embedder.embed([SENTENCE * 14] * 40, lane=EmbedLane.BULK)
        )
        await asyncio.sleep(0.05)
        with pytest.raises(TimeoutError):  # its caller gives up before it is answered
            async with asyncio.timeout(0.001):
                await embedder.embed(["a query"], lane=EmbedLane.QUERY)
        assert len(await long_batch) == 40
        assert await embedder.embed(["someone having a meal"], lane=EmbedLane.BULK) == [meal]
        assert model_pid(embedder) == pid
    finally:
        await embedder.close()


async def test_a_query_and_a_save_wait_for_a_slice_not_for_another_knowledge_bases_batch(
    models: Path,
) -> None:
    """Two knowledge bases on one model: while one embeds a long bulk batch, the other's
    query and save are answered within a slice's time, and the batch's vectors are
    unchanged by the slicing."""
    shared = embedders.BundledModels()
    bulk = LocalEmbedder(EmbeddingConfig(provider="local"), models, shared)
    live = LocalEmbedder(EmbeddingConfig(provider="local"), models, shared)
    texts = [f"{i} {SENTENCE * 14}" for i in range(160)]
    try:
        (meal,) = await live.embed(["someone having a meal"], lane=EmbedLane.QUERY)
        started = time.monotonic()
        batch = asyncio.ensure_future(bulk.embed(texts, lane=EmbedLane.BULK))
        await asyncio.sleep(0.2)
        waits = []
        for lane in (EmbedLane.QUERY, EmbedLane.SAVE, EmbedLane.QUERY):
            asked = time.monotonic()
            (vector,) = await live.embed(["someone having a meal"], lane=lane)
            waits.append(time.monotonic() - asked)
            assert not batch.done()  # answered while the batch runs
            if lane is EmbedLane.QUERY:
                assert vector == meal
        vectors = await batch
        whole = time.monotonic() - started
        assert max(waits) < whole / 4, (waits, whole)
        (alone,) = await bulk.embed([texts[7]], lane=EmbedLane.BULK)
        assert float(np.dot(alone, vectors[7])) > 0.9999
    finally:
        await bulk.close()
        await live.close()


def test_slices_hold_few_texts_and_few_tokens() -> None:
    short, long_text, cjk = "a note", "word " * 400, "東京は日本の首都です。" * 30
    assert [len(s) for s in model_lanes.slices([short] * 40)] == [16, 16, 8]
    assert [len(s) for s in model_lanes.slices([short, long_text, short])] == [1, 1, 1]
    assert [len(s) for s in model_lanes.slices([cjk, cjk])] == [1, 1]  # ~330 tokens each
    assert model_lanes.estimated_tokens("東京" * 50) == 101
    assert model_lanes.estimated_tokens("word " * 40) == 51


async def test_lanes_serve_queries_then_saves_then_bulk_work_each_user_in_turn() -> None:
    lanes = model_lanes.Lanes()

    def put(user: str, lane: EmbedLane, *names: str) -> None:
        lanes.add(user, [model_lanes.Slice(None, 1.0, lane, [name]) for name in names])

    put("b", EmbedLane.BULK, "b1", "b2", "b3")
    put("c", EmbedLane.BULK, "c1", "c2")
    put("a", EmbedLane.SAVE, "a1", "a2")
    put("a", EmbedLane.QUERY, "q")
    order = []
    while (piece := lanes.next()) is not None:
        order.append(piece.texts[0])
        if piece.texts[0] == "b1":
            put("a", EmbedLane.QUERY, "q2")  # a query that comes later still goes next
            gone = model_lanes.Slice(None, 1.0, EmbedLane.BULK, ["gone"])
            lanes.add("c", [gone])
            gone.reply.cancel()  # its caller gave up: never sent
    assert order == ["q", "a1", "a2", "b1", "q2", "c1", "b2", "c2", "b3"]


async def test_an_idle_model_process_exits(models: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedders, "IDLE_UNLOAD_S", 0.05)
    embedder = LocalEmbedder(EmbeddingConfig(provider="local"), models)
    try:
        await embedder.embed(["ready"], lane=EmbedLane.BULK)
        pid = model_pid(embedder)
        deadline = time.monotonic() + 10
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert not Path(f"/proc/{pid}").exists() and not embedder.loaded
    finally:
        await embedder.close()


async def test_any_other_local_model_runs_in_a_process_whose_pool_is_its_only_idle_timer(
    models: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A local model other than the bundled ones (here MiniLM from a folder, through
    fastembed) runs in a model process too, and is unloaded when its pool lets that go."""
    monkeypatch.setattr(embedders, "IDLE_UNLOAD_S", 0.05)
    folder = models / "all-MiniLM-L6-v2"
    config = EmbeddingConfig(
        provider="local", model=embedders.BUNDLED_FASTEMBED_NAME, model_path=str(folder)
    )
    own = LocalEmbedder(config, models)
    bundled = LocalEmbedder(EmbeddingConfig(provider="local"), models)
    try:
        (a,) = await own.embed(["someone having a meal"], lane=EmbedLane.BULK)
        pid = model_pid(own)
        assert pid != os.getpid()
        (b,) = await bundled.embed(["someone having a meal"], lane=EmbedLane.BULK)
        assert float(np.dot(a, b)) > 0.99  # fastembed's model.onnx, the lean one: close
        deadline = time.monotonic() + 10
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert not Path(f"/proc/{pid}").exists() and not own.loaded
        assert await own.embed(["someone having a meal"], lane=EmbedLane.BULK) == [a]
    finally:
        await own.close()
        await bundled.close()
