"""An episode's outcome reward: the task's answer verifiers on its last model turn, plus the
environment's verdict on its final state, as one more component named "environment".

Both wrappers keep the interfaces their callers know: `EpisodeRewarder` is a Rewarder to evaluation (components,
score_rollout), `EpisodeScoring` a verifier pool to the GRPO loop (submit_rollout, stats, close). The answer
verifiers still run where they ran (worker processes); the state verdict is a pure comparison made here, in the
trainer, on the state text the episode recorded (the same text `rlvr verify` re-scores).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlvr.agents.protocol import Environment
from rlvr.rewards.rewarder import weigh
from rlvr.types import Outcome, Prompt, RolloutBatch, ScoredBatch, Verdict
from rlvr.verifiers.base import error_verdict

STATE = "environment"  # the component's name in verdicts, scores and metrics (reward/environment)


def state_verdicts(environment: Environment, batch: RolloutBatch) -> list[Verdict]:
    """One verdict per row on its final state (an environment with `scores_state`); a failure is an ERROR."""
    if batch.turns is None:
        raise ValueError("state_verdicts needs a batch of episodes (RolloutBatch.turns)")
    return [state_verdict(environment, record.final_state, batch.prompt_of(row))
            for row, record in enumerate(batch.turns.records)]


def state_verdict(environment: Environment, final_state: str, prompt: Prompt) -> Verdict:
    """One final state's verdict; a check that fails is an ERROR verdict. `rlvr verify` re-scores recorded states
    through this same function, so a re-check fails as training's check did."""
    try:
        verdict = environment.score_state(final_state, prompt)
    except Exception as err:  # noqa: BLE001 - a verifier never raises (docs/design.md principle 7)
        return error_verdict(f"{environment.name}.score_state raised", err)
    if not isinstance(verdict, Verdict):
        return error_verdict(f"{environment.name}.score_state returned {type(verdict).__name__}, not a Verdict")
    return verdict


def with_state(answers: ScoredBatch | None, environment: Environment, weight: float,
               batch: RolloutBatch) -> ScoredBatch:
    """The answer verifiers' ScoredBatch (None: the task has none) with the state component added."""
    if not environment.scores_state:
        if answers is None:
            raise ValueError(f"environment {environment.name!r} has no state to check and the task no answer "
                             "verifiers: nothing would score its episodes")
        return answers
    state = weigh({STATE: state_verdicts(environment, batch)}, {STATE: weight})
    if answers is None:
        return state
    device = answers.rewards.device
    scorable = answers.scorable & state.scorable.to(device)
    # as `weigh` does for single-turn components: an unscorable row is never rewarded, whatever another component
    # said (its advantage is masked; left in, its answer reward inflated the logged reward mean)
    return ScoredBatch(rewards=(answers.rewards + state.rewards.to(device)).masked_fill(~scorable, 0.0),
                       scorable=scorable,
                       verdicts={**answers.verdicts, **state.verdicts},
                       scores={**answers.scores, STATE: state.scores[STATE].to(device)})


@dataclass
class _StateComponent:
    """Stands for the state check in `components` (evaluation gates correctness on every weighted component)."""

    environment: Environment

    def verify(self, completion: str, reference: str) -> Verdict:  # never called: states are scored per batch
        return Verdict(Outcome.ERROR, 0.0, "the environment's state is scored per episode batch", scorable=False)


class EpisodeRewarder:
    """A Rewarder for episodes: `components` and `score_rollout` as rlvr.rewards.rewarder.Rewarder has them."""

    def __init__(self, answers, environment: Environment, weight: float):
        self.answers, self.environment, self.weight = answers, environment, weight
        self.components: dict[str, tuple[Any, float]] = dict(answers.components) if answers is not None else {}
        if environment.scores_state:  # weight 0: logged, never gating correctness (evaluate.gated_names)
            self.components[STATE] = (_StateComponent(environment), weight)

    def score_rollout(self, batch: RolloutBatch) -> ScoredBatch:
        answers = self.answers.score_rollout(batch) if self.answers is not None else None
        return with_state(answers, self.environment, self.weight, batch)


@dataclass
class _Done:
    scored: ScoredBatch

    def result(self, timeout: float | None = None) -> ScoredBatch:
        return self.scored


@dataclass
class _WithState:
    pending: Any
    environment: Environment
    weight: float
    batch: RolloutBatch

    def result(self, timeout: float | None = None) -> ScoredBatch:
        return with_state(self.pending.result(timeout), self.environment, self.weight, self.batch)

    def done(self) -> bool:
        return self.pending.done()


class EpisodeScoring:
    """The verifier pool for episodes: answers in the pool's workers (while the trainer computes log-probs), the
    state verdict added when the result is read."""

    def __init__(self, pool, environment: Environment, weight: float):
        self.pool, self.environment, self.weight = pool, environment, weight

    def submit_rollout(self, batch: RolloutBatch):
        if self.pool is None:
            return _Done(with_state(None, self.environment, self.weight, batch))
        return _WithState(self.pool.submit_rollout(batch), self.environment, self.weight, batch)

    def score_rollout(self, batch: RolloutBatch) -> ScoredBatch:
        return self.submit_rollout(batch).result()

    def stats(self) -> dict[str, int]:
        return self.pool.stats() if self.pool is not None else {}

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()

