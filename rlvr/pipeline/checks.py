"""What must hold before the first stage runs: every input a stage reads exists, and a
distillation student can read the teacher's traces. A recipe that would fail in stage 4 after an hour of
training fails here instead, naming the stage and the key."""
from __future__ import annotations

import re
from pathlib import Path

from rlvr.config.run import ConfigError, ModelConfig, RunConfig
from rlvr.pipeline.manifest import Manifest
from rlvr.pipeline.spec import MODEL_KINDS, Recipe
from rlvr.sampling.run import MISSES
from rlvr.sft.data import COLD_START, check_mix
from rlvr.tasks.cold_start import check_cold_start_phrasing

HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")  # "openai/gsm8k": cannot be checked offline; the stage reports it
DATA_SUFFIXES = (".jsonl", ".json", ".parquet", ".csv")


def before_any_stage(recipe: Recipe, manifest: Manifest) -> None:
    produced = {str(Path(s.directory) / "final") for s in manifest.stages}
    produced |= {s.config["sample"]["output"] or str(Path(s.directory) / "sft_data.jsonl")
                 for s in manifest.stages if s.kind == "sample"}
    produced |= {str(Path(s.directory) / MISSES) for s in manifest.stages if s.kind == "sample"}
    _check_model(recipe.base_model, "base.model.name_or_path")
    for record in manifest.stages:
        config = RunConfig.model_validate(record.config)
        where = f"stage {record.name!r}"
        if record.kind != "grpo" and config.model.lora.enabled:
            raise ConfigError(f"{where}: model.lora applies to grpo stages only (set it under stages.NAME.model)")
        if record.kind in MODEL_KINDS and config.checkpoint.save_final == "none":
            raise ConfigError(f"{where}: checkpoint.save_final=none would keep no final model, but the recipe "
                              "evaluates every sft/grpo stage's model and later stages start from it; use "
                              "checkpoint.save_final=model (weights, tokenizer and config, no optimizer state)")
        if config.model.name_or_path not in produced:
            _check_model(config.model.name_or_path, f"{where}: model.name_or_path")
        if record.kind == "sft":
            _check_sft(config, produced, where)
        if record.kind == "sample" and config.sample.mix_path:
            _check_data(config.sample.mix_path, f"{where}: sample.mix_path")
        if config.task.focus and config.task.focus not in produced:
            _check_data(config.task.focus, f"{where}: task.focus")
        if config.task.name == "qa":
            _check_data(config.task.path, f"{where}: task.path")
        if record.kind == "sample" and config.sample.student:
            _check_student(config, produced, manifest, where)


def _check_sft(config: RunConfig, produced: set[str], where: str) -> None:
    """sft.data and sft.mix_data exist (or an earlier stage writes them), the mix settings come together,
    and a cold start can be written in the task's phrasing."""
    if config.sft.data not in produced and config.sft.data != COLD_START:
        _check_data(config.sft.data, f"{where}: sft.data")
    try:
        check_mix(config, files=False)  # the files: below, where an earlier stage may write them
        if COLD_START in (config.sft.data, config.sft.mix_data) and config.task.name == "arithmetic":
            check_cold_start_phrasing(config.task)
    except ConfigError as err:  # ColdStartError and SFTDataError are ConfigErrors
        raise ConfigError(f"{where}: {err}") from None
    if config.sft.mix_data and config.sft.mix_data not in produced and config.sft.mix_data != COLD_START:
        _check_data(config.sft.mix_data, f"{where}: sft.mix_data")


def _check_model(name_or_path: str, where: str) -> None:
    from rlvr.model.load import ModelError, resolve_model_path

    try:
        resolve_model_path(name_or_path)
    except ModelError as err:
        raise ConfigError(f"{where}: {err}") from None


def _check_data(path: str | None, where: str) -> None:
    if not path:
        raise ConfigError(f"{where} is not set")
    if Path(path).exists() or (HUB_ID.match(path) and not path.endswith(DATA_SUFFIXES)):
        return
    raise ConfigError(f"{where}: {path!r} does not exist (a .jsonl/.json/.parquet file, a saved dataset directory "
                      "or a hub id)")


def _root_model(config: RunConfig, produced: set[str], manifest: Manifest) -> str:
    """The model whose tokenizer a stage's model has: stages never change the tokenizer, so follow the chain
    of stage outputs back to a model that exists now."""
    name = config.model.name_or_path
    by_output = {str(Path(s.directory) / "final"): s for s in manifest.stages}
    while name in produced and name in by_output:
        name = by_output[name].config["model"]["name_or_path"]
    return name


def _check_student(config: RunConfig, produced: set[str], manifest: Manifest, where: str) -> None:
    from rlvr.model.load import context_length, load_tokenizer
    from rlvr.sampling.tokenizers import check_student_tokenizer, distillation_texts

    student = config.sample.student
    if student in produced:
        student = _root_model(config.model_copy(update={"model": ModelConfig(name_or_path=student)}), produced,
                              manifest)
    _check_model(student, f"{where}: sample.student")
    student_model = config.model.model_copy(update={"name_or_path": student})
    teacher = load_tokenizer(config.model.model_copy(update={"name_or_path": _root_model(config, produced, manifest)}))
    problems = check_student_tokenizer(teacher, load_tokenizer(student_model), distillation_texts(config),
                                       config.rollout.max_new_tokens, context=context_length(student_model))
    if problems:
        raise ConfigError(f"{where}: sample.student {config.sample.student!r} cannot learn from the teacher's "
                          f"traces: {'; '.join(problems)}")
