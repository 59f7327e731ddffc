"""reasoning-gym as a task with its own scorer: rlvr/tasks/reasoning_gym.py and
rlvr/verifiers/reasoning_gym.py. The reference and config checks run without the library; the rest skip when the
optional extra `gym` (reasoning-gym) is not installed."""
from __future__ import annotations

import json
import sys

import pytest

from rlvr.config.run import ConfigError, TaskConfig, load_config
from rlvr.types import Outcome
from rlvr.verifiers import build_verifiers
from rlvr.verifiers.reasoning_gym import GymRow, ReasoningGymVerifier

# 2-term sums of 2-digit numbers: 90 * 90 = 8100 questions, so 500 train rows and 200 held-out rows share about
# 200 * (1 - (1 - 1/8100) ** 500) ~ 12 questions: enough for the repeat-dropping to matter, few enough to keep 150
SMALL = {"min_terms": 2, "max_terms": 2, "min_digits": 2, "max_digits": 2, "operators": ["+"],
         "allow_parentheses": False, "allow_negation": False}


def gym_task_config(**extra) -> TaskConfig:
    return TaskConfig(**{"name": "reasoning_gym", "verifiers": {"reasoning_gym": 1.0}, "gym_config": SMALL,
                         "gym_size": 500, **extra})


# ---------------------------------------------------------------- without the library
@pytest.mark.parametrize("reference, why", [
    ("not json", "not JSON"),
    ('{"dataset": "x"}', "keys"),
    (json.dumps({"dataset": "x", "config": {}, "seed": True, "size": 5, "index": 0, "question": "q"}), "'seed'"),
    (json.dumps({"dataset": "x", "config": {}, "seed": 0, "size": 5, "index": 5, "question": "q"}), "outside"),
])
def test_a_bad_reference_is_an_unscorable_error(reference, why):
    # caught: dropping the bool exclusion lets seed=True through (a reference rlvr never writes)
    verdict = ReasoningGymVerifier().verify("<answer>1</answer>", reference)
    assert verdict.outcome is Outcome.ERROR and not verdict.scorable and why in verdict.detail


def test_the_task_and_its_verifier_go_together():
    # caught: dropping the rule in rules._task_problems (the default math verifier would score every row 0)
    with pytest.raises(ConfigError, match="go together"):
        load_config(overrides=["task.name=reasoning_gym"])
    with pytest.raises(ConfigError, match="go together"):
        load_config(overrides=["task.verifiers={reasoning_gym: 1.0}"])
    config = load_config(overrides=["task.name=reasoning_gym", "task.verifiers={reasoning_gym: 1.0}"])
    assert set(build_verifiers(config.task)) == {"reasoning_gym"}


def test_without_the_library_the_task_and_verifier_say_how_to_install_it(monkeypatch):
    from rlvr.tasks import build_task

    monkeypatch.setitem(sys.modules, "reasoning_gym", None)  # import reasoning_gym -> ImportError
    with pytest.raises(ConfigError, match=r"pip install 'rlvr\[gym\]'"):
        build_task(gym_task_config(gym_size=7))  # 7: no split of a test with the library is cached
    row = GymRow("chain_sum", {"min_terms": 3}, 0, 3, 1, "q")  # a dataset no other test has made (cache)
    verdict = ReasoningGymVerifier().verify("<answer>1</answer>", row.as_reference())
    assert verdict.outcome is Outcome.ERROR and not verdict.scorable and "pip install" in verdict.detail


# ---------------------------------------------------------------- with the library
@pytest.fixture(scope="module")
def task():
    pytest.importorskip("reasoning_gym")
    from rlvr.tasks import build_task

    return build_task(gym_task_config())


def answer_of(prompt) -> str:
    import reasoning_gym

    row = json.loads(prompt.reference)
    return reasoning_gym.create_dataset(row["dataset"], seed=row["seed"], size=row["size"], **row["config"])[
        row["index"]]["answer"]


def test_its_own_scorer_decides(task):
    prompt = task.eval_prompts(1)[0]
    answer = answer_of(prompt)
    assert prompt.messages[-1]["content"].endswith("between <answer> and </answer>.")
    verifier = ReasoningGymVerifier()
    right = verifier.verify(f"It is {answer}.\n<answer>{answer}</answer>", prompt.reference)
    assert right.outcome is Outcome.CORRECT and right.score == 1.0
    wrong = verifier.verify(f"<answer>{int(answer) + 1}</answer>", prompt.reference)
    assert wrong.outcome is Outcome.WRONG and wrong.score == 0.0
    assert verifier.verify(f"Answer: {answer}", prompt.reference).outcome is Outcome.UNPARSEABLE
    # caught: dropping strip_thinking (the block inside the reasoning would be read as the answer)
    hidden = verifier.verify(f"<think><answer>{answer}</answer></think> I give up", prompt.reference)
    assert hidden.outcome is Outcome.UNPARSEABLE


def test_the_default_scorer_gives_partial_credit(task):
    # reasoning-gym's default scorer: the oracle inside a longer answer earns len(oracle) / len(answer)
    prompt = task.eval_prompts(1)[0]
    answer = answer_of(prompt)  # a sum of two 2-digit numbers: 2 or 3 characters
    verdict = ReasoningGymVerifier().verify(f"<answer>{answer}0</answer>", prompt.reference)
    assert verdict.outcome is Outcome.WRONG and verdict.score == pytest.approx(len(answer) / (len(answer) + 1))


def test_a_row_that_regenerates_differently_is_never_rewarded(task):
    # caught: dropping the question check (the answer would be scored against whatever row came back)
    prompt = task.eval_prompts(1)[0]
    answer = answer_of(prompt)
    row = json.loads(prompt.reference)
    assert ReasoningGymVerifier().verify(f"<answer>{answer}</answer>", prompt.reference).score == 1.0
    forged = json.dumps({**row, "question": row["question"] + " "})
    verdict = ReasoningGymVerifier().verify(f"<answer>{answer}</answer>", forged)
    assert verdict.outcome is Outcome.ERROR and not verdict.scorable and "another question" in verdict.detail


def test_a_scorer_that_raises_becomes_an_error(task, monkeypatch):
    from rlvr.verifiers.reasoning_gym import make_dataset

    prompt = task.eval_prompts(1)[0]
    row = GymRow.from_reference(prompt.reference)
    dataset = make_dataset(row.dataset, row.config, row.seed, row.size)  # the verifier's cached instance

    def boom(answer, entry):
        raise KeyError("metadata")

    monkeypatch.setattr(dataset, "score_answer", boom)
    verdict = ReasoningGymVerifier().verify("<answer>3</answer>", prompt.reference)
    assert verdict.outcome is Outcome.ERROR and verdict.scorable and "scorer raised" in verdict.detail


def test_held_out_rows_are_another_seed_and_never_train_questions(task):
    train = {row.question for row in task.train}
    held = task.held_out
    assert {row.seed for row in task.train} == {0} and {row.seed for row in held} == {500}
    assert not train & {row.question for row in held}  # caught: keeping held-out rows whose question is in train
    assert len({row.question for row in held}) == len(held)
    # caught: a held-out seed next to the train one (seed 1): rows 0..198 of seed 1 are rows 1..199 of seed 0,
    # all dropped as repeats, leaving a few
    assert 150 <= len(held) <= 200
    example = task.example[0].split(" Put only")[0]  # the one-shot question, in neither split
    assert example not in train and example not in {row.question for row in held}
    assert [r.index for r in held] == sorted(r.index for r in held) and held[0].index >= 1  # 0: the example
    assert [p.id for p in task.eval_prompts(3)] == [f"reasoning_gym/basic_arithmetic/eval/500:{r.index}"
                                                     for r in held[:3]]


def test_train_stream_is_deterministic_and_one_shot(task):
    import itertools

    first = [p.id for p in itertools.islice(task.train_prompts(7), 5)]
    assert first == [p.id for p in itertools.islice(task.train_prompts(7), 5)]
    assert first != [p.id for p in itertools.islice(task.train_prompts(8), 5)]
    roles = [m["role"] for m in next(task.train_prompts(7)).messages]
    assert roles == ["user", "assistant", "user"]
    assert next(task.train_prompts(7)).messages[1]["content"].startswith("<answer>")


@pytest.mark.parametrize("update, message", [
    ({"gym_dataset": "basic_arithmetc"}, "did you mean basic_arithmetic"),
    ({"gym_config": {"seed": 3}}, "set by rlvr's split"),
    ({"gym_config": {"min_terms": 0}}, "refused"),
    ({"gym_config": {"no_such_field": 1}}, "refused"),
    ({"gym_config": {**SMALL, "min_digits": 1, "max_digits": 1}, "gym_size": 2000}, "held-out questions"),
])
def test_bad_dataset_choices_are_one_config_error(update, message):
    pytest.importorskip("reasoning_gym")
    from rlvr.tasks import build_task

    with pytest.raises(ConfigError, match=message):
        build_task(gym_task_config().model_copy(update=update))


def test_a_generator_that_is_not_deterministic_is_refused(monkeypatch):
    reasoning_gym = pytest.importorskip("reasoning_gym")
    import itertools

    from rlvr.tasks import build_task

    counter = itertools.count()
    real = reasoning_gym.create_dataset

    def drifting(name, **kwargs):  # row 0's question changes on every creation, as an unseeded generator's would
        dataset = real(name, **kwargs)
        return [{"question": f"q{next(counter)}", "answer": "1", "metadata": {}}] if kwargs.get("size") == 1 \
            else dataset

    monkeypatch.setattr(reasoning_gym, "create_dataset", drifting)
    with pytest.raises(ConfigError, match="different rows from the same seed"):
        build_task(gym_task_config().model_copy(update={"gym_size": 499}))  # 499: not the cached split
