"""The rollout engine protocol; engines differ (transformers, vLLM) but return the same RolloutBatch."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from rlvr.types import Prompt, RolloutBatch


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0  # 0 = greedy
    top_p: float = 1.0
    max_new_tokens: int = 32


class RolloutEngine(Protocol):
    def generate(self, prompts: list[Prompt], group_size: int, sampling: SamplingParams) -> RolloutBatch:
        """G completions for each prompt, rows grouped by prompt, with masks and sampling log-probs."""
        ...
