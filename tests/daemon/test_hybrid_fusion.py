"""Hybrid search fuses the keyword and vector lists by their scores (`fusion.blend`): a
clear vector first outvotes keyword search's narrow one, which rank fusion could not (a
note first in one list and second in the other tied, and keywords broke the tie)."""

from __future__ import annotations

from pathlib import Path

from cofferd.application.search.fusion import blend
from cofferd.domain.models import Passage
from tests.support.daemon import Daemon, cleanup, new_daemon, wait_for
from tests.support.helpers import write

# "How long must a dog go out each day?": the cat note holds more of its words (每天, 出门,
# 多久), the dog note is what it means.
NOTES = {
    "dog.md": "# 小狗\n\n我家的小狗每天早上都要出去散步一个小时。",
    "cat.md": "# 猫\n\n猫每天要睡多久？十几个小时，白天很少出门。",
    "train.md": "# 火车\n\n从北京坐火车到上海要多久？高铁每天有很多班。",
    "phone.md": "# 手机\n\n新手机充电要多久？充满一次能用一天。",
    "sport.md": "# 运动\n\n医生建议成年人每周运动一百五十分钟。",
    "tokyo.md": "# 东京\n\n东京是日本的首都，人口很多。",
    "cake.md": "# 蛋糕\n\n把鸡蛋和面粉混合，然后放进烤箱烤二十分钟。",
    "tea.md": "# 绿茶\n\n绿茶用八十度的水泡两分钟味道最好。",
}
QUESTION = "狗每天要出门多久"
CONFIG = {
    "enabled_modes": ["keyword", "grep", "vector", "hybrid"],
    "default_mode": "hybrid",
    "embedding": {"provider": "local", "model": "multilingual-e5-small"},
}


def embedded(d: Daemon, kb: str, documents: int) -> bool:
    for entry in d.client.get("/api/v1/status")["knowledge_bases"]:
        if entry["name"] == kb:
            owed = entry.get("vectors", {}).get("embed_pending", 0)
            return bool(entry["documents"] == documents and owed == 0)
    return False


def test_hybrid_ranks_the_note_the_question_means_above_keywords_narrow_first(
    tmp_path: Path,
) -> None:
    d = new_daemon(tmp_path).start()
    try:
        d.client.post("/api/v1/knowledge_bases", {"name": "zh", "config": CONFIG})
        for name, text in NOTES.items():
            write(d.docs("zh") / name, text)
        wait_for(lambda: embedded(d, "zh", len(NOTES)), timeout=60)

        def ranked(mode: str) -> list[str]:
            """Searched in `mode`, asked for (the KB's default is hybrid), in the KB and in
            every KB."""
            found = d.client.post(d.client.kb("zh", "/search"), {"query": QUESTION, "mode": mode})
            assert found["mode"] == mode and found["fallback"] is None
            every = d.client.post("/api/v1/search", {"query": QUESTION, "mode": mode})
            assert every["mode"] == mode  # ranked as one KB's list (scores fused anew)
            assert [p["path"] for p in every["passages"]] == [p["path"] for p in found["passages"]]
            return [Path(p["path"]).name for p in found["passages"]]

        assert ranked("keyword")[:2] == ["cat.md", "dog.md"]
        assert ranked("vector")[:2] == ["dog.md", "cat.md"]
        assert ranked("hybrid")[:2] == ["dog.md", "cat.md"]
        d.client.request("PATCH", d.client.kb("zh"), {"config": {"default_mode": "vector"}})
        found = d.client.post(d.client.kb("zh", "/search"), {"query": QUESTION})
        assert found["mode"] == "vector"  # none asked for: the KB's default
    finally:
        cleanup(d)


def passage(name: str, score: float) -> Passage:
    return Passage(name, name, "", score, 0, f"{name}.md")


def test_a_single_keyword_hit_still_counts() -> None:
    # z-scores of a one-item list say nothing; the hit must still beat what keywords missed
    keyword = [passage("a", 3.2)]
    semantic = [passage("b", 0.90), passage("a", 0.89), passage("c", 0.50)]
    assert [p.document_id for p in blend(keyword, semantic, 3)] == ["a", "b", "c"]


def test_scores_on_any_scale_weigh_alike_and_ties_keep_keyword_order() -> None:
    keyword = [passage("a", 40.0), passage("b", 20.0)]
    semantic = [passage("b", 0.9), passage("a", 0.7)]
    # a: 0.6 * 1 + 0.4 * -1 = 0.2; b: 0.6 * -1 + 0.4 * 1 = -0.2
    assert [(p.document_id, round(p.score, 6)) for p in blend(keyword, semantic, 2)] == [
        ("a", 0.2),
        ("b", -0.2),
    ]
    assert [p.document_id for p in blend(keyword, semantic, 2, share=0.5)] == ["a", "b"]
    assert blend([], [], 5) == []
