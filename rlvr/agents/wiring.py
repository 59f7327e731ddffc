"""How a run that plays episodes is put together: the task names its environment, the run config its
budgets, and three wrappers make the rest of the system see what it already knows: an engine with `generate`
(EpisodeRunner), a Rewarder (EpisodeRewarder) and a verifier pool (EpisodeScoring).

A task plays episodes when it has `environment(episode_config) -> Environment`. It may also say which answer
verifiers score its final turn (`answer_verifiers`, e.g. {} for the filesystem, whose outcome is its state alone);
that replaces task.verifiers when task.verifiers has its default value ({math: 1.0}).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rlvr.agents.chat import Rendering
from rlvr.agents.protocol import Budgets, Environment
from rlvr.config.base import ConfigError
from rlvr.config.run import TaskConfig
from rlvr.errors import UserFacingError

if TYPE_CHECKING:
    from rlvr.config.run import RunConfig
    from rlvr.config.sections import EpisodeConfig


@dataclass(frozen=True)
class EpisodeParts:
    environment: Environment
    budgets: Budgets
    state_weight: float
    rendering: Rendering
    config: Any  # the RunConfig with the task's answer verifiers in task.verifiers (what the rewarder is built from)

    @property
    def has_answer_verifiers(self) -> bool:
        return bool(self.config.task.verifiers)


def budgets_of(episode: EpisodeConfig) -> Budgets:
    return Budgets(max_turns=episode.max_turns, tokens_per_turn=episode.tokens_per_turn,
                   tokens_per_episode=episode.tokens_per_episode, tool_time_limit_s=episode.tool_time_limit_s,
                   turn_time_limit_s=episode.turn_time_limit_s, episode_time_limit_s=episode.episode_time_limit_s,
                   tool_workers=episode.tool_workers)


def plays_episodes(task) -> bool:
    return callable(getattr(task, "environment", None))


def _default_verifiers() -> dict[str, float]:
    """task.verifiers' default. Compared by value, not by whether the user set it: a run's config.yaml, and `rlvr
    eval`'s re-validated config, carry every field as if set, and must still mean the task's own verifiers."""
    return TaskConfig.model_fields["verifiers"].default_factory()


def episode_parts(task, config: RunConfig) -> EpisodeParts | None:
    """None for single-turn tasks; else the environment, budgets and the config the answer rewarder reads."""
    if not plays_episodes(task):
        return None
    environment = task.environment(config.episode)
    own = getattr(task, "answer_verifiers", None)
    if own is not None and config.task.verifiers == _default_verifiers():
        config = config.model_copy(deep=True)
        config.task.verifiers = dict(own)
    if not config.task.verifiers and not environment.scores_state:
        raise ConfigError(f"task.name={config.task.name}: its environment {environment.name!r} has no state to "
                          "check, so task.verifiers must name at least one answer verifier")
    rendering = Rendering(config.episode.observation_role, config.episode.list_tools)
    return EpisodeParts(environment, budgets_of(config.episode), config.episode.state_weight, rendering, config)


def episode_rewarder(parts: EpisodeParts):
    """The answer verifiers (when the task has any) and the state check, as one Rewarder."""
    from rlvr.agents.scoring import EpisodeRewarder
    from rlvr.rewards.rewarder import build_rewarder

    answers = build_rewarder(parts.config) if parts.has_answer_verifiers else None
    return EpisodeRewarder(answers, parts.environment, parts.state_weight)


def episode_engine(engine, tokenizer, parts: EpisodeParts):
    from rlvr.agents.episodes import EpisodeRunner

    # credit=process reads the step reward of every turn, the last one's too: its calls must run (episodes.py)
    step_credit = parts.config.episode.credit == "process"
    return EpisodeRunner(engine, tokenizer, parts.environment, parts.budgets, parts.rendering, step_credit)


def episode_plan(plan, rewarder):
    """The step plan with the reward components the episode rewarder scores (the answer verifiers the task chose,
    and the environment's state check when it has one), in the rewarder's order."""
    from dataclasses import replace

    components = tuple((name, weight) for name, (_, weight) in rewarder.components.items())
    return replace(plan, reward=replace(plan.reward, verifiers=components))


class SingleTurnOnly(UserFacingError):
    """A command that samples single completions was given a task that plays multi-turn episodes."""


def refuse_episodes(task, command: str) -> None:
    """`rlvr sample` and `rlvr eval --scaling` sample one completion per prompt; on an environment task that would
    silently drop the environment, so they refuse it with one message (until they play episodes)."""
    if plays_episodes(task):
        raise SingleTurnOnly(f"{command} samples single completions and does not play multi-turn episodes yet; "
                             f"task {getattr(task, 'name', '?')!r} needs its environment (use rlvr train / rlvr eval)")
