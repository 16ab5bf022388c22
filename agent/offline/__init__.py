"""The offline generator: every thought becomes a concrete transformation, no LLM needed.

Two kinds of variants make up a task's search space:
- generic ones, for any task: the reference with compiler options and pragmas (autovectorizer LMUL,
  unroll and interleave counts, restrict, fast-math when the tolerance allows);
- family ones: parameterized RVV intrinsic implementations for common operator families, whose knobs
  (LMUL, unroll, accumulators, block sizes, prefetch distance) are tagged with the miners' technique
  taxonomy, so a thought's technique says which knob to turn.
"""

from agent.offline.base import Family, Knob, ThoughtRef, Variant
from agent.offline.generator import OfflineGenerator

__all__ = ["Family", "Knob", "OfflineGenerator", "ThoughtRef", "Variant"]
