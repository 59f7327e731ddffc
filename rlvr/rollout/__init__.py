"""Rollout engines: sample G completions per prompt (chosen once in rlvr/grpo/backends.py).

- hf.py: the in-process transformers engine; it *is* the policy, so nothing is synced.
- host.py: a transformers engine with its own copy of the weights (what a child process or a Ray actor runs).
- process.py / process_worker.py: that engine in a child process, weights broadcast over gloo.
- vllm/engine.py / vllm/convert.py: vLLM colocated in the trainer (engine.py is the module that imports vllm).
- vllm/server.py / vllm/weights.py: a separate `vllm serve` over HTTP, weights over NCCL (only the NCCL sender
  imports vllm).
- decode_steps.py: one decode step of the in-process engine (transformers' forward, or the fused Llama step).
- agreement.py: the post-sync check that engine and trainer score the same tokens alike.
- pipelined.py: asynchronous rollouts (max_staleness 1).
"""
from rlvr.rollout.base import RolloutEngine, SamplingParams, SyncedEngine

__all__ = ["RolloutEngine", "SamplingParams", "SyncedEngine"]
