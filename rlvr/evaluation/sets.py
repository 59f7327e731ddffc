"""The held-out prompts an evaluation runs on: task's own, or those of every eval.sets entry.

Why sets: the R1 recipe trains on one level; whether the reasoning it learned carries to harder levels (or to a new
phrasing of the same problems) is only visible when each is measured on its own, in the same run and with the same
model. Each set is a partial task override ({level: 3}); its prompts carry a "set" column with the set's label, so
the evaluation reports every estimator per set (evaluate.py's breakdown). The keys a set may change are checked
with the config (rlvr/config/rules.py, EVAL_SET_FIXED): one rewarder, built from task, scores every set.

`rlvr eval`, `rlvr eval --scaling` and the training loop's evaluations all read their prompts from here.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from rlvr.config.run import ConfigError, RunConfig, TaskConfig
from rlvr.tasks import build_task
from rlvr.tasks.base import Task
from rlvr.types import Prompt

SET_COLUMN = "set"  # the Prompt.columns key holding a prompt's set label (a breakdown key of evaluate.py)


def set_label(entry: dict[str, Any]) -> str:
    """'level=3 phrasing=words_new': the set's keys as given; 'task' for {} (task's own prompts)."""
    return " ".join(f"{key}={value}" for key, value in entry.items()) or "task"


def set_task_config(task: TaskConfig, entry: dict[str, Any]) -> TaskConfig:
    """task with the set's keys overridden; no train_levels: a set is only evaluated, so no training level of it is
    built (the config check has refused a set that names train_levels, or an unknown key)."""
    return TaskConfig.model_validate({**task.model_dump(), "train_levels": None, **entry})


def evaluation_prompts(config: RunConfig, task: Task | None = None, size: int | None = None) -> list[Prompt]:
    """Without eval.sets: the first `size` (default eval.size) held-out prompts of `task` (built from config.task
    when not given) after the first eval.offset. With them: the same of each set's, set after set, each tagged with
    its set's label (replacing a "set" column the task itself wrote: the label is always the set's). Two sets that
    yield the same prompt id (the same level twice) are a ConfigError: their results could not be told apart."""
    size, skip = (config.eval.size if size is None else size), config.eval.offset
    if config.eval.sets is None:
        return (task if task is not None else build_task(config.task)).eval_prompts(skip + size)[skip:]
    prompts: list[Prompt] = []
    owner: dict[str, int] = {}  # prompt id -> index of the set that holds it
    for i, entry in enumerate(config.eval.sets):
        label = set_label(entry)
        for prompt in build_task(set_task_config(config.task, entry)).eval_prompts(skip + size)[skip:]:
            if prompt.id in owner:
                raise ConfigError(f"eval.sets[{i}] ({label}) holds prompt {prompt.id!r}, as eval.sets["
                                  f"{owner[prompt.id]}] does: each set must hold other problems (is a level or "
                                  "phrasing named twice?)")
            owner[prompt.id] = i
            prompts.append(replace(prompt, columns={**prompt.columns, SET_COLUMN: label}))
    return prompts
