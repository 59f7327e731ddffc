"""The rollout engine protocols; engines differ (transformers in-process or in another process, vLLM, a Ray
actor) but return the same RolloutBatch."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch

from rlvr.types import Prompt, RolloutBatch


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0  # 0 = greedy
    top_p: float = 1.0
    max_new_tokens: int = 32
    # Seeds the call's own generator when set. The trainer draws it from its (checkpointed) RNG for every call, so
    # an engine in another process samples exactly what the in-process engine would (Ray and process
    # engines are tested for equal rewards and parameters) and a resumed run replays the same draws.
    seed: int | None = None


class RolloutEngine(Protocol):
    def generate(self, prompts: list[Prompt], group_size: int, sampling: SamplingParams) -> RolloutBatch:
        """G completions for each prompt, rows grouped by prompt, with masks and sampling log-probs."""
        ...


@dataclass(frozen=True)
class SampledTurn:
    """One model turn sampled after a token context (multi-turn episodes): token ids in, token ids out."""

    ids: list[int]  # the sampled ids as sampled, the stop token included when the turn stopped
    logprobs: list[float]  # log-prob of each id under the distribution it was drawn from
    stopped: bool  # ended with a stop token (False: the turn's token budget ran out first)


@runtime_checkable
class MultiTurnEngine(Protocol):
    """An engine that can run the turns of episodes: the in-process and hf_process engines. vLLM and Ray engines
    lack it and are refused with one message (rlvr/agents/episodes.py) until they grow it."""

    def continue_tokens(self, contexts: list[list[int]], group_size: int, sampling: SamplingParams
                        ) -> list[SampledTurn]:
        """group_size turns after each context (rows grouped by context), at most sampling.max_new_tokens each."""
        ...


@runtime_checkable
class SyncedEngine(Protocol):
    """An engine that holds its own copy of the weights (another process, vLLM, a Ray actor). After every update
    the trainer pushes its weights (`sync_weights`) and then checks, on a few sequences, that the engine scores
    them as the trainer does (`teacher_forced_logprobs`, rlvr/rollout/agreement.py): a sync that silently did not
    apply is caught there (trl#2923, NeMo-RL#3366 are such reports)."""

    def generate(self, prompts: list[Prompt], group_size: int, sampling: SamplingParams) -> RolloutBatch: ...

    def sync_weights(self, model: torch.nn.Module, version: int) -> None:
        """Make the engine sample from `model`'s current parameters; `version` is the trainer's step."""
        ...

    def teacher_forced_logprobs(self, rollouts: RolloutBatch, temperature: float) -> torch.Tensor:
        """[B, C] log-probs of rollouts' completion tokens under the engine's weights at `temperature` (0 on
        padding), computed the way the sampler computes them."""
        ...

    def close(self) -> None: ...


def sampling_generator(seed: int | None, device: torch.device | str) -> torch.Generator | None:
    """The call's generator (None = torch's global RNG, as before rollouts had their own seeds)."""
    return None if seed is None else torch.Generator(device=device).manual_seed(seed)


def draw_seed() -> int:
    """A sampling seed from torch's global RNG (checkpointed with the run; per-rank under torchrun)."""
    return int(torch.randint(0, 2**62, (1,)).item())  # host: torch's global CPU RNG, the checkpointed one
