"""Rollout engines: sample G completions per prompt. `hf` is the in-process transformers engine."""
from rlvr.rollout.base import RolloutEngine, SamplingParams

__all__ = ["RolloutEngine", "SamplingParams"]
