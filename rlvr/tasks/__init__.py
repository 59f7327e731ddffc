"""Verifiable task sources: where prompts (with reference answers) come from (the Task contract:
rlvr/tasks/base.py).

Tasks are chosen once from `TASKS` (docs/design.md principle 5), made from the one list of built-in tasks
(rlvr/config/task_catalog.py). The factories import their module lazily so that the arithmetic path never pays for
importing `datasets`. The environment tasks (multi-turn, with tools: calculator, filesystem, code) are in envs/.
"""
from __future__ import annotations

import importlib
from typing import Callable

from rlvr.config.rules import REGISTERED_TASKS
from rlvr.config.run import ConfigError, TaskConfig
from rlvr.config.task_catalog import BUILTIN_TASKS
from rlvr.tasks.base import Task
from rlvr.tasks.focus import Focused
from rlvr.tasks.levels import LevelMix
from rlvr.tasks.phrasings import check_phrasing


def _factory(where: str) -> Callable[[TaskConfig], Task]:
    """The factory of a built-in task: imports its module when the task is built, not when rlvr.tasks is."""
    module, _, attr = where.partition(":")

    def build(config: TaskConfig) -> Task:
        return getattr(importlib.import_module(module), attr)(config)
    return build


# Made from the one list of built-in tasks (rlvr/config/task_catalog.py: a new task is one line there, which config
# validation also reads); register_task adds a script's own.
TASKS: dict[str, Callable[[TaskConfig], Task]] = {name: _factory(task.where) for name, task in BUILTIN_TASKS.items()}


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
