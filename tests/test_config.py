"""Config: defaults < YAML < dotted overrides; every problem is one ConfigError naming the key (rlvr/config/run.py)."""
from __future__ import annotations

from typing import get_args

import pytest
import yaml

from rlvr.config.run import (
    EMBEDDED_MODEL,
    ConfigError,
    RolloutConfig,
    RunConfig,
    dump_config,
    load_config,
    parse_overrides,
)


def write_yaml(path, data) -> str:
    path.write_text(yaml.safe_dump(data))
    return str(path)


def config_error(*args, **kwargs) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(*args, **kwargs)
    return str(info.value)


# ---------------------------------------------------------------- defaults and precedence
def test_defaults_load():
    config = load_config()
    assert config == RunConfig()
    assert config.model.name_or_path == EMBEDDED_MODEL
    assert config.task.name == "arithmetic" and config.task.verifiers == {"math": 1.0}
    assert config.rollout.group_size == 8 and config.rollout.prompts_per_step == 4
    assert config.batch_size == 32
    assert config.micro_batch_size == 16  # min(optimizer.micro_batch_size, batch)
    assert config.max_steps == 30 and config.output_dir is None  # None: a new runs/<date-time> per run
    assert config.rollout.dynamic_sampling.enabled == "auto"  # decided per run: on in one process


def test_load_config_with_no_overrides_list_and_empty_list_agree():
    assert load_config(None, None) == load_config(None, []) == RunConfig()


def test_yaml_file_is_applied(tmp_path):
    path = write_yaml(tmp_path / "c.yaml", {"max_steps": 7, "rollout": {"group_size": 4}, "task": {"level": 2}})
    config = load_config(path)
    assert config.max_steps == 7
    assert config.rollout.group_size == 4
    assert config.rollout.prompts_per_step == 4  # untouched siblings keep their defaults
    assert config.task.level == 2 and config.task.name == "arithmetic"


def test_empty_yaml_file_means_defaults(tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text("")
    assert load_config(path) == RunConfig()


def test_dotted_overrides(tmp_path):
    out = str(tmp_path / "run")
    config = load_config(None, ["max_steps=3", f"output_dir={out}", "seed=11", "rollout.group_size=4"])
    assert config.max_steps == 3
    assert config.output_dir == out
    assert config.seed == 11
    assert config.rollout.group_size == 4
    assert config.batch_size == 16


def test_override_values_are_yaml_scalars():
    config = load_config(None, ["optimizer.lr=3e-6", "eval.at_end=false", "optimizer.betas=[0.8, 0.9]",
                                "task.verifiers={math: 1.0, format: 0.5}", "task.system_prompt=null"])
    assert config.optimizer.lr == pytest.approx(3e-6)
    assert config.eval.at_end is False
    assert config.optimizer.betas == (0.8, 0.9)
    assert config.task.verifiers == {"math": 1.0, "format": 0.5}
    assert config.task.system_prompt is None


def test_overrides_take_precedence_over_yaml(tmp_path):
    path = write_yaml(tmp_path / "c.yaml", {"max_steps": 7, "seed": 5, "rollout": {"group_size": 4,
                                                                                    "max_new_tokens": 20}})
    config = load_config(path, ["max_steps=2", "rollout.group_size=2"])
    assert config.max_steps == 2  # override wins
    assert config.rollout.group_size == 2  # nested override wins
    assert config.seed == 5  # YAML value not overridden stays
    assert config.rollout.max_new_tokens == 20  # nested merge keeps YAML siblings


def test_later_override_wins():
    assert load_config(None, ["seed=1", "seed=2"]).seed == 2


def test_parse_overrides_builds_a_tree():
    # Scalars stay text until the typed field converts them (so output_dir=2024 stays a path).
    assert parse_overrides(["a.b=1", "a.c=x", "seed=3"]) == {"a": {"b": "1", "c": "x"}, "seed": "3"}
    assert load_config(None, ["seed=3"]).seed == 3
    assert parse_overrides(["output_dir="]) == {"output_dir": ""}


# ---------------------------------------------------------------- unknown keys
def test_unknown_top_level_key_names_it_suggests_and_lists_allowed():
    message = config_error(None, ["max_step=3"])
    assert "'max_step'" in message
    assert "did you mean 'max_steps'" in message
    for allowed in RunConfig.model_fields:
        assert allowed in message


def test_unknown_nested_key_names_it_suggests_and_lists_allowed():
    message = config_error(None, ["rollout.group_sise=4"])
    assert "'rollout.group_sise'" in message
    assert "did you mean 'group_size'" in message
    for allowed in RolloutConfig.model_fields:
        assert allowed in message
    assert "max_steps" not in message  # lists the keys allowed *here*, in the rollout section


def test_unknown_key_in_yaml_file(tmp_path):
    path = write_yaml(tmp_path / "c.yaml", {"optimizer": {"learning_rate": 1e-5}})
    message = config_error(path)
    assert "'optimizer.learning_rate'" in message and "allowed here" in message and "lr" in message


def test_unknown_key_with_no_close_match_still_lists_allowed():
    message = config_error(None, ["zzzzzz=1"])
    assert "'zzzzzz'" in message and "did you mean" not in message and "max_steps" in message


def test_unknown_section():
    message = config_error(None, ["rolout.group_size=4"])
    assert "'rolout'" in message and "did you mean 'rollout'" in message


# ---------------------------------------------------------------- wrong values
def test_wrong_type_names_the_key():
    message = config_error(None, ["rollout.group_size=abc"])
    assert "rollout.group_size" in message and "'abc'" in message


def test_wrong_literal_names_the_key():
    message = config_error(None, ["model.dtype=float64"])
    assert "model.dtype" in message and "float32" in message


def test_section_given_a_scalar():
    assert "rollout" in config_error(None, ["rollout=3"])


def test_batch_not_divisible_by_micro_batch():
    message = config_error(None, ["optimizer.micro_batch_size=5"])  # 4 prompts x 8 = 32
    assert "optimizer.micro_batch_size=5" in message and "32" in message


def test_micro_batch_larger_than_batch_is_capped_not_rejected():
    config = load_config(None, ["optimizer.micro_batch_size=100"])
    assert config.micro_batch_size == config.batch_size == 32


def test_group_size_one_rejected():
    message = config_error(None, ["rollout.group_size=1"])
    assert "rollout.group_size" in message and "2" in message


def test_unknown_verifier_name():
    message = config_error(None, ["task.verifiers={bogus: 1.0}"])
    assert "bogus" in message and "math" in message  # names the bad one and the allowed ones


def test_task_and_verifier_names_are_the_registries_keys():
    """Config validation checks names against its own lists, importing no registry; they must agree,
    in order, since the order is the one the messages list."""
    from rlvr.config.rules import TaskName, VerifierName
    from rlvr.tasks import TASKS
    from rlvr.verifiers import VERIFIERS

    assert get_args(TaskName) == tuple(TASKS)
    assert get_args(VerifierName) == tuple(VERIFIERS)


def test_unknown_task_and_verifier_messages_list_the_allowed_names():
    from rlvr.config.task_catalog import BUILTIN_TASKS

    # the catalogue's order (a new task is one line there: the message follows it, no list to edit here)
    assert list(BUILTIN_TASKS)[:3] == ["arithmetic", "qa", "reasoning_gym"] and "humaneval" in BUILTIN_TASKS
    assert config_error(None, ["task.name=arith"]) == (
        f"invalid config: task.name: unknown task 'arith'; allowed: {', '.join(BUILTIN_TASKS)}")
    assert config_error(None, ["task.verifiers={bogus: 1.0, zz: 2}"]) == (
        "invalid config: task.verifiers: unknown verifier(s) ['bogus', 'zz']; allowed: ['answer_format', 'code', "
        "'format', 'language', 'math', 'reasoning_gym', 'steps', 'tag_count', 'think_format', 'tool_call']")


def test_negative_verifier_weight():
    message = config_error(None, ["task.verifiers={math: -1.0}"])
    assert "task.verifiers" in message and ">= 0" in message


def test_all_zero_verifier_weights():
    assert "task.verifiers" in config_error(None, ["task.verifiers={math: 0}"])


def test_qa_task_needs_a_path(tmp_path):
    message = config_error(None, ["task.name=qa"])
    assert "task.path" in message and "qa" in message
    assert load_config(None, ["task.name=qa", f"task.path={tmp_path / 'd.jsonl'}"]).task.name == "qa"


# ---------------------------------------------------------------- bad files and overrides
def test_nonexistent_yaml_file(tmp_path):
    missing = tmp_path / "nope.yaml"
    message = config_error(missing)
    assert str(missing) in message and "does not exist" in message


def test_yaml_that_is_a_list(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("- max_steps: 3\n- seed: 1\n")
    message = config_error(path)
    assert "mapping" in message and "list" in message


def test_invalid_yaml_syntax(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("rollout: [group_size: 4\n")
    assert "not valid YAML" in config_error(path)


@pytest.mark.parametrize("item", ["foo", "=3", " =3"])
def test_malformed_override(item):
    message = config_error(None, [item])
    assert repr(item) in message and "dotted.key=value" in message


def test_override_both_value_and_section():
    assert "both as a value and as a section" in config_error(None, ["seed=1", "seed.x=2"])


# ---------------------------------------------------------------- dump round trip
def test_dump_config_round_trips(tmp_path):
    original = load_config(None, ["max_steps=3", "rollout.group_size=4", "optimizer.betas=[0.8, 0.95]",
                                  "task.verifiers={math: 1.0, answer_format: 0.2}", f"output_dir={tmp_path / 'r'}",
                                  "task.answer_mode=last_number", "model.dtype=bfloat16"])
    path = tmp_path / "config.yaml"
    dump_config(original, path)
    assert load_config(path) == original
    assert yaml.safe_load(path.read_text())["max_steps"] == 3  # plain YAML, readable by anything


def test_dump_config_round_trips_defaults(tmp_path):
    path = tmp_path / "config.yaml"
    dump_config(RunConfig(), path)
    assert load_config(path) == RunConfig()


# ---------------------------------------------------------------- known bugs (do not fix here: report)
def test_override_with_malformed_yaml_value_is_a_config_error():
    message = config_error(None, ["seed=[1"])
    assert "seed" in message


def test_string_field_accepts_numeric_looking_override():
    assert load_config(None, ["output_dir=2024"]).output_dir == "2024"


def test_non_utf8_yaml_is_a_config_error(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"\xff\xfe: bad\n")
    config_error(path)


@pytest.mark.parametrize("override, key", [
    ("optimizer.lr=inf", "optimizer.lr"), ("rollout.temperature=nan", "rollout.temperature"),
    ("task.verifiers={math: .nan}", "task.verifiers"), ("optimizer.betas=[0.9, 2]", "optimizer.betas"),
    ("model.device=gpu", "model.device"), ("algorithm.std_epsilon=inf", "algorithm.std_epsilon")])
def test_non_finite_and_out_of_range_values_are_refused(override, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_config(None, [override])


# ---------------------------------------------------------------- engines, async, Ray
def test_worked_ray_config_loads_as_shipped():
    from pathlib import Path

    config = load_config(str(Path(__file__).resolve().parent.parent / "configs" / "cluster" / "ray.yaml"))
    assert config.ray.enabled and config.ray.address == "auto" and config.ray.engine_gpus == 1
    assert config.rollout.engine.max_staleness == 1 and config.rollout.correction.mode == "tis"


@pytest.mark.parametrize("overrides, words", [
    (["rollout.engine.max_staleness=1"], ["needs an engine with its own weights", "hf_process"]),
    (["rollout.engine.kind=hf_process", "rollout.engine.max_staleness=1", "rollout.dynamic_sampling.enabled=true"],
     ["dynamic sampling or the curriculum"]),
    (["rollout.engine.kind=vllm", "model.lora.enabled=true"], ["model.lora", "vllm", "merged weights"]),
    (["ray.enabled=true", "rollout.engine.kind=vllm"], ["Ray actor", "leave it at hf"]),
    (["rollout.engine.max_staleness=2"], ["max_staleness"]),
    (["rollout.compile_decode=true", "rollout.engine.kind=hf_process"], ["compile_decode", "kind=hf_process"]),
    (["rollout.decode_attention=matmul", "ray.enabled=true"], ["decode_attention=matmul", "ray.enabled=True"]),
    (["ray.address=auto"], ["ray.enabled=false", "ignore the cluster"]),
    (["rollout.engine.kind=vllm", "rollout.engine.max_staleness=1"], ["vllm_mode=colocate", "nothing would overlap"]),
    (["rollout.engine.kind=vllm", "rollout.engine.vllm_mode=server"], ["vllm_server_url=http://host:port", "None"]),
    (["rollout.engine.kind=vllm", "rollout.engine.vllm_mode=server", "rollout.engine.vllm_server_url=localhost:8000"],
     ["vllm_server_url=http://host:port", "'localhost:8000'"]),
])
def test_engine_combinations_that_cannot_run_are_one_error(overrides, words):
    message = config_error(None, overrides)
    assert all(w in message for w in words), message


def test_engines_with_their_own_weights_are_refused_under_torchrun():
    from rlvr.distributed.checks import problems
    from rlvr.distributed.context import DistContext

    two_ranks = DistContext(0, 2, 0, "gloo")
    assert problems(RunConfig(), two_ranks) == []
    found = problems(load_config(None, ["rollout.engine.kind=hf_process"]), two_ranks)
    assert len(found) == 1 and "rollout.engine.kind=hf_process" in found[0]
    assert problems(load_config(None, ["rollout.engine.kind=hf_process"]), DistContext(0, 1, 0, None)) == []


# ---------------------------------------------------------------- trainer ranks as Ray actors
RAY_RANKS = ["ray.enabled=true", "ray.trainer_ranks=2"]


@pytest.mark.parametrize("overrides, words", [
    (["ray.trainer_ranks=2"], ["ray.trainer_ranks=2", "ray.enabled=true", "torchrun"]),
    ([*RAY_RANKS, "ray.trainer_gpus=0.5"], ["ray.trainer_gpus=0.5", "0 or 1"]),
    ([*RAY_RANKS, "model.device=cuda"], ["model.device=cuda", "ray.trainer_gpus=1"]),
    ([*RAY_RANKS, "ray.trainer_gpus=1"], ["model.device=cpu", "set model.device=cuda"]),
    # each Ray rank samples in-process (its engine is the policy): nothing to overlap with the update
    ([*RAY_RANKS, "rollout.engine.max_staleness=1"], ["max_staleness=1", "ray.trainer_ranks=1"]),
    ([*RAY_RANKS, "rollout.engine.kind=hf_process"], ["rollout.engine.kind=hf_process", "leave it at hf"]),
    (["ray.trainer_ranks=0"], ["ray.trainer_ranks"]),
])
def test_ray_trainer_rank_settings_that_cannot_run_are_one_error(overrides, words):
    message = config_error(None, overrides)
    assert all(w in message for w in words), message


def test_ray_trainer_ranks_pass_the_rank_checks_that_ray_engines_fail():
    from rlvr.distributed.checks import problems
    from rlvr.distributed.context import DistContext

    two_ranks = DistContext(0, 2, 0, "gloo")
    ranks = load_config(None, [*RAY_RANKS, "ray.trainer_cpus=4", "ray.trainer_gpus=1", "model.device=cuda"])
    assert ranks.ray.trainer_gpus == 1 and problems(ranks, two_ranks) == []
    # ray.enabled with trainer_ranks=1 means a Ray engine actor: still refused under several ranks
    found = problems(load_config(None, ["ray.enabled=true"]), two_ranks)
    assert len(found) == 1 and "ray.trainer_ranks=1" in found[0]


def test_worked_ray_trainers_config_loads_as_shipped():
    from pathlib import Path

    from rlvr.distributed.checks import problems
    from rlvr.distributed.context import DistContext

    path = Path(__file__).resolve().parent.parent / "configs" / "cluster" / "ray_trainers.yaml"
    config = load_config(str(path))
    r = config.ray
    assert r.enabled and r.address == "auto" and (r.trainer_ranks, r.trainer_gpus) == (4, 1)
    assert config.distributed.strategy == "fsdp2" and problems(config, DistContext(0, 4, 0, None)) == []
