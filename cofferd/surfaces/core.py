"""Composition root: builds Coffer's services over one data home. Surfaces use the
application services it exposes; the stores are built here and nowhere else."""

from __future__ import annotations

from dataclasses import dataclass

from cofferd.application.activity import Activity
from cofferd.application.documents import Documents
from cofferd.application.embeddings import Embeddings
from cofferd.application.indexing import RECONCILE_INTERVAL_S, IndexingService
from cofferd.application.ingest import Ingest
from cofferd.application.knowledge_bases import KnowledgeBases
from cofferd.application.registry import KBRegistry
from cofferd.application.reindexer import Reindexer
from cofferd.application.retrieval import Retrieval
from cofferd.infrastructure import vec_index
from cofferd.infrastructure.activity_store import KEEP_DEFAULT, SqliteActivity
from cofferd.infrastructure.conversion import WorkerConverter
from cofferd.infrastructure.database import Database
from cofferd.infrastructure.docs_tree import FileDocsTree
from cofferd.infrastructure.document_policy import DocumentPolicy
from cofferd.infrastructure.document_store import SqliteDocuments
from cofferd.infrastructure.embedders import make_embedder
from cofferd.infrastructure.grep import Ripgrep
from cofferd.infrastructure.kb_files import KBFiles
from cofferd.infrastructure.sqlite import SQLITE_VERSION
from cofferd.infrastructure.vector_store import SqliteVectors
from cofferd.locations import Locations


@dataclass(frozen=True)
class Tuning:
    """Daemon-wide settings (flags and environment; see cofferd --help)."""

    reconcile_interval_s: float = RECONCILE_INTERVAL_S
    activity_keep: int = KEEP_DEFAULT


@dataclass(frozen=True)
class Stores:
    """The infrastructure behind the services (tests and benchmarks inspect it)."""

    db: Database
    documents: SqliteDocuments
    vectors: SqliteVectors
    activity: SqliteActivity


class Coffer:
    def __init__(self, locations: Locations, db: Database, tuning: Tuning) -> None:
        self.locations = locations
        self.tuning = tuning
        self.stores = stores = Stores(
            db, SqliteDocuments(db), SqliteVectors(db), SqliteActivity(db)
        )
        self.converter = WorkerConverter()
        self.policy = DocumentPolicy(locations, self.converter.formats())
        tree = FileDocsTree(locations, self.policy)
        self.registry = KBRegistry(KBFiles(locations))
        self.reindexer = Reindexer(stores.documents, stores.activity, tree, self.registry)
        self.kbs = KnowledgeBases(
            self.registry, self.registry.repo, stores.documents, stores.activity, self.reindexer
        )
        self.embeddings = Embeddings(
            self.kbs, stores.vectors, lambda config: make_embedder(config, locations.models_dir)
        )
        self.reindexer.on_change = self.embeddings.wake
        grep = Ripgrep(locations, self.policy)
        self.retrieval = Retrieval(
            self.kbs, stores.documents, stores.vectors, grep, self.embeddings
        )
        self.documents = Documents(self.kbs, stores.documents, tree, self.reindexer)
        self.ingest = Ingest(
            self.kbs,
            stores.documents,
            tree,
            self.reindexer,
            self.documents,
            self.converter,
            self.policy,
        )
        self.activity = Activity(self.kbs, stores.activity)
        self.indexing = IndexingService(
            self.kbs,
            self.reindexer,
            self.embeddings,
            reconcile_interval_s=tuning.reconcile_interval_s,
        )

    @staticmethod
    def engines() -> dict[str, str]:
        return {
            "sqlite_version": SQLITE_VERSION,
            "vector_search": vec_index.load_error or "available",
        }

    @classmethod
    async def open(cls, locations: Locations, tuning: Tuning | None = None) -> Coffer:
        tuning = tuning or Tuning()
        locations.home.mkdir(parents=True, exist_ok=True)
        db = await Database(locations.db_path).open()
        coffer = cls(locations, db, tuning)
        try:
            await coffer.stores.activity.keep(tuning.activity_keep)
            await coffer.registry.load()
        except BaseException:
            await db.close()
            raise
        return coffer

    async def close(self) -> None:
        await self.indexing.stop()
        await self.embeddings.stop()
        await self.converter.close()
        await self.stores.db.close()

    async def __aenter__(self) -> Coffer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
