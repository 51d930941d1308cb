from __future__ import annotations

import pytest

from cofferd.domain.config import (
    KnowledgeBaseConfig,
    check_kb_name,
    effective_settings,
    merge_config,
    parse_config,
)
from cofferd.domain.errors import ValidationFailed


def test_defaults_follow_the_seed() -> None:
    c = KnowledgeBaseConfig()
    assert c.enabled_modes == ["keyword", "grep"]
    assert c.default_mode == "keyword"
    assert (c.chunk_size, c.chunk_overlap) == (512, 64)
    assert c.max_document_bytes == 25 * 1024 * 1024
    assert c.embedding is None and c.auto_update_sources is False


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"chunk_size": 63}, "chunk_size"),
        ({"chunk_size": 2049}, "chunk_size"),
        ({"chunk_size": "big"}, "chunk_size"),
        ({"max_document_bytes": 10}, "max_document_bytes"),
        ({"enabled_modes": ["telepathy"]}, "enabled_modes[0]"),
        ({"colour": "blue"}, "colour"),
        ({"embedding": {"provider": "nope", "model": "m", "dimensions": 3}}, "embedding.provider"),
    ],
)
def test_invalid_values_name_the_field(data: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationFailed) as err:
        parse_config(data)
    assert field in [e["field"] for e in err.value.details["errors"]]
    assert field in err.value.message


def test_overlap_is_at_most_half_the_chunk() -> None:
    parse_config({"chunk_size": 100, "chunk_overlap": 50})
    with pytest.raises(ValidationFailed, match="chunk_overlap"):
        parse_config({"chunk_size": 100, "chunk_overlap": 51})


def test_vector_adds_hybrid_and_needs_embedding() -> None:
    emb = {"provider": "local", "model": "all-MiniLM-L6-v2", "dimensions": 384}
    c = parse_config({"enabled_modes": ["keyword", "vector"], "embedding": emb})
    assert "hybrid" in c.enabled_modes and c.default_mode == "hybrid"
    with pytest.raises(ValidationFailed, match="embedding"):
        parse_config({"enabled_modes": ["keyword", "vector"]})


def test_merge_keeps_other_settings() -> None:
    c = merge_config(parse_config({"chunk_size": 300}), {"chunk_overlap": 10})
    assert (c.chunk_size, c.chunk_overlap) == (300, 10)


def test_a_change_is_a_json_merge_patch() -> None:
    remote = {"provider": "openai", "model": "m", "dimensions": 8,
              "base_url": "http://127.0.0.1:9/v1", "credential_ref": "env:KEY"}  # fmt: skip
    c = merge_config(parse_config({"embedding": remote}), {"embedding": {"model": "n"}})
    assert c.embedding is not None and c.embedding.model == "n"
    assert (c.embedding.provider, c.embedding.base_url) == ("openai", "http://127.0.0.1:9/v1")
    c = merge_config(c, {"embedding": {"base_url": None}, "chunk_size": 300})
    assert c.embedding is not None and c.embedding.base_url is None
    assert c.embedding.credential_ref == "env:KEY" and c.chunk_size == 300
    c = merge_config(c, {"chunk_size": None, "embedding": None})  # null: back to the default
    assert c.chunk_size == 512 and c.embedding is None
    assert "chunk_size" not in c.model_fields_set  # not written to kb.yaml any more


def test_effective_settings_say_where_each_value_comes_from() -> None:
    c = parse_config({"chunk_size": 256, "auto_update_sources": True,
                      "embedding": {"provider": "local", "threads": 2}})  # fmt: skip
    found = effective_settings(c)
    assert found["chunk_size"] == {"value": 256, "source": "kb_yaml"}
    assert found["chunk_overlap"] == {"value": 64, "source": "default"}
    assert found["auto_update_sources"] == {"value": True, "source": "machine"}
    assert found["embedding.provider"] == {"value": "local", "source": "machine"}
    assert found["embedding.threads"] == {"value": 2, "source": "machine"}
    assert found["embedding.min_similarity"] == {"value": 0.3, "source": "model"}
    assert found["embedding.multilingual"] == {"value": False, "source": "model"}
    assert found["add_folder"] == {"value": "", "source": "default"}
    e5 = parse_config({"embedding": {"provider": "local", "model": "multilingual-e5-small"}})
    e5_floor = effective_settings(e5)["embedding.min_similarity"]
    assert e5_floor == {"value": 0.78, "source": "model"}  # calibrated: bench.studies.e5_floor
    own_model = parse_config({"embedding": {"provider": "local", "model_path": "/m"}})
    no_floor = effective_settings(own_model)["embedding.min_similarity"]
    assert no_floor == {"value": None, "source": "default"}  # none applies: scales differ
    unset = effective_settings(KnowledgeBaseConfig())["embedding"]
    assert unset == {"value": None, "source": "default"}


def test_the_folder_for_adds_is_inside_the_knowledge_base() -> None:
    assert parse_config({"add_folder": "Inbox/"}).add_folder == "Inbox"
    with pytest.raises(ValidationFailed) as err:
        parse_config({"add_folder": "../elsewhere"})
    assert err.value.details["field"] == "add_folder"


@pytest.mark.parametrize("name", ["notes", "a", "work-2024", "my_kb", "x" * 64])
def test_valid_kb_names(name: str) -> None:
    assert check_kb_name(name) == name


@pytest.mark.parametrize(
    "name",
    ["", "..", "../etc", "a/b", "a\\b", ".hidden", "Notes", "x" * 65, "a b", "-x", "ü", "notes\n"],
)
def test_unsafe_kb_names_are_refused(name: str) -> None:
    with pytest.raises(ValidationFailed) as err:
        check_kb_name(name)
    assert err.value.details["field"] == "name"
