"""The step's stages that turn scores into a train batch: reward components with DAPO's overlong shaping,
KL in the reward, masking truncated completions, and the two advantage estimators' outputs."""
from __future__ import annotations

import pytest
import torch

from rlvr.algorithms.advantages import ADVANTAGES
from rlvr.config.run import load_config
from rlvr.grpo import stages
from rlvr.grpo.estimators import OutcomeEstimator
from rlvr.grpo.plan import StepPlan, step_plan
from rlvr.grpo.setup import Models
from rlvr.types import Outcome, Prompt, RolloutBatch, ScoredBatch, Verdict


def rollouts(lengths: list[int], truncated: list[bool], C: int = 4, G: int = 2) -> RolloutBatch:
    B = len(lengths)
    mask = torch.tensor([[1] * n + [0] * (C - n) for n in lengths])
    return RolloutBatch(
        prompts=[Prompt(f"p{i}", ({"role": "user", "content": "q"},), "1") for i in range(B // G)], group_size=G,
        prompt_ids=torch.ones(B // G, 3, dtype=torch.long), prompt_mask=torch.ones(B // G, 3, dtype=torch.long),
        completion_ids=torch.ones(B, C, dtype=torch.long), completion_mask=mask,
        sampling_logprobs=torch.full((B, C), -1.0) * mask, completions=["x"] * B,
        truncated=torch.tensor(truncated))


def scored(values: list[float], scorable=None) -> ScoredBatch:
    rewards = torch.tensor(values)
    ok = torch.ones(len(values), dtype=torch.bool) if scorable is None else torch.tensor(scorable)
    verdicts = [Verdict(Outcome.CORRECT if v else Outcome.WRONG, v) for v in values]
    return ScoredBatch(rewards.masked_fill(~ok, 0.0), ok, {"math": verdicts}, {"math": rewards})


def plan_with(*overrides: str) -> StepPlan:
    return step_plan(load_config(None, ["rollout.max_new_tokens=4", *overrides]))


def test_reward_components_with_overlong_shaping_by_hand() -> None:
    plan = plan_with("reward.overlong_buffer=2", "reward.overlong_penalty=0.5")
    batch = rollouts([1, 2, 3, 4], [False, False, False, True])
    comps = stages.reward_components(batch, scored([1.0, 0.0, 1.0, 1.0], [True, True, True, False]), plan.reward)
    # math: the unscorable row's 1.0 is zeroed
    assert comps["math"][0].tolist() == [1.0, 0.0, 1.0, 0.0] and comps["math"][1] == 1.0
    # L_max 4, L_cache 2: lengths 1, 2 -> 0 ; 3 -> (2 - 3)/2 = -0.5 ; 4 (truncated) -> (2 - 4)/2 = -1 ; weight 0.5
    assert comps["overlong"][0].tolist() == [0.0, 0.0, -0.5, -1.0] and comps["overlong"][1] == 0.5


def test_kl_for_reward_uses_sampler_logprobs_when_mu_is_one() -> None:
    batch = rollouts([2, 1, 4, 3], [False] * 4)
    ref = torch.full((4, 4), -2.0)
    assert stages.kl_for_reward(batch, None, ref, plan_with().kl) is None  # KL sits in the loss by default
    plan = plan_with("algorithm.kl_placement=reward", "algorithm.kl_estimator=k1")
    kl = stages.kl_for_reward(batch, None, ref, plan.kl)
    # k1 = logp - ref = -1 - (-2) = 1 on real tokens, 0 past each row's end
    assert kl.tolist() == [[1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 1], [1, 1, 1, 0]]
    old = torch.full((4, 4), -1.5)  # mu > 1: the pi_old forward is used instead: -1.5 + 2 = 0.5
    assert stages.kl_for_reward(batch, old, ref, plan.kl)[2].tolist() == [0.5] * 4


def test_outcome_estimator_charges_each_token_the_kl_to_go() -> None:
    batch = rollouts([2, 2, 1, 1], [False] * 4)
    kl = torch.tensor([[1.0, 1.0, 0, 0], [0.0, 0.0, 0, 0], [0.5, 0, 0, 0], [0.5, 0, 0, 0]])
    estimator = OutcomeEstimator(ADVANTAGES["dr_grpo"], "sum_then_normalize", 1e-4, beta=0.1)
    out = estimator(batch, {"math": (torch.tensor([1.0, 1.0, 0.0, 1.0]), 1.0)}, torch.ones(4, dtype=torch.bool), kl)
    # outcome (dr_grpo, G = 2): group 0 ties at 1 -> [0, 0] ; group 1 mean 0.5 -> [-0.5, 0.5]
    # KL to go, beta 0.1: row 0 [0.2, 0.1] ; row 1 [0, 0] ; rows 2, 3 [0.05] ; padding 0
    expected = torch.tensor([[-0.2, -0.1, 0, 0], [0, 0, 0, 0], [-0.55, 0, 0, 0], [0.45, 0, 0, 0]])
    torch.testing.assert_close(out.values, expected, rtol=0, atol=1e-6)
    # shaped reward r - beta * sum_t KL = [0.8, 1.0, -0.05, 0.95] -> mean 0.675 ; KL per sequence (2+0+.5+.5)/4
    assert out.shaped_reward_mean == pytest.approx(0.675)
    assert out.extra["kl_in_reward"] == pytest.approx(0.75)


def test_kl_in_the_reward_is_not_divided_by_the_group_std() -> None:
    # all four answers right (a tied group) with KL sums 0.50, 0.52, 0.49, 0.51 on one token each, beta 0.04:
    # the outcome advantage is 0 and each token pays only beta * KL = [0.02, 0.0208, 0.0196, 0.0204]
    # (normalising r - beta*KL by the group std would have given advantages of size ~1 from KL noise)
    batch = rollouts([1, 1, 1, 1], [False] * 4, G=4)
    kl = torch.zeros(4, 4)
    kl[:, 0] = torch.tensor([0.50, 0.52, 0.49, 0.51])
    estimator = OutcomeEstimator(ADVANTAGES["grpo"], "sum_then_normalize", 1e-4, beta=0.04)
    out = estimator(batch, {"math": (torch.ones(4), 1.0)}, torch.ones(4, dtype=torch.bool), kl)
    torch.testing.assert_close(out.values[:, 0], torch.tensor([-0.02, -0.0208, -0.0196, -0.0204]), rtol=0, atol=1e-7)
    assert out.values[:, 1:].abs().max() == 0


def test_make_train_batch_masks_truncated_rows_and_drops_in_loss_ref_for_reward_placement() -> None:
    batch = rollouts([2, 4, 1, 4], [False, True, False, True])
    ref = torch.zeros(4, 4)
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5])
    def train_batch(*overrides: str):
        plan = plan_with(*overrides)
        return stages.make_train_batch(batch, adv, None, ref, plan.mask_truncated, plan.kl)

    plain = train_batch()
    assert plain.completion_mask.sum().item() == 11 and plain.ref_logprobs is ref
    masked = train_batch("algorithm.mask_truncated=true")
    assert masked.completion_mask.sum(dim=1).tolist() == [2, 0, 1, 0]  # truncated rows get no loss
    moved = train_batch("algorithm.kl_placement=reward")
    assert moved.ref_logprobs is None  # the KL was paid in the reward, not again in the loss


class CountingModel:
    """Stands in for a model: counts forward calls (scoring_logprobs must not make one when mu = 1)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        raise AssertionError("no forward pass expected")

    base_model = property(lambda self: self)
    dtype = torch.float32  # the packed forward builds its attention mask in the model's dtype first


def test_mu_one_spends_no_forward_on_old_logprobs() -> None:
    policy, batch = CountingModel(), rollouts([2, 1, 3, 4], [False] * 4)
    models = Models(policy, None, tokenizer=None)
    assert stages.scoring_logprobs(models, batch, plan_with().scoring) == (None, None)
    assert policy.calls == 0
    with pytest.raises(AssertionError, match="no forward pass expected"):  # mu > 1: pi_old is computed once
        stages.scoring_logprobs(models, batch, plan_with("algorithm.updates_per_batch=2").scoring)
    assert policy.calls == 1


def test_kl_placement_is_resolved_once_into_plain_facts() -> None:
    # the plan is the one reader of algorithm.kl_placement; the stages and the loss see only these facts
    in_loss = plan_with()  # beta 0.04, in the loss (GRPO)
    assert (in_loss.kl.in_loss, in_loss.kl.in_reward, in_loss.loss.beta) == (True, False, 0.04)
    in_reward = plan_with("algorithm.kl_placement=reward", "algorithm.kl_estimator=k1")
    assert (in_reward.kl.in_loss, in_reward.kl.in_reward, in_reward.loss.beta) == (False, True, 0.0)
    off = plan_with("algorithm.beta=0")
    assert (off.kl.in_loss, off.kl.in_reward, off.loss.beta) == (False, False, 0.0)
    # a pi_old forward: for mu > 1, or for the KL in the reward when the sampler's log-probs are top-p truncated
    assert not in_reward.scoring.needs_old_logprobs and not plan_with("rollout.top_p=0.9").scoring.needs_old_logprobs
    truncated = plan_with("algorithm.kl_placement=reward", "algorithm.kl_estimator=k1", "rollout.top_p=0.9")
    assert truncated.scoring.needs_old_logprobs
    assert plan_with("algorithm.updates_per_batch=2").scoring.needs_old_logprobs

