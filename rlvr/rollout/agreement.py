"""The post-sync agreement check: after the trainer pushes its weights to an engine that
holds its own copy, both score the same few sequences; their mismatch KL must stay under a threshold.

This is separate from the per-batch mismatch the update logs (correction.py): with asynchronous rollouts
(max_staleness 1) the batch was sampled one update earlier, so its mismatch is the staleness the correction
reweights, not a fault. Here both sides hold the same version, so anything above fp noise means the sync did
not apply (or the engine runs another model, dtype or temperature).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from rlvr.algorithms.correction import check_agreement, mismatch_kl
from rlvr.model.logprobs import batched_logprobs
from rlvr.types import RolloutBatch


@dataclass(frozen=True)
class Agreement:
    rows: int  # sequences scored by both sides
    tokens: int  # completion tokens among them
    mismatch_kl: float  # mean per-token KL(engine || trainer), k3 (correction.mismatch_kl)


def probe_rows(rollouts: RolloutBatch, rows: int) -> RolloutBatch:
    """The first group's first `rows` completions with at least one token (a whole group is not needed: the
    check compares per-token log-probs). Kept as a RolloutBatch so both sides read the same layout."""
    first_group = range(rollouts.group_size)  # rows [0, G) share prompts[0]
    keep = [i for i in first_group if int(rollouts.completion_mask[i].sum()) > 0][:rows]
    return RolloutBatch(
        prompts=rollouts.prompts[:1], group_size=len(keep), prompt_ids=rollouts.prompt_ids[:1],
        prompt_mask=rollouts.prompt_mask[:1], completion_ids=rollouts.completion_ids[keep],
        completion_mask=rollouts.completion_mask[keep], sampling_logprobs=rollouts.sampling_logprobs[keep],
        completions=[rollouts.completions[i] for i in keep], truncated=rollouts.truncated[keep])


def trainer_logprobs(model, probe: RolloutBatch, temperature: float) -> torch.Tensor:
    """[B, C] the trainer's log-probs of the probe's completion tokens (the forward the update uses)."""
    return batched_logprobs(model, probe.prompt_ids, probe.prompt_mask, probe.prompt_index, probe.completion_ids,
                            probe.completion_mask, temperature, max(probe.size, 1))


def check_after_sync(engine, model, rollouts: RolloutBatch, temperature: float, rows: int,
                     threshold: float | None) -> Agreement | None:
    """Score `rows` sequences of `rollouts` with the engine and the trainer; raise EngineMismatch past the
    threshold. None when rows = 0 or no completion has a token."""
    if rows <= 0:
        return None
    probe = probe_rows(rollouts, rows)
    if probe.size == 0:
        return None
    mask = probe.completion_mask
    engine_side = engine.teacher_forced_logprobs(probe, temperature)
    with torch.no_grad():
        trainer_side = trainer_logprobs(model, probe, temperature)
    agreement = Agreement(probe.size, int(mask.sum()), mismatch_kl(trainer_side, engine_side, mask))
    check_agreement(agreement.mismatch_kl, threshold)
    return agreement
