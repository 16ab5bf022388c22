"""Ingest records: upsert nodes and relationships, then embed the embeddable ones whose text changed."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from knowledge.embeddings import Embedder
from knowledge.models import Node, Relationship
from knowledge.store import EMBEDDED_LABELS, GraphStore, embedding_properties


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
        """Idempotent: the same batch twice leaves the graph as once.

        Embeddings of new or changed text are written in the same pass as the node (`precomputed` maps a
        node key to its vector, e.g. from a benchmark or another model run).
        """
        extra = self._embeddings(nodes, precomputed or {})
        report = IngestReport(embedded=len(extra))
        report.nodes = self.store.upsert_nodes(nodes, extra=extra)
        report.relationships = self.store.upsert_relationships(rels) if rels else 0
        for node in nodes:
            report.by_label[node.label] = report.by_label.get(node.label, 0) + 1
        return report

    def _embeddings(self, nodes: Sequence[Node], precomputed: dict[str, np.ndarray]) -> dict[str, dict]:
        """Embedding properties for the nodes whose text is new or changed since it was last embedded."""
        texts: dict[str, dict[str, str]] = defaultdict(dict)
        for node in nodes:
            text = node.embedding_text()
            if node.label in EMBEDDED_LABELS and text:
                texts[node.label][node.key_value()] = text
        todo: dict[str, tuple[str, str]] = {}  # key -> (text, hash)
        for label, by_key in texts.items():
            keys = list(by_key)
            hashes = dict(zip(keys, self.embedder.hashes([by_key[k] for k in keys]), strict=True))
            stored = self.store.embedding_hashes(label, keys, self.embedder.model_name)
            todo.update({k: (by_key[k], hashes[k]) for k in keys if stored.get(k) != hashes[k]})
        if not todo:
            return {}
        missing = [k for k in todo if k not in precomputed]
        fresh = dict(zip(missing, self.embedder.embed([todo[k][0] for k in missing]), strict=True))
        gen = self.store.bump_embedding_generation()
        model = self.embedder.model_name
        return {
            k: embedding_properties(precomputed[k] if k in precomputed else fresh[k], h, model, gen)
            for k, (_, h) in todo.items()
        }
