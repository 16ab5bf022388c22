"""Miners: any git history -> classified optimization commits -> ideas and thoughts in the graph.

Public API:
    Miner(store, embedder_factory, settings, progress=None).mine(spec, MineOptions(...)) -> MineReport
    classify(raw, profile, triage, patch) / parse_perf_claims(text)   (miners.classify)
    walk_commits(handle, revs, warnings)                                (miners.gitwalk)
"""

from miners.pipeline import LIBRARIES, MineOptions, Miner, MineReport

__all__ = ["LIBRARIES", "MineOptions", "MineReport", "Miner"]
