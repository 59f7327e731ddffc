"""Recipes: a YAML list of stages (sft -> grpo -> sample -> sft -> grpo), resolved into one RunConfig per stage
before anything runs, so a bad stage config fails at once, naming the stage and the key.

A recipe file:

    description: one line
    base: {RunConfig sections shared by every stage}
    evaluation: {RunConfig sections for the evaluations of the base model and after each model stage}
    stages:
      - name: cold_start          # unique; also the stage directory's name
        kind: sft | grpo | sample
        model: base | <stage>     # whose model it starts from; default: the previous model stage's, else base
        data: <sample stage>      # sft only: train on that stage's dataset (default: the latest sample stage,
                                  # unless the stage sets sft.data itself)
        mix: <sample stage>       # sft only: mix that stage's dataset into the data (sft.mix_data), as
                                  # sft.mix_ratio says (rlvr/sft/mix.py)
        focus: <sample stage>     # grpo only: train on the prompts that sample stage's model still missed
                                  # (its misses.jsonl as task.focus; rlvr/tasks/focus.py)
        seed_offset: 1            # optional: this stage runs with seed + 1, so a second RL stage draws fresh
                                  # prompts instead of replaying an earlier one's stream (seed=S still applies)
        config: {RunConfig sections}

Overrides on the command line: `stages.NAME.key=value` for one stage, `evaluation.key=value` for the
evaluations, any other `key=value` for every stage (it goes into `base`).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from rlvr.config.run import ConfigError, RunConfig, _merge, parse_overrides, validate_config

BUILTIN = ("r1", "r1-zero", "distill")
KINDS = ("sft", "grpo", "sample")
MODEL_KINDS = ("sft", "grpo")  # stages that produce a model (and are evaluated); sample produces data
STAGE_KEYS = {"name", "kind", "model", "data", "mix", "focus", "seed_offset", "config"}
TOP_KEYS = {"description", "base", "evaluation", "stages"}


@dataclass
class StageSpec:
    name: str
    kind: str  # one of KINDS
    model_from: str  # "base" or an earlier model stage's name
    data_from: str | None  # sft: the sample stage whose dataset it trains on
    config: RunConfig  # resolved; model.name_or_path and sft.data are filled in by the runner from the sources
    raw: dict[str, Any] = field(default_factory=dict)  # the stage's own sections, as written
    focus_from: str | None = None  # grpo: the sample stage whose misses it trains on (task.focus)
    mix_from: str | None = None  # sft: the sample stage whose dataset is mixed in (sft.mix_data)


@dataclass
class Recipe:
    name: str
    description: str
    base_model: str  # the model the first stage starts from (base.model.name_or_path, resolved by config)
    evaluation: RunConfig  # task + eval settings for every evaluation
    stages: list[StageSpec]


def recipe_source(name_or_path: str) -> tuple[str, dict[str, Any]]:
    """A built-in recipe name (r1, r1-zero, distill) or a YAML file -> (name, parsed mapping)."""
    if name_or_path in BUILTIN:
        text = resources.files("rlvr.pipeline").joinpath("recipes", f"{name_or_path}.yaml").read_text("utf-8")
        return name_or_path, yaml.safe_load(text)
    path = Path(name_or_path)
    if not path.is_file():
        raise ConfigError(f"recipe {name_or_path!r}: not a built-in recipe ({', '.join(BUILTIN)}) nor a YAML file")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise ConfigError(f"recipe {str(path)!r} is not valid YAML (UTF-8): {err}") from None
    return path.stem, data


def load_recipe(name_or_path: str, overrides: list[str] | None = None) -> Recipe:
    name, data = recipe_source(name_or_path)
    if not isinstance(data, dict) or not isinstance(data.get("stages"), list) or not data["stages"]:
        raise ConfigError(f"recipe {name!r}: needs a non-empty 'stages' list")
    unknown = set(data) - TOP_KEYS
    if unknown:
        raise ConfigError(f"recipe {name!r}: unknown key(s) {sorted(unknown)}; allowed: {sorted(TOP_KEYS)}")
    data = _apply_overrides(copy.deepcopy(data), parse_overrides(overrides or []))
    base = _mapping(data.get("base"), f"recipe {name!r}: base")
    evaluation = _resolve(_merge(base, _mapping(data.get("evaluation"), "evaluation")), "evaluation")
    stages: list[StageSpec] = []
    for index, raw in enumerate(data["stages"]):
        stages.append(_stage(raw, index, base, stages))
    return Recipe(name, str(data.get("description", "")), validate_config(base).model.name_or_path,
                  evaluation, stages)


def _apply_overrides(data: dict[str, Any], tree: dict[str, Any]) -> dict[str, Any]:
    """`stages.NAME.*` -> that stage's config, `evaluation.*` -> evaluation, the rest -> base."""
    names = {s.get("name") for s in data["stages"] if isinstance(s, dict)}
    for stage_name, sections in tree.pop("stages", {}).items():
        if stage_name not in names:
            raise ConfigError(f"override stages.{stage_name}.*: no stage named {stage_name!r}; "
                              f"stages: {', '.join(str(n) for n in names)}")
        stage = next(s for s in data["stages"] if s.get("name") == stage_name)
        stage["config"] = _merge(stage.get("config") or {}, sections)
    if "evaluation" in tree:
        data["evaluation"] = _merge(data.get("evaluation") or {}, tree.pop("evaluation"))
    data["base"] = _merge(data.get("base") or {}, tree)
    return data


def _stage(raw: Any, index: int, base: dict[str, Any], earlier: list[StageSpec]) -> StageSpec:
    where = f"stage {index + 1}"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: must be a mapping with name, kind and config")
    name = raw.get("name")
    where = f"stage {name!r}" if name else where
    unknown = set(raw) - STAGE_KEYS
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; allowed: {sorted(STAGE_KEYS)}")
    if not isinstance(name, str) or not name.replace("_", "").replace("-", "").isalnum():
        raise ConfigError(f"{where}: 'name' must be letters, digits, '_' or '-' (it names the stage directory)")
    if name in {s.name for s in earlier} or name == "base":
        raise ConfigError(f"{where}: the name is used twice (or is 'base'); stage names must be unique")
    kind = raw.get("kind")
    if kind not in KINDS:
        raise ConfigError(f"{where}: kind {kind!r} is unknown; allowed: {', '.join(KINDS)}")
    own = _mapping(raw.get("config"), f"{where}: config")
    model_from = raw.get("model") or next((s.name for s in reversed(earlier) if s.kind in MODEL_KINDS), "base")
    models = {"base", *(s.name for s in earlier if s.kind in MODEL_KINDS)}
    if model_from not in models:
        raise ConfigError(f"{where}: model {model_from!r} is not 'base' or an earlier sft/grpo stage "
                          f"({', '.join(sorted(models))})")
    offset = raw.get("seed_offset", 0)
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise ConfigError(f"{where}: seed_offset must be a whole number >= 0, got {offset!r}")
    config = _resolve(_merge(base, own), where)
    if offset:
        config = config.model_copy(update={"seed": config.seed + offset})
    return StageSpec(name, kind, model_from, _data_source(raw, kind, own, earlier, where), config, own,
                     _focus_source(raw, kind, earlier, where), _mix_source(raw, kind, config, earlier, where))


def _sample_stage(raw: dict, key: str, kind: str, takes: str, earlier: list[StageSpec], where: str) -> str | None:
    """The earlier sample stage that the stage key `key` (focus, mix) names; only `takes` stages may name one."""
    if raw.get(key) is None:
        return None
    samplers = [s.name for s in earlier if s.kind == "sample"]
    if kind != takes or raw[key] not in samplers:
        raise ConfigError(f"{where}: {key} {raw[key]!r} must name an earlier sample stage "
                          f"({', '.join(samplers) or 'none'}) and only {takes} stages take it")
    return str(raw[key])


def _focus_source(raw: dict, kind: str, earlier: list[StageSpec], where: str) -> str | None:
    return _sample_stage(raw, "focus", kind, "grpo", earlier, where)


def _mix_source(raw: dict, kind: str, config: RunConfig, earlier: list[StageSpec], where: str) -> str | None:
    source = _sample_stage(raw, "mix", kind, "sft", earlier, where)
    if source is not None and config.sft.mix_ratio == 0:
        raise ConfigError(f"{where}: mix {source!r} needs sft.mix_ratio > 0 in the stage's config (the share "
                          "of training rows drawn from it)")
    if source is not None and config.sft.mix_data:  # one source of mixed rows: neither may replace the other
        raise ConfigError(f"{where}: mix {source!r} and sft.mix_data {config.sft.mix_data!r} both name the rows "
                          "to mix in; keep one")
    return source


def _data_source(raw: dict, kind: str, own: dict, earlier: list[StageSpec], where: str) -> str | None:
    samplers = [s.name for s in earlier if s.kind == "sample"]
    if raw.get("data") is not None:
        if kind != "sft" or raw["data"] not in samplers:
            raise ConfigError(f"{where}: data {raw['data']!r} must name an earlier sample stage "
                              f"({', '.join(samplers) or 'none'}) and only sft stages take it")
        return str(raw["data"])
    if kind != "sft" or (own.get("sft") or {}).get("data"):
        return None
    if not samplers:
        raise ConfigError(f"{where}: an sft stage needs sft.data (a file, a hub id or 'cold_start') or an earlier "
                          "sample stage to train on")
    return samplers[-1]


def _resolve(data: dict[str, Any], where: str) -> RunConfig:
    try:
        return validate_config(data)
    except ConfigError as err:
        raise ConfigError(f"{where}: {err}") from None


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be a mapping of config sections, not {type(value).__name__}")
    return value
