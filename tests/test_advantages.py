"""GRPO advantages: group-normalised rewards, with numbers derived by hand in the comments."""
from __future__ import annotations

import math

import pytest
import torch

from rlvr.algorithms.advantages import ADVANTAGES, grpo_advantages, tied_groups

torch.set_num_threads(1)


def test_two_groups_by_hand() -> None:
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0])
    # group 0 [1,0,0,1]: mean 0.5, deviations ±0.5, sample var = 4*0.25/3 = 1/3, std = 0.5773503
    #   -> A = ±0.5 / (0.5773503 + 1e-4) = ±0.8658754
    # group 1 [1,1,1,0]: mean 0.75, deviations [.25,.25,.25,-.75], sample var = (3*0.0625 + 0.5625)/3 = 0.25,
    #   std = 0.5 -> A = 0.25/0.5001 = 0.4999000 (x3), -0.75/0.5001 = -1.4997001
    expected = torch.tensor([0.8658754, -0.8658754, -0.8658754, 0.8658754,
                             0.4999000, 0.4999000, 0.4999000, -1.4997001])
    torch.testing.assert_close(grpo_advantages(rewards, 4), expected, rtol=0, atol=1e-6)


def test_integer_rewards_are_accepted() -> None:
    # [1, 0] as ints: mean 0.5, sample std sqrt((0.25+0.25)/1) = 0.7071068 -> ±0.5/0.7072068 = ±0.7070068
    out = grpo_advantages(torch.tensor([1, 0]), 2)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, torch.tensor([0.7070068, -0.7070068]), rtol=0, atol=1e-6)


def test_eps_effect() -> None:
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0])
    # std = sqrt(1/3) = 0.5773503 (see above)
    # eps = 0: A = ±0.5/0.5773503 = ±0.8660254 ; eps = 1: A = ±0.5/1.5773503 = ±0.3169873
    sign = torch.tensor([1.0, -1.0, -1.0, 1.0])
    torch.testing.assert_close(grpo_advantages(rewards, 4, eps=0.0), 0.8660254 * sign, rtol=0, atol=1e-6)
    torch.testing.assert_close(grpo_advantages(rewards, 4, eps=1.0), 0.3169873 * sign, rtol=0, atol=1e-6)


@pytest.mark.parametrize("value", [0.0, 1.0, 0.1, 0.3, 1e6 + 0.1])
def test_tied_group_is_exactly_zero(value: float) -> None:
    # all-equal rewards carry no signal: (r - mean) may be float noise (0.1 is not representable), but the
    # result must be exactly 0, not noise / eps.
    rewards = torch.full((3,), value)
    out = grpo_advantages(rewards, 3)
    assert torch.equal(out, torch.zeros(3))


def test_tied_group_beside_untied_group() -> None:
    # group 0 [0.1, 0.1, 0.1] ties -> 0 ; group 1 [0, 1, 0.5]: mean 0.5, sample var (0.25+0.25+0)/2 = 0.25,
    # std 0.5 -> A = [-0.5, 0.5, 0]/0.5001 = [-0.9998000, 0.9998000, 0]
    out = grpo_advantages(torch.tensor([0.1, 0.1, 0.1, 0.0, 1.0, 0.5]), 3)
    assert torch.equal(out[:3], torch.zeros(3))
    torch.testing.assert_close(out[3:], torch.tensor([-0.9998000, 0.9998000, 0.0]), rtol=0, atol=1e-6)


def test_single_element_groups_give_zero_without_nan() -> None:
    # group_size 1: each completion is its own baseline, r - mean = 0; std of one sample would be NaN.
    out = grpo_advantages(torch.tensor([0.3, 1.0, 0.0]), 1)
    assert not torch.isnan(out).any()
    assert torch.equal(out, torch.zeros(3))


def test_advantages_sum_to_zero_per_group() -> None:
    # (r - mean) sums to 0 within a group; dividing by a per-group constant keeps that.
    rewards = torch.tensor([0.2, 0.9, 0.4, 0.0, 1.0, 0.3])
    out = grpo_advantages(rewards, 3).view(2, 3).sum(dim=1)
    torch.testing.assert_close(out, torch.zeros(2), rtol=0, atol=1e-6)


@pytest.mark.parametrize("rewards, group_size", [
    (torch.zeros(2, 2), 2),  # not 1-D
    (torch.zeros(5), 2),  # 5 rewards do not split into groups of 2
    (torch.zeros(3), 4),  # fewer rewards than one group
])
def test_bad_shapes_raise(rewards: torch.Tensor, group_size: int) -> None:
    with pytest.raises(ValueError):
        grpo_advantages(rewards, group_size)
    with pytest.raises(ValueError):
        tied_groups(rewards, group_size)


def test_tied_groups() -> None:
    # groups: [1,1,0,1] mixed ; [0,0,0,0] tied ; [0.5]*4 tied ; [0.1,0.1,0.1,0.2] mixed
    rewards = torch.tensor([1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.5, 0.5, 0.1, 0.1, 0.1, 0.2])
    assert tied_groups(rewards, 4).tolist() == [False, True, True, False]
    # every one-element group ties
    assert tied_groups(torch.tensor([0.0, 1.0]), 1).tolist() == [True, True]


def test_registry_holds_grpo() -> None:
    assert ADVANTAGES["grpo"] is grpo_advantages
    assert math.isclose(float(ADVANTAGES["grpo"](torch.tensor([1.0, 0.0]), 2, 0.0)[0]), 0.5 / math.sqrt(0.5),
                        rel_tol=1e-6)  # [1,0]: mean .5, sample std sqrt(0.5) -> 0.5/0.7071068 = 0.7071068


def test_unscorable_rows_are_left_out_of_the_baseline_and_get_zero():
    # group [1, 0, X, 0] where X (reward 1.0 from a broken reference) is unscorable:
    # valid rewards [1, 0, 0]: mean 1/3, sample var ((2/3)^2 + 2*(1/3)^2)/2 = (4/9 + 2/9)/2 = 1/3,
    # std 0.5773503 -> A = (1 - 1/3)/(0.5773503 + 1e-4) = 1.1545, (0 - 1/3)/0.5774503 = -0.57725, X -> 0
    rewards = torch.tensor([1.0, 0.0, 1.0, 0.0])
    valid = torch.tensor([True, True, False, True])
    adv = grpo_advantages(rewards, 4, eps=1e-4, valid=valid)
    torch.testing.assert_close(adv, torch.tensor([1.1545008, -0.5772504, 0.0, -0.5772504]), rtol=0, atol=1e-5)


def test_group_with_one_scorable_row_gets_zero():
    # one valid row: no baseline to compare it with -> 0, not NaN
    adv = grpo_advantages(torch.tensor([1.0, 0.0]), 2, valid=torch.tensor([True, False]))
    assert adv.tolist() == [0.0, 0.0]
