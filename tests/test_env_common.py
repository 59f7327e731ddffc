"""What the built-in environment tasks share: the hashed held-out split's guards (rlvr/tasks/base.py, every
enumerated task's split), and from rlvr/tasks/envs/common.py the one-shot exchange's system turn and SplitTask's
contract."""
from __future__ import annotations

import dataclasses

import pytest

from rlvr.config.run import TaskConfig
from rlvr.tasks.base import split_by_hash
from rlvr.tasks.envs.common import Example, ExampleTurn, SplitTask, one_shot_messages


def test_a_split_refuses_duplicate_identities():
    """Two problems with one canonical text would put the same prompt id in both splits: a leak, refused."""
    problems = [f"p{i}" for i in range(300)] + ["p7"]
    with pytest.raises(ValueError, match="share a canonical text; the held-out split would leak"):
        split_by_hash(problems, str)


def test_a_split_needs_something_left_to_train_on():
    """max(200, n // 5) are held out: 201 problems leave 1 to train on, 200 leave none (refused)."""
    train, held = split_by_hash([f"p{i}" for i in range(201)], str)
    assert (len(train), len(held)) == (1, 200)
    with pytest.raises(ValueError, match="200 problems leave none to train on after 200 held out"):
        split_by_hash([f"p{i}" for i in range(200)], str)


EXAMPLE = Example("What is 1 + 1?", "I will use the calculator.",
                  (ExampleTurn((("calculate", {"expression": "1 + 1"}),), ("2",)),), "Answer: 2")


def test_the_system_prompt_opens_the_messages_before_the_worked_exchange():
    config = TaskConfig(name="calculator", system_prompt="Be brief.")
    with_system = one_shot_messages([EXAMPLE], "What is 2 + 2?", config)
    assert with_system[0] == {"role": "system", "content": "Be brief."}
    assert [m["role"] for m in with_system] == ["system", "user", "assistant", "tool", "assistant", "user"]
    without = one_shot_messages([EXAMPLE], "What is 2 + 2?", TaskConfig(name="calculator", system_prompt=None))
    assert without == with_system[1:]


def test_worked_examples_cannot_be_changed():
    """A task's worked examples are module constants every prompt of the process is built from: frozen."""
    one_shot_messages([EXAMPLE], "?", TaskConfig(name="calculator"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        EXAMPLE.answer = "Answer: 3"
    with pytest.raises(dataclasses.FrozenInstanceError):
        EXAMPLE.turns[0].results = ("3",)


def test_a_split_task_without_prompt_fails_loudly():
    """A subclass that forgets `prompt` raises instead of streaming None prompts into training."""
    class Forgetful(SplitTask):
        name, train, held_out = "forgetful", ("a",), ("b",)

    with pytest.raises(NotImplementedError):
        next(Forgetful().train_prompts(0))
    with pytest.raises(NotImplementedError):
        Forgetful().eval_prompts(1)


class Letters(SplitTask):
    name, train, held_out = "letters", ("a", "b"), ("x", "y", "z")

    def prompt(self, problem, split):
        return f"{split}/{problem}"


def test_eval_prompts_takes_any_size_from_zero():
    """eval.size=0 is a run without evaluation prompts; a negative size is a mistake, refused."""
    task = Letters()
    assert task.eval_prompts(0) == [] and task.eval_prompts(2) == ["eval/x", "eval/y"]
    assert task.eval_prompts(10) == ["eval/x", "eval/y", "eval/z"]  # the whole held-out split at most
    with pytest.raises(ValueError, match="eval size must be >= 0, got -1"):
        task.eval_prompts(-1)
