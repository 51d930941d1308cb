"""Knowledge-base configuration and name rules (seed: KnowledgeBaseConfig, EmbeddingConfig)."""

from __future__ import annotations

import re
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from cofferd.domain.errors import ValidationFailed
from cofferd.domain.file_names import folder_in_kb
from cofferd.domain.formats import DEFAULT_INDEX_FORMATS, format_named
from cofferd.domain.model_coverage import ENGLISH, EVERY_SCRIPT, XLMR, ModelCoverage
from cofferd.domain.validation import validation_failed

RetrievalMode = Literal["grep", "keyword", "vector", "hybrid"]
InPlaceFormat = Literal[
    "pdf", "docx", "pptx", "xlsx", "html", "epub", "csv", "json", "xml", "png", "jpg", "webp", "txt"
]
Provider = Literal[
    "openai",
    "openrouter",
    "voyage",
    "jina",
    "gemini",
    "azure",
    "dashscope",
    "ollama",
    "lmstudio",
    "local",
]

_DEFAULT_MODES: list[RetrievalMode] = ["keyword", "grep"]
KB_NAME_MAX = 64
_KB_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")
# Names Windows reserves for devices: a folder of that name cannot be synced there.
_WINDOWS_RESERVED = re.compile(r"(con|prn|aux|nul|com[0-9]|lpt[0-9])")


# Raised when the way text is indexed changes: every document is indexed again, once.
INDEX_FORMAT = "v8"  # v8: Markdown images and links to any file are links (issue 34 §2)
LOCAL_DEFAULT_MODEL = "all-MiniLM-L6-v2"
# The bundled multilingual model (multilingual-e5-small, 4-bit): about 100 languages, CJK
# among them; slower than MiniLM (docs/benchmarks.md, issue 36), so chosen by a KB's text
# when it is mostly in scripts MiniLM does not read (domain.model_by_text), or by `kb set`.
LOCAL_MULTILINGUAL_MODEL = "multilingual-e5-small"
BUNDLED_MODELS = (LOCAL_DEFAULT_MODEL, LOCAL_MULTILINGUAL_MODEL)
LOCAL_DEFAULT_DIMENSIONS = 384  # both bundled models
# Cosine similarity below which a bundled model's nearest chunk is not relevant, each
# calibrated on questions with and without an answer (docs/benchmarks.md, "A floor for
# vector hits": MiniLM on SciFact and tldr-pages; e5, whose similarities crowd near 1, on
# JSQuAD and CMRC 2018: bench.studies.e5_floor).
LOCAL_MIN_SIMILARITY = 0.3
MULTILINGUAL_MIN_SIMILARITY = 0.78


# The trust boundary: settings that name a URL, a credential, a local path, a provider to
# send text to, or an automatic action are this machine's own. They are kept in the data
# home and never read from a KB folder, which may arrive by sync or copy.
MACHINE_LOCAL = ("auto_update_sources",)
MACHINE_LOCAL_EMBEDDING = (
    "provider", "base_url", "credential_ref", "model_path", "threads", "batch_size", "timeout_s",
)  # fmt: skip


class EmbeddingConfig(BaseModel):
    """`credential_ref` names a secret, never holds one: `env:NAME` or `file:/path` (0600).
    Without a `provider` (a KB folder synced in from another machine names only its model),
    vectors stay off here until this machine chooses one."""

    model_config = ConfigDict(extra="forbid")

    provider: Provider | None = None
    model: str = Field(default=LOCAL_DEFAULT_MODEL, min_length=1, max_length=200)
    base_url: str | None = None
    credential_ref: str | None = Field(
        default=None, pattern=r"^(env:[A-Za-z_][A-Za-z0-9_]*|file:/.+)$"
    )
    dimensions: int = Field(default=LOCAL_DEFAULT_DIMENSIONS, ge=1, le=8192)
    model_path: str | None = None  # local: a folder with model.onnx and tokenizer files
    threads: int = Field(default=1, ge=1, le=64)  # local: 1 measured fastest on 2 cores
    batch_size: int = Field(default=32, ge=1, le=2048)
    timeout_s: float = Field(default=30.0, gt=0, le=600)
    # None: remote models and the bundled multilingual one yes, MiniLM and other local ones no
    multilingual: bool | None = None
    # a vector hit that no keyword matched must be this similar to the query (cosine);
    # None: the bundled model's calibrated floor, none for other models
    min_similarity: float | None = Field(default=None, ge=-1.0, le=1.0)

    @model_validator(mode="before")
    @classmethod
    def _remote_needs_a_model(cls, data: Any) -> Any:
        remote = [p for p in get_args(Provider) if p != "local"]
        if isinstance(data, dict) and data.get("provider") in remote:
            for key in ("model", "dimensions"):
                if key not in data:
                    raise ValueError(f"{key} is required for provider {data.get('provider')!r}")
        return data

    def identity(self) -> str:
        """What a stored vector depends on: a change means the corpus is embedded again."""
        where = self.model_path or self.base_url or ""
        return f"{self.provider}:{self.model}:{self.dimensions}:{where}"

    def bundled(self) -> str | None:
        """The bundled model this is (a name in BUNDLED_MODELS), if it is one."""
        if self.provider == "local" and self.model in BUNDLED_MODELS and not self.model_path:
            return self.model
        return None

    def similarity_floor(self) -> float:
        if self.min_similarity is not None:
            return self.min_similarity
        bundled = self.bundled()
        if bundled is None:
            return -1.0
        if bundled == LOCAL_MULTILINGUAL_MODEL:
            return MULTILINGUAL_MIN_SIMILARITY
        return LOCAL_MIN_SIMILARITY

    def coverage(self) -> ModelCoverage:
        """The scripts the model reads: `multilingual` says so when set; otherwise a remote
        model reads every script, a bundled one its own, any other local model English."""
        if self.multilingual is not None:
            return EVERY_SCRIPT if self.multilingual else ENGLISH
        if self.bundled() == LOCAL_MULTILINGUAL_MODEL:
            return XLMR
        return ENGLISH if self.provider == "local" else EVERY_SCRIPT

    def covers_all_languages(self) -> bool:
        return self.coverage() is not ENGLISH

    def text_chooses_model(self) -> bool:
        """Whether the KB's text chooses the bundled model (domain.model_by_text): a local
        one and none named (a model the user names always wins)."""
        return (
            self.provider == "local"
            and "model" not in self.model_fields_set
            and (not self.model_path)
        )

    def model_chosen_by_text(self) -> bool:
        """Whether the model in use is one the text chose over the default."""
        return self.text_chooses_model() and self.model != LOCAL_DEFAULT_MODEL


class KnowledgeBaseConfig(BaseModel):
    """Chunk sizes are counted in words: runs of non-space text, each CJK character one word."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    enabled_modes: list[RetrievalMode] = Field(default_factory=lambda: _DEFAULT_MODES.copy())
    default_mode: RetrievalMode = "keyword"
    chunk_size: int = Field(default=512, ge=64, le=2048)
    chunk_overlap: int = Field(default=64, ge=0)
    max_document_bytes: int = Field(default=25 * 1024 * 1024, ge=1024, le=104_857_600)
    embedding: EmbeddingConfig | None = None
    auto_update_sources: bool = False
    add_folder: str = ""  # where `add` writes new documents, inside the KB ("": its top)
    # files of these formats in the docs tree are documents where they lie (domain.formats)
    index_formats: list[InPlaceFormat] = Field(
        default_factory=lambda: list(DEFAULT_INDEX_FORMATS)  # type: ignore[arg-type]
    )

    @field_validator("index_formats", mode="before")
    @classmethod
    def _formats_listed(cls, value: Any) -> Any:
        """`pdf,docx` as one value (`--set index_formats=pdf`) is the list it names."""
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        if isinstance(value, list):
            value = [format_named(v) if isinstance(v, str) else v for v in value]
        return value

    @field_validator("index_formats")
    @classmethod
    def _formats_once(cls, value: list[InPlaceFormat]) -> list[InPlaceFormat]:
        return sorted(set(value))

    @field_validator("add_folder")
    @classmethod
    def _a_folder_inside(cls, value: str) -> str:
        return folder_in_kb(value)

    @model_validator(mode="before")
    @classmethod
    def _vector_implies_hybrid(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        modes = data.get("enabled_modes")
        if isinstance(modes, list) and "vector" in modes and "hybrid" not in modes:
            data = {**data, "enabled_modes": [*modes, "hybrid"]}
        return data

    @model_validator(mode="after")
    def _check(self) -> KnowledgeBaseConfig:
        if self.chunk_overlap > self.chunk_size // 2:
            raise ValueError(f"chunk_overlap must be at most chunk_size/2 ({self.chunk_size // 2})")
        if "default_mode" not in self.model_fields_set:
            # a default the user never set follows what is enabled, never blocks a change;
            # written past validate_assignment, so that it stays unset (not saved)
            self.__dict__["default_mode"] = _followed_mode(self.enabled_modes)
        if self.default_mode not in self.enabled_modes:
            raise ValueError(f"default_mode {self.default_mode!r} is not in enabled_modes")
        if "vector" in self.enabled_modes and self.embedding is None:
            raise ValueError("enabling 'vector' requires an embedding configuration")
        return self

    @property
    def vector_enabled(self) -> bool:
        return (
            "vector" in self.enabled_modes
            and self.embedding is not None
            and self.embedding.provider is not None
        )

    def chunking_key(self) -> str:
        """Identifies everything that shapes chunks: a change means the corpus is re-chunked."""
        return f"{INDEX_FORMAT}:words:{self.chunk_size}:{self.chunk_overlap}"


def _followed_mode(enabled: list[RetrievalMode]) -> RetrievalMode:
    """The default mode when none is set: hybrid with vectors on, else keyword, else the
    first enabled (keyword when nothing is: the check names it)."""
    for mode in ("hybrid" if "vector" in enabled else "keyword", "keyword"):
        if mode in enabled:
            return mode
    return enabled[0] if enabled else "keyword"


def with_text_model(config: KnowledgeBaseConfig, model: str) -> KnowledgeBaseConfig:
    """`config` embedding with `model`, the bundled model its text chose, where the text
    chooses; a default like any other: never saved, and gone when a model is named."""
    embedding = config.embedding
    if embedding is None or not embedding.text_chooses_model() or embedding.model == model:
        return config
    chosen = embedding.model_copy(update={"model": model})
    chosen.__pydantic_fields_set__.discard("model")
    return config.model_copy(update={"embedding": chosen})


def parse_config(data: Any) -> KnowledgeBaseConfig:
    try:
        return KnowledgeBaseConfig.model_validate(data if data is not None else {})
    except ValidationError as exc:
        raise validation_failed("invalid settings", exc, KnowledgeBaseConfig) from None


def split_config(data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(portable, machine-local) parts of a config dict."""
    portable = {k: v for k, v in data.items() if k not in MACHINE_LOCAL}
    local = {k: v for k, v in data.items() if k in MACHINE_LOCAL}
    embedding = data.get("embedding")
    if isinstance(embedding, dict):
        portable["embedding"] = {
            k: v for k, v in embedding.items() if k not in MACHINE_LOCAL_EMBEDDING
        }
        mine = {k: v for k, v in embedding.items() if k in MACHINE_LOCAL_EMBEDDING}
        if mine:
            local["embedding"] = mine
    return portable, local


def join_config(portable: dict[str, Any], local: dict[str, Any]) -> dict[str, Any]:
    joined = {**portable, **{k: v for k, v in local.items() if k != "embedding"}}
    if isinstance(local.get("embedding"), dict):
        joined["embedding"] = {**(portable.get("embedding") or {}), **local["embedding"]}
    return joined


def merge_config(current: KnowledgeBaseConfig, patch: dict[str, Any]) -> KnowledgeBaseConfig:
    """The settings `patch` (a JSON merge patch) makes of `current`."""
    return parse_config(merge_patch(current.model_dump(exclude_unset=True), patch))


def merge_patch(current: Any, patch: Any) -> Any:
    """JSON merge patch (RFC 7396): an object changes only the keys it names, recursively;
    null removes a key (its default applies again); any other value replaces."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(current) if isinstance(current, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


# Where a setting in use comes from: its default, the KB's portable kb.yaml, this machine's
# own settings (local/<kb>.yaml), or the embedding model (a default that depends on it).
# `text`: the embedding model, which the KB's text chose (domain.model_by_text).
Source = Literal["default", "kb_yaml", "machine", "model", "text"]


def effective_settings(config: KnowledgeBaseConfig) -> dict[str, dict[str, Any]]:
    """Every setting's value in use, with where it comes from; the embedding's one by one
    (`embedding.min_similarity`)."""
    values = config.model_dump(mode="json")
    found = {}
    for key in KnowledgeBaseConfig.model_fields:
        if key == "embedding" and config.embedding is not None:
            found.update(_embedding_settings(config.embedding))
            continue
        source = _source(key in config.model_fields_set, key in MACHINE_LOCAL)
        found[key] = {"value": values[key], "source": source}
    return found


def _embedding_settings(embedding: EmbeddingConfig) -> dict[str, dict[str, Any]]:
    values = embedding.model_dump(mode="json")
    found = {}
    for key in EmbeddingConfig.model_fields:
        source = _source(key in embedding.model_fields_set, key in MACHINE_LOCAL_EMBEDDING)
        found[f"embedding.{key}"] = {"value": values[key], "source": source}
    if embedding.model_chosen_by_text():
        found["embedding.model"]["source"] = "text"
    for key, value in _model_defaults(embedding).items():
        if values[key] is None:
            found[f"embedding.{key}"] = {"value": value, "source": "model"}
    return found


def _model_defaults(embedding: EmbeddingConfig) -> dict[str, Any]:
    """The settings left unset that the chosen model decides."""
    if embedding.provider is None:
        return {}
    found: dict[str, Any] = {"multilingual": embedding.covers_all_languages()}
    floor = embedding.similarity_floor()
    if floor > -1.0:
        found["min_similarity"] = floor
    return found


def _source(is_set: bool, machine_local: bool) -> Source:
    if not is_set:
        return "default"
    return "machine" if machine_local else "kb_yaml"


def check_kb_name(name: str) -> str:
    """A KB name is a folder name: a lowercase slug, so it is safe on every filesystem."""
    if not isinstance(name, str) or not _KB_NAME.fullmatch(name) or len(name) > KB_NAME_MAX:
        raise ValidationFailed(
            "invalid knowledge base name: use 1-64 lowercase letters, digits, '-' or '_', "
            "starting with a letter or digit",
            field="name",
            name=str(name)[:200],
        )
    if _WINDOWS_RESERVED.fullmatch(name):
        raise ValidationFailed(
            f"{name!r} is a device name on Windows, so its folder could not be synced there; "
            "choose another name",
            field="name",
            name=name,
        )
    return name
