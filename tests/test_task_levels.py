"""task.train_levels: train prompts drawn from several levels of one task, a level chosen uniformly per prompt;
held-out prompts, name and environment from task.level (rlvr/tasks/levels.py)."""
from __future__ import annotations

import itertools
import json

import pytest

from rlvr.config.run import ConfigError, TaskConfig, load_config
from rlvr.config.sections import EpisodeConfig
from rlvr.tasks import build_task
from rlvr.tasks.envs.calculator import CalculatorEnvironment, splits
from rlvr.tasks.levels import LevelMix


def level_of(prompt_id: str) -> int:
    return int(prompt_id.split("/")[0].rsplit("-l", 1)[1])  # "calculator-l2/train/birds 3 4 5" -> 2


def test_levels_are_drawn_uniformly_not_by_split_size() -> None:
    task = build_task(TaskConfig(name="calculator", level=2, train_levels=[1, 2]))
    assert isinstance(task, LevelMix) and task.name == "calculator-l2"
    stream = task.train_prompts(0)
    drawn = [next(stream) for _ in range(400)]
    ones = sum(level_of(p.id) == 1 for p in drawn)
    # uniform over levels: Binomial(400, 1/2), mean 200, sd 10; by split size it would be 373 / (373 + 5327) of
    # the train problems, ~26 of 400
    assert 150 <= ones <= 250
    held = {p.canonical for level in (1, 2) for p in splits(level)[1]}
    assert not {p.id.split("/train/")[1] for p in drawn} & held  # no level leaks its held-out problems
    # each prompt is its level's own (the expression has level operations)
    assert all(sum(p.columns["expression"].count(op) for op in "+-*/") == level_of(p.id) for p in drawn)


def test_stream_is_exact_by_seed_and_evaluation_is_the_evaluated_level() -> None:
    config = TaskConfig(name="calculator", level=2, train_levels=[1, 2])
    first, again, other = (build_task(config).train_prompts(s) for s in (5, 5, 6))
    ids = [next(first).id for _ in range(30)]
    assert ids == [next(again).id for _ in range(30)] and ids != [next(other).id for _ in range(30)]
    task = build_task(config)
    assert [p.id for p in task.eval_prompts(20)] == [p.id for p in build_task(TaskConfig(
        name="calculator", level=2)).eval_prompts(20)]
    assert isinstance(task.environment(EpisodeConfig()), CalculatorEnvironment) and task.answer_verifiers is None


def test_the_evaluated_level_is_not_trained_when_train_levels_leaves_it_out() -> None:
    """task.level=3 with train_levels=[1, 2]: training draws levels 1 and 2 only, held-out prompts are level 3's
    (a mix that kept task.level among the trained levels passed every other test)."""
    task = build_task(TaskConfig(name="calculator", level=3, train_levels=[1, 2]))
    assert sorted(task.levels) == [1, 2]
    stream = task.train_prompts(0)
    assert {level_of(next(stream).id) for _ in range(200)} == {1, 2}  # P(a level missing) = 2 * 2^-200
    assert {level_of(p.id) for p in task.eval_prompts(10)} == {3} and task.name == "calculator-l3"


def test_train_levels_of_the_level_alone_is_the_plain_task_and_bad_levels_are_refused(tmp_path) -> None:
    assert not isinstance(build_task(TaskConfig(name="calculator", level=2, train_levels=[2])), LevelMix)
    with pytest.raises(ConfigError, match=r"task.train_levels: task.level: calculator has levels 1, 2, 3 .*got 4"):
        build_task(TaskConfig(name="calculator", train_levels=[1, 4]))
    rows = tmp_path / "qa.jsonl"
    rows.write_text("".join(json.dumps({"question": f"{i} + 1?", "answer": str(i + 1)}) + "\n" for i in range(20)))
    with pytest.raises(ConfigError, match="task.train_levels: task 'qa' has no levels"):
        build_task(TaskConfig(name="qa", path=str(rows), train_levels=[1, 2]))
    for bad in ("[]", "[1, 1, 2]"):  # no level; a level twice (it would silently weigh double)
        with pytest.raises(ConfigError, match="train_levels"):
            load_config(None, [f"task.train_levels={bad}"])


def test_phrasing_carries_over_to_every_level_of_the_mix() -> None:
    # Each level's task is built from the same TaskConfig with another level: catches a LevelMix level built from a
    # fresh TaskConfig (it would ask symbols).
    task = build_task(TaskConfig(level=2, train_levels=[1, 2], phrasing="words"))
    assert isinstance(task, LevelMix)
    drawn = list(itertools.islice(task.train_prompts(0), 60))
    assert {p.columns["set"] for p in drawn} == {"L1 words", "L2 words"}
    assert all(f"arithmetic-l{p.columns['level']}/train/words/" in p.id for p in drawn)
    assert all(p.columns["set"] == "L2 words" for p in task.eval_prompts(20))


def test_level_streams_are_distinct_for_every_seed_and_level(monkeypatch) -> None:
    """Each (seed, level) gets its own stream seed: two levels of one run, or one level of two seeds, never replay
    the same problems. The mix passes each level a whole-number seed derived from the run's."""
    seen: dict[tuple[int, int], object] = {}

    class Recorder:
        def __init__(self, level: int) -> None:
            self.level = level

        def train_prompts(self, seed):
            seen[(run_seed, self.level)] = seed
            return iter(())

    mix = LevelMix({level: Recorder(level) for level in (1, 2, 3)}, Recorder(3))
    for run_seed in range(3000):
        with pytest.raises(RuntimeError):  # the recorders' streams are empty: the mix's generator stops
            next(mix.train_prompts(run_seed))
    assert all(type(s) is int for s in seen.values())
    assert len(set(seen.values())) == len(seen) == 3 * 3000


def test_a_level_mix_survives_copy_and_pickle() -> None:
    """copy and pickle build the object before its attributes exist; the mix's attribute forwarding must then say
    "no such attribute", not recurse (the hf_process engine and deep-copied configs move tasks between processes)."""
    import copy
    import pickle

    task = build_task(TaskConfig(name="calculator", level=2, train_levels=[1, 2]))
    for twin in (copy.deepcopy(task), pickle.loads(pickle.dumps(task))):
        assert twin.name == "calculator-l2" and sorted(twin.levels) == [1, 2]
        assert [next(twin.train_prompts(3)).id for _ in range(2)] == [next(task.train_prompts(3)).id] * 2
