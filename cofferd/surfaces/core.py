"""Composition root: builds Coffer's services over one data home."""

from __future__ import annotations

from cofferd.application.documents import Documents
from cofferd.application.embeddings import Embeddings
from cofferd.application.ingest import Ingest
from cofferd.application.knowledge_bases import KnowledgeBases
from cofferd.application.locks import KBLocks
from cofferd.application.reindexer import Reindexer
from cofferd.application.retrieval import Retrieval
from cofferd.infrastructure.conversion import WorkerConverter
from cofferd.infrastructure.database import Database
from cofferd.infrastructure.docs_tree import FileDocsTree
from cofferd.infrastructure.embedders import make_embedder
from cofferd.infrastructure.grep import Ripgrep
from cofferd.infrastructure.index_store import SqliteIndexStore
from cofferd.infrastructure.kb_files import KBFiles
from cofferd.infrastructure.paths import Locations


class Coffer:
    def __init__(self, locations: Locations, db: Database) -> None:
        self.locations = locations
        self.db = db
        self.store = SqliteIndexStore(db)
        self.tree = FileDocsTree(locations)
        self.locks = KBLocks()
        self.reindexer = Reindexer(self.store, self.tree, self.locks)
        self.kbs = KnowledgeBases(KBFiles(locations), self.store, self.reindexer, self.locks)
        self.grep = Ripgrep(locations)
        self.embeddings = Embeddings(
            self.kbs, self.store, lambda config: make_embedder(config, locations.models_dir)
        )
        self.reindexer.on_change = self.embeddings.wake
        self.retrieval = Retrieval(self.kbs, self.store, self.store, self.grep, self.embeddings)
        self.documents = Documents(self.kbs, self.store, self.tree, self.reindexer)
        self.converter = WorkerConverter()
        self.ingest = Ingest(
            self.kbs, self.store, self.tree, self.reindexer, self.documents, self.converter
        )

    @classmethod
    async def open(cls, locations: Locations) -> Coffer:
        locations.home.mkdir(parents=True, exist_ok=True)
        db = await Database(locations.db_path).open()
        return cls(locations, db)

    async def close(self) -> None:
        await self.embeddings.stop()
        await self.converter.close()
        await self.db.close()

    async def __aenter__(self) -> Coffer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
