"""Composition root: the one place where the CLI, the API and the tests assemble the real parts."""

from __future__ import annotations

from functools import cached_property

from core.settings import Settings, get_settings
from knowledge.embeddings import Embedder
from knowledge.ingest import Ingestor
from knowledge.retrieval import Retriever
from knowledge.store import GraphStore
from knowledge.vector_index import VectorIndex


def build_store(settings: Settings | None = None) -> GraphStore:
    return GraphStore.connect(settings or get_settings())


def build_embedder(settings: Settings | None = None) -> Embedder:
    return Embedder.from_settings(settings or get_settings())


def build_index(store: GraphStore, embedder: Embedder, settings: Settings | None = None) -> VectorIndex:
    s = settings or get_settings()
    return VectorIndex(store, s.home / "index", embedder.model_name, embedder.dim)


def build_retriever(settings: Settings | None = None) -> Retriever:
    return Container(settings).retriever


class Container:
    """Lazily built, shared parts for one process (the embedding model is loaded once)."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or get_settings()

    @cached_property
    def store(self) -> GraphStore:
        return build_store(self.settings)

    @cached_property
    def embedder(self) -> Embedder:
        return build_embedder(self.settings)

    @cached_property
    def index(self) -> VectorIndex:
        return build_index(self.store, self.embedder, self.settings)

    @cached_property
    def retriever(self) -> Retriever:
        return Retriever(self.store, self.embedder, self.index)

    @cached_property
    def ingestor(self) -> Ingestor:
        return Ingestor(self.store, self.embedder)

    def close(self) -> None:
        if "store" in self.__dict__:
            if self.store.wrote_embeddings:
                self.store.sync_vector_index()  # so analysts' vector queries see what this process wrote
            self.store.close()
