"""Evaluator: kernel tasks, targets, toolchains, sandboxed runners, correctness, timing and the X60 cost model."""
