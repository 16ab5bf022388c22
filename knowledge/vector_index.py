"""The FAISS index: a persisted cache of the embeddings stored on graph nodes.

It records the graph's embedding generation it reflects. When the graph has moved on it catches up with
the nodes written since (incremental), and rebuilds from scratch when missing, unreadable, or when the
counts disagree (nodes were deleted). Filterable attributes live beside the vectors so a filtered search
never needs the graph.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path

import faiss
import numpy as np

from knowledge.store import GraphStore

log = logging.getLogger(__name__)
ATTRS = ("isa", "operator", "technique", "target")


@dataclass
class VectorHit:
    label: str
    key: str
    score: float


@dataclass
class _Entries:
    labels: list[str] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    attrs: dict[str, list[str]] = field(default_factory=lambda: {a: [] for a in ATTRS})
    vectors: list[np.ndarray] = field(default_factory=list)


class VectorIndex:
    def __init__(self, store: GraphStore, directory: Path, model: str, dim: int) -> None:
        self._store = store
        self._dir = directory
        self.model = model
        self.dim = dim
        self._lock = threading.Lock()
        self._index: faiss.IndexFlatIP | None = None
        self._generation = -1
        self._labels = np.array([], dtype=object)
        self._keys = np.array([], dtype=object)
        self._attrs: dict[str, np.ndarray] = {a: np.array([], dtype=object) for a in ATTRS}
        self._pos: dict[tuple[str, str], int] = {}

    @property
    def _stem(self) -> Path:
        return self._dir / f"faiss-{self.model.replace('/', '_')}"

    @property
    def size(self) -> int:
        return 0 if self._index is None else self._index.ntotal

    @property
    def generation(self) -> int:
        return self._generation

    # -- freshness ---------------------------------------------------------------------------------------

    def ensure_fresh(self) -> str:
        """Bring the index up to date with the graph. Returns what was done: fresh|loaded|updated|rebuilt."""
        with self._lock:
            graph_gen = self._store.embedding_generation()
            action = "fresh"
            if self._index is None:
                if not self._load():
                    self._rebuild(graph_gen)
                    return "rebuilt"
                action = "loaded"
            if self._generation != graph_gen:
                self._catch_up(graph_gen)
                action = "updated"
            if action != "fresh" and self.size != self._store.embedded_count(self.model):
                self._rebuild(graph_gen)  # nodes were deleted or the file predates them
                return "rebuilt"
            return action

    def _rebuild(self, graph_gen: int) -> None:
        log.info("rebuilding FAISS index from the graph")
        self._set(_Entries(), graph_gen, reset=True)
        self._catch_up(graph_gen, since=0)

    def _catch_up(self, graph_gen: int, since: int | None = None) -> None:
        since = self._generation if since is None else since
        entries = _Entries()
        for page in self._store.iter_embeddings(self.model, since_generation=since):
            for r in page:
                if len(r["v"]) != self.dim:
                    continue  # written by a model with another dimension under the same name: ignore
                entries.labels.append(r["label"])
                entries.keys.append(r["k"])
                for a in ATTRS:
                    entries.attrs[a].append(r.get(a) or "")
                entries.vectors.append(np.asarray(r["v"], dtype=np.float32))
        self._set(entries, graph_gen, reset=False)
        self._save()

    def _set(self, e: _Entries, generation: int, reset: bool) -> None:
        if reset or self._index is None:
            self._index = faiss.IndexFlatIP(self.dim)
            self._labels = np.array([], dtype=object)
            self._keys = np.array([], dtype=object)
            self._attrs = {a: np.array([], dtype=object) for a in ATTRS}
            self._pos = {}
        # Replaced vectors: rewrite in place (flat index storage is a plain float array).
        new_rows, new_idx = [], []
        flat = (
            faiss.rev_swig_ptr(self._index.get_xb(), self.size * self.dim).reshape(-1, self.dim) if self.size else None
        )
        for i, (label, key) in enumerate(zip(e.labels, e.keys, strict=True)):
            pos = self._pos.get((label, key))
            if pos is not None and flat is not None:
                flat[pos] = e.vectors[i]
                for a in ATTRS:
                    self._attrs[a][pos] = e.attrs[a][i]
            else:
                new_idx.append(i)
                new_rows.append(e.vectors[i])
        if new_rows:
            start = self.size
            self._index.add(np.stack(new_rows))
            self._labels = np.concatenate([self._labels, np.array([e.labels[i] for i in new_idx], dtype=object)])
            self._keys = np.concatenate([self._keys, np.array([e.keys[i] for i in new_idx], dtype=object)])
            for a in ATTRS:
                self._attrs[a] = np.concatenate(
                    [self._attrs[a], np.array([e.attrs[a][i] for i in new_idx], dtype=object)]
                )
            for j, i in enumerate(new_idx):
                self._pos[(e.labels[i], e.keys[i])] = start + j
        self._generation = generation

    # -- persistence -------------------------------------------------------------------------------------

    def _save(self) -> None:
        self._dir.mkdir(parents=True, exist_ok=True)
        tmp = self._stem.with_suffix(".tmp")
        faiss.write_index(self._index, str(tmp))
        meta = {
            "model": self.model,
            "dim": self.dim,
            "generation": self._generation,
            "labels": self._labels.tolist(),
            "keys": self._keys.tolist(),
            "attrs": {a: v.tolist() for a, v in self._attrs.items()},
        }
        tmp_meta = self._stem.with_suffix(".json.tmp")
        tmp_meta.write_text(json.dumps(meta))
        tmp.replace(self._stem.with_suffix(".faiss"))
        tmp_meta.replace(self._stem.with_suffix(".json"))

    def _load(self) -> bool:
        idx_path, meta_path = self._stem.with_suffix(".faiss"), self._stem.with_suffix(".json")
        if not (idx_path.exists() and meta_path.exists()):
            return False
        try:
            index = faiss.read_index(str(idx_path))
            meta = json.loads(meta_path.read_text())
            if meta["dim"] != self.dim or index.ntotal != len(meta["keys"]):
                return False
        except (RuntimeError, ValueError, KeyError, OSError) as err:
            log.warning("FAISS index at %s unreadable (%s): rebuilding", idx_path, err)
            return False
        self._index = index
        self._generation = meta["generation"]
        self._labels = np.array(meta["labels"], dtype=object)
        self._keys = np.array(meta["keys"], dtype=object)
        self._attrs = {a: np.array(meta["attrs"][a], dtype=object) for a in ATTRS}
        self._pos = {(lb, k): i for i, (lb, k) in enumerate(zip(meta["labels"], meta["keys"], strict=True))}
        return True

    # -- search ------------------------------------------------------------------------------------------

    def search(
        self, vector: np.ndarray, k: int, labels: set[str] | None = None, where: dict[str, str] | None = None
    ) -> list[VectorHit]:
        """Top-k by cosine; `labels` and `where` (attribute equality) filter before ranking."""
        if self._index is None or self.size == 0:
            return []
        q = np.asarray(vector, dtype=np.float32).reshape(1, -1)
        mask = self._mask(labels, where)
        if mask is None:
            scores, ids = self._index.search(q, min(k, self.size))
            return [self._hit(int(i), float(s)) for s, i in zip(scores[0], ids[0], strict=True) if i >= 0]
        candidates = np.flatnonzero(mask)
        if len(candidates) == 0:
            return []
        sel = faiss.SearchParameters(sel=faiss.IDSelectorBatch(candidates.astype(np.int64)))
        scores, ids = self._index.search(q, min(k, len(candidates)), params=sel)
        return [self._hit(int(i), float(s)) for s, i in zip(scores[0], ids[0], strict=True) if i >= 0]

    def _mask(self, labels: set[str] | None, where: dict[str, str] | None) -> np.ndarray | None:
        mask = None
        if labels:
            mask = np.isin(self._labels, list(labels))
        for attr, value in (where or {}).items():
            m = self._attrs[attr] == value
            mask = m if mask is None else mask & m
        return mask

    def _hit(self, i: int, score: float) -> VectorHit:
        return VectorHit(self._labels[i], self._keys[i], score)
