"""Composition root: builds Coffer's services over one data home. Surfaces use the
application services it exposes; the stores are built here and nowhere else."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from coffer_kernel.locations import Locations
from cofferd.application.documents.documents import Documents
from cofferd.application.documents.ingest import Ingest
from cofferd.application.documents.originals import Originals
from cofferd.application.documents.trash import PURGE_INTERVAL_S, RETENTION_DAYS, Trash
from cofferd.application.indexing.activity import Activity
from cofferd.application.indexing.conversion_queue import Conversions, Pages
from cofferd.application.indexing.embeddings import Embeddings, ModelCheck
from cofferd.application.indexing.indexing import (
    RECONCILE_INTERVAL_S,
    IndexingService,
    PeriodicJob,
)
from cofferd.application.indexing.knowledge_bases import KnowledgeBases
from cofferd.application.indexing.progress import ProgressBoard
from cofferd.application.indexing.registry import KBRegistry
from cofferd.application.indexing.reindexer import Reindexer
from cofferd.application.search.graph import Graph
from cofferd.application.search.retrieval import Retrieval
from cofferd.domain.budgets import DEFAULT as DEFAULT_BUDGET
from cofferd.domain.config import EmbeddingConfig
from cofferd.domain.events import (
    Converted,
    ConvertiblesAhead,
    DocumentsChanged,
    Events,
    FullPassWanted,
    IndexDamaged,
    LayoutChanged,
    UnconvertedFound,
)
from cofferd.domain.ports import Embedder, MarkdownConverter
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
from cofferd.surfaces.watcher import Watcher


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
    web_port: int | None = None  # the web page kept on from the start, on this port


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


@dataclass(frozen=True)
class Files:
    """The user's files and the data home's own folders, as the services reach them."""

    boundary: Boundary
    registry: KBRegistry
    policy: DocumentPolicy
    tree: FileDocsTree
    texts: DerivedTexts  # converted documents' text
    bin: FileTrash


@dataclass(frozen=True)
class IndexingRoom:
    """What keeps the index current (the indexing room)."""

    progress: ProgressBoard
    reindexer: Reindexer
    kbs: KnowledgeBases
    embeddings: Embeddings
    conversions: Conversions


@dataclass(frozen=True)
class DocumentsRoom:
    """What changes documents through the API (the documents room)."""

    documents: Documents
    trash: Trash
    ingest: Ingest
    originals: Originals


class Coffer:
    def __init__(self, locations: Locations, db: Database, tuning: Tuning, events: Events) -> None:
        self.locations = locations
        self.tuning = tuning
        self.events = events
        self.stores = stores = _stores(db, locations)
        self.boundary = boundary = Boundary(locations)
        # the pools of processes: converters (`add`'s, express, and the background's, which
        # `add` never waits behind), preparers, and one process per bundled model
        self.converters = ConverterPool(home=(locations.home, locations.converter_home))
        self.preparer = ProcessPreparer(
            boundary, tuning.workers, entry=WorkerEntry(prepare_main.__name__, prepare_main.REPLIES)
        )
        bundled = BundledModels()
        self.converter = self.converters.interactive
        files = _files(locations, boundary, self.converter.formats())
        self.registry, self.policy, self.texts = files.registry, files.policy, files.texts
        room = _indexing(
            stores,
            files,
            events,
            self.preparer,
            self.converters.background,
            lambda config: make_embedder(config, locations.models_dir, bundled),
            tuning,
            HomeScratch(locations.home, locations.converting_dir),
        )
        self.progress, self.reindexer, self.kbs = room.progress, room.reindexer, room.kbs
        self.embeddings, self.conversions = room.embeddings, room.conversions
        docs = _documents(stores, files, room, self.converter, locations, tuning)
        self.documents, self.trash, self.ingest = docs.documents, docs.trash, docs.ingest
        self.originals = docs.originals
        self.indexing = _indexing_service(room, docs.trash, tuning)
        self.retrieval, self.graph = _search(stores, files, room, docs.documents, locations)
        self.activity = Activity(self.kbs, stores.activity)
        _wire(events, self)

    def watcher(self) -> Watcher:
        """The watch of the KBs' files, told at once when a KB's folder comes or goes."""
        watcher = Watcher(self.policy, self.indexing)
        _wire_watcher(self.events, watcher)
        return watcher

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
        events = Events()  # first: the database publishes to it too
        db = await Database(locations.db_path, events).open()
        coffer = cls(locations, db, tuning, events)
        coffer.preparer.start()
        try:
            await coffer.stores.activity.keep(tuning.activity_keep)
            await coffer._trust_existing_links()
            await coffer.registry.load()
            if db.created and coffer.registry.all():  # every file of its KBs to be prepared:
                coffer.preparer.warm()  # the workers start beside the rest of the start
            await coffer._restore()
            await coffer.embeddings.choice.restore()
            await coffer.stores.index.merge_as_written()  # a bulk load a stop cut short
        except BaseException:
            await coffer.preparer.close()
            await db.close()
            raise
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

    async def _rebuild(self, damage: IndexDamaged) -> None:
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


def _stores(db: Database, locations: Locations) -> Stores:
    tracked = SqliteTrackedSources(db, locations)
    return Stores(
        db,
        SqliteDocumentIndex(db, tracked),
        SqliteDocumentCatalog(db),
        SqliteKeywordSearch(db),
        tracked,
        SqliteVectors(db),
        SqliteActivity(db),
    )


def _files(locations: Locations, boundary: Boundary, formats: Sequence[str]) -> Files:
    registry = KBRegistry(KBFiles(locations, boundary))
    policy = DocumentPolicy(
        locations,
        formats,
        boundary,
        lambda kb: tuple(found.config.index_formats) if (found := registry.get(kb)) else (),
    )
    return Files(
        boundary,
        registry,
        policy,
        FileDocsTree(locations, policy),
        DerivedTexts(locations.home, locations.derived_dir),
        FileTrash(locations, boundary),
    )


def _indexing(
    stores: Stores,
    files: Files,
    events: Events,
    preparer: ProcessPreparer,
    converter: MarkdownConverter,
    embedder: Callable[[EmbeddingConfig], Embedder],
    tuning: Tuning,
    scratch: HomeScratch,
) -> IndexingRoom:
    progress = ProgressBoard()
    budget = replace(DEFAULT_BUDGET, prepare_s=tuning.prepare_timeout_s)
    reindexer = Reindexer(
        stores.index,
        stores.activity,
        files.tree,
        files.registry,
        preparer,
        progress,
        budget,
        events=events,
    )
    kbs = KnowledgeBases(
        files.registry,
        files.registry.repo,
        stores.index,
        stores.activity,
        reindexer,
        events,
        vet=ModelCheck(embedder),
        credential_problem=credential_problem,
    )
    embeddings = Embeddings(kbs, stores.vectors, embedder, progress)
    conversions = Conversions(
        kbs,
        stores.index,
        files.tree,
        converter,
        files.texts,
        reindexer,
        progress,
        scratch,
        files.bin,
        events,
    )
    return IndexingRoom(progress, reindexer, kbs, embeddings, conversions)


def _documents(
    stores: Stores,
    files: Files,
    indexing: IndexingRoom,
    converter: MarkdownConverter,
    locations: Locations,
    tuning: Tuning,
) -> DocumentsRoom:
    kbs, reindexer, tree = indexing.kbs, indexing.reindexer, files.tree
    documents = Documents(kbs, stores.catalog, tree, reindexer, files.texts)
    trash = Trash(
        kbs,
        stores.index,
        stores.tracked,
        tree,
        reindexer,
        documents,
        files.bin,
        retention_days=tuning.trash_retention_days,
    )
    ingest = Ingest(
        kbs,
        stores.catalog,
        stores.tracked,
        tree,
        reindexer,
        documents,
        converter,
        files.policy,
        data_home=locations.home,
        agent_roots=tuning.agent_roots,
        private_folders=private_folders(),
    )
    return DocumentsRoom(documents, trash, ingest, Originals(ingest))


def _indexing_service(indexing: IndexingRoom, trash: Trash, tuning: Tuning) -> IndexingService:
    return IndexingService(
        indexing.kbs,
        indexing.reindexer,
        indexing.embeddings,
        indexing.conversions,
        jobs=(PeriodicJob("trash-purge", PURGE_INTERVAL_S, trash.purge_all, at_start=True),),
        reconcile_interval_s=tuning.reconcile_interval_s,
    )


def _search(
    stores: Stores, files: Files, indexing: IndexingRoom, documents: Documents, locations: Locations
) -> tuple[Retrieval, Graph]:
    retrieval = Retrieval(
        indexing.kbs,
        stores.catalog,
        stores.keywords,
        stores.vectors,
        Ripgrep(locations, files.policy, converted_files=stores.index.converted_files),
        indexing.embeddings,
        files.tree,
        Pages(files.texts),
    )
    graph = Graph(indexing.kbs, documents, SqliteGraph(stores.db), files.tree)
    return retrieval, graph


def _wire(events: Events, coffer: Coffer) -> None:
    """Every subscriber of the events the services publish, in the order each is told."""
    conversions, indexing = coffer.conversions, coffer.indexing
    events.subscribe(DocumentsChanged, lambda _: coffer.embeddings.wake())
    events.subscribe(ConvertiblesAhead, lambda e: conversions.expect(e.kb))
    events.subscribe(UnconvertedFound, lambda e: conversions.submit(e.kb, e.relpath, e.digest))
    events.subscribe(Converted, lambda e: indexing.paths_changed(e.kb, [e.relpath]))
    events.subscribe(FullPassWanted, lambda e: indexing.request_full(e.kb))
    events.subscribe(IndexDamaged, coffer._rebuild)


def _wire_watcher(events: Events, watcher: Watcher) -> None:
    """The file watcher's, once it is made (Coffer.watcher)."""
    events.subscribe(LayoutChanged, lambda _: watcher.look())
