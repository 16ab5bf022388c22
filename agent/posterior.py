"""Thompson sampling over thoughts: mined evidence is the prior, measured experiences update it.

A thought "succeeds" when the candidate it produced is correct and beats its parent by a margin. Its
success probability on a target is Beta(alpha, beta):
  alpha = 1 + mined pseudo-successes + measured successes (all tasks on this target) + successes in this run
  beta  = 1 + measured failures + failures in this run
Mined pseudo-successes grow with the log of the evidencing commits and the claimed speedup, capped so a
handful of measurements on the board outweighs any amount of history (KOPE: target-side memory matters most).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

IMPROVEMENT_MARGIN = 1.02  # a step ratio above this counts as a success (KOPE's "effective" starts at 1.05)
MAX_MINED_PSEUDO = 3.0


@dataclass
class ThoughtStats:
    thought_id: str
    evidence_commits: int = 0
    prior_speedup: float | None = None
    trials: int = 0  # measured on this target, across runs and tasks
    successes: int = 0
    run_trials: int = 0  # in the current run (already included in trials once recorded)
    run_successes: int = 0

    @property
    def mined_pseudo_successes(self) -> float:
        claimed = math.log(self.prior_speedup) if self.prior_speedup and self.prior_speedup > 1 else 0.0
        return min(MAX_MINED_PSEUDO, 0.5 * math.log1p(self.evidence_commits) + claimed)

    @property
    def alpha(self) -> float:
        return 1.0 + self.mined_pseudo_successes + self.successes

    @property
    def beta(self) -> float:
        return 1.0 + max(0, self.trials - self.successes)

    def mean(self) -> float:
        return self.alpha / (self.alpha + self.beta)

    def sample(self, rng: random.Random) -> float:
        return rng.betavariate(self.alpha, self.beta)

    def observe(self, success: bool) -> None:
        self.trials += 1
        self.run_trials += 1
        self.successes += int(success)
        self.run_successes += int(success)


def is_success(ok: bool, speedup: float | None, parent_speedup: float | None) -> bool:
    if not ok or not speedup:
        return False
    return speedup > (parent_speedup or 1.0) * IMPROVEMENT_MARGIN


def thompson_pick(stats: list[ThoughtStats], rng: random.Random) -> ThoughtStats:
    return max(stats, key=lambda s: s.sample(rng))
