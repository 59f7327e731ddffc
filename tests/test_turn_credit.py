"""episode.credit=process in the loop's advantage stage: on a 3-turn episode and a 2-turn one of
the same group, every sampled token gets its episode's outcome GRPO advantage plus its turn's process advantage
(DeepSeekMath sec. 4.1.3), environment tokens get nothing; numbers derived by hand below."""
from __future__ import annotations

import math

import pytest
import torch

from rlvr.agents.process_reward import StepScores
from rlvr.agents.protocol import EpisodeRecord
from rlvr.algorithms.advantages import ADVANTAGES
from rlvr.grpo.estimators import OutcomeEstimator, TurnCreditEstimator
from rlvr.types import Prompt, RolloutBatch, Turns

EPS = 1e-4
# row 0: turns 0, 1, 2 with environment tokens between them; row 1: turns 0 and 1, then padding (-1 everywhere else)
TURN_OF_TOKEN = torch.tensor([[0, 0, -1, 1, -1, -1, 2, 2],
                              [0, -1, 1, 1, -1, -1, -1, -1]])
SAMPLED = (TURN_OF_TOKEN >= 0).long()


def episodes(turn_rewards: list[list[float]]) -> RolloutBatch:
    mask = torch.tensor([[True, True, True], [True, True, False]])
    records = [EpisodeRecord(turn_rewards=r) for r in turn_rewards]
    padded = torch.tensor([r + [0.0] * (3 - len(r)) for r in turn_rewards])
    turns = Turns(TURN_OF_TOKEN, padded, mask, records)
    prompt = Prompt("p", ({"role": "user", "content": "q"},), "1")
    return RolloutBatch([prompt], 2, torch.zeros(1, 1, dtype=torch.long), torch.ones(1, 1, dtype=torch.long),
                        torch.zeros(2, 8, dtype=torch.long), SAMPLED, torch.zeros(2, 8), ["a", "b"],
                        torch.zeros(2, dtype=torch.bool), turns)


def estimator(weight: float) -> TurnCreditEstimator:
    return TurnCreditEstimator(OutcomeEstimator(ADVANTAGES["grpo"], "sum_then_normalize", EPS, 0.0), None, weight, EPS)


def test_outcome_plus_process_credit_per_turn_by_hand():
    batch = episodes([[1.0, 0.0, 1.0], [0.0, 0.0]])
    components = {"answer": (torch.tensor([1.0, 0.0]), 1.0)}
    out = estimator(1.0)(batch, components, torch.tensor([True, True]), None)
    # outcome: rewards 1, 0 -> mean 0.5, sample std sqrt(0.5) -> +-0.5 / (0.70711 + 1e-4)
    outcome = 0.5 / (math.sqrt(0.5) + EPS)
    # process: the group's 5 valid steps 1, 0, 1, 0, 0: mean 0.4, sample var 1.2 / 4 = 0.3 -> s = sqrt(0.3)
    # normalised: 1 -> 0.6 / (s + eps), 0 -> -0.4 / (s + eps); summed from each turn to the episode's end
    hi, lo = 0.6 / (math.sqrt(0.3) + EPS), -0.4 / (math.sqrt(0.3) + EPS)
    row0 = [outcome + hi + lo + hi, outcome + lo + hi, outcome + hi]  # turns 0, 1, 2
    row1 = [-outcome + lo + lo, -outcome + lo]
    expected = torch.tensor([[row0[0], row0[0], 0, row0[1], 0, 0, row0[2], row0[2]],
                             [row1[0], 0, row1[1], row1[1], 0, 0, 0, 0]])
    torch.testing.assert_close(out.values, expected, rtol=0, atol=1e-5)
    assert out.extra["process/advantage_abs_mean"] == pytest.approx(
        (abs(row0[0] - outcome) + abs(row0[1] - outcome) + abs(row0[2] - outcome)
         + abs(row1[0] + outcome) + abs(row1[1] + outcome)) / 5, abs=1e-5)


def test_tied_step_rewards_leave_plain_outcome_credit_and_weight_scales_the_process_term():
    components = {"answer": (torch.tensor([1.0, 0.0]), 1.0)}
    valid = torch.tensor([True, True])
    tied = estimator(1.0)(episodes([[0.5, 0.5, 0.5], [0.5, 0.5]]), components, valid, None)
    outcome = 0.5 / (math.sqrt(0.5) + EPS)
    torch.testing.assert_close(tied.values, torch.where(SAMPLED.bool(), torch.tensor([[outcome], [-outcome]]), 0.0),
                               rtol=0, atol=1e-6)
    batch = episodes([[1.0, 0.0, 1.0], [0.0, 0.0]])
    full, half = (estimator(w)(batch, components, valid, None).values for w in (1.0, 0.5))
    base = torch.where(SAMPLED.bool(), torch.tensor([[outcome], [-outcome]]), 0.0)
    torch.testing.assert_close(half - base, 0.5 * (full - base), rtol=0, atol=1e-6)
    assert (full - base).abs().max() > 0.1  # the process term is there to scale


def test_an_unscorable_episode_gets_no_process_credit_either():
    components = {"answer": (torch.tensor([1.0, 0.0]), 1.0)}
    out = estimator(1.0)(episodes([[1.0, 0.0, 1.0], [0.0, 0.0]]), components, torch.tensor([True, False]), None)
    assert (out.values[1] == 0).all() and (out.values[0][SAMPLED[0].bool()] != 0).all()


def test_with_the_kl_in_the_reward_each_token_keeps_its_turn_s_process_credit():
    """kl_placement=reward makes the outcome advantage per token; the process term is still added per turn (on that
    path it was dropped and no test saw it)."""
    batch = episodes([[1.0, 0.0, 1.0], [0.0, 0.0]])
    components = {"answer": (torch.tensor([1.0, 0.0]), 1.0)}
    kl = torch.zeros(2, 8)
    kl[0, 3] = 0.5  # one token of row 0 (turn 1) pays KL: beta 0.2 * 0.5 = 0.1 on every token up to it
    charged = TurnCreditEstimator(OutcomeEstimator(ADVANTAGES["grpo"], "sum_then_normalize", EPS, 0.2), None, 1.0,
                                  EPS)(batch, components, torch.tensor([True, True]), kl)
    # the numbers of test_outcome_plus_process_credit_per_turn_by_hand, less the KL still to pay from each token on
    outcome = 0.5 / (math.sqrt(0.5) + EPS)
    hi, lo = 0.6 / (math.sqrt(0.3) + EPS), -0.4 / (math.sqrt(0.3) + EPS)
    row0 = [outcome + hi + lo + hi, outcome + lo + hi, outcome + hi]
    row1 = [-outcome + lo + lo, -outcome + lo]
    expected = torch.tensor([[row0[0] - 0.1, row0[0] - 0.1, 0, row0[1] - 0.1, 0, 0, row0[2], row0[2]],
                             [row1[0], 0, row1[1], row1[1], 0, 0, 0, 0]])
    torch.testing.assert_close(charged.values, expected, rtol=0, atol=1e-5)
    assert charged.extra["kl_in_reward"] == pytest.approx(0.25)  # 0.5 summed over row 0, 0 over row 1, mean


class FixedScorer:
    """A process scorer (episode.process_reward) that scores the turns `scores` and records what it was shown."""

    def __init__(self, scores: list[list[float]], failed: int) -> None:
        self.scores, self.failed, self.prompts = torch.tensor(scores), failed, None

    def score(self, turns, prompts):
        self.prompts = list(prompts)
        return StepScores(self.scores, self.failed)


def test_a_process_scorer_s_scores_are_added_to_the_environment_s_step_rewards():
    """Step rewards are the environment's per-turn rewards plus the scorer's: environment [1, 0, 0], [0, 0] and
    scorer [0, 0, 1], [0, 0] give the steps [1, 0, 1], [0, 0] of test_outcome_plus_process_credit_per_turn_by_hand,
    hence its credit (a scorer subtracted instead would give [1, 0, -1] and other numbers). The scorer is shown each
    row's prompt, and the turns it failed on are logged."""
    batch = episodes([[1.0, 0.0, 0.0], [0.0, 0.0]])
    components = {"answer": (torch.tensor([1.0, 0.0]), 1.0)}
    scorer = FixedScorer([[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]], failed=2)
    scored = TurnCreditEstimator(OutcomeEstimator(ADVANTAGES["grpo"], "sum_then_normalize", EPS, 0.0), scorer, 1.0,
                                 EPS)(batch, components, torch.tensor([True, True]), None)
    plain = estimator(1.0)(episodes([[1.0, 0.0, 1.0], [0.0, 0.0]]), components, torch.tensor([True, True]), None)
    without = estimator(1.0)(batch, components, torch.tensor([True, True]), None)
    assert (without.values - plain.values).abs().max() > 0.1  # the scorer's point is what moves the credit
    torch.testing.assert_close(scored.values, plain.values, rtol=0, atol=1e-6)
    assert scored.extra["process/failed_turns"] == 2 and "process/failed_turns" not in plain.extra
    assert scorer.prompts == [batch.prompts[0], batch.prompts[0]]  # rows 0 and 1 are the group of prompt 0


def test_a_batch_without_turns_gets_the_outcome_credit_alone():
    """Single-turn rollouts (no Turns): per-completion outcome advantages, +-0.5 / (sqrt 0.5 + eps), and no process
    metric."""
    batch = episodes([[1.0, 0.0, 1.0], [0.0, 0.0]])
    batch.turns = None
    out = estimator(1.0)(batch, {"answer": (torch.tensor([1.0, 0.0]), 1.0)}, torch.tensor([True, True]), None)
    outcome = 0.5 / (math.sqrt(0.5) + EPS)
    torch.testing.assert_close(out.values, torch.tensor([outcome, -outcome]), rtol=0, atol=1e-6)
    assert "process/advantage_abs_mean" not in out.extra


def test_episodes_that_answered_at_once_have_no_step_and_log_a_zero_process_term():
    """Every episode answered in its first turn: that turn is a final answer, not a step (turn_mask all False).
    The credit is the plain outcome credit and the process metric is 0, not 0 / 0."""
    turn_of_token = torch.tensor([[0, 0, -1], [0, -1, -1]])
    turns = Turns(turn_of_token, torch.zeros(2, 1), torch.zeros(2, 1, dtype=torch.bool),
                  [EpisodeRecord(), EpisodeRecord()])
    prompt = Prompt("p", ({"role": "user", "content": "q"},), "1")
    batch = RolloutBatch([prompt], 2, torch.zeros(1, 1, dtype=torch.long), torch.ones(1, 1, dtype=torch.long),
                         torch.zeros(2, 3, dtype=torch.long), (turn_of_token >= 0).long(), torch.zeros(2, 3),
                         ["a", "b"], torch.zeros(2, dtype=torch.bool), turns)
    out = estimator(1.0)(batch, {"answer": (torch.tensor([1.0, 0.0]), 1.0)}, torch.tensor([True, True]), None)
    outcome = 0.5 / (math.sqrt(0.5) + EPS)
    torch.testing.assert_close(out.values, torch.tensor([[outcome, outcome, 0], [-outcome, 0, 0]]), rtol=0,
                               atol=1e-6)
    assert out.extra["process/advantage_abs_mean"] == 0.0
