"""The held-out split of every built-in task stays where it was: the rule (rank rows by a hash,
hold out max(200, n // 5)) now lives once in rlvr/tasks/base.py, and moving it must move no row between train and
held-out, or a run's evaluation would leak training problems and scores would stop being comparable across runs.

The numbers below were printed by the code BEFORE the rule moved (commit 5d1ff9d, when the environment tasks still
lived in rlvr/agents/envs/ and arithmetic and code_tasks each wrote the rule out themselves): for each task,
len(task.train), len(task.eval_prompts(10**6)), the ids of the first two and of the last held-out prompt, and the
first two ids of train_prompts(0). They are not derived by hand: they pin what the old code did, row for row.
Mutations caught: a divisor other than 5 or a minimum other than 200 (the sizes move), ranking by anything but the
sha256 of the canonical text (the first ids move), dropping the worked example's exclusion (the sizes move).
"""
from __future__ import annotations

import itertools

import pytest

from rlvr.config.run import TaskConfig
from rlvr.tasks import build_task

# (name, level): (train size, held-out size, first two held-out ids, last held-out id, first two train draws, seed 0)
PINNED = {
    ("arithmetic", 1): (137, 200, ["arithmetic-l1/eval/6 * 10", "arithmetic-l1/eval/4 * 3"],
                        "arithmetic-l1/eval/9 + 7", ["arithmetic-l1/train/12 * 10", "arithmetic-l1/train/11 * 5"]),
    ("arithmetic", 2): (12136, 3034, ["arithmetic-l2/eval/69 - 21", "arithmetic-l2/eval/96 + 84"],
                        "arithmetic-l2/eval/36 + 39", ["arithmetic-l2/train/60 - 53", "arithmetic-l2/train/28 + 3"]),
    ("arithmetic", 3): (2334, 583, ["arithmetic-l3/eval/12 + 8 * 10", "arithmetic-l3/eval/3 + 10 * 5"],
                        "arithmetic-l3/eval/61 * 6",
                        ["arithmetic-l3/train/4 + 5 * 0", "arithmetic-l3/train/0 + 0 * 6"]),
    ("arithmetic", 4): (6480, 1620, ["arithmetic-l4/eval/65 * 11", "arithmetic-l4/eval/70 * 30"],
                        "arithmetic-l4/eval/81 * 46", ["arithmetic-l4/train/72 * 31", "arithmetic-l4/train/21 * 14"]),
    ("calculator", 1): (373, 200, ["calculator-l1/eval/fly 12 10", "calculator-l1/eval/fill 8 10"],
                        "calculator-l1/eval/bake 3 8",
                        ["calculator-l1/train/share 12 6", "calculator-l1/train/fill 6 11"]),
    ("calculator", 2): (5327, 1331, ["calculator-l2/eval/birds 10 12 5", "calculator-l2/eval/flowers 5 6 8"],
                        "calculator-l2/eval/pens 4 12 7",
                        ["calculator-l2/train/birds 5 3 5", "calculator-l2/train/flowers 7 10 8"]),
    ("calculator", 3): (7305, 1826, ["calculator-l3/eval/market 8 6 8 5", "calculator-l3/eval/bakery 3 7 7 7"],
                        "calculator-l3/eval/market 4 3 3 7",
                        ["calculator-l3/train/market 9 4 7 7", "calculator-l3/train/garden 2 8 9 8"]),
    ("filesystem", 1): (2048, 512, ["filesystem-l1/eval/mkdir|data.csv|old|42",
                                    "filesystem-l1/eval/move_into|report.md|projects|42"],
                        "filesystem-l1/eval/move_into|report.md|archive|meeting at 5",
                        ["filesystem-l1/train/rename|ideas.md|draft.txt|meeting at 5",
                         "filesystem-l1/train/write|report.md|notes.txt|meeting at 5"]),
    ("filesystem", 2): (973, 243, ["filesystem-l2/eval/move_out|data.csv|old|42",
                                   "filesystem-l2/eval/mkdir_move|plan.txt|projects|draft one"],
                        "filesystem-l2/eval/mkdir_move|ideas.md|docs|42",
                        ["filesystem-l2/train/copy|draft.txt|plan.txt|done",
                         "filesystem-l2/train/mkdir_move|list.txt|docs|meeting at 5"]),
    ("code_agent", None): (519, 200, ["code_agent/eval/dist 10", "code_agent/eval/max 43"], "code_agent/eval/dist 12",
                           ["code_agent/train/divisible 41", "code_agent/train/mul 22"]),
}


@pytest.mark.parametrize("name, level", sorted(PINNED, key=str))
def test_the_held_out_rows_are_those_of_the_old_code(name, level):
    train_size, held_size, head, last, draws = PINNED[name, level]
    task = build_task(TaskConfig(name=name) if level is None else TaskConfig(name=name, level=level))
    held = task.eval_prompts(10**6)
    assert (len(task.train), len(held)) == (train_size, held_size)
    assert [p.id for p in held[:2]] == head and held[-1].id == last
    assert [p.id for p in itertools.islice(task.train_prompts(0), 2)] == draws


def test_reasoning_gym_holds_out_as_before():
    """Its held-out stream is max(200, gym_size // 5) + 1 rows of seed gym_size (the +1: the one-shot example),
    minus repeats; pinned from the old code as above: 2000 train rows; of the 401 rows of seed 2000, row 0 is the
    example and one of the other 400 repeats a question seen before, leaving 399."""
    pytest.importorskip("reasoning_gym")
    task = build_task(TaskConfig(name="reasoning_gym"))
    held = task.eval_prompts(10**6)
    assert (len(task.train), len(held)) == (2000, 399)
    assert [p.id for p in held[:2]] == ["reasoning_gym/basic_arithmetic/eval/2000:1",
                                        "reasoning_gym/basic_arithmetic/eval/2000:2"]
    assert held[-1].id == "reasoning_gym/basic_arithmetic/eval/2000:400"
