"""Vectors and hybrid search with a real embeddings server on loopback and the real
openai client; sqlite-vec for real; the bundled local model for real."""

from __future__ import annotations

import asyncio
import math
import shutil
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from coffer_kernel.locations import Locations
from cofferd.application.indexing import embeddings as embeddings_module
from cofferd.application.search.retrieval import fuse
from cofferd.domain.config import EmbeddingConfig
from cofferd.domain.errors import EngineUnavailable
from cofferd.domain.index_records import EmbedLane
from cofferd.domain.models import KnowledgeBase, Passage
from cofferd.infrastructure.models.embedders import LocalEmbedder, resolve_credential
from cofferd.surfaces.core import Coffer
from tests.support.fake_embeddings import FakeEmbeddings
from tests.support.helpers import index_dump, write

CORPUS = {
    "cats.md": "# Cats\n\nCats purr and chase mice around the garden.",
    "dogs.md": "# Dogs\n\nDogs bark loudly and fetch sticks in the park.",
    "rust.md": "# Rust\n\nThe rust compiler checks ownership and borrowing.",
    "tokyo.md": "# 東京\n\n東京都は日本の首都です。",
}


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COFFER_TEST_EMBED_KEY", "sk-test-secret")


@pytest.fixture
async def server() -> AsyncIterator[FakeEmbeddings]:
    s = await FakeEmbeddings().start()
    yield s
    await s.stop()


@pytest.fixture
async def vkb(coffer: Coffer, server: FakeEmbeddings) -> KnowledgeBase:
    kb = await coffer.kbs.create("vec", server.config())
    for name, text in CORPUS.items():
        write(coffer.locations.docs_dir("vec") / name, text)
    await coffer.reindexer.reconcile(kb)
    return kb


async def search(coffer: Coffer, query: str, top_k: int = 10) -> list[str]:
    return [p.path for p in (await coffer.retrieval.search("vec", query, top_k)).passages]


async def test_keyword_first_then_vectors_in_the_background(
    coffer: Coffer, vkb: KnowledgeBase, server: FakeEmbeddings
) -> None:
    # searchable at once by keyword, before any vector exists
    assert (await coffer.stores.index.metrics("vec"))["embed_pending"] == 4
    assert "cats.md" in await search(coffer, "purr")
    await coffer.embeddings.drain("vec")
    metrics = await coffer.stores.index.metrics("vec")
    assert metrics["embed_pending"] == 0 and metrics["documents_degraded"] == 0
    assert len((await index_dump(coffer, "vec"))["vectors"]) == metrics["chunks"]
    assert server.keys == {"Bearer sk-test-secret"}
    result = await coffer.retrieval.search("vec", "cats purr")
    assert result.mode == "hybrid" and result.passages[0].path == "cats.md"


async def test_vector_only_mode_finds_by_meaning_of_shared_words(
    coffer: Coffer, server: FakeEmbeddings, vkb: KnowledgeBase
) -> None:
    await coffer.embeddings.drain("vec")
    await coffer.kbs.update_config("vec", {"default_mode": "vector"})
    result = await coffer.retrieval.search("vec", "ownership borrowing compiler")
    assert result.mode == "vector" and result.passages[0].path == "rust.md"
    assert 0 < result.passages[0].score <= 1


@pytest.mark.parametrize("mode", ["down", "wrong_dim", "nan", "zeros"])
async def test_a_bad_provider_degrades_and_never_corrupts(
    coffer: Coffer, vkb: KnowledgeBase, server: FakeEmbeddings, mode: Any
) -> None:
    server.mode = mode
    await coffer.embeddings.drain("vec")
    metrics = await coffer.stores.index.metrics("vec")
    assert metrics["documents_degraded"] == 4 and metrics["embed_pending"] == 4
    assert (await index_dump(coffer, "vec"))["vectors"] == []  # nothing stored
    result = await coffer.retrieval.search("vec", "bark")
    assert [p.path for p in result.passages] == ["dogs.md"]
    if mode == "down":
        assert result.fallback == "embedder_unavailable"  # the query could not be embedded either
    # provider back: a reconcile retries, only the vectors are written
    server.mode = "ok"
    before = await index_dump(coffer, "vec")
    await coffer.embeddings.retry_now("vec")
    await coffer.embeddings.drain("vec")
    after = await index_dump(coffer, "vec")
    metrics = await coffer.stores.index.metrics("vec")
    assert metrics["documents_degraded"] == 0 and metrics["embed_pending"] == 0
    assert after["chunks"] == before["chunks"]  # no chunk or FTS churn
    assert len(after["vectors"]) == metrics["chunks"]


async def test_failures_back_off(
    coffer: Coffer, vkb: KnowledgeBase, server: FakeEmbeddings
) -> None:
    server.mode = "down"
    await coffer.embeddings.drain("vec")
    calls = server.requests
    await coffer.embeddings.drain("vec")  # not due yet: no new attempt
    assert server.requests == calls
    jobs = await coffer.stores.vectors.pending_embeds("vec", 100, time.time() + 3600)
    assert len(jobs) == 4


async def test_a_slow_provider_never_blocks_search(
    coffer: Coffer, vkb: KnowledgeBase, server: FakeEmbeddings
) -> None:
    server.mode = "slow"
    coffer.indexing.start(full_reconcile=False)  # the embedding queue among the rest
    try:
        await asyncio.sleep(0.1)  # the background embed is now waiting on the server
        started = time.monotonic()
        result = await coffer.retrieval.search("vec", "bark")
        assert time.monotonic() - started < 3.5  # the query embed times out (2 s)
        assert [p.path for p in result.passages] == ["dogs.md"]
    finally:
        await coffer.indexing.stop()


async def test_language_guard_keeps_keyword_results_for_scripts_the_model_cannot_read(
    coffer: Coffer, server: FakeEmbeddings
) -> None:
    config = server.config(multilingual=False)
    kb = await coffer.kbs.create("guarded", config)
    write(coffer.locations.docs_dir("guarded") / "tokyo.md", CORPUS["tokyo.md"])
    write(coffer.locations.docs_dir("guarded") / "cats.md", CORPUS["cats.md"])
    await coffer.reindexer.reconcile(kb)
    await coffer.embeddings.drain("guarded")
    calls = server.requests
    guarded = await coffer.retrieval.search("guarded", "首都")
    assert guarded.mode == "keyword" and [p.path for p in guarded.passages] == ["tokyo.md"]
    assert server.requests == calls  # the model was not even asked
    assert (await coffer.retrieval.search("guarded", "purr")).mode == "hybrid"


async def test_model_change_reembeds_and_rebuilds_at_the_new_width(
    coffer: Coffer, vkb: KnowledgeBase, server: FakeEmbeddings
) -> None:
    await coffer.embeddings.drain("vec")
    server.dims = 32
    await coffer.kbs.update_config("vec", server.config())
    assert "cats.md" in await search(coffer, "purr")  # keyword works throughout
    await coffer.embeddings.drain("vec")
    assert await coffer.stores.vectors.vector_model("vec") == (
        coffer.kbs.get("vec").config.embedding.identity(),  # type: ignore[union-attr]
        32,
    )
    metrics = await coffer.stores.index.metrics("vec")
    assert metrics["embed_pending"] == 0
    assert len((await index_dump(coffer, "vec"))["vectors"]) == metrics["chunks"]


async def test_oracle_with_vectors(
    coffer: Coffer, vkb: KnowledgeBase, server: FakeEmbeddings, tmp_path: Path
) -> None:
    docs = coffer.locations.docs_dir("vec")
    await coffer.embeddings.drain("vec")
    write(docs / "cats.md", "# Cats\n\nCats sleep all day.")
    (docs / "dogs.md").unlink()
    write(docs / "new" / "birds.md", "# Birds\n\n" + "\n\n".join("song " * 80 for _ in range(12)))
    await coffer.reindexer.reconcile(vkb)
    await coffer.embeddings.drain("vec")
    dump = await index_dump(coffer, "vec")

    home = tmp_path / uuid.uuid4().hex
    other = await Coffer.open(Locations(home=home, socket=home / "s"))
    try:
        (home / "knowledge" / "vec").mkdir(parents=True)
        shutil.copy(coffer.locations.kb_config_path("vec"), home / "knowledge" / "vec")
        other.registry.repo.attach("vec", coffer.locations.docs_dir("vec"))  # the same files
        # the same machine's own settings (its embedding provider) beside the same files
        shutil.copy(coffer.locations.local_settings_path("vec"), home / "local")
        await other.reindexer.reconcile(await other.kbs.adopt("vec") or other.kbs.get("vec"))
        await other.embeddings.drain("vec")
        assert dump == await index_dump(other, "vec")
    finally:
        await other.close()
    chunk_ids = sorted(c[0] for c in dump["chunks"])
    assert dump["vectors"] == chunk_ids  # no orphans, none missing


async def test_disabling_vectors_drops_them(
    coffer: Coffer, vkb: KnowledgeBase, server: FakeEmbeddings
) -> None:
    await coffer.embeddings.drain("vec")
    await coffer.kbs.update_config(
        "vec", {"enabled_modes": ["keyword", "grep"], "default_mode": "keyword", "embedding": None}
    )
    await coffer.embeddings.drain("vec")
    assert (await index_dump(coffer, "vec"))["vectors"] == []
    assert await coffer.stores.vectors.vector_model("vec") is None


def test_fusion_is_rrf_deduplicated_by_passage() -> None:
    def p(doc: str, pos: int = 0) -> Passage:
        return Passage(doc, doc, "", 1.0, pos, doc + ".md")

    fused = fuse([(1.0, [p("a"), p("b"), p("c")]), (1.0, [p("c"), p("a"), p("d")])], 3)
    assert [x.document_id for x in fused] == ["a", "c", "b"]
    assert math.isclose(fused[0].score, 1 / 61 + 1 / 62)
    assert fuse([(1.0, [p("a", 0), p("a", 1)])], 5)[1].position == 1


def test_credentials_are_references_never_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_KEY", "secret-1")
    assert resolve_credential("env:MY_KEY") == "secret-1"
    key = tmp_path / "key"
    key.write_text("secret-2\n")
    key.chmod(0o644)
    with pytest.raises(EngineUnavailable, match="private"):
        resolve_credential(f"file:{key}")
    key.chmod(0o600)
    assert resolve_credential(f"file:{key}") == "secret-2"
    with pytest.raises(EngineUnavailable, match="NOT_SET_ANYWHERE"):
        resolve_credential("env:NOT_SET_ANYWHERE")
    with pytest.raises(Exception, match="credential_ref"):
        EmbeddingConfig(provider="openai", model="m", dimensions=8, credential_ref="sk-plaintext")


async def test_bundled_local_model_gives_reference_embeddings(tmp_path: Path) -> None:
    embedder = LocalEmbedder(EmbeddingConfig(provider="local"), tmp_path / "models")
    try:
        a, b = await embedder.embed(
            ["A man is eating food.", "A man is eating a piece of bread."], lane=EmbedLane.BULK
        )
    finally:
        await embedder.close()
    cosine = sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(
        sum(x * x for x in a) * sum(y * y for y in b)
    )
    # 0.7535 in float32; 0.745 with the layers' int8 arithmetic (issue 23)
    assert len(a) == 384 and abs(cosine - 0.753) < 0.012


async def test_local_kb_end_to_end(coffer: Coffer) -> None:
    kb = await coffer.kbs.create(
        "local",
        {"enabled_modes": ["keyword", "grep", "vector"], "embedding": {"provider": "local"}},
    )
    write(
        coffer.locations.docs_dir("local") / "food.md",
        "# Lunch\n\nA man is eating a piece of bread.",
    )
    write(
        coffer.locations.docs_dir("local") / "code.md",
        "# Code\n\nThe compiler rejected the program.",
    )
    await coffer.reindexer.reconcile(kb)
    await coffer.embeddings.drain("local")
    assert (await coffer.stores.index.metrics("local"))["embed_pending"] == 0
    result = await coffer.retrieval.search("local", "someone having a meal")
    assert result.mode == "hybrid" and result.passages[0].path == "food.md"
    # nothing relevant: an empty answer in every mode (the model's similarity floor)
    for mode in ("hybrid", "vector"):
        await coffer.kbs.update_config("local", {"default_mode": mode})
        assert [p.path for p in (await coffer.retrieval.search("local", "a meal")).passages][
            :1
        ] == ["food.md"]
        for query in ("quarterly tax filing deadline", "how do I reset my router", "#", "🙂"):
            answer = await coffer.retrieval.search("local", query)
            assert (answer.mode, answer.passages) == (mode, []), query


async def test_hub_model_names_fail_fast_offline(tmp_path: Path) -> None:
    config = EmbeddingConfig(provider="local", model="BAAI/bge-small-en-v1.5", dimensions=384)
    embedder = LocalEmbedder(config, tmp_path)
    started = time.monotonic()
    try:
        with pytest.raises(embeddings_module.EmbeddingFailed):
            await embedder.embed(["x"], lane=EmbedLane.BULK)
    finally:
        await embedder.close()
    assert time.monotonic() - started < 10


async def test_search_says_what_answered_and_why(
    coffer: Coffer, vkb: KnowledgeBase, server: FakeEmbeddings
) -> None:
    await coffer.embeddings.drain("vec")
    assert (await coffer.retrieval.search("vec", "cats sleep")).mode == "hybrid"
    local = await coffer.kbs.update_config(
        "vec", {"embedding": {**server.config()["embedding"], "multilingual": False}}
    )
    assert local[0].config.embedding is not None
    await coffer.embeddings.drain("vec")
    cjk = await coffer.retrieval.search("vec", "猫は一日中寝る")
    assert (cjk.mode, cjk.fallback) == ("keyword", "language_not_covered")
    server.mode = "down"
    down = await coffer.retrieval.search("vec", "cats sleep")
    assert (down.mode, down.fallback) == ("keyword", "embedder_unavailable")
    no_provider = await coffer.kbs.create(
        "portable", {"enabled_modes": ["keyword", "grep", "vector"], "embedding": {"model": "m"}}
    )
    result = await coffer.retrieval.search(no_provider.name, "anything")
    assert (result.mode, result.fallback) == ("keyword", "no_provider")


async def test_vectors_are_written_under_the_knowledge_base_lock(
    coffer: Coffer, vkb: KnowledgeBase, server: FakeEmbeddings
) -> None:
    await coffer.embeddings.drain("vec")
    write(coffer.locations.docs_dir("vec") / "cats.md", "# Cats\n\nCats nap in the sun.")
    await coffer.reindexer.reconcile(vkb)  # cats.md owes new vectors
    asked = server.requests
    async with coffer.registry.lock("vec"):  # as a reconcile of the KB would hold it
        draining = asyncio.create_task(coffer.embeddings.drain("vec"))
        deadline = time.monotonic() + 10
        while server.requests == asked and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert server.requests > asked  # the vectors are computed meanwhile...
        await asyncio.sleep(0.2)
        assert not draining.done()  # ...but not written while the lock is held
        assert (await coffer.stores.index.metrics("vec"))["embed_pending"] == 1
    await draining
    assert (await coffer.stores.index.metrics("vec"))["embed_pending"] == 0


async def test_embedded_this_run_counts_every_document_since_the_start(
    coffer: Coffer, vkb: KnowledgeBase, server: FakeEmbeddings
) -> None:
    await coffer.embeddings.drain("vec")
    await coffer.embeddings.retry_now("vec")  # as every full reconcile does
    assert coffer.embeddings.status("vec")["embedded_this_run"] == len(CORPUS)


async def test_documents_converted_where_they_lie_get_vectors(
    coffer: Coffer, server: FakeEmbeddings
) -> None:
    """A PDF's and a Word file's converted text is embedded like a note's, and found by
    meaning alone."""
    from tests.support.samples import make_docx, make_pdf

    kb = await coffer.kbs.create("vecdocs", {**server.config(), "index_formats": ["pdf", "docx"]})
    docs = coffer.locations.docs_dir("vecdocs")
    write(docs / "rust.pdf", make_pdf("The rust compiler checks ownership and borrowing."))
    write(docs / "cats.docx", make_docx("Cats purr and chase mice around the garden."))
    await coffer.reindexer.reconcile(kb)  # both handed over for conversion
    converting = asyncio.create_task(coffer.conversions.run())
    try:
        deadline = time.monotonic() + 60
        while coffer.conversions.waiting("vecdocs"):
            assert time.monotonic() < deadline, "not converted"
            await asyncio.sleep(0.05)
    finally:
        converting.cancel()
    await coffer.reindexer.reconcile(kb)
    await coffer.embeddings.drain("vecdocs")
    assert (await coffer.stores.index.metrics("vecdocs"))["embed_pending"] == 0
    await coffer.kbs.update_config("vecdocs", {"default_mode": "vector"})
    result = await coffer.retrieval.search("vecdocs", "ownership borrowing compiler")
    assert result.mode == "vector" and result.passages[0].path == "rust.pdf"
    assert result.passages[0].page == 1
    result = await coffer.retrieval.search("vecdocs", "purr mice garden")
    assert result.passages[0].path == "cats.docx"


def test_what_is_embedded_is_the_text_not_coffers_marks() -> None:
    """A converted deck's slide marks say where its text is, not what it says: the model,
    which reads a few hundred tokens, is given the text (issue 35 §5); a note's own heading
    that reads like a mark stays, in its heading path."""
    from cofferd.infrastructure.storage.vector_store import embedding_text

    deck = "## Slide 1\n\n# Plan\n\nfirst\n\n## Slide 2\n\n# Plan (2)\n\nsecond"
    embedded = embedding_text(["Talk"], deck)
    assert "Slide" not in embedded and embedded.startswith("Talk\n\n# Plan\n\nfirst")
    assert embedding_text(["Doc", "Page 3"], "## Page 3\n\ntext") == "Doc / Page 3\n\ntext"
    assert embedding_text(["Doc", "Intro"], "## Intro\n\ntext") == "Doc\n\n## Intro\n\ntext"


def test_a_chunk_starting_with_its_heading_reads_it_as_the_grammar_does() -> None:
    """The heading a chunk starts with is read by the one Markdown grammar (closing `#`s
    dropped; `#word` is no heading), so it is not embedded twice, nor a tag taken for it."""
    from cofferd.infrastructure.storage.vector_store import embedding_text

    assert embedding_text(["Doc", "Intro"], "## Intro ##\n\ntext") == "Doc\n\n## Intro ##\n\ntext"
    assert embedding_text(["Doc", "Intro"], "#Intro\n\ntext") == "Doc / Intro\n\n#Intro\n\ntext"
