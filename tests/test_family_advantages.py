"""Every advantage estimator of the family, reward combination and soft overlong shaping, against numbers derived
by hand in the comments. (GRPO's own edge cases are in test_advantages.py.)"""
from __future__ import annotations

from typing import get_args

import pytest
import torch

from rlvr.algorithms.advantages import (
    ADVANTAGES,
    combined_advantages,
    dr_grpo_advantages,
    grpo_advantages,
    rloo_advantages,
)
from rlvr.algorithms.loss import AGGREGATIONS, KL_ESTIMATORS
from rlvr.algorithms.objectives import OBJECTIVES
from rlvr.algorithms.shaping import soft_overlong_penalty
from rlvr.config.run import AdvantageName, AggregationName, KLName, ObjectiveName

torch.set_num_threads(1)

EPS = 1e-4
ATOL = dict(rtol=0, atol=1e-6)
GROUP_BASELINE = ["grpo", "dr_grpo", "rloo", "grpo_batch_std", "reinforce_pp_baseline"]
assert set(GROUP_BASELINE) | {"reinforce_pp"} == set(ADVANTAGES)  # a new estimator must be added to these tests

# --- one two-group example, every estimator -----------------------------------------------------------------
# G = 3, rewards: group 0 = [3, 0, 0], group 1 = [1, 2, 3]
#   group 0: mean 1, r - mean = [2, -1, -1], Bessel var (4 + 1 + 1)/2 = 3, std sqrt(3) = 1.7320508
#   group 1: mean 2, r - mean = [-1, 0, 1], Bessel var (1 + 0 + 1)/2 = 1, std 1
#   leave-one-out means: group 0: r=3 -> (0+0)/2 = 0, r=0 -> (3+0)/2 = 1.5 (twice)
#                        group 1: r=1 -> (2+3)/2 = 2.5, r=2 -> (1+3)/2 = 2, r=3 -> (1+2)/2 = 1.5
#   batch: mean (3+0+0+1+2+3)/6 = 1.5, r - 1.5 = [1.5, -1.5, -1.5, -0.5, 0.5, 1.5],
#          Bessel var (4*2.25 + 2*0.25)/5 = 9.5/5 = 1.9, batch std sqrt(1.9) = 1.3784049
#   centred c = r - group mean = [2, -1, -1, -1, 0, 1]: batch mean 0, Bessel var (4+1+1+1+0+1)/5 = 1.6,
#          std sqrt(1.6) = 1.2649111
REWARDS = [3.0, 0.0, 0.0, 1.0, 2.0, 3.0]
EXPECTED = {
    # (r - group mean)/(group std + eps): [2,-1,-1]/1.7321508, [-1,0,1]/1.0001
    "grpo": [1.1546339, -0.5773169, -0.5773169, -0.9999000, 0.0, 0.9999000],
    # r - group mean
    "dr_grpo": [2.0, -1.0, -1.0, -1.0, 0.0, 1.0],
    # r - leave-one-out mean: 3-0, 0-1.5, 0-1.5, 1-2.5, 2-2, 3-1.5
    "rloo": [3.0, -1.5, -1.5, -1.5, 0.0, 1.5],
    # (r - group mean)/(batch std + eps) = [2,-1,-1,-1,0,1]/1.3785049
    "grpo_batch_std": [1.4508472, -0.7254236, -0.7254236, -0.7254236, 0.0, 0.7254236],
    # (r - 1.5)/1.3785049 = [1.5,-1.5,-1.5,-0.5,0.5,1.5]/1.3785049
    "reinforce_pp": [1.0881354, -1.0881354, -1.0881354, -0.3627118, 0.3627118, 1.0881354],
    # (c - 0)/(1.2649111 + 1e-4) = [2,-1,-1,-1,0,1]/1.2650111
    "reinforce_pp_baseline": [1.5810138, -0.7905069, -0.7905069, -0.7905069, 0.0, 0.7905069],
}


@pytest.mark.parametrize("name", sorted(ADVANTAGES))
def test_two_groups_by_hand(name: str) -> None:
    out = ADVANTAGES[name](torch.tensor(REWARDS), 3, EPS)
    assert out.shape == (6,) and out.dtype == torch.float32
    torch.testing.assert_close(out, torch.tensor(EXPECTED[name]), **ATOL)


@pytest.mark.parametrize("name", sorted(ADVANTAGES))
def test_unscorable_rows_are_left_out_and_get_zero(name: str) -> None:
    # the same two groups with a 4th, unscorable row each (rewards 9 and 7: garbage from a broken reference).
    # Leaving them out of every mean and std gives back the G = 3 example exactly (rloo: 3 valid rows ->
    # scale 3/2, as for G = 3; the batch std is over the 6 valid rewards), and the two rows get 0.
    rewards = torch.tensor([3.0, 0.0, 0.0, 9.0, 1.0, 2.0, 3.0, 7.0])
    valid = torch.tensor([True, True, True, False, True, True, True, False])
    out = ADVANTAGES[name](rewards, 4, EPS, valid=valid)
    e = EXPECTED[name]
    torch.testing.assert_close(out, torch.tensor(e[:3] + [0.0] + e[3:] + [0.0]), **ATOL)
    assert out[3].item() == 0.0 and out[7].item() == 0.0


@pytest.mark.parametrize("name", GROUP_BASELINE)
@pytest.mark.parametrize("value", [0.1, 0.3, 1.0])
def test_tied_group_is_exactly_zero_for_group_baselines(name: str, value: float) -> None:
    # group 0 ties at `value` (0.1, 0.3 are not representable: r - mean would be float noise);
    # group 1 [0, 1, 0.5] has a spread, so it gets non-zero advantages at its first two rows
    rewards = torch.tensor([value] * 3 + [0.0, 1.0, 0.5])
    out = ADVANTAGES[name](rewards, 3, EPS)
    assert torch.equal(out[:3], torch.zeros(3))
    assert out[3] < 0 < out[4]
    assert torch.isfinite(out).all()


def test_reinforce_pp_baseline_leaves_tied_groups_out_of_the_batch_std() -> None:
    # rewards [0.1]*3 + [0, 1, 0.5]: centred c = [0, 0, 0, -0.5, 0.5, 0]; group 0 ties, so only group 1's
    # c = [-0.5, 0.5, 0] are samples: mean 0, Bessel var (0.25 + 0.25 + 0)/2 = 0.25, std 0.5
    #   -> [-0.5, 0.5, 0]/0.5001 = [-0.9998000, 0.9998000, 0]
    # (with the tied zeros counted the std would be sqrt(0.5/5) = 0.3162278 and A = +-1.5806)
    out = ADVANTAGES["reinforce_pp_baseline"](torch.tensor([0.1, 0.1, 0.1, 0.0, 1.0, 0.5]), 3, EPS)
    torch.testing.assert_close(out, torch.tensor([0.0, 0.0, 0.0, -0.9998000, 0.9998000, 0.0]), **ATOL)


def test_reinforce_pp_gives_a_tied_group_non_zero_advantages() -> None:
    # REINFORCE++ has no group baseline: G = 2, group 0 = [1, 1] (tied), group 1 = [0, 0] (tied)
    # batch mean 0.5, r - mean = [0.5, 0.5, -0.5, -0.5], Bessel var 4*0.25/3 = 1/3, std 0.5773503
    #   -> +-0.5/0.5774503 = +-0.8658754
    rewards = torch.tensor([1.0, 1.0, 0.0, 0.0])
    torch.testing.assert_close(ADVANTAGES["reinforce_pp"](rewards, 2, EPS),
                               torch.tensor([0.8658754, 0.8658754, -0.8658754, -0.8658754]), **ATOL)
    # ... while every group-baseline estimator sees two tied groups: all exactly 0
    for name in GROUP_BASELINE:
        assert torch.equal(ADVANTAGES[name](rewards, 2, EPS), torch.zeros(4)), name


@pytest.mark.parametrize("name", GROUP_BASELINE)
def test_one_element_groups_give_zero_for_group_baselines(name: str) -> None:
    # G = 1: each completion is its own baseline (r - mean = 0, Bessel std 0/0): exactly 0, no NaN
    out = ADVANTAGES[name](torch.tensor([2.0, 0.0, 1.0]), 1, EPS)
    assert torch.equal(out, torch.zeros(3))


def test_one_element_groups_reinforce_pp() -> None:
    # G = 1 is REINFORCE++'s home ground: rewards [2, 0, 1], batch mean 1, r - mean [1, -1, 0],
    # Bessel var (1 + 1 + 0)/2 = 1, std 1 -> [1, -1, 0]/1.0001 = [0.9999000, -0.9999000, 0]
    out = ADVANTAGES["reinforce_pp"](torch.tensor([2.0, 0.0, 1.0]), 1, EPS)
    torch.testing.assert_close(out, torch.tensor([0.9999000, -0.9999000, 0.0]), **ATOL)


@pytest.mark.parametrize("name", sorted(ADVANTAGES))
@pytest.mark.parametrize("group_size", [1, 2, 4])
def test_all_tied_batch_is_all_zeros(name: str, group_size: int) -> None:
    # every reward 0.7: no group and no batch has a spread -> exactly 0 (reinforce_pp too: batch std 0)
    assert torch.equal(ADVANTAGES[name](torch.full((8,), 0.7), group_size, EPS), torch.zeros(8))


@pytest.mark.parametrize("name", sorted(ADVANTAGES))
@pytest.mark.parametrize("rewards, group_size, valid", [
    ([0.0, 1.0, 0.5, 0.5], 2, [False, False, False, False]),  # nothing scorable
    ([0.0, 1.0, 0.5, 0.5], 2, [True, False, False, False]),  # one scorable row in the whole batch
    ([0.0, 1.0, 0.5, 0.5], 2, [True, False, True, True]),  # group 0 has one row, group 1 ties
    ([0.0, 1.0, 0.5, 0.5], 4, [False, True, False, True]),  # two valid rows in the only group
    ([1e6, -1e6, 0.0, 0.0], 1, None),  # G = 1, large rewards
    ([0.0, 0.0], 2, None),  # one tied group, eps 0 below
])
def test_no_nan_anywhere(name, rewards, group_size, valid) -> None:
    for eps in (EPS, 0.0):
        out = ADVANTAGES[name](torch.tensor(rewards), group_size, eps,
                               valid=None if valid is None else torch.tensor(valid))
        assert torch.isfinite(out).all(), (eps, out)
        if valid is not None:  # unscorable rows are always 0
            assert (out[~torch.tensor(valid)] == 0).all()


def test_rloo_is_g_over_g_minus_1_times_dr_grpo() -> None:
    # r_i - mean_{j!=i} r_j = r_i - (G mean - r_i)/(G-1) = G/(G-1) (r_i - mean) for a full group
    rewards = torch.rand(20, generator=torch.Generator().manual_seed(0))
    for g in (2, 4, 5):
        torch.testing.assert_close(rloo_advantages(rewards, g), g / (g - 1) * dr_grpo_advantages(rewards, g),
                                   rtol=0, atol=1e-6)
    # by hand, G = 2 [1, 0]: rloo [1 - 0, 0 - 1] = [1, -1] = 2 * dr_grpo [0.5, -0.5]
    assert rloo_advantages(torch.tensor([1.0, 0.0]), 2).tolist() == [1.0, -1.0]


# --- combined_advantages --------------------------------------------------------------------------------------
# one group of G = 3, two components: a = [1, 0, 0] with weight 1, b = [0, 0, 2] with weight 0.5
#   a: mean 1/3, a - mean = [2/3, -1/3, -1/3], Bessel var (4/9 + 1/9 + 1/9)/2 = 1/3, std 0.5773503
#   b: mean 2/3, b - mean = [-2/3, -2/3, 4/3], Bessel var (4/9 + 4/9 + 16/9)/2 = 4/3, std 1.1547005
#   grpo(a) = [2/3, -1/3, -1/3]/0.5774503 = [1.1545006, -0.5772503, -0.5772503]
#   grpo(b) = [-2/3, -2/3, 4/3]/1.1548005 = [-0.5773003, -0.5773003, 1.1546005]
A_VALUES, B_VALUES = torch.tensor([1.0, 0.0, 0.0]), torch.tensor([0.0, 0.0, 2.0])
GRPO_A = [1.1545006, -0.5772503, -0.5772503]


def test_sum_then_normalize_by_hand() -> None:
    # 1*a + 0.5*b = [1, 0, 1]: mean 2/3, deviations [1/3, -2/3, 1/3], Bessel var (1/9 + 4/9 + 1/9)/2 = 1/3,
    # std 0.5773503 -> [1/3, -2/3, 1/3]/0.5774503 = [0.5772503, -1.1545006, 0.5772503]
    out = combined_advantages(grpo_advantages, {"a": (A_VALUES, 1.0), "b": (B_VALUES, 0.5)},
                              "sum_then_normalize", 3, EPS)
    torch.testing.assert_close(out, torch.tensor([0.5772503, -1.1545006, 0.5772503]), **ATOL)


def test_normalize_then_sum_by_hand_differs() -> None:
    # 1*grpo(a) + 0.5*grpo(b) = [1.1545006 - 0.2886501, -0.5772503 - 0.2886501, -0.5772503 + 0.5773003]
    #                         = [0.8658504, -0.8659004, 0.0000500]
    # differs from sum_then_normalize's [0.5772503, -1.1545006, 0.5772503] (the 3rd completion: 0.58 vs 0)
    components = {"a": (A_VALUES, 1.0), "b": (B_VALUES, 0.5)}
    out = combined_advantages(grpo_advantages, components, "normalize_then_sum", 3, EPS)
    torch.testing.assert_close(out, torch.tensor([0.8658504, -0.8659004, 0.0000500]), **ATOL)
    other = combined_advantages(grpo_advantages, components, "sum_then_normalize", 3, EPS)
    assert (out - other).abs().max() > 0.5


def test_zero_weight_components_are_ignored() -> None:
    # a NaN component with weight 0 must not be touched (0 * NaN would poison the sum): result = grpo(a)
    junk = torch.tensor([float("nan"), 5.0, -3.0])
    for combination in ("sum_then_normalize", "normalize_then_sum"):
        out = combined_advantages(grpo_advantages, {"a": (A_VALUES, 1.0), "junk": (junk, 0.0)},
                                  combination, 3, EPS)
        torch.testing.assert_close(out, torch.tensor(GRPO_A), **ATOL)
    with pytest.raises(ValueError):
        combined_advantages(grpo_advantages, {"junk": (junk, 0.0)}, "sum_then_normalize", 3, EPS)


def test_combined_advantages_passes_valid_through() -> None:
    # a = [1, 0, 0] plus a 4th unscorable row (reward 5): same as grpo(a) and 0 for the 4th, both ways
    values = torch.tensor([1.0, 0.0, 0.0, 5.0])
    valid = torch.tensor([True, True, True, False])
    for combination in ("sum_then_normalize", "normalize_then_sum"):
        out = combined_advantages(grpo_advantages, {"a": (values, 1.0)}, combination, 4, EPS, valid=valid)
        torch.testing.assert_close(out, torch.tensor(GRPO_A + [0.0]), **ATOL)


def test_unknown_combination_raises() -> None:
    with pytest.raises(ValueError, match="unknown reward combination"):
        combined_advantages(grpo_advantages, {"a": (A_VALUES, 1.0)}, "normalise_then_sum", 3, EPS)


# --- soft_overlong_penalty (DAPO eq. 13) -----------------------------------------------------------------------

def test_soft_overlong_penalty_by_hand() -> None:
    # L_max = 10, L_cache = 4: free up to 10 - 4 = 6, then ((10 - 4) - |y|)/4, and -1 past 10
    #   0 -> 0 ; 6 -> 0 (edge of the buffer) ; 7 -> (6-7)/4 = -0.25 ; 8 -> -0.5 ; 9 -> -0.75
    #   10 -> (6-10)/4 = -1 (end of the buffer) ; 11, 50 -> -1 (over the budget)
    lengths = torch.tensor([0, 6, 7, 8, 9, 10, 11, 50])
    out = soft_overlong_penalty(lengths, 10, 4)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, torch.tensor([0.0, 0.0, -0.25, -0.5, -0.75, -1.0, -1.0, -1.0]), **ATOL)


def test_soft_overlong_penalty_buffer_equal_to_budget() -> None:
    # L_cache = L_max = 8: the buffer starts at 0: |y| = 2 -> (0 - 2)/8 = -0.25 ; 8 -> -1
    out = soft_overlong_penalty(torch.tensor([0, 2, 8, 9]), 8, 8)
    torch.testing.assert_close(out, torch.tensor([0.0, -0.25, -1.0, -1.0]), **ATOL)


def test_soft_overlong_penalty_buffer_zero_is_off() -> None:
    out = soft_overlong_penalty(torch.tensor([1, 10, 11, 1000]), 10, 0)
    assert out.dtype == torch.float32 and torch.equal(out, torch.zeros(4))


def test_soft_overlong_penalty_buffer_larger_than_budget_raises() -> None:
    with pytest.raises(ValueError):
        soft_overlong_penalty(torch.tensor([1, 2]), 10, 11)


# --- the registries and the config's Literal names agree --------------------------------------------------------

def test_registries_match_config_literals() -> None:
    advantage_names = set(get_args(AdvantageName))
    assert set(ADVANTAGES) <= advantage_names
    assert advantage_names - set(ADVANTAGES) == {"gae"}  # the learned critic lives in gae.py
    assert set(OBJECTIVES) == set(get_args(ObjectiveName))
    assert set(AGGREGATIONS) == set(get_args(AggregationName))
    assert set(KL_ESTIMATORS) == set(get_args(KLName))
    assert len(advantage_names) == len(ADVANTAGES) + 1
