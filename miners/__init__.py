"""Miners: any git history -> classified optimization commits -> ideas and thoughts in the graph.

Public API:
    Miner(store, embedder_factory, settings, progress=None).mine(spec, MineOptions(...), early=None) -> MineReport
    classify_commits(handle, profile, raws, warnings, opts)            (miners.pipeline)
    classify(raw, profile, triage, patch) / parse_perf_claims(text)   (miners.classify)
    walk_commits(handle, revs, warnings) / EarlyWalk.start(spec)      (miners.gitwalk)

The pipeline (and with it the graph driver) is imported on first use of Miner, MineOptions or MineReport,
so `eok` can start git on a repository before paying for those imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

LIBRARIES = ("auto", "openblas", "ggml", "onnxruntime", "generic")

if TYPE_CHECKING:
    from miners.pipeline import MineOptions, Miner, MineReport

__all__ = ["LIBRARIES", "MineOptions", "MineReport", "Miner", "check_library"]


def check_library(library: str) -> None:
    """--library is one of LIBRARIES (cheap: `eok mine` checks it before importing the pipeline)."""
    from core.errors import InvalidInput

    if library not in LIBRARIES:
        raise InvalidInput(f"--library: unknown value {library!r}", f"use one of: {', '.join(LIBRARIES)}")


def __getattr__(name: str) -> Any:
    if name in ("MineOptions", "MineReport", "Miner"):
        from miners import pipeline

        return getattr(pipeline, name)
    raise AttributeError(f"module 'miners' has no attribute {name!r}")
