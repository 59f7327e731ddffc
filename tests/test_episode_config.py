"""Config rules of multi-turn episodes: engines that cannot run them, and combinations that
would silently do the wrong thing, are one clear message each; EPISODE_TASKS agrees with the task registry."""
from __future__ import annotations

import pytest

from rlvr.agents.wiring import plays_episodes
from rlvr.config.rules import EPISODE_TASKS
from rlvr.config.run import ConfigError, TaskConfig, load_config
from rlvr.tasks import TASKS, build_task

OPTIONAL = {"reasoning_gym": "reasoning_gym", "textarena": "textarena"}  # tasks whose library is an extra


def problems(*overrides: str) -> str:
    with pytest.raises(ConfigError) as err:
        load_config(None, ["task.name=calculator", *overrides])
    return str(err.value)


def test_engines_without_turns_and_unsupported_combinations_are_refused():
    assert "vLLM and Ray engines cannot run yet" in problems("rollout.engine.kind=vllm")
    assert "vLLM and Ray engines cannot run yet" in problems("ray.enabled=true")
    assert "max_staleness=1 is not supported" in problems("rollout.engine.kind=hf_process",
                                                         "rollout.engine.max_staleness=1")
    assert "use algorithm.mask_truncated=true instead" in problems("reward.overlong_buffer=4")
    assert "credit=process adds a per-turn term" in problems("episode.credit=process", "algorithm.advantage=gae",
                                                             "rollout.group_size=1")
    assert "exceeds episode.tokens_per_episode" in problems("episode.tokens_per_turn=300")
    assert "would never run" in problems("episode.process_reward=mymod:score")  # credit is outcome by default
    load_config(None, ["task.name=calculator", "rollout.engine.kind=hf_process"])  # a supported engine passes
    load_config(None, ["reward.overlong_buffer=4"])  # single-turn tasks keep their rules


@pytest.mark.parametrize("name", sorted(TASKS))
def test_episode_tasks_are_the_tasks_with_an_environment(name):
    if name in OPTIONAL:
        pytest.importorskip(OPTIONAL[name])
    config = {"qa": TaskConfig(name="qa", path="tests/data/qa_tiny.jsonl")}.get(name, TaskConfig(name=name))
    try:
        task = build_task(config)
    except (ConfigError, FileNotFoundError) as err:  # a dataset task without its file: its class says it all
        pytest.skip(f"{name} needs data: {err}")
    assert plays_episodes(task) == (name in EPISODE_TASKS)


def test_an_environment_task_keeps_its_own_answer_verifiers_also_from_a_fully_dumped_config():
    from rlvr.agents.wiring import episode_parts
    from rlvr.config.run import validate_config

    config = load_config(None, ["task.name=filesystem"])
    dumped = validate_config(config.model_dump())  # as `rlvr eval` and a run's config.yaml give it: every field set
    for c in (config, dumped):
        assert episode_parts(build_task(c.task), c).config.task.verifiers == {}  # the filesystem scores its state
    chosen = load_config(None, ["task.name=filesystem", "task.verifiers={format: 1.0}"])
    assert episode_parts(build_task(chosen.task), chosen).config.task.verifiers == {"format": 1.0}


def test_commands_that_sample_single_completions_refuse_an_environment_task():
    from rlvr.agents.wiring import SingleTurnOnly, refuse_episodes

    with pytest.raises(SingleTurnOnly, match="rlvr sample samples single completions.*'calculator-l1'"):
        refuse_episodes(build_task(TaskConfig(name="calculator")), "rlvr sample")
    refuse_episodes(build_task(TaskConfig(name="arithmetic")), "rlvr sample")  # single-turn tasks pass


def test_the_episode_settings_reach_the_runner_and_the_rewarder(tiny_model_dir):
    """Every episode.* budget, the observation role, the tool listing and the state weight arrive where they act
    (`Budgets(max_turns=4, ...)` in place of episode.max_turns passed every test)."""
    from transformers import AutoTokenizer

    from rlvr.agents.protocol import Budgets
    from rlvr.agents.wiring import episode_engine, episode_parts, episode_rewarder

    defaults = load_config(None, ["task.name=calculator"]).episode
    chosen = ["episode.max_turns=6", "episode.tokens_per_turn=40", "episode.tokens_per_episode=170",
              "episode.tool_time_limit_s=0.7", "episode.observation_role=user", "episode.list_tools=false",
              "episode.state_weight=0.25"]
    config = load_config(None, ["task.name=filesystem", *chosen])
    for line in chosen:  # the premise: each chosen value differs from its default
        key, value = line.split(".", 1)[1].split("=")
        assert str(getattr(defaults, key)).lower() != value, key

    class TurnEngine:
        def continue_tokens(self, contexts, group_size, sampling):
            raise AssertionError("not played here")

    parts = episode_parts(build_task(config.task), config)
    runner = episode_engine(TurnEngine(), AutoTokenizer.from_pretrained(tiny_model_dir), parts)
    assert runner.budgets == Budgets(max_turns=6, tokens_per_turn=40, tokens_per_episode=170, tool_time_limit_s=0.7)
    assert (runner.rendering.observation_role, runner.rendering.list_tools) == ("user", False)
    assert runner.turn_template.role == "user"
    assert episode_rewarder(parts).weight == 0.25 and parts.state_weight == 0.25
    assert parts.environment.limit_s == 0.7  # the tools' time limit is the environment's to apply


def test_the_python_budgets_default_to_the_configured_ones():
    """`Budgets()` (the protocol's, for code that builds a runner itself) starts from the same budgets as a run
    with no episode.* setting (they were 64 and 256 tokens against the config's 48 and 192)."""
    from rlvr.agents.protocol import Budgets
    from rlvr.agents.wiring import budgets_of
    from rlvr.config.sections import EpisodeConfig

    assert Budgets() == budgets_of(EpisodeConfig())
    assert budgets_of(EpisodeConfig(max_turns=6, tokens_per_turn=40, tokens_per_episode=170, tool_time_limit_s=0.7)) \
        == Budgets(6, 40, 170, 0.7)


def test_episode_parts_leave_the_caller_s_config_alone_and_say_whether_answers_are_scored():
    """episode_parts puts the task's own answer verifiers into a copy of the config: the caller's config (the one
    written to config.yaml and shown in the run log) keeps task.verifiers as given. has_answer_verifiers says
    whether a verifier pool is needed: the filesystem is scored by its state alone, the calculator by "math"."""
    from rlvr.agents.wiring import episode_parts, episode_rewarder

    config = load_config(None, ["task.name=filesystem"])
    before = dict(config.task.verifiers)
    parts = episode_parts(build_task(config.task), config)
    assert parts.config.task.verifiers == {} and config.task.verifiers == before != {}
    assert parts.has_answer_verifiers is False and list(episode_rewarder(parts).components) == ["environment"]
    calculator = load_config(None, ["task.name=calculator"])
    parts = episode_parts(build_task(calculator.task), calculator)
    assert parts.has_answer_verifiers is True and "math" in episode_rewarder(parts).components


def test_an_environment_without_state_and_a_task_without_answer_verifiers_is_one_config_error():
    """Nothing would score such episodes: a task whose environment has no state to check and whose own answer
    verifiers are none is refused when the run is put together, naming the task and the environment."""
    from rlvr.agents.wiring import episode_parts

    class Stateless:
        name, tools, scores_state = "game", (), False

    class Task:
        answer_verifiers: dict[str, float] = {}

        def environment(self, episode_config):
            return Stateless()

    config = load_config(None, ["task.name=calculator"])
    with pytest.raises(ConfigError, match="task.name=calculator: its environment 'game' has no state to check, "
                                          "so task.verifiers must name at least one answer verifier"):
        episode_parts(Task(), config)
    Task.answer_verifiers = {"math": 1.0}  # with an answer verifier it is scored by it
    assert episode_parts(Task(), config).config.task.verifiers == {"math": 1.0}
