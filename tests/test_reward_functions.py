"""Your own reward functions: reward.functions in the config and train(reward_funcs=...), TRL's
calling convention, unclamped values, one clear error per broken function, and what config.yaml records."""
from __future__ import annotations

import json
import os
import sys

import numpy
import pytest
import torch
import yaml

from rlvr.cli.main import main
from rlvr.config.run import ConfigError, load_config
from rlvr.errors import UserFacingError
from rlvr.evaluation.evaluate import gated_names
from rlvr.grpo.loop import train
from rlvr.rewards.functions import (
    RewardFunctionError,
    UserFunction,
    load_reward_function,
    recorded_name,
    sort_passed,
    with_functions,
)
from rlvr.rewards.rewarder import Rewarder, build_rewarder
from rlvr.sampling.run import Sampler
from rlvr.types import Outcome, Prompt, RolloutBatch
from rlvr.verifiers.math.verifier import MathVerifier

MESSAGES = ({"role": "system", "content": "be brief"}, {"role": "user", "content": "3 + 4?"})
PROMPT = Prompt(id="t/3+4", messages=MESSAGES, reference="7", columns={"level": 1})


def length_penalty(completions, **kwargs):
    return [-len(c) / 1000 for c in completions]


SEEN: dict[str, object] = {}


def id_parity(completion_ids, **kwargs):
    """-1, 0 or 1 from the sampled ids: differs within a group where the verifier's 0s all tie."""
    SEEN["pid"] = os.getpid()
    return [float(sum(ids) % 3) - 1.0 for ids in completion_ids]


def user(function, name="mymodule:length_penalty", conversational=False) -> UserFunction:
    return UserFunction(name, function, conversational)


def test_config_refuses_a_malformed_function_spec():
    with pytest.raises(ConfigError, match="reward.functions: 'length_penalty' is not 'module:function'"):
        load_config(None, ['reward.functions={"length_penalty": 1}'])
    # `true` is a YAML slip, not the weight 1 (pydantic would read it so); the number 1 is a weight
    with pytest.raises(ConfigError, match="the weight of 'm:f' is true, not a number"):
        load_config(None, ['reward.functions={"m:f": true}'])
    assert load_config(None, ['reward.functions={"m:f": 1}']).reward.functions == {"m:f": 1.0}


@pytest.fixture
def in_a_project(tmp_path, monkeypatch):
    """A working directory with a module and a file of reward functions; sys.path is restored afterwards."""
    (tmp_path / "rf_mod_48.py").write_text("CONSTANT = 3\n\ndef short(completions, **kwargs):\n"
                                           "    return [1.0 if len(c) < 4 else 0.0 for c in completions]\n")
    (tmp_path / "rewards").mkdir()
    (tmp_path / "rewards" / "mine.py").write_text("def boom(completions, **kwargs):\n    raise KeyError('solution')\n")
    (tmp_path / "broken.py").write_text("1 / 0\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    return tmp_path


def test_module_and_file_forms_load_from_the_working_directory(in_a_project):
    # `rlvr` is a console script: the working directory is not on sys.path until the loader adds it
    assert load_reward_function("rf_mod_48:short")(completions=["abc", "abcdef"]) == [1.0, 0.0]
    with pytest.raises(KeyError):
        load_reward_function("rewards/mine.py:boom")(completions=["x"])


@pytest.mark.parametrize("spec, message", [
    ("no_such_module_48:f", "cannot import 'no_such_module_48:f': ModuleNotFoundError"),
    ("rf_mod_48:missing", "'rf_mod_48:missing': rf_mod_48 has no attribute 'missing'"),
    ("rf_mod_48:CONSTANT", "'rf_mod_48:CONSTANT' is an int, not a function"),
    ("nowhere/mine.py:f", "'nowhere/mine.py' does not exist"),
    ("broken.py:f", "cannot import 'broken.py:f': ZeroDivisionError: division by zero"),
])
def test_a_bad_spec_is_one_config_error(in_a_project, spec, message):
    with pytest.raises(ConfigError) as found:
        load_reward_function(spec)
    assert message in str(found.value) and "\n" not in str(found.value)


def test_negative_and_large_values_reach_the_total_unclamped():
    rewarder = Rewarder({"math": (MathVerifier(), 1.0), "mymodule:length_penalty": (user(length_penalty), 1.0),
                         "mymodule:bonus": (user(lambda completions, **_: [2.5, 2.5], "mymodule:bonus"), 0.2)})
    scored = rewarder.score([PROMPT, PROMPT], ["Answer: 7", "Answer: 8"])
    # math [1, 0]; length_penalty -9/1000 each (9 characters); bonus 2.5 x 0.2 = 0.5:
    # reward = [1 - 0.009 + 0.5, 0 - 0.009 + 0.5] = [1.491, 0.491] (clamped to [0, 1] it was [1.2, 0.2])
    assert scored.rewards.tolist() == pytest.approx([1.491, 0.491])
    assert scored.scores["mymodule:length_penalty"].tolist() == pytest.approx([-0.009, -0.009])


def boom(prompts, completions, **columns):
    raise KeyError("solution")


@pytest.mark.parametrize("function, n, message", [
    (lambda completions, **_: [0.0] * 7, 8, "reward function mymodule:length_penalty returned 7 values for 8 "
                                            "completions"),
    (boom, 2, "reward function mymodule:length_penalty raised KeyError: 'solution' (at "),
    (lambda completions, **_: [0.5, "1.0"], 2, "returned str '1.0', not a number or None for completion 1 ('b')"),
    (lambda completions, **_: [float("inf"), 0.0], 2, "returned inf, not a finite number for completion 0 ('a')"),
    # the completion is quoted by its first 40 characters
    (lambda completions, **_: [None, "x"], 2, f"for completion 1 ({'b' * 40!r})"),
    (lambda completions, **_: 1.0, 2, "returned float '1.0', not a list of 2 values"),
    # one value too many is as wrong as one too few (kills `!= n` -> `< n`)
    (lambda completions, **_: [0.0] * 3, 2, "reward function mymodule:length_penalty returned 3 values for 2 "
                                            "completions"),
    # a dict or a set has a length but no order: list() of a dict gives its KEYS (kills dropping Mapping/Set)
    (lambda completions, **_: {0.5: "a", 1.0: "b"}, 2, "returned dict \"{0.5: 'a', 1.0: 'b'}\", not a list of 2"),
    (lambda completions, **_: {0.5, 1.0}, 2, "returned set '{0.5, 1.0}', not a list of 2 values"),
    (lambda completions, **_: (len(c) for c in completions), 2, "returned generator "),
    # 0-d: a __len__ that raises TypeError (kills dropping the try around list())
    (lambda completions, **_: torch.tensor(1.0), 2, "returned Tensor 'tensor(1.)', not a list of 2 values"),
    (lambda completions, **_: numpy.array(1.0), 2, "returned ndarray '1.0', not a list of 2 values"),
    (lambda completions, **_: [10 ** 400, 0.0], 2, "returned 1000000000000000000000000000000000000000..., a number "
                                                  "too large for a float for completion 0 ('a')"),
    # 1e20 would zero every advantage of its group in float32 ((1e20)**2 overflows; 1e39 is inf there): refused,
    # with 1e15 itself still a score (kills `>` -> `>=` only with a case at the bound: test_the_reward_bound...)
    (lambda completions, **_: [0.0, -2e15], 2, "returned -2e+15, beyond +-1e+15: rewards go through float32"),
])
def test_a_broken_function_is_one_error_naming_it(function, n, message):
    completions = ["a", "b" * 50, *["c"] * (n - 2)] if "'bbb" in message else ["a", "b", *["c"] * (n - 2)]
    with pytest.raises(RewardFunctionError) as found:
        Rewarder({"mymodule:length_penalty": (user(function), 1.0)}).score([PROMPT] * n, completions)
    assert message in str(found.value)
    assert isinstance(found.value, UserFacingError)  # the CLI prints it as one line, exit 2
    if function is boom:  # the line points at the user's own code
        assert f"{__file__}:" in str(found.value) and str(found.value).endswith("in boom)")


def test_a_function_given_twice_counts_twice():
    # TRL sums reward_funcs=[f, f]; keeping one entry per name halved the reward (weights 1 + 1 -> 1)
    name = recorded_name(length_penalty)  # this module as pytest imported it
    assert name is not None and name.endswith(":length_penalty")
    assert sort_passed([length_penalty, length_penalty]).recorded == {name: 2.0}
    assert sort_passed({length_penalty: 0.5}).recorded == {name: 0.5}


def test_the_reward_bound_is_inclusive_and_such_rewards_still_make_finite_advantages():
    from rlvr.algorithms.advantages import grpo_advantages

    scored = Rewarder({"m:f": (user(lambda completions, **_: [1e15, -1e15, 0.0, 0.0], "m:f"), 1.0)}).score(
        [PROMPT] * 4, ["a", "b", "c", "d"])
    assert scored.rewards.tolist() == pytest.approx([1e15, -1e15, 0.0, 0.0], rel=1e-7)  # float32: 9.99999987e14
    # one group [1e15, -1e15, 0, 0]: mean 0, Bessel std sqrt(2e30 / 3) = 8.165e14, advantages 1.2247, -1.2247, 0, 0
    advantages = grpo_advantages(scored.rewards.float(), group_size=4)
    assert advantages.tolist() == pytest.approx([1.2247, -1.2247, 0.0, 0.0], abs=1e-3)


def test_numpy_and_torch_scalars_and_bools_are_numbers():
    values = [numpy.True_, numpy.bool_(False), numpy.float32(0.5), torch.tensor(2.0), True, numpy.float64("nan")]
    scored = Rewarder({"m:f": (user(lambda completions, **_: values, "m:f"), 1.0)}).score([PROMPT] * 6, ["x"] * 6)
    # True -> 1, False -> 0 (as TRL takes numpy bools: kills dropping numpy.generic); NaN -> not applicable, 0
    assert scored.scores["m:f"].tolist() == [1.0, 0.0, 0.5, 2.0, 1.0, 0.0]
    assert [v.outcome for v in scored.verdicts["m:f"]][4:] == [Outcome.CORRECT, Outcome.UNPARSEABLE]


@pytest.mark.parametrize("column", ["prompts", "completions", "completion_ids"])
def test_a_dataset_column_named_as_a_trl_argument_is_refused(column):
    prompt = Prompt(id="t/1", messages=MESSAGES, reference="7", columns={column: "shadow", "level": 1})
    rewarder = Rewarder({"m:f": (user(lambda completions, **_: [0.0] * len(completions), "m:f"), 1.0)})
    with pytest.raises(RewardFunctionError, match=f"the dataset has a column named '{column}'.*rename that column"):
        rewarder.score([prompt], ["x"], completion_ids=[[1]])
    # verifiers alone never see the columns: nothing to refuse
    assert Rewarder({"math": (MathVerifier(), 1.0)}).score([prompt], ["Answer: 7"]).rewards.tolist() == [1.0]


def test_a_file_spec_is_recorded_absolute_and_works_from_another_directory(in_a_project, tmp_path_factory,
                                                                            monkeypatch):
    config = load_config(None, ['reward.functions={"rewards/mine.py:boom": 0.5, "rf_mod_48:short": 1}'])
    absolute = f"{in_a_project / 'rewards' / 'mine.py'}:boom"
    assert config.reward.functions == {absolute: 0.5, "rf_mod_48:short": 1.0}  # a module name stays as written
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (elsewhere / "config.yaml").write_text(yaml.safe_dump({"reward": {"functions": {absolute: 0.5}}}))
    monkeypatch.chdir(elsewhere)  # `rlvr eval RUN` from another directory
    assert build_rewarder(load_config(elsewhere / "config.yaml")).components[absolute][0].function.__name__ == "boom"
    monkeypatch.setenv("HOME", str(in_a_project))
    assert load_config(None, ['reward.functions={"~/rewards/mine.py:boom": 1}']).reward.functions == {absolute: 1.0}
    assert load_reward_function("~/rewards/mine.py:boom").__name__ == "boom"


def test_one_file_named_twice_is_executed_once(in_a_project):
    (in_a_project / "counted.py").write_text(
        "open(__file__ + '.loads', 'a').write('x')\nSTATE = []\n\n"
        "def a(completions, **kwargs):\n    return [0.0] * len(completions)\n\n"
        "def b(completions, **kwargs):\n    return [1.0] * len(completions)\n")
    a, b = load_reward_function("counted.py:a"), load_reward_function("./counted.py:b")
    assert (in_a_project / "counted.py.loads").read_text() == "x"  # kills dropping the sys.modules cache
    assert a.__globals__ is b.__globals__  # one module: state kept by one function is seen by the other


def test_a_function_of_main_is_not_recorded(monkeypatch):
    def main_function(completions, **_):
        return [0.0] * len(completions)

    main_function.__module__, main_function.__qualname__ = "__main__", "main_function_48"
    # importable as __main__:main_function_48 in this process, but a resume's __main__ is another script
    monkeypatch.setattr(sys.modules["__main__"], "main_function_48", main_function, raising=False)
    assert recorded_name(main_function) is None  # kills dropping `module == "__main__"`
    passed = sort_passed([main_function])
    assert passed.recorded == {} and list(passed.unrecorded) == ["__main__:main_function_48"]
    assert "defined in __main__" in passed.warning()


def test_a_weight_given_to_train_wins_over_the_configs():
    name = f"{__name__}:length_penalty"
    config = load_config(None, [f'reward.functions={{"{name}": 0.3, "m:other": 2}}'])
    assert with_functions(config, {name: 0.9}).reward.functions == {name: 0.9, "m:other": 2.0}


def test_build_rewarder_scores_an_unrecordable_function_of_train():
    passed = sort_passed({(lambda completions, **_: [3.0] * len(completions)): 0.5})
    rewarder = build_rewarder(load_config(None, []), passed)
    (name,) = passed.unrecorded
    assert name in rewarder.components  # kills passing {} instead of passed.unrecorded
    # math: "Answer: 7" right (1), weight 1; the lambda 3.0 x 0.5 = 1.5: reward 2.5
    assert rewarder.score([PROMPT], ["Answer: 7"]).rewards.tolist() == [2.5]


def record_prompts(prompts, completions, **kwargs):
    SEEN["prompts"], SEEN["completions"] = prompts, completions
    return [0.0] * len(completions)


def test_the_configs_function_format_reaches_the_function():
    name = f"{__name__}:record_prompts"
    config = load_config(None, [f'reward.functions={{"{name}": 1}}', "reward.function_format=conversational"])
    SEEN.clear()
    build_rewarder(config).score([PROMPT], ["Answer: 7"])
    assert SEEN["prompts"] == [list(MESSAGES)]  # kills dropping `r.function_format == "conversational"`
    assert SEEN["completions"] == [[{"role": "assistant", "content": "Answer: 7"}]]


def rollout(completions: list[str]) -> RolloutBatch:
    ids = torch.tensor([[5, 6, 2, 0], [7, 2, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    zeros = torch.zeros(1, 2, dtype=torch.long)
    return RolloutBatch([PROMPT], 2, zeros, zeros, ids, mask, torch.zeros(2, 4), completions,
                        torch.zeros(2, dtype=torch.bool))


@pytest.mark.parametrize("conversational", [False, True])
def test_trl_arguments_text_or_conversational_with_completion_ids(conversational):
    seen = {}

    def record(**kwargs):
        seen.update(kwargs)
        return [0.0] * len(kwargs["completions"])

    Rewarder({"m:record": (user(record, "m:record", conversational), 1.0)}).score_rollout(rollout(["a", "b"]))
    assert seen["completion_ids"] == [[5, 6, 2], [7, 2]]  # padding dropped, EOS kept
    assert seen["level"] == [1, 1] and seen["answer"] == ["7", "7"]  # dataset columns, the reference as 'answer'
    if conversational:  # TRL's conversational format
        assert seen["prompts"] == [list(MESSAGES)] * 2
        assert seen["completions"] == [[{"role": "assistant", "content": "a"}], [{"role": "assistant", "content": "b"}]]
    else:
        assert seen["prompts"] == ["3 + 4?"] * 2 and seen["completions"] == ["a", "b"]


def test_train_functions_are_recorded_when_importable_and_warned_about_otherwise():
    def local(completions, **_):
        return [0.0] * len(completions)

    passed = sort_passed([length_penalty, lambda completions, **_: [], local, lambda completions, **_: []])
    assert passed.recorded == {f"{__name__}:length_penalty": 1.0}
    names = list(passed.unrecorded)
    assert len(names) == 3 and len(set(names)) == 3  # two lambdas stay two components
    assert names[1] == f"{__name__}:test_train_functions_are_recorded_when_importable_and_warned_about_otherwise." \
                       "<locals>.local"
    assert "a resume and `rlvr eval` of this run will not have them" in passed.warning()
    assert sort_passed({length_penalty: -0.5}).recorded == {f"{__name__}:length_penalty": -0.5}
    assert sort_passed([length_penalty]).warning() is None
    with pytest.raises(ConfigError, match="is not callable"):
        sort_passed([42])
    with pytest.raises(ConfigError, match="must be a finite number"):
        sort_passed({length_penalty: float("nan")})


def test_held_out_correctness_stays_the_verifiers():
    rewarder = Rewarder({"math": (MathVerifier(), 1.0), "m:f": (user(length_penalty, "m:f"), 1.0)})
    assert gated_names(rewarder) == ["math"]  # a -len/1000 penalty would otherwise make every sample wrong
    # `rlvr sample` keeps a completion when its gating components accept it: the function is none of them
    # (kills dropping the gates_correctness filter of Sampler.weights)
    sampler = Sampler(None, None, None, None, rewarder, None, print)
    assert sampler.weights == {"math": 1.0}


def tiny_overrides(model_dir, out) -> list[str]:
    return [f"model.name_or_path={model_dir}", f"output_dir={out}", "max_steps=1", "rollout.group_size=4",
            "rollout.prompts_per_step=2", "rollout.max_new_tokens=8", "optimizer.micro_batch_size=8",
            "eval.at_end=false", "logging.progress=off", "rollout.dynamic_sampling.enabled=false"]


def test_train_with_functions_records_them_and_trains_on_them(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "run"
    config = load_config(None, [*tiny_overrides(tiny_model_dir, out), "algorithm.beta=0", "reward.workers=1"])
    SEEN.clear()
    train(config, reward_funcs={id_parity: 0.5, (lambda completions, **_: [0.0] * len(completions)): 1.0})
    assert SEEN["pid"] == os.getpid()  # with a verifier worker running, the function ran in the trainer process
    name = f"{__name__}:id_parity"
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["reward"]["functions"] == {name: 0.5}  # the lambda cannot be recorded
    assert capsys.readouterr().out.count("cannot be recorded in config.yaml") == 1
    record = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
    assert record["reward/math"] == 0.0  # a random model: the verifier's rewards all tie...
    assert record["reward_std"] > 0  # the function's values differ
    assert record["grad_norm"] > 0  # ...so only the function's weight in the advantages can move the policy
    assert record["reward_mean"] == pytest.approx(0.5 * record[f"reward/{name}"], abs=1e-6)
    # what a resume and `rlvr eval RUN` build from config.yaml: the same function object again
    rebuilt = build_rewarder(load_config(out / "config.yaml"))
    assert rebuilt.components[name][0].function is id_parity and rebuilt.components[name][1] == 0.5
    # `rlvr train --resume RUN` (config.yaml alone) goes on with it, its config unchanged
    assert main(["train", "--resume", str(out), "max_steps=2"]) == 0
    second = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    assert second["step"] == 2 and second["reward_mean"] == pytest.approx(0.5 * second[f"reward/{name}"], abs=1e-6)


def test_a_raising_function_stops_train_with_one_line(tiny_model_dir, tmp_path, capsys, in_a_project):
    out = tmp_path / "run"
    code = main(["train", *tiny_overrides(tiny_model_dir, out), "reward.workers=0",
                 'reward.functions={"rewards/mine.py:boom": 1.0}'])
    err = capsys.readouterr().err
    assert code == 2
    # the file's path as config.yaml records it: absolute
    assert err.startswith(f"rlvr: error: reward function {in_a_project / 'rewards' / 'mine.py'}:boom raised "
                          "KeyError: 'solution' (at ")
    assert "Traceback" not in err


def test_a_reserved_column_is_refused_before_the_model_loads(tiny_model_dir, tmp_path, capsys, monkeypatch):
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"question": f"{i} + 1?", "answer": str(i + 1), "completions": "x"}) + "\n"
                            for i in range(40)))

    def no_model(*args, **kwargs):
        raise AssertionError("the model was loaded before the dataset's columns were checked")

    monkeypatch.setattr("rlvr.grpo.setup.build_models", no_model)
    code = main(["train", *tiny_overrides(tiny_model_dir, tmp_path / "run"), "task.name=qa", f"task.path={data}",
                 'reward.functions={"tests.test_reward_functions:length_penalty": 1.0}'])
    # catches dropping the check in setup (the AssertionError of no_model then ends the run instead)
    assert code == 2
    assert "the dataset has a column named 'completions'" in capsys.readouterr().err


def test_the_reward_section_keeps_its_defaults_and_bounds_after_its_move():
    # RewardConfig moved from rlvr/config/run.py to rlvr/config/reward.py: the defaults the docs state
    # (one retry of a crashed worker's sample, a reward model weighing 1, a cut completion losing 1.0) and the bounds
    reward = load_config(None, []).reward
    assert (reward.workers, reward.retries, reward.model_weight, reward.overlong_penalty) == (2, 1, 1.0, 1.0)
    assert (reward.functions, reward.control) == ({}, "none")
    for bad in ("reward.overlong_penalty=-0.5", "reward.retries=-1", "reward.model_weight=-1", "reward.workers=-1"):
        with pytest.raises(ConfigError):
            load_config(None, [bad])
