"""Ingest records: upsert nodes and relationships, then embed the embeddable ones whose text changed."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from knowledge.embeddings import Embedder
from knowledge.models import Node, Relationship
from knowledge.store import EMBEDDED_LABELS, GraphStore


@dataclass
class IngestReport:
    nodes: int = 0
    relationships: int = 0
    embedded: int = 0
    by_label: dict[str, int] = field(default_factory=dict)


class Ingestor:
    def __init__(self, store: GraphStore, embedder: Embedder) -> None:
        self.store = store
        self.embedder = embedder

    def ingest(
        self,
        nodes: Sequence[Node],
        rels: Sequence[Relationship] = (),
        precomputed: dict[str, np.ndarray] | None = None,
    ) -> IngestReport:
        """Idempotent: the same batch twice leaves the graph as once. `precomputed` maps node key -> vector."""
        report = IngestReport()
        report.nodes = self.store.upsert_nodes(nodes)
        report.relationships = self.store.upsert_relationships(rels) if rels else 0
        for node in nodes:
            report.by_label[node.label] = report.by_label.get(node.label, 0) + 1
        report.embedded = self._embed(nodes, precomputed or {})
        return report

    def _embed(self, nodes: Sequence[Node], precomputed: dict[str, np.ndarray]) -> int:
        by_label: dict[str, dict[str, str]] = defaultdict(dict)
        for node in nodes:
            text = node.embedding_text()
            if node.label in EMBEDDED_LABELS and text:
                by_label[node.label][node.key_value()] = text
        total = 0
        for label, texts in by_label.items():
            keys = list(texts)
            hashes = dict(zip(keys, self.embedder.hashes([texts[k] for k in keys]), strict=True))
            stored = self.store.embedding_hashes(label, keys, self.embedder.model_name)
            todo = [k for k in keys if stored.get(k) != hashes[k]]
            if not todo:
                continue
            if all(k in precomputed for k in todo):
                vectors = np.stack([precomputed[k] for k in todo]).astype(np.float32)
            else:
                vectors = self.embedder.embed([texts[k] for k in todo])
            self.store.set_embeddings(label, todo, vectors, self.embedder.model_name, [hashes[k] for k in todo])
            total += len(todo)
        return total
