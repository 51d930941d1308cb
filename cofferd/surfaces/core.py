"""Composition root: builds Coffer's services over one data home. Surfaces use the
application services it exposes; the stores are built here and nowhere else."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from coffer_kernel.locations import Locations
from cofferd.application.documents.documents import Documents
from cofferd.application.documents.ingest import Ingest
from cofferd.application.documents.originals import Originals
from cofferd.application.documents.trash import RETENTION_DAYS, Trash
from cofferd.application.indexing.activity import Activity
from cofferd.application.indexing.conversion_queue import Conversions, Pages
from cofferd.application.indexing.embeddings import Embeddings
from cofferd.application.indexing.indexing import RECONCILE_INTERVAL_S, IndexingService
from cofferd.application.indexing.knowledge_bases import KnowledgeBases
from cofferd.application.indexing.progress import ProgressBoard
from cofferd.application.indexing.registry import KBRegistry
from cofferd.application.indexing.reindexer import Reindexer
from cofferd.application.search.graph import Graph
from cofferd.application.search.retrieval import Retrieval
from cofferd.domain.budgets import DEFAULT as DEFAULT_BUDGET
from cofferd.infrastructure.conversion.converter import ConverterPool
from cofferd.infrastructure.conversion.derived_texts import DerivedTexts
from cofferd.infrastructure.files.confinement import Boundary, HomeScratch
from cofferd.infrastructure.files.document_policy import DocumentPolicy
from cofferd.infrastructure.files.grep import Ripgrep
from cofferd.infrastructure.files.kb_folders import KBFiles
from cofferd.infrastructure.files.trash_bin import FileTrash
from cofferd.infrastructure.files.tree_scan import FileDocsTree
from cofferd.infrastructure.models.credentials import credential_problem
from cofferd.infrastructure.models.embedders import BundledModels, make_embedder
from cofferd.infrastructure.sandbox import private_folders
from cofferd.infrastructure.storage import cjk_tokens, vec_index
from cofferd.infrastructure.storage.activity_store import KEEP_DEFAULT, SqliteActivity
from cofferd.infrastructure.storage.database import Database
from cofferd.infrastructure.storage.document_rows import SqliteDocumentCatalog
from cofferd.infrastructure.storage.graph_store import SqliteGraph
from cofferd.infrastructure.storage.keyword_search import SqliteKeywordSearch
from cofferd.infrastructure.storage.sqlite import SQLITE_VERSION
from cofferd.infrastructure.storage.tracked_sources import SqliteTrackedSources
from cofferd.infrastructure.storage.vector_store import SqliteVectors
from cofferd.infrastructure.storage.write_path import SqliteDocumentIndex
from cofferd.infrastructure.workers.pool import WorkerEntry
from cofferd.infrastructure.workers.prepare_pool import ProcessPreparer
from cofferd.surfaces.processes import prepare_main


def default_workers() -> int:
    """One per core this process may run on. They run at a lower CPU priority than the
    daemon (and the express worker that serves saves), so serving and writing go first;
    measured on 2 cores, one fewer left a core idle: 1.2-1.4x slower cold indexing."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on macOS
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class Tuning:
    """Daemon-wide settings (flags and environment; see cofferd --help)."""

    reconcile_interval_s: float = RECONCILE_INTERVAL_S
    activity_keep: int = KEEP_DEFAULT
    agent_roots: tuple[Path, ...] = ()  # folders agents may add files from (none by default)
    trash_retention_days: int = RETENTION_DAYS
    workers: int = field(default_factory=default_workers)  # preparing documents
    prepare_timeout_s: float = DEFAULT_BUDGET.prepare_s  # one document, in a worker


@dataclass(frozen=True)
class Stores:
    """The infrastructure behind the services (tests and benchmarks inspect it)."""

    db: Database
    index: SqliteDocumentIndex
    catalog: SqliteDocumentCatalog
    keywords: SqliteKeywordSearch
    tracked: SqliteTrackedSources
    vectors: SqliteVectors
    activity: SqliteActivity


class Coffer:
    def __init__(self, locations: Locations, db: Database, tuning: Tuning) -> None:
        self.locations = locations
        self.tuning = tuning
        tracked = SqliteTrackedSources(db, locations)
        self.stores = stores = Stores(
            db,
            SqliteDocumentIndex(db, tracked),
            SqliteDocumentCatalog(db),
            SqliteKeywordSearch(db),
            tracked,
            SqliteVectors(db),
            SqliteActivity(db),
        )
        # one pool of converter processes: `add`'s (express) and the background's
        self.converters = ConverterPool(home=(locations.home, locations.converter_home))
        self.converter = self.converters.interactive
        self.boundary = boundary = Boundary(locations)
        self.registry = registry = KBRegistry(KBFiles(locations, boundary))
        self.policy = DocumentPolicy(
            locations,
            self.converter.formats(),
            boundary,
            lambda kb: tuple(found.config.index_formats) if (found := registry.get(kb)) else (),
        )
        tree = FileDocsTree(locations, self.policy)
        self.progress = ProgressBoard()
        self.preparer = ProcessPreparer(
            boundary, tuning.workers, entry=WorkerEntry(prepare_main.__name__, prepare_main.REPLIES)
        )
        self.reindexer = Reindexer(
            stores.index,
            stores.activity,
            tree,
            self.registry,
            self.preparer,
            self.progress,
            replace(DEFAULT_BUDGET, prepare_s=tuning.prepare_timeout_s),
        )
        self.kbs = KnowledgeBases(
            self.registry, self.registry.repo, stores.index, stores.activity, self.reindexer
        )
        bundled = BundledModels()  # one process per bundled model, for every KB using it
        self.embeddings = Embeddings(
            self.kbs,
            stores.vectors,
            lambda config: make_embedder(config, locations.models_dir, bundled),
            self.progress,
        )
        self.reindexer.on_change = self.embeddings.wake
        self.kbs.vet = self.embeddings.check
        self.kbs.credential_problem = credential_problem
        grep = Ripgrep(locations, self.policy, converted_files=stores.index.converted_files)
        self.texts = texts = DerivedTexts(locations.home, locations.derived_dir)
        self.retrieval = Retrieval(
            self.kbs,
            stores.catalog,
            stores.keywords,
            stores.vectors,
            grep,
            self.embeddings,
            tree,
            Pages(texts),
        )
        self.documents = Documents(self.kbs, stores.catalog, tree, self.reindexer, texts)
        self.trash = Trash(
            self.kbs,
            stores.index,
            stores.tracked,
            tree,
            self.reindexer,
            self.documents,
            FileTrash(locations, boundary),
            retention_days=tuning.trash_retention_days,
        )
        self.graph = Graph(self.kbs, self.documents, SqliteGraph(db), tree)
        self.ingest = Ingest(
            self.kbs,
            stores.catalog,
            stores.tracked,
            tree,
            self.reindexer,
            self.documents,
            self.converter,
            self.policy,
            data_home=locations.home,
            agent_roots=tuning.agent_roots,
            private_folders=private_folders(),
        )
        self.originals = Originals(self.ingest)
        self.activity = Activity(self.kbs, stores.activity)
        self.conversions = Conversions(
            self.kbs,
            stores.index,
            tree,
            self.converters.background,  # `add` never waits behind it
            texts,
            self.reindexer,
            self.progress,
            HomeScratch(locations.home, locations.converting_dir),
            self.trash.bin,
        )
        self.indexing = IndexingService(
            self.kbs,
            self.reindexer,
            self.embeddings,
            self.trash,
            self.conversions,
            reconcile_interval_s=tuning.reconcile_interval_s,
        )
        self.kbs.schedule_pass = self.indexing.request_full

    def engines(self) -> dict[str, Any]:
        return {
            "sqlite_version": SQLITE_VERSION,
            "vector_search": vec_index.load_error or "available",
            "cjk_tokenizer": cjk_tokens.load_error or "native",
            "index_rebuilds": self.stores.db.damage,
        }

    @classmethod
    async def open(cls, locations: Locations, tuning: Tuning | None = None) -> Coffer:
        tuning = tuning or Tuning()
        locations.home.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(locations.home, 0o700)  # it holds the index: the text of every note
        db = await Database(locations.db_path).open()
        coffer = cls(locations, db, tuning)
        coffer.preparer.start()
        try:
            await coffer.stores.activity.keep(tuning.activity_keep)
            await coffer._trust_existing_links()
            await coffer.registry.load()
            await coffer._restore()
        except BaseException:
            await coffer.preparer.close()
            await db.close()
            raise
        db.on_damage = coffer._rebuild
        return coffer

    async def check_index(self) -> None:
        """Read the whole index once (damage in the middle shows only on reading); a
        damaged one is moved aside and rebuilt from the files. At start, once the first
        reconciles are done: the check takes a core for seconds in a large index, and
        they are what start-up waits for."""
        await self.indexing.first_passes()
        await self.stores.db.check()

    async def _trust_existing_links(self) -> None:
        """Attached folders from before their identity was recorded: those this machine
        has indexed are recorded as attached here, once (kb_folders.trust_existing_links)."""
        repo = self.registry.repo
        unrecorded = await asyncio.to_thread(repo.unrecorded_links)
        if unrecorded is None:
            return  # done once already: no document counts at start
        indexed = [
            name for name in unrecorded if (await self.stores.index.metrics(name))["documents"]
        ]
        await asyncio.to_thread(repo.trust_existing_links, indexed)

    async def _restore(self) -> None:
        """What the index holds that files cannot tell: restored from the data home."""
        names = [kb.name for kb in self.registry.all()]
        await self.stores.tracked.restore(names)

    async def _rebuild(self, reason: str) -> None:
        """The database was damaged and replaced by an empty one: rebuild it from the files."""
        await self.stores.activity.keep(self.tuning.activity_keep)
        await self._restore()
        self.reindexer.forget_all_skipped()
        self.indexing.request_full()

    async def close(self) -> None:
        await self.indexing.stop()
        await self.embeddings.close()
        await self.preparer.close()
        await self.converters.close()
        await self.stores.db.close()

    async def __aenter__(self) -> Coffer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
