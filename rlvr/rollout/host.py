"""A transformers rollout engine with its own copy of the weights: what runs inside an engine process
(rollout/process.py) or a Ray actor (cluster/ray_backend.py). It loads the same architecture as the trainer,
receives the trainer's parameters in a fixed order, samples with HFRolloutEngine and scores sequences for the
post-sync agreement check (rollout/agreement.py). Transport (pipe + gloo, Ray object store) is the caller's."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator

import torch

from rlvr.config.run import ModelConfig
from rlvr.model.logprobs import batched_logprobs
from rlvr.rollout.base import SampledTurn, SamplingParams
from rlvr.rollout.hf import HFRolloutEngine
from rlvr.types import Prompt, RolloutBatch


def synced_parameters(model: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    """The tensors a sync sends, in a fixed order both sides agree on: named_parameters() lists a tied weight
    (SmolLM2's embedding = LM head) once; buffers are not sent (rotary tables are rebuilt from the config)."""
    return list(model.named_parameters())


@dataclass(frozen=True)
class HostSettings:
    """What a host loads and runs with, and nothing else of the run (design.md principle 8: a component
    takes its own settings; rlvr/grpo/backends.py builds them from the run config)."""

    model: ModelConfig  # the trainer's model section: the same checkpoint, dtype and device
    threads: int  # rollout.engine.threads: torch threads of the host (0 = torch's default)


class EngineHost:
    def __init__(self, settings: HostSettings):
        from rlvr.model.load import load_model, load_tokenizer

        if settings.threads:
            torch.set_num_threads(settings.threads)
        self.model = load_model(settings.model, trainable=False)
        self.tokenizer = load_tokenizer(settings.model)
        self.engine = HFRolloutEngine(self.model, self.tokenizer)
        self.version = -1  # the trainer step whose weights are loaded (-1: the checkpoint on disk)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def generate(self, prompts: list[Prompt], group_size: int, sampling: SamplingParams) -> RolloutBatch:
        return self.engine.generate(prompts, group_size, sampling)

    def continue_tokens(self, contexts: list[list[int]], group_size: int, sampling: SamplingParams
                        ) -> list[SampledTurn]:
        return self.engine.continue_tokens(contexts, group_size, sampling)

    def parameters_in_order(self) -> Iterator[tuple[str, torch.Tensor]]:
        return iter(synced_parameters(self.model))

    @torch.no_grad()
    def load_parameters(self, named: Iterable[tuple[str, torch.Tensor]], version: int) -> None:
        """Copy the trainer's tensors in (names checked, so another model is one clear error, not garbage)."""
        own = dict(synced_parameters(self.model))
        for name, value in named:
            if name not in own or own[name].shape != value.shape:
                raise ValueError(f"weight sync: the engine's model has no parameter {name!r} of shape "
                                 f"{tuple(value.shape)}; trainer and engine must load the same architecture")
            own[name].copy_(value)
        self.version = version

    @torch.no_grad()
    def teacher_forced_logprobs(self, rollouts: RolloutBatch, temperature: float) -> torch.Tensor:
        """[B, C] log-probs of the completion tokens under this copy, 0 on padding."""
        logprobs = batched_logprobs(self.model, rollouts.prompt_ids, rollouts.prompt_mask, rollouts.prompt_index,
                                    rollouts.completion_ids, rollouts.completion_mask, temperature,
                                    max(rollouts.size, 1))
        return logprobs * rollouts.completion_mask
