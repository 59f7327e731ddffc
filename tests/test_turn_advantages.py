"""Step-level credit of multi-turn episodes: rlvr/algorithms/turns.py, numbers derived by hand."""
from __future__ import annotations

import math

import pytest
import torch

from rlvr.algorithms.turns import combine_credit, process_advantages, turn_token_advantages

# One group, G = 2: episode 0 took 3 turns with step rewards 1, 0, 1; episode 1 took 2 turns with 0, 0. Its third
# step is not a turn (mask False) and holds a junk 5 that must not enter the statistics.
REWARDS = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 5.0]])
MASK = torch.tensor([[True, True, True], [True, True, False]])
# Valid steps 1, 0, 1, 0, 0: n = 5, mean = 2/5 = 0.4; squared deviations 0.36, 0.16, 0.36, 0.16, 0.16 sum to 1.2;
# Bessel variance 1.2 / 4 = 0.3, std = sqrt(0.3). Normalized: a 1 -> 0.6 / sqrt(0.3) = sqrt(1.2) = 1.0954451,
# a 0 -> -0.4 / sqrt(0.3) = -sqrt(8/15) = -0.7302967. Summed from each step to the end of its episode:
HI, LO = math.sqrt(1.2), -math.sqrt(8 / 15)
EXPECTED = [[HI + LO + HI, LO + HI, HI],  # 1.4605935, 0.3651484, 1.0954451
            [LO + LO, LO, 0.0]]  # -1.4605935, -0.7302967, and 0 for the step that is not a turn


def test_process_advantages_by_hand():
    advantages = process_advantages(REWARDS, MASK, group_size=2, eps=0.0)
    torch.testing.assert_close(advantages, torch.tensor(EXPECTED), rtol=0, atol=1e-6)


def test_groups_are_normalized_on_their_own():
    # A second group with the same step rewards shifted by +10 gets the same advantages: its own mean (10.4) is
    # subtracted. Pooled over the batch (mean of all 10 valid steps = 5.4) neither group would match EXPECTED.
    rewards = torch.cat([REWARDS, REWARDS + 10.0])
    assert not torch.equal(rewards[2:], rewards[:2])
    advantages = process_advantages(rewards, torch.cat([MASK, MASK]), group_size=2, eps=0.0)
    torch.testing.assert_close(advantages, torch.tensor(EXPECTED + EXPECTED), rtol=0, atol=1e-5)


def test_tied_and_single_step_groups_get_exactly_zero():
    # Group 0: its valid steps are six 0.3s (the 7s are not turns): tied, no signal. In float32 the mean of six 0.3s
    # is 3e-8 off 0.3, so without the tie rule (0.3 - mean) / (0 + eps) would be that noise blown up by 1/eps.
    # Group 1: one valid step: a std of 0 and no other step to compare with.
    rewards = torch.tensor([[0.3, 0.3, 0.3, 0.3], [0.3, 0.3, 7.0, 7.0], [3.0, 9.0, 9.0, 9.0], [9.0, 9.0, 9.0, 9.0]])
    mask = torch.tensor([[True, True, True, True], [True, True, False, False],
                         [True, False, False, False], [False, False, False, False]])
    advantages = process_advantages(rewards, mask, group_size=2, eps=1e-8)
    assert torch.equal(advantages, torch.zeros(4, 4))


def test_a_step_outside_the_mask_gets_zero_even_inside_an_episode():
    # A hole at step 1 of row 0 (a caller may leave out a turn it could not score): its reward-to-go would hold
    # step 2's (1 - 0.8) / std, but a step that is not in the mask carries no advantage.
    mask = torch.tensor([[True, False, True], [True, True, True]])
    advantages = process_advantages(torch.tensor([[1.0, 9.0, 1.0], [0.0, 2.0, 0.0]]), mask, group_size=2)
    assert advantages[0, 1] == 0.0 and advantages[0, 2] > 0.0


def test_process_advantages_refuses_bad_shapes():
    with pytest.raises(ValueError, match="groups of 2"):
        process_advantages(torch.zeros(3, 2), torch.ones(3, 2, dtype=torch.bool), group_size=2)
    with pytest.raises(ValueError, match=r"\[B, T\]"):
        process_advantages(torch.zeros(2, 2), torch.ones(2, 3, dtype=torch.bool), group_size=2)
    assert process_advantages(torch.zeros(2, 0), torch.zeros(2, 0, dtype=torch.bool), 2).shape == (2, 0)


TURN_ADVANTAGES = torch.tensor([[1.0, 2.0, 3.0], [10.0, 20.0, 0.0]])
# Row 0: turn 0 sampled two tokens, a tool turn (-1), turn 1, a tool turn, turn 2, padding.
# Row 1: turn 0, a tool turn, turn 1 (two tokens), padding.
TURN_OF_TOKEN = torch.tensor([[0, 0, -1, 1, -1, 2, -1], [0, -1, 1, 1, -1, -1, -1]])


def test_each_sampled_token_gets_its_turns_advantage():
    tokens = turn_token_advantages(TURN_ADVANTAGES, TURN_OF_TOKEN)
    assert tokens.tolist() == [[1.0, 1.0, 0.0, 2.0, 0.0, 3.0, 0.0], [10.0, 0.0, 20.0, 20.0, 0.0, 0.0, 0.0]]
    with pytest.raises(ValueError, match="turn 3"):
        turn_token_advantages(TURN_ADVANTAGES, torch.tensor([[0, 3], [0, 0]]))


def test_combine_credit_adds_the_outcome_to_every_sampled_token():
    outcome = torch.tensor([0.5, -1.0])
    # outcome + the token's turn advantage on sampled tokens (0.5 + 1, 0.5 + 2, ...; -1 + 10, -1 + 20); 0 elsewhere
    both = combine_credit(outcome, TURN_ADVANTAGES, TURN_OF_TOKEN)
    assert both.tolist() == [[1.5, 1.5, 0.0, 2.5, 0.0, 3.5, 0.0], [9.0, 0.0, 19.0, 19.0, 0.0, 0.0, 0.0]]
    alone = combine_credit(outcome, None, TURN_OF_TOKEN)
    assert alone.tolist() == [[0.5, 0.5, 0.0, 0.5, 0.0, 0.5, 0.0], [-1.0, 0.0, -1.0, -1.0, 0.0, 0.0, 0.0]]


def test_end_to_end_from_step_rewards_to_tokens():
    # EXPECTED's turns spread over the tokens of TURN_OF_TOKEN, plus outcome advantages +1 / -1.
    process = process_advantages(REWARDS, MASK, group_size=2, eps=0.0)
    credit = combine_credit(torch.tensor([1.0, -1.0]), process, TURN_OF_TOKEN)
    (a0, a1, a2), (b0, b1, _) = EXPECTED
    want = [[1 + a0, 1 + a0, 0, 1 + a1, 0, 1 + a2, 0], [-1 + b0, 0, -1 + b1, -1 + b1, 0, 0, 0]]
    torch.testing.assert_close(credit, torch.tensor(want), rtol=0, atol=1e-6)
