"""An episode's outcome reward: answer verifiers on the last model turn plus the environment's
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
        if final_state == "sloppy":  # a user's check that returns a bare number
            return 1.0
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
    reward is 0, so they do not lift the logged reward mean either (the answer's 1.0 stayed)."""
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


def test_a_state_check_that_returns_no_verdict_is_an_unscorable_error_naming_the_type():
    """A user's score_state that returns a number (or None) instead of a Verdict is an ERROR verdict scoring 0
    (as a check that raises is), whose detail names what came back; never a crash of the step."""
    scored = EpisodeScoring(None, StateEnv(), 1.0).score_rollout(batch(["7", "sloppy", "9", "8"], [""] * 4))
    verdict = scored.verdicts[STATE][1]
    assert verdict.outcome == Outcome.ERROR and verdict.score == 0.0
    assert "state.score_state returned float, not a Verdict" in verdict.detail
    assert scored.rewards.tolist() == [1.0, 0.0, 1.0, 0.0]


def test_state_verdicts_of_a_single_turn_batch_is_a_caller_error():
    from rlvr.agents.scoring import state_verdicts

    single = batch(["7"] * 4, [""] * 4)
    single.turns = None
    with pytest.raises(ValueError, match="needs a batch of episodes"):
        state_verdicts(StateEnv(), single)


class Pending:
    def __init__(self, scored):
        self.scored, self.timeouts = scored, []

    def result(self, timeout=None):
        self.timeouts.append(timeout)
        return self.scored

    def done(self):
        return True


class AnswerPool:
    """A verifier pool as the GRPO loop has it: answers scored (here at once) behind a future."""

    def __init__(self):
        self.rewarder, self.closed = Rewarder({"answer": (answer_is_reference, 1.0)}), False

    def submit_rollout(self, rollout):
        self.pending = Pending(self.rewarder.score_rollout(rollout))
        return self.pending

    def stats(self):
        return {"jobs": 1}

    def close(self):
        self.closed = True


def test_with_a_pool_the_answers_come_from_it_and_the_state_is_added_when_read():
    """EpisodeScoring keeps the pool's interface: submit returns a future whose result (with the caller's timeout)
    is the pool's answers plus the state component; done, stats and close are the pool's."""
    pool = AnswerPool()
    scoring = EpisodeScoring(pool, StateEnv(), 0.5)
    future = scoring.submit_rollout(batch(["7", "x", "9", "8"], ["0", "0", "nope", "1"]))
    assert future.done() is True
    scored = future.result(timeout=12.0)
    # answers 1/1/0/1, states 1/0/1/0 at weight 0.5
    assert scored.rewards.tolist() == [1.5, 1.0, 0.5, 1.0] and list(scored.verdicts) == ["answer", STATE]
    assert pool.pending.timeouts == [12.0]
    assert scoring.stats() == {"jobs": 1}
    scoring.close()
    assert pool.closed
    EpisodeScoring(None, StateEnv(), 1.0).close()  # no pool: nothing to close, no error


def test_the_state_component_is_a_verifier_that_never_scores_a_single_completion():
    """The state check stands in `components` (evaluation gates on it) as a verifier, so nothing treats it as a
    reward function to run on completions (rewarder.reward_functions); verified alone, without an episode's
    state, it is an unscorable ERROR of score 0, never a reward."""
    from rlvr.rewards.rewarder import reward_functions

    rewarder = EpisodeRewarder(Rewarder({"answer": (answer_is_reference, 1.0)}), StateEnv(), 0.5)
    assert reward_functions(rewarder) == {"answer": rewarder.components["answer"]}
    verdict = rewarder.components[STATE][0].verify("Answer: 7", "7")
    assert (verdict.outcome, verdict.score, verdict.scorable) == (Outcome.ERROR, 0.0, False)
    assert "scored per episode batch" in verdict.detail
