"""The bundled multilingual model (multilingual-e5-small, 4-bit) run for real, in the real
daemon's model process: CJK notes embedded, a CJK question answered through vectors, and
`kb set` saying which languages the chosen model reads and how much of the KB it does not
(text it does not read gets no vector)."""

from __future__ import annotations

import contextlib
import io
import random
import time
from pathlib import Path
from typing import Any

from cofferctl import cli
from cofferd.surfaces.core import Coffer
from tests.support.daemon import Daemon, cleanup, new_daemon, wait_for
from tests.support.helpers import index_dump, write

NOTES = {
    "dog.md": "# 小狗\n\n我家的小狗每天早上都要出去散步。",
    "tokyo.md": "# 东京\n\n东京是日本的首都，人口很多。",
    "seoul.md": "# 서울\n\n서울은 한국의 수도이며 큰 도시입니다.",
    "cake.md": "# 蛋糕\n\n把鸡蛋和面粉混合，然后放进烤箱烤二十分钟。",
    "rust.md": "# Rust\n\nThe rust compiler checks ownership and borrowing.",
}
MULTILINGUAL = {"provider": "local", "model": "multilingual-e5-small"}
VECTOR_MODES = ["keyword", "grep", "vector", "hybrid"]


# the other KB's bulk pass: documents of a few chunks of Chinese (a chunk is a slice)
BULK_DOCUMENTS = 48
COMMON = (
    "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动"
    "同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自"
    "二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日"
    "那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变"
    "条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总"
    "次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指"
    "几九区强放决西被干做必战先回则任取据处理府研质"
)


def cjk_document(seed: int, sections: int = 6, chars: int = 200) -> str:
    """A document of a few sections of made-up Chinese (each a chunk, sent alone)."""
    rng = random.Random(seed)
    parts = [f"# 文档 {seed}"]
    for n in range(sections):
        text = "".join(rng.choice(COMMON) for _ in range(chars))
        parts.append(
            f"## 第{n + 1}节\n\n" + "。".join(text[i : i + 30] for i in range(0, chars, 30))
        )
    return "\n\n".join(parts) + "\n"


def owed(d: Daemon, kb: str) -> int:
    for entry in d.client.get("/api/v1/status")["knowledge_bases"]:
        if entry["name"] == kb:
            return int(entry.get("vectors", {}).get("embed_pending", 0))
    raise KeyError(kb)


def embedded(d: Daemon, kb: str, documents: int) -> bool:
    for entry in d.client.get("/api/v1/status")["knowledge_bases"]:
        if entry["name"] == kb:
            owed = entry.get("vectors", {}).get("embed_pending", 0)
            return bool(entry["documents"] == documents and owed == 0)
    return False


def cofferctl(d: Daemon, *argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stderr(io.StringIO()):
        assert cli.main(["--socket", str(d.socket), *argv], stdout=out) == 0
    return out.getvalue()


MULTILINGUAL_KB = {
    "enabled_modes": VECTOR_MODES,
    "default_mode": "hybrid",
    "embedding": MULTILINGUAL,
}


def multilingual_kb(d: Daemon, kb: str) -> None:
    """A KB of NOTES on the multilingual model, hybrid by default, embedded."""
    d.client.post("/api/v1/knowledge_bases", {"name": kb, "config": MULTILINGUAL_KB})
    for name, text in NOTES.items():
        write(d.docs(kb) / name, text)
    wait_for(lambda: embedded(d, kb, len(NOTES)), timeout=60)


def test_a_cjk_question_is_answered_through_the_multilingual_model(tmp_path: Path) -> None:
    d = new_daemon(tmp_path).start()
    try:
        multilingual_kb(d, "zh")

        def top(query: str) -> tuple[str, Any, str]:
            found = d.client.post(d.client.kb("zh", "/search"), {"query": query})
            return found["mode"], found["fallback"], Path(found["passages"][0]["path"]).name

        # no word of the question is in the note: only the model's vectors find it
        assert top("宠物犬的日常运动") == ("hybrid", None, "dog.md")
        assert top("What is the capital of South Korea?") == ("hybrid", None, "seoul.md")
        assert top("memory safety in systems programming") == ("hybrid", None, "rust.md")
    finally:
        cleanup(d)


def test_a_search_and_a_save_never_wait_for_another_knowledge_bases_bulk_pass(
    tmp_path: Path,
) -> None:
    """Two knowledge bases on the multilingual model share its one process. While `bulk`
    embeds many chunks (a pass of minutes), a search in `live` is answered in hybrid mode
    (its query goes to the express process, never behind bulk work, and never falls back
    to keyword), and a note saved in `live` gets its vectors within seconds (its texts go
    there too), with `bulk`'s pass still under way."""
    d = new_daemon(tmp_path).start()
    try:
        multilingual_kb(d, "live")
        d.client.post("/api/v1/knowledge_bases", {"name": "bulk", "config": MULTILINGUAL_KB})
        for i in range(BULK_DOCUMENTS):
            write(d.docs("bulk") / f"doc{i:03d}.md", cjk_document(i))
        wait_for(lambda: owed(d, "bulk") == BULK_DOCUMENTS, timeout=30)  # indexed, none embedded

        for query, note in (
            ("宠物犬的日常运动", "dog.md"),
            ("What is the capital of South Korea?", "seoul.md"),
        ):
            asked = time.monotonic()
            found = d.client.post(d.client.kb("live", "/search"), {"query": query})
            took = time.monotonic() - asked
            assert (found["mode"], found["fallback"]) == ("hybrid", None), found
            assert Path(found["passages"][0]["path"]).name == note
            assert took < 4.0, took  # a batch of the bulk pass takes tens of seconds

        write(d.docs("live") / "tea.md", "# 绿茶\n\n春天采摘的绿茶要用八十度的水冲泡。")
        saved = time.monotonic()
        wait_for(lambda: embedded(d, "live", len(NOTES) + 1), timeout=10.0)
        assert time.monotonic() - saved < 10.0
        assert owed(d, "bulk") > 0  # its pass was under way all along
        found = d.client.post(d.client.kb("live", "/search"), {"query": "泡茶的水温"})
        assert (found["mode"], Path(found["passages"][0]["path"]).name) == ("hybrid", "tea.md")
    finally:
        cleanup(d)


def test_a_cjk_kb_with_vectors_gets_the_multilingual_model_by_default(tmp_path: Path) -> None:
    """No model named: the text, mostly Chinese, Japanese and Korean, chooses e5; its notes
    are embedded with it (a question none of whose words are in the note finds it); status
    and `kb show` say why."""
    d = new_daemon(tmp_path).start()
    try:
        config = {"enabled_modes": VECTOR_MODES, "embedding": {"provider": "local"}}
        d.client.post("/api/v1/knowledge_bases", {"name": "zh", "config": config})
        for name, text in NOTES.items():
            write(d.docs("zh") / name, text)
        wait_for(lambda: embedded(d, "zh", len(NOTES)), timeout=60)
        entry = next(
            k for k in d.client.get("/api/v1/status")["knowledge_bases"] if k["name"] == "zh"
        )
        assert entry["vectors"]["model"] == "multilingual-e5-small"
        choice = entry["vectors"]["model_choice"]
        assert choice["chosen_by"] == "text" and "Chinese/Japanese/Korean" in choice["why"]
        assert choice["reads"]["multilingual-e5-small"] == 1.0
        assert choice["reads"]["all-MiniLM-L6-v2"] < 0.5
        found = d.client.post(d.client.kb("zh", "/search"), {"query": "宠物犬的日常运动"})
        assert (found["mode"], found["fallback"]) == ("hybrid", None)
        assert Path(found["passages"][0]["path"]).name == "dog.md"

        said = cofferctl(d, "status")
        assert (
            "zh: embedding model multilingual-e5-small, chosen by its text: most of its text is "
            "in Chinese/Japanese/Korean, which all-MiniLM-L6-v2 does not read"
        ) in said
        assert "all-MiniLM-L6-v2 reads " in said and "; multilingual-e5-small 100 %" in said
        shown = cofferctl(d, "kb", "show", "zh")
        assert 'embedding.model: "multilingual-e5-small"  (chosen by its text)' in shown
        settings = (d.docs("zh").parent / "kb.yaml").read_text()
        assert "multilingual" not in settings  # a default: never written to its settings

        d.stop()  # started again, the KB is on the model its vectors are from at once
        d.start()
        entry = next(
            k for k in d.client.get("/api/v1/status")["knowledge_bases"] if k["name"] == "zh"
        )
        assert entry["vectors"]["model"] == "multilingual-e5-small"
        found = d.client.post(d.client.kb("zh", "/search"), {"query": "宠物犬的日常运动"})
        assert (found["mode"], found["fallback"]) == ("hybrid", None)
        assert Path(found["passages"][0]["path"]).name == "dog.md"
    finally:
        cleanup(d)


def test_kb_set_says_which_languages_the_model_reads_and_how_much_it_does_not(
    tmp_path: Path,
) -> None:
    d = new_daemon(tmp_path).start()
    try:
        d.client.post("/api/v1/knowledge_bases", {"name": "mixed", "config": {}})
        for name, text in NOTES.items():
            write(d.docs("mixed") / name, text)
        wait_for(lambda: embedded(d, "mixed", len(NOTES)))

        said = cofferctl(
            d, "kb", "set", "mixed", "enabled_modes=keyword,grep,vector,hybrid",
            "embedding.provider=local",
        )  # fmt: skip
        assert (
            "embedding model multilingual-e5-small, chosen by its text: most of its text is in "
            "Chinese/Japanese/Korean, which all-MiniLM-L6-v2 does not read (all-MiniLM-L6-v2 "
            "reads "
        ) in said
        assert "% of its words; multilingual-e5-small 100 %)" in said
        assert "all of this knowledge base's text is in scripts it reads" in said

        # a model the user names wins over the text, and stays
        said = cofferctl(d, "kb", "set", "mixed", "embedding.model=all-MiniLM-L6-v2")
        assert "embedding model all-MiniLM-L6-v2 reads English" in said
        share = float(said.split("; ")[1].split("%")[0])
        assert 60 < share < 95, said  # four notes of five are Chinese, Japanese or Korean
        assert "embedding.model=multilingual-e5-small" in said and "chosen by its text" not in said
        wait_for(lambda: embedded(d, "mixed", len(NOTES)))
        vectors = next(
            k for k in d.client.get("/api/v1/status")["knowledge_bases"] if k["name"] == "mixed"
        )["vectors"]
        assert vectors["model"] == "all-MiniLM-L6-v2"
        assert vectors["model_choice"]["chosen_by"] == "user"

        said = cofferctl(d, "kb", "set", "mixed", "embedding.model=multilingual-e5-small")
        assert "embedding model multilingual-e5-small reads about 100 languages: Chinese" in said
        assert "all of this knowledge base's text is in scripts it reads" in said
        reply = d.client.request(
            "PATCH", d.client.kb("mixed"), {"config": {"embedding": {"model": "all-MiniLM-L6-v2"}}}
        )
        assert reply["model_languages"]["model"] == "all-MiniLM-L6-v2"
        assert 0.6 < reply["model_languages"]["not_read_share"] < 0.95
        assert reply["notices"] == [] and reply["model_choice"]["chosen_by"] == "user"
    finally:
        cleanup(d)


def test_kb_set_of_a_model_without_vector_search_says_what_else_to_set(tmp_path: Path) -> None:
    d = new_daemon(tmp_path).start()
    try:
        d.client.post("/api/v1/knowledge_bases", {"name": "kw", "config": {}})  # keyword only
        said = cofferctl(d, "kb", "set", "kw", "embedding.model=multilingual-e5-small")
        command = (
            "cofferctl kb set kw enabled_modes=keyword,grep,vector,hybrid embedding.provider=local"
        )
        assert (
            "note: kw has no vector search (vector mode is off and no embedding provider is "
            "chosen on this machine)"
        ) in said
        assert f"\n  {command}\n" in said
        reply = d.client.request(
            "PATCH",
            d.client.kb("kw"),
            {"config": {"embedding": {"model": "multilingual-e5-small"}}},
        )
        (notice,) = reply["notices"]
        assert notice["code"] == "vector_search_off" and notice["command"] == command

        said = cofferctl(d, *command.split()[1:])  # the command given does it
        assert "note:" not in said
        assert "embedding model multilingual-e5-small reads about 100 languages" in said
        entry = next(
            k for k in d.client.get("/api/v1/status")["knowledge_bases"] if k["name"] == "kw"
        )
        assert entry["vectors"]["model"] == "multilingual-e5-small"

        d.client.post("/api/v1/knowledge_bases", {"name": "off", "config": {
            "enabled_modes": VECTOR_MODES, "embedding": {"provider": "local"},
        }})  # fmt: skip
        said = cofferctl(d, "kb", "set", "off", "embedding.provider=null", "embedding.threads=2")
        assert "no embedding provider is chosen on this machine" in said
        assert "\n  cofferctl kb set off embedding.provider=local\n" in said
    finally:
        cleanup(d)


async def test_text_the_model_does_not_read_gets_no_vector(coffer: Coffer) -> None:
    config = {  # MiniLM named: the text would choose e5
        "enabled_modes": VECTOR_MODES,
        "embedding": {"provider": "local", "model": "all-MiniLM-L6-v2"},
    }
    kb = await coffer.kbs.create("en", config)
    for name, text in NOTES.items():
        write(coffer.locations.docs_dir("en") / name, text)
    await coffer.reindexer.reconcile(kb)
    await coffer.embeddings.drain("en")
    dump = await index_dump(coffer, "en")
    assert len(dump["chunks"]) == len(NOTES)
    (embedded_chunk,) = [c for c in dump["chunks"] if c[0] in set(dump["vectors"])]
    assert "rust compiler" in str(embedded_chunk)  # the English note alone
    assert (await coffer.kbs.counts("en"))["embed_pending"] == 0  # none owed, none failed


def test_each_model_reads_the_letters_of_its_scripts() -> None:
    from cofferd.domain.model_coverage import ENGLISH, XLMR

    assert XLMR.reads_all("人々は何を使う？") and XLMR.reads_all("青天衙门Ⅱ 서울 Москва")
    assert ENGLISH.reads_all("TNF-α in Part Ⅱ") and not ENGLISH.reads_all("plan 東京")
    assert ENGLISH.words("a garden plan in 東京") == (2, 6)  # each CJK character a word
    assert ENGLISH.reads("# 2027 — 42") and not ENGLISH.reads("東京大学の近く, near a park")


def test_the_text_chooses_the_model_and_does_not_flap() -> None:
    from cofferd.domain.model_by_text import measure, model_for_text, reads_line

    english, e5 = "all-MiniLM-L6-v2", "multilingual-e5-small"
    cjk = measure(NOTES.values())
    assert model_for_text(cjk, english) == e5 and model_for_text(cjk, e5) == e5
    assert reads_line(cjk) is not None and reads_line(cjk).endswith(f"; {e5} 100 %")  # type: ignore[union-attr]
    prose = measure(["The rust compiler checks ownership and borrowing, every day. " * 5])
    assert model_for_text(prose, e5) == english and reads_line(prose) is None

    def half(english_words: int) -> str:  # 100 words, of which so many in English
        return "word " * english_words + "東" * (100 - english_words)

    between = measure([half(60)])  # MiniLM reads 60 %: each keeps what it has
    assert model_for_text(between, english) == english and model_for_text(between, e5) == e5
    assert model_for_text(measure([half(40)]), english) == e5
    assert model_for_text(measure([half(75)]), e5) == english
    assert model_for_text(measure(["東京"]), english) == english  # too little to choose by
