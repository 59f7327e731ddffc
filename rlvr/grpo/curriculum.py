"""Pass-rate curriculum: spend rollouts where the model is sometimes right.

A group where every answer is right or every answer is wrong has zero advantage everywhere (the seeds: such
groups teach nothing). Unlike dynamic sampling, which discards them after paying for their generation, this
keeps a running pass-rate estimate per prompt and skips prompts predicted to be all-right or all-wrong before
generating. A skipped prompt is still drawn with a small probability so its estimate can recover as the policy
changes. Its state (estimates, RNG) is plain data (state_dict), so a checkpoint can carry it once exact
resume lands (a later issue).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Iterator

import torch

from rlvr.config.run import CurriculumConfig
from rlvr.types import Prompt


def group_pass_rates(rewards: torch.Tensor, valid: torch.Tensor, group_size: int, threshold: float
                     ) -> list[float | None]:
    """[B] rewards -> per group, the share of valid rows with reward >= threshold (None: no valid row)."""
    passed = (rewards >= threshold) & valid
    counts = valid.view(-1, group_size).sum(dim=1)
    rates = passed.view(-1, group_size).sum(dim=1) / counts.clamp(min=1)
    return [float(r) if c > 0 else None for r, c in zip(rates.tolist(), counts.tolist())]


@dataclass
class CurriculumStats:
    skipped: int = 0  # prompts passed over by the last take()
    admitted: int = 0  # prompts returned by the last take()
    forced: int = 0  # prompts admitted although predicted uninformative (skip limit reached)

    @property
    def skipped_share(self) -> float:
        seen = self.skipped + self.admitted
        return self.skipped / seen if seen else 0.0


@dataclass
class PassRateCurriculum:
    config: CurriculumConfig
    seed: int
    estimates: dict[str, float] = field(default_factory=dict)  # prompt id -> running pass rate
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed ^ 0x5EED)  # own stream: never shifts the prompt order of a run

    def predicted_uninformative(self, prompt: Prompt) -> bool:
        rate = self.estimates.get(prompt.id)
        return rate is not None and (rate <= self.config.skip_below or rate >= self.config.skip_above)

    def take(self, stream: Iterator[Prompt], n: int) -> tuple[list[Prompt], CurriculumStats]:
        """The next n admitted prompts of the stream. Once this call has skipped 50 n prompts the rest are
        admitted anyway (a task the model has fully solved must not hang the run), counted as `forced`."""
        chosen, stats = [], CurriculumStats()
        while len(chosen) < n:
            prompt = next(stream)
            skip = self.predicted_uninformative(prompt) and self.rng.random() >= self.config.revisit_probability
            if skip and stats.skipped < 50 * n:
                stats.skipped += 1
                continue
            stats.forced += int(skip)
            chosen.append(prompt)
        stats.admitted = len(chosen)
        return chosen, stats

    def observe(self, prompts: list[Prompt], rates: list[float | None]) -> None:
        """Fold each group's pass rate into its prompt's estimate (first observation taken as is)."""
        d = self.config.decay
        for prompt, rate in zip(prompts, rates):
            if rate is None:
                continue
            old = self.estimates.get(prompt.id)
            self.estimates[prompt.id] = rate if old is None else d * old + (1 - d) * rate

    def state_dict(self) -> dict:
        return {"estimates": dict(self.estimates), "rng": self.rng.getstate()}

    def load_state_dict(self, state: dict) -> None:
        self.estimates = dict(state["estimates"])
        self.rng.setstate(state["rng"])
