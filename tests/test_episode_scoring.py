"""An episode's outcome reward (issue 26, item 1): answer verifiers on the last model turn plus the environment's
verdict on the final state, weighted by episode.state_weight; a state check that fails is an ERROR, never a raise."""
from __future__ import annotations

import pytest
import torch

from rlvr.agents.protocol import EpisodeRecord
from rlvr.agents.scoring import STATE, EpisodeRewarder, EpisodeScoring, with_state
from rlvr.rewards.rewarder import Rewarder
from rlvr.types import Outcome, Prompt, RolloutBatch, Turns, Verdict

PROMPTS = [Prompt("t/0", ({"role": "user", "content": "q0"},), "7"),
           Prompt("t/1", ({"role": "user", "content": "q1"},), "9")]


class StateEnv:
    name, tools, scores_state = "state", (), True

    def start(self, prompt):
        raise AssertionError("not played here")

    def score_state(self, final_state: str, prompt: Prompt) -> Verdict:
        if final_state == "boom":
            raise RuntimeError("state checker bug")
        if final_state == "broken":  # e.g. a prompt whose reference state cannot be read
            return Verdict(Outcome.ERROR, 0.0, "reference unreadable", scorable=False)
        ok = final_state == prompt.reference
        return Verdict(Outcome.CORRECT if ok else Outcome.WRONG, float(ok))


def batch(states: list[str], answers: list[str]) -> RolloutBatch:
    """2 prompts x G = 2 episodes; only what scoring reads is real."""
    b = len(states)
    records = [EpisodeRecord(final_state=s) for s in states]
    turns = Turns(torch.full((b, 1), 0), torch.zeros(b, 1), torch.ones(b, 1, dtype=torch.bool), records)
    z = torch.zeros(b, 1, dtype=torch.long)
    return RolloutBatch(PROMPTS, 2, torch.zeros(2, 1, dtype=torch.long), torch.ones(2, 1, dtype=torch.long), z, z + 1,
                        torch.zeros(b, 1), answers, torch.zeros(b, dtype=torch.bool), turns)


def answer_is_reference(prompts, completions, **_):
    return [float(c == p[-1]) for p, c in zip(prompts, completions)]  # "q0" -> "0": a toy answer check


def test_reward_is_answer_plus_weighted_state_and_a_failing_check_is_an_error():
    rewarder = EpisodeRewarder(Rewarder({"answer": (answer_is_reference, 1.0)}), StateEnv(), 0.5)
    scored = rewarder.score_rollout(batch(["7", "x", "9", "boom"], ["0", "0", "nope", "1"]))
    # rows: answer 1/1/0/1 ("q1" -> "1" for the last row), state 1/0/1/error(0); reward = answer + 0.5 * state
    assert scored.rewards.tolist() == [1.5, 1.0, 0.5, 1.0]
    outcomes = [v.outcome for v in scored.verdicts[STATE]]
    assert outcomes == [Outcome.CORRECT, Outcome.WRONG, Outcome.CORRECT, Outcome.ERROR]
    assert "state checker bug" in scored.verdicts[STATE][3].detail
    assert list(rewarder.components) == ["answer", STATE] and rewarder.components[STATE][1] == 0.5


def test_a_row_whose_state_is_unscorable_gets_no_reward_even_where_its_answer_is_right():
    """As `weigh` does for single-turn components: unscorable rows are masked out of the advantages, and their
    reward is 0, so they do not lift the logged reward mean either (issue 41: the answer's 1.0 stayed)."""
    rewarder = EpisodeRewarder(Rewarder({"answer": (answer_is_reference, 1.0)}), StateEnv(), 0.5)
    scored = rewarder.score_rollout(batch(["7", "broken", "9", "broken"], ["0", "0", "1", "nope"]))
    # answers 1/1/1/0, states 1/unscorable/1/unscorable -> 1.5, 0 (not 1.0), 1.5, 0
    assert scored.rewards.tolist() == [1.5, 0.0, 1.5, 0.0]
    assert scored.scorable.tolist() == [True, False, True, False]
    alone = EpisodeScoring(None, StateEnv(), 1.0).score_rollout(batch(["7", "broken", "9", "8"], [""] * 4))
    assert alone.rewards.tolist() == [1.0, 0.0, 1.0, 0.0] and alone.scorable.tolist() == [True, False, True, True]


def test_a_task_scored_by_its_state_alone_needs_no_verifier_pool():
    scoring = EpisodeScoring(None, StateEnv(), 1.0)
    scored = scoring.submit_rollout(batch(["7", "7", "9", "8"], ["", "", "", ""])).result()
    assert scored.rewards.tolist() == [1.0, 1.0, 1.0, 0.0] and list(scored.verdicts) == [STATE]
    assert scoring.stats() == {}


def test_a_stateless_environment_leaves_the_answer_scores_alone():
    env = StateEnv()
    env.scores_state = False
    answers = Rewarder({"answer": (answer_is_reference, 1.0)})
    b = batch(["", "", "", ""], ["0", "1", "1", "0"])
    assert torch.equal(with_state(answers.score_rollout(b), env, 1.0, b).rewards, torch.tensor([1.0, 0.0, 1.0, 0.0]))
    assert list(EpisodeRewarder(answers, env, 1.0).components) == ["answer"]
    with pytest.raises(ValueError, match="nothing would score"):
        with_state(None, env, 1.0, b)
