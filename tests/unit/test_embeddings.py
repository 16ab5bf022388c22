"""The embedding model under ONNX Runtime gives the vectors sentence-transformers gives under torch; concurrent
search queries share one model call and each gets its own vector."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from core.settings import Settings
from knowledge.embeddings import (
    BULK_TEXTS,
    BUNDLED_MODEL,
    EMBED_MAX_TOKENS,
    Embedder,
    QueryBatcher,
    _load_sentence_transformer,
)

TEXTS = [
    "vfmacc with four accumulators for the dot kernel",
    "pack the B panel so the micro-kernel reads it contiguously",
    "x",
    "a much longer description of a register blocking scheme " * 20,  # truncated at EMBED_MAX_TOKENS
]


def test_onnx_vectors_match_torch_and_the_export_is_cached(tmp_path: Path) -> None:
    embedder = Embedder.from_settings(Settings(home=tmp_path))
    got = embedder.embed(TEXTS)
    exported = sorted(p.name for p in (tmp_path / "cache" / "onnx").iterdir())
    assert exported == [f"{BUNDLED_MODEL}{ext}" for ext in (".json", ".onnx", ".tokenizer.json")]

    model = _load_sentence_transformer(BUNDLED_MODEL)
    model.max_seq_length = EMBED_MAX_TOKENS  # both sides embed the same first tokens of a long text
    reference = model.encode(TEXTS, normalize_embeddings=True)
    assert got.shape == (4, 384) and got.dtype == np.float32
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert float(np.min((got * reference).sum(axis=1))) > 0.9999

    # A second process loads the cached export, without importing torch, and gives the same vectors.
    code = (
        "import sys, numpy as np; from pathlib import Path; from core.settings import Settings; "
        "from knowledge.embeddings import Embedder; "
        f"e = Embedder.from_settings(Settings(home=Path({str(tmp_path)!r}))); "
        f"v = e.embed([{TEXTS[0]!r} + ' again']); assert e.dim == 384; "
        "print('torch' in sys.modules, v.shape)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0] == "False"
    again = Embedder.from_settings(Settings(home=tmp_path)).embed([TEXTS[1] + " again"])
    assert float((again[0] * reference[1]).sum()) > 0.95  # a new text, not a cache hit

    # A mine's batch: texts of mixed lengths, embedded in length order on every core, come back in order.
    texts = [f"{t} {i} " * (1 + i % 7) for i, t in enumerate(TEXTS * 10)]
    bulk = embedder._encoder.encode(texts)
    alone = np.stack([embedder._encoder.encode([t])[0] for t in texts])
    assert len(texts) >= BULK_TEXTS and float(np.min((bulk * alone).sum(axis=1))) > 0.9999


def test_query_batcher_coalesces_concurrent_queries_and_returns_each_its_own_vector() -> None:
    gate, calls = threading.Event(), []

    def embed(texts: list[str]) -> np.ndarray:
        calls.append(list(texts))
        if len(calls) == 1:
            assert gate.wait(10)  # the first call is in the model while the others arrive
        if "boom" in texts:
            raise ValueError("model failed")
        return np.array([[len(t), ord(t[-1])] for t in texts], dtype=np.float32)

    batcher = QueryBatcher(embed, max_batch=4)
    got: dict[str, object] = {}

    def ask(text: str) -> None:
        try:
            got[text] = tuple(batcher(text))
        except ValueError as e:
            got[text] = str(e)

    first = threading.Thread(target=ask, args=("a",))
    first.start()
    while not calls:
        time.sleep(0.001)
    later = ["bb", "ccc", "boom", "dddd", "ee", "f"]
    threads = [threading.Thread(target=ask, args=(t,)) for t in later]
    for th in threads:
        th.start()
    while len(batcher._queue) < len(later):
        time.sleep(0.001)
    gate.set()
    for th in [first, *threads]:
        th.join(10)
    assert calls[0] == ["a"] and sorted(map(len, calls[1:])) == [2, 4]  # 6 queued: one call of 4, one of 2
    assert sorted(t for c in calls[1:] for t in c) == sorted(later)
    assert (batcher.calls, batcher.texts) == (3, 7)
    failed = next(c for c in calls if "boom" in c)
    for text in ["a", *later]:
        want = "model failed" if text in failed else (float(len(text)), float(ord(text[-1])))
        assert got[text] == want, text
