#!/usr/bin/env python3
"""Embedding throughput of a cold mine (issue 22 item 4): thought texts of realistic length, the real model.

A first mine embeds every thought it makes (OpenBLAS: ~1,600 thoughts and ~300 ideas). This bench builds
thought texts the way the miner does (knowledge.models.Thought.embedding_text over a title, a
distill.describe-shaped description and the example's identifiers), embeds them with the bundled model
under ONNX Runtime, and compares:

  before: the model's 256 tokens, texts in mining order, batches of 64, one thread (the previous encoder)
  after:  knowledge.embeddings as it is (EMBED_MAX_TOKENS, batches of similar length, every core for bulk)

It reports wall seconds, CPU seconds (all threads) and texts per second, and projects the embedding time of
a cold OpenBLAS mine. No cache is used (every text is new).

    python scripts/bench_embed.py [--texts 600] [--repeat 2] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from pathlib import Path

import numpy as np

from core.settings import Settings
from knowledge import embeddings
from knowledge.models import Thought
from knowledge.taxonomy import TECHNIQUE_DESCRIPTIONS, Isa, Operator, Technique

OPENBLAS_TEXTS = 1_586 + 300  # thoughts + ideas of a cold OpenBLAS mine (docs/MINERS.md, issue 12 figures)
REPOS = ["OpenBLAS", "ggml"]
TITLES = [
    "Optimize {op} kernel for {cpu} with {isa} intrinsics",
    "kernel/{arch}: faster {op} using {tech} ({cpu})",
    "Add {isa} {op} micro-kernel, {n} accumulators",
    "ggml : improve {op} performance on {cpu} ({isa})",
    "{isa}: unroll the {op} inner loop and reduce once after it",
]
WHY = [
    "Using several accumulators hides the FMA latency so the pipeline never stalls.",
    "Loading the panel once and reusing it from registers cuts memory bandwidth by half.",
    "The horizontal reduction was done every iteration; now it is done once after the loop, which is faster.",
    "",
]
IDENTS = [
    f"{p}_{t}m{m}"
    for p in ("__riscv_vle32_v", "__riscv_vfmacc_vv", "__riscv_vfredusum_vs", "__riscv_vwmacc_vv", "__riscv_vse32_v")
    for t in ("f32", "i16", "i8")
    for m in (1, 2, 4, 8)
] + [
    "_mm256_fmadd_ps",
    "_mm256_loadu_ps",
    "_mm512_reduce_add_ps",
    "vfmaq_f32",
    "vld1q_f32",
    "svmla_f32_x",
    "svwhilelt_b32",
    "vaddvq_f32",
    "BLASLONG",
    "FLOAT",
    "sumf",
    "acc0",
    "acc1",
    "vx",
    "vy",
    "block_q8_0",
    "GGML_FP16_TO_FP32",
]


def thought_texts(n: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        op = rng.choice(list(Operator)).value
        isa = rng.choice(list(Isa)).value
        tech = rng.choice(list(Technique))
        title = rng.choice(TITLES).format(
            op=op,
            isa=isa.upper(),
            cpu=rng.choice(["X60", "C910", "Zen 4", "A64FX", "SkylakeX"]),
            arch=rng.choice(["riscv64", "x86_64", "arm64"]),
            tech=tech.value,
            n=rng.choice([2, 4, 8]),
        )
        why = rng.choice(WHY)
        description = " ".join(
            [
                f"{rng.choice(REPOS)} {rng.getrandbits(36):09x}: {title}.",
                f"{TECHNIQUE_DESCRIPTIONS[tech]} in {op} code ({isa}).",
                f"The change adds {rng.randint(8, 90)} SIMD intrinsic calls.",
                f"Why: {why}" if why else "Why: the commit gives no reason beyond its title.",
                f"Claimed: {rng.uniform(1.1, 3):.2f}x ('{op} {rng.uniform(1.1, 3):.1f}x faster on {isa}')."
                if rng.random() < 0.3
                else "",
            ]
        ).strip()
        idents = " ".join(sorted(rng.sample(IDENTS, rng.randint(12, 40))))
        t = Thought(
            id=f"t{i}",
            idea_id="i",
            title=f"{title} [{tech.value} on {isa}]",
            description=description,
            identifiers=idents,
            technique=tech,
        )
        out.append(t.embedding_text() or "")
    return out


def _session(graph: Path, threads: int):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])


def encode_before(texts: list[str], onnx_dir: Path, name: str) -> np.ndarray:
    """The previous encoder: 256 tokens, mining order, batches of 64, one thread."""
    from tokenizers import Tokenizer

    graph, tok_path, meta_path = embeddings._OnnxMeanPooler._paths(onnx_dir, name)
    meta = json.loads(meta_path.read_text())
    tok = Tokenizer.from_file(str(tok_path))
    tok.enable_truncation(max_length=meta["max_seq_length"])
    tok.enable_padding(pad_id=meta["pad_id"], pad_token=meta["pad_token"])
    pooler = embeddings._OnnxMeanPooler(tok, _session(graph, 1), meta["dim"])
    out = []
    for i in range(0, len(texts), 64):
        encs = tok.encode_batch(texts[i : i + 64])
        ids = np.asarray([e.ids for e in encs], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encs], dtype=np.int64)
        hidden = pooler._session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
        w = mask[..., None].astype(np.float32)
        pooled = (hidden * w).sum(axis=1) / np.maximum(w.sum(axis=1), 1e-9)
        out.append(pooled / np.linalg.norm(pooled, axis=1, keepdims=True))
    return np.concatenate(out)


def measure(fn) -> tuple[float, float, np.ndarray]:
    w, c = time.perf_counter(), time.process_time()
    v = fn()
    return time.perf_counter() - w, time.process_time() - c, v


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--texts", type=int, default=600)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    settings = Settings()
    onnx_dir = settings.home / "cache" / "onnx"
    name = settings.embedding_model
    texts = thought_texts(args.texts)
    after_enc = embeddings._LazySentenceTransformer(name, settings.embedding_batch_size, onnx_dir)
    after_enc.encode(texts[:40])  # load and export once, outside the timing
    encode_before(texts[:8], onnx_dir, name)
    rows = {"before": [], "after": []}
    for _ in range(args.repeat):
        rows["before"].append(measure(lambda: encode_before(texts, onnx_dir, name)))
        rows["after"].append(measure(lambda: after_enc.encode(texts)))
    vb, va = rows["before"][0][2], rows["after"][0][2]
    result = {
        "texts": len(texts),
        "mean_chars": round(sum(map(len, texts)) / len(texts)),
        "cores": os.cpu_count(),
        "load_1min": round(os.getloadavg()[0], 1),
        "cosine_after_vs_before": {"median": float(np.median((va * vb).sum(1))), "min": float((va * vb).sum(1).min())},
    }
    for k, rs in rows.items():
        wall = min(r[0] for r in rs)
        cpu = min(r[1] for r in rs)
        threads = 1 if k == "before" else min(2, os.cpu_count() or 1)
        result[k] = {
            "wall_s": round(wall, 2),
            "cpu_s": round(cpu, 2),
            "texts_per_wall_s": round(len(texts) / wall, 1),
            "texts_per_cpu_s": round(len(texts) / cpu, 1),
            # a quiet 2-core machine: the CPU time spread over the threads the encoder uses
            "openblas_projection_s": round(OPENBLAS_TEXTS * cpu / len(texts) / threads, 1),
        }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for k, v in result.items():
            print(f"{k}: {v}")


if __name__ == "__main__":
    main()
