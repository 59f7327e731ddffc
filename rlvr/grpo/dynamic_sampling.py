"""DAPO dynamic sampling (Yu et al. 2025, sec. 3.2): a group whose rewards all tie has advantage 0 everywhere
and teaches nothing, yet still costs a forward and backward pass and dilutes the batch. Keep drawing prompts
until the batch holds the requested number of groups with reward spread, up to a cap on extra prompts.

Also the group-level helper it needs: selecting RolloutBatch / ScoredBatch groups (concatenating them is
rlvr.types.concat_groups, which the distributed gather shares).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

from rlvr.algorithms.advantages import tied_groups
from rlvr.algorithms.turns import tied_step_groups
from rlvr.types import RolloutBatch, ScoredBatch, concat_groups


def select_groups(rollouts: RolloutBatch, scored: ScoredBatch, groups: list[int]
                  ) -> tuple[RolloutBatch, ScoredBatch]:
    """The listed prompt groups (in that order), rows and prompts alike."""
    G = rollouts.group_size
    # host: indexes the host's scores and the policy's rollouts alike (CUDA takes host indices)
    rows = torch.tensor([g * G + j for g in groups for j in range(G)], dtype=torch.long)
    picked = RolloutBatch(
        prompts=[rollouts.prompts[g] for g in groups], group_size=G,
        prompt_ids=rollouts.prompt_ids[groups], prompt_mask=rollouts.prompt_mask[groups],
        completion_ids=rollouts.completion_ids[rows], completion_mask=rollouts.completion_mask[rows],
        sampling_logprobs=rollouts.sampling_logprobs[rows], completions=[rollouts.completions[r] for r in rows],
        truncated=rollouts.truncated[rows], turns=None if rollouts.turns is None else rollouts.turns.rows(rows))
    kept = ScoredBatch(rewards=scored.rewards[rows], scorable=scored.scorable[rows],
                       verdicts={k: [v[r] for r in rows] for k, v in scored.verdicts.items()},
                       scores={k: v[rows] for k, v in scored.scores.items()})
    return picked, kept


@dataclass
class DrawStats:
    extra_prompts: int  # prompts drawn beyond the requested number (the cost of dynamic sampling)
    rounds: int  # generation calls made for this batch
    informative_groups: int  # groups in the returned batch whose rewards differ
    topped_up: int  # tied groups put in because the cap was reached first


Draw = Callable[[int], tuple[RolloutBatch, ScoredBatch]]  # n prompts -> their generated and scored groups


def next_request(missing: int, informative: int, drawn: int, cap_left: int) -> int:
    """Prompts to draw next: enough to find `missing` informative groups at the share seen so far, within the cap.

    Asking for only the missing number costs one generation round per find when most groups tie (a policy near
    its ceiling: 1 informative group in 4), and a round of few rows costs nearly as much as a full one on a
    memory-bound decoder (65 s/step). The share is Laplace-smoothed, (informative + 1) /
    (drawn + 2), so a first round with no informative group still asks for a finite number.
    """
    share = (informative + 1) / (drawn + 2)
    return max(1, min(cap_left, math.ceil(missing / share)))


def tied_mask(rollouts: RolloutBatch, scored: ScoredBatch, step_credit: bool) -> list[bool]:
    """Per group: no learning signal. With episode.credit=process an episode group whose outcomes tie still teaches
    when its turns' step rewards differ (estimators.TurnCreditEstimator adds their normalised term), so it is tied
    only when both tie (judged on outcomes alone, a calculator run at 1 % success threw away every group
    whose first steps differed and drew 12 extra prompts each step)."""
    outcome = tied_groups(scored.rewards, rollouts.group_size, scored.scorable)
    if not step_credit or rollouts.turns is None:
        return outcome.tolist()
    turns = rollouts.turns
    steps = tied_step_groups(turns.turn_rewards, turns.turn_mask, rollouts.group_size).to(outcome.device)
    return (outcome & steps).tolist()


def draw_informative_groups(draw: Draw, wanted: int, max_extra_prompts: int, step_credit: bool = False
                            ) -> tuple[RolloutBatch, ScoredBatch, DrawStats]:
    """Draw `wanted` groups, then more (sized by `next_request`, at most max_extra_prompts in all) until
    `wanted` groups with reward spread are held; surplus informative groups are left out. If the cap is hit
    first, the batch is topped up with tied groups so that its size, and so the step's scale, stays the same (verl
    stops the run instead). `step_credit`: episodes' step rewards count as spread too (`tied_mask`)."""
    informative: list[tuple[RolloutBatch, ScoredBatch]] = []
    tied: list[tuple[RolloutBatch, ScoredBatch]] = []
    extra, rounds, request = 0, 0, wanted
    while True:
        rollouts, scored = draw(request)
        rounds += 1
        for g, is_tied in enumerate(tied_mask(rollouts, scored, step_credit)):
            (tied if is_tied else informative).append(select_groups(rollouts, scored, [g]))
        missing = wanted - len(informative)
        if missing <= 0 or extra >= max_extra_prompts:
            break
        request = next_request(missing, len(informative), len(informative) + len(tied), max_extra_prompts - extra)
        extra += request
    chosen = informative[:wanted]
    topped_up = tied[:wanted - len(chosen)]
    rollouts, scored = concat_groups(chosen + topped_up)
    return rollouts, scored, DrawStats(extra, rounds, len(chosen), len(topped_up))
