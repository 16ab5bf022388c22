"""What the optimizer needs from the process it runs in; the composition root (service.bootstrap.Container)
provides it, so the agent never imports the service layer above it."""

from __future__ import annotations

from typing import Protocol

from core.settings import Settings
from knowledge.embeddings import Embedder
from knowledge.ingest import Ingestor
from knowledge.retrieval import Retriever
from knowledge.store import GraphStore


class AgentParts(Protocol):
    """The shared parts of one process: settings, the graph, the embedding model, retrieval, ingest."""

    @property
    def settings(self) -> Settings: ...

    @property
    def store(self) -> GraphStore: ...

    @property
    def embedder(self) -> Embedder: ...

    @property
    def retriever(self) -> Retriever: ...

    @property
    def ingestor(self) -> Ingestor: ...
