"""GRPO-family configuration: bad combinations are refused at config time with a message that lists the valid
choices, and every preset in configs/ loads and says what it is."""
from __future__ import annotations

from pathlib import Path

import pytest

from rlvr.config.run import ConfigError, load_config

PRESETS = sorted(Path(__file__).resolve().parent.parent.joinpath("configs").glob("*.yaml"))


def config_error(overrides: list[str], path=None) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(path, overrides)
    return str(info.value)


@pytest.mark.parametrize("key, value, choices", [
    ("advantage", "ppo", ["grpo", "dr_grpo", "rloo", "reinforce_pp", "reinforce_pp_baseline", "gae"]),
    ("objective", "trpo", ["ppo_clip", "dual_clip", "gspo", "cispo"]),
    ("aggregation", "seq_sum", ["sequence_mean", "token_mean", "constant"]),
    ("kl_estimator", "k4", ["k1", "k2", "k3"]),
    ("kl_placement", "both", ["loss", "reward"]),
    ("reward_combination", "max", ["sum_then_normalize", "normalize_then_sum"]),
])
def test_unknown_variant_names_list_the_valid_choices(key: str, value: str, choices: list[str]) -> None:
    message = config_error([f"algorithm.{key}={value}"])
    assert f"algorithm.{key}" in message and repr(value) in message
    for choice in choices:
        assert f"'{choice}'" in message, choice


def test_clip_higher_below_low_is_refused() -> None:
    message = config_error(["algorithm.clip_epsilon=0.2", "algorithm.clip_epsilon_high=0.1"])
    assert "clip_epsilon_high=0.1" in message and "clip_epsilon=0.2" in message
    assert load_config(None, ["algorithm.clip_epsilon_high=0.28"]).algorithm.clip_high == 0.28
    assert load_config().algorithm.clip_high == 0.2  # None means symmetric


@pytest.mark.parametrize("aggregation", ["token_mean", "constant"])
def test_gspo_with_token_weighted_aggregation_is_refused(aggregation: str) -> None:
    message = config_error(["algorithm.objective=gspo", f"algorithm.aggregation={aggregation}"])
    assert "gspo" in message and "allowed aggregations with gspo: sequence_mean" in message


def test_group_estimators_need_two_samples_and_name_the_alternatives() -> None:
    for advantage in ("grpo", "dr_grpo", "rloo", "grpo_batch_std", "reinforce_pp_baseline"):
        message = config_error([f"algorithm.advantage={advantage}", "rollout.group_size=1"])
        assert "group_size >= 2" in message and "reinforce_pp, gae" in message
    assert load_config(None, ["algorithm.advantage=reinforce_pp", "rollout.group_size=1"]).rollout.group_size == 1


def test_kl_in_reward_without_beta_and_gae_with_decoupled_normalisation_are_refused() -> None:
    assert "kl_placement=reward" in config_error(["algorithm.kl_placement=reward", "algorithm.beta=0"])
    message = config_error(["algorithm.advantage=gae", "algorithm.reward_combination=normalize_then_sum"])
    assert "sum_then_normalize" in message


def test_other_family_bounds() -> None:
    assert "dual_clip_c" in config_error(["algorithm.dual_clip_c=1"])
    assert "entropy_coef" in config_error(["algorithm.entropy_coef=-0.1"])
    assert "overlong_buffer" in config_error(["reward.overlong_buffer=32"])  # not below max_new_tokens 32
    message = config_error(["curriculum.enabled=true", "curriculum.skip_below=0.5", "curriculum.skip_above=0.5"])
    assert "skip_below" in message and "skip_above" in message
    assert "max_extra_prompts" in config_error(["rollout.dynamic_sampling.max_extra_prompts=-1"])


def test_every_preset_is_there_loads_and_is_annotated() -> None:
    names = {p.stem for p in PRESETS}
    assert {"grpo", "dr_grpo", "dapo", "rloo", "reinforce_pp", "gspo", "cispo", "ppo"} <= names
    for path in PRESETS:
        load_config(path)  # valid as shipped
        numbers = [line for line in path.read_text().splitlines()
                   if ":" in line and line.split(":", 1)[1].split("#")[0].strip() not in ("",)]
        unannotated = [line for line in numbers if "#" not in line]
        assert not unannotated, f"{path.name}: values without a source comment: {unannotated}"


def test_presets_set_what_their_papers_define() -> None:
    dapo = load_config(PRESETS[[p.stem for p in PRESETS].index("dapo")])
    assert dapo.algorithm.clip_high == 0.28 and dapo.algorithm.aggregation == "token_mean"
    assert dapo.rollout.dynamic_sampling.enabled and dapo.algorithm.beta == 0 and dapo.reward.overlong_buffer > 0
    dr = load_config(PRESETS[[p.stem for p in PRESETS].index("dr_grpo")])
    assert dr.algorithm.advantage == "dr_grpo" and dr.algorithm.aggregation == "constant"
    grpo = load_config(PRESETS[[p.stem for p in PRESETS].index("grpo")])
    assert (grpo.rollout.group_size, grpo.algorithm.clip_epsilon, grpo.algorithm.beta) == (8, 0.2, 0.04)
    ppo = load_config(PRESETS[[p.stem for p in PRESETS].index("ppo")])
    assert ppo.algorithm.advantage == "gae" and ppo.batch_size == grpo.batch_size  # same batch for the comparison


def test_combinations_that_would_train_on_noise_are_refused_with_alternatives() -> None:
    message = config_error(["algorithm.kl_estimator=k1"])  # in the loss, beta 0.04
    assert "zero-mean gradient" in message and "k2, k3" in message
    assert load_config(None, ["algorithm.kl_estimator=k1", "algorithm.kl_placement=reward"]).algorithm.beta == 0.04
    message = config_error(["algorithm.objective=gspo", "algorithm.advantage=gae", "rollout.group_size=1"])
    assert "gspo" in message and "grpo" in message
    message = config_error(["rollout.dynamic_sampling.enabled=true", "algorithm.advantage=reinforce_pp"])
    assert "dynamic_sampling" in message and "grpo, dr_grpo, rloo" in message
    message = config_error(["curriculum.enabled=true", "algorithm.advantage=reinforce_pp", "rollout.group_size=1"])
    assert "curriculum needs rollout.group_size >= 2" in message
    message = config_error(["curriculum.enabled=true", "curriculum.pass_threshold=1.5"])
    assert "pass_threshold=1.5" in message and "highest reward 1" in message
