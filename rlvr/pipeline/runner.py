"""Runs a recipe stage by stage: base evaluation, then each stage's own command with the
previous stage's output wired in, an evaluation after every model stage, and the manifest after every change.

Re-running the same command continues: finished stages are skipped, an interrupted one resumes from its own
checkpoint (GRPO and SFT) or progress file (sampling), and missing evaluations are redone. SIGTERM/SIGINT
stops at the next safe point: inside a stage its own handler checkpoints (rlvr/checkpoint/stop.py); during
an evaluation, the pipeline's handler lets it finish, records it, then stops.
"""
from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from rlvr.checkpoint.state import config_differences, with_current_defaults
from rlvr.checkpoint.stop import GracefulStop
from rlvr.checkpoint.store import latest_good
from rlvr.config.run import ConfigError, RunConfig, dump_config, validate_config
from rlvr.pipeline import checks
from rlvr.pipeline.manifest import DONE, INTERRUPTED, PENDING, RUNNING, Manifest, StageRecord, load_manifest
from rlvr.pipeline.recheck import recheck_falls
from rlvr.pipeline.spec import MODEL_KINDS, Recipe
from rlvr.pipeline.summary import summary_table
from rlvr.sampling.run import MISSES


@dataclass
class StageOutput:
    finished: bool  # False: a SIGTERM/SIGINT stopped the stage after checkpointing it
    model: Path | None = None
    data: Path | None = None
    result: dict[str, Any] = field(default_factory=dict)


def _run_sft(config: RunConfig, stage_dir: Path) -> StageOutput:
    from rlvr.sft.trainer import sft

    out = sft(config, stage_dir)
    return StageOutput(out.name == "final", model=out if out.name == "final" else None)


def _run_grpo(config: RunConfig, stage_dir: Path) -> StageOutput:
    from rlvr.grpo.loop import train

    out = train(config, stage_dir)
    return StageOutput(out.name == "final", model=out if out.name == "final" else None)


def _run_sample(config: RunConfig, stage_dir: Path) -> StageOutput:
    from rlvr.sampling.run import rejection_sample

    out = rejection_sample(config, stage_dir)
    if out.complete and out.rows_kept + out.rows_general == 0:
        raise ConfigError(f"stage {stage_dir.name}: rejection sampling kept no row ({out.correct} of {out.sampled} "
                          "samples correct); raise sample.samples or sample.prompts, or train the model first")
    return StageOutput(out.complete, data=Path(out.path), result=out.summary())


StageRunner = Callable[[RunConfig, Path], StageOutput]
STAGE_RUNNERS: dict[str, StageRunner] = {"sft": _run_sft, "grpo": _run_grpo, "sample": _run_sample}


def _evaluate(config: RunConfig, model: str) -> dict[str, Any]:
    from rlvr.evaluation.evaluate import evaluate_model

    return evaluate_model(config, model).as_json()


Evaluator = Callable[[RunConfig, str], dict[str, Any]]


def stage_dir(run_dir: Path, index: int, name: str) -> Path:
    return run_dir / "stages" / f"{index + 1:02d}-{name}"


def plan(recipe: Recipe, run_dir: Path) -> Manifest:
    """Every stage's final config, with its inputs wired to the earlier stages' (deterministic) outputs."""
    models: dict[str, str] = {"base": recipe.base_model}
    datasets: dict[str, str] = {}
    misses: dict[str, str] = {}  # sample stage -> its misses.jsonl (a grpo stage's task.focus)
    records = []
    for index, spec in enumerate(recipe.stages):
        directory = stage_dir(run_dir, index, spec.name)
        data = spec.config.model_dump(mode="json")
        if not (spec.raw.get("model") or {}).get("name_or_path"):  # a stage's own model (a teacher) wins
            data["model"]["name_or_path"] = models[spec.model_from]
            if spec.model_from != "base":  # an earlier stage's checkpoint: its trained weights, even of a random init
                data["model"].update(init="pretrained", architecture=None)
        if spec.data_from is not None:
            data["sft"]["data"] = datasets[spec.data_from]
        if spec.focus_from is not None:
            data["task"]["focus"] = misses[spec.focus_from]
        if spec.mix_from is not None:
            data["sft"]["mix_data"] = datasets[spec.mix_from]
        if spec.kind == "sample" and data["sample"]["student"] in models:
            data["sample"]["student"] = models[data["sample"]["student"]]  # "base" or a stage's name
        data.update(output_dir=str(directory))
        data["eval"]["at_end"] = False  # the pipeline evaluates every model the same way (recipe.evaluation)
        config = validate_config(data)
        if spec.kind in MODEL_KINDS:
            models[spec.name] = str(directory / "final")
        else:
            datasets[spec.name] = config.sample.output or str(directory / "sft_data.jsonl")
            misses[spec.name] = str(directory / MISSES)
        records.append(StageRecord(spec.name, spec.kind, str(directory), config.model_dump(mode="json")))
    return Manifest(recipe.name, recipe.base_model, records)


def reconcile(saved: Manifest, fresh: Manifest, force: bool) -> Manifest:
    """Continue `saved`; refuse when a started stage would now run with a different config (its outputs would
    not be what the manifest says), unless force. Pending stages take the new config."""
    if [(s.name, s.kind) for s in saved.stages] != [(s.name, s.kind) for s in fresh.stages]:
        raise ConfigError(f"{fresh.stages[0].directory.rsplit('/stages/', 1)[0]} holds a run of recipe "
                          f"{saved.recipe!r} with other stages; choose another --output-dir")
    for old, new in zip(saved.stages, fresh.stages):
        if old.status == PENDING:
            old.config = new.config
            continue
        differences = config_differences(with_current_defaults(old.config), new.config)
        if differences and not force:
            raise ConfigError(f"stage {old.name!r} ran with another config ({'; '.join(differences[:4])}); "
                              "re-run with the same settings, use another --output-dir, or pass --force")
    return saved


def run_recipe(recipe: Recipe, run_dir: Path, *, force: bool = False, evaluator: Evaluator = _evaluate,
               say: Callable[[str], None] = lambda text: print(text, flush=True)) -> Manifest:
    """Run (or continue) `recipe` in run_dir; returns the manifest (finished unless a signal stopped it)."""
    fresh = plan(recipe, run_dir)
    checks.before_any_stage(recipe, fresh)
    saved = load_manifest(run_dir)
    if saved is None and run_dir.exists() and any(not p.name.startswith(".rlvr") for p in run_dir.iterdir()):
        raise ConfigError(f"{run_dir} holds files but no manifest.json; choose a new --output-dir")
    manifest = fresh if saved is None else reconcile(saved, fresh, force)
    run_dir.mkdir(parents=True, exist_ok=True)
    dump_config(recipe.evaluation, run_dir / "evaluation.yaml")
    manifest.save(run_dir)
    say(f"recipe {recipe.name}: {len(manifest.stages)} stages in {run_dir}"
        + ("" if saved is None else f" (continuing: {sum(s.status == DONE for s in manifest.stages)} done)"))
    with GracefulStop(say=say) as stop:
        if manifest.base_eval is None:
            say(f"evaluating the base model {recipe.base_model}")
            started = time.monotonic()
            manifest.base_eval = evaluator(_eval_config(recipe, recipe.base_model), recipe.base_model)
            manifest.base_eval_seconds = round(time.monotonic() - started, 1)
            manifest.save(run_dir)
            write_summary(manifest, run_dir)
        for record in manifest.stages:
            if stop.requested or not _advance(recipe, manifest, record, run_dir, evaluator, say):
                say(f"pipeline stopped; re-run the same command to continue ({run_dir})")
                return manifest
    manifest.finished = time.strftime("%Y-%m-%dT%H:%M:%S")
    manifest.save(run_dir)
    say(write_summary(manifest, run_dir))
    return manifest


def write_summary(manifest: Manifest, run_dir: Path) -> str:
    """RUN/summary.md, rewritten after every evaluation: a stopped recipe's table (and `rlvr report RUN`) shows the
    stages so far."""
    table = summary_table(manifest)
    (run_dir / "summary.md").write_text(table + "\n", encoding="utf-8")
    return table


def _advance(recipe: Recipe, manifest: Manifest, record: StageRecord, run_dir: Path, evaluator: Evaluator,
             say: Callable[[str], None]) -> bool:
    """Bring one stage to DONE with its evaluation; False when a signal stopped it."""
    if record.status != DONE:
        config = _without_empty_focus(validate_config(record.config), record.name, say)
        directory = Path(record.directory)
        if record.status in (RUNNING, INTERRUPTED) and record.kind in MODEL_KINDS:
            config = _continue_config(config, directory, say)
        elif record.status in (RUNNING, INTERRUPTED):
            config.checkpoint.resume = "auto"  # sampling continues from its progress file
        record.status, record.attempts = RUNNING, record.attempts + 1
        manifest.save(run_dir)
        say(f"stage {record.name} ({record.kind}) starting" + (f", attempt {record.attempts}"
                                                              if record.attempts > 1 else ""))
        started = time.monotonic()
        directory.parent.mkdir(parents=True, exist_ok=True)
        output = STAGE_RUNNERS[record.kind](config, directory)
        record.seconds += round(time.monotonic() - started, 1)
        if not output.finished:
            record.status = INTERRUPTED
            manifest.save(run_dir)
            return False
        record.status, record.result = DONE, output.result
        record.model = str(output.model) if output.model else None
        record.data = str(output.data) if output.data else None
        manifest.save(run_dir)
        say(f"stage {record.name} done in {record.seconds:.0f} s")
    if record.kind in MODEL_KINDS and record.eval is None:
        say(f"evaluating after stage {record.name}")
        started = time.monotonic()
        record.eval = evaluator(_eval_config(recipe, record.model), record.model)
        record.eval_seconds = round(time.monotonic() - started, 1)
        manifest.save(run_dir)
        write_summary(manifest, run_dir)
    if record.kind in MODEL_KINDS and recipe.evaluation.eval.recheck_size:
        started, done = time.monotonic(), len(record.recheck)
        recheck_falls(recipe.evaluation, record, _model_before(recipe, manifest, record), evaluator,
                      lambda: manifest.save(run_dir), say)
        if len(record.recheck) > done:
            record.recheck_seconds += round(time.monotonic() - started, 1)
            manifest.save(run_dir)
            write_summary(manifest, run_dir)
    return True


def _model_before(recipe: Recipe, manifest: Manifest, record: StageRecord) -> tuple[str, dict[str, Any],
                                                                                       dict[str, Any]]:
    """(model, evaluation, rechecks) of the model the tables compare `record`'s with: the evaluated model stage
    before it, else the base model."""
    earlier = manifest.stages[:manifest.stages.index(record)]
    for stage in reversed(earlier):
        if stage.kind in MODEL_KINDS and stage.eval is not None and stage.model:
            return stage.model, stage.eval, stage.recheck
    return recipe.base_model, manifest.base_eval or {}, {}


def _without_empty_focus(config: RunConfig, name: str, say: Callable[[str], None]) -> RunConfig:
    """A stage that trains on an earlier sample stage's misses, when that model solved every sampled prompt: the
    file lists nothing, so the stage trains on the whole train split (and says so) rather than failing at the end
    of a long recipe. The same on every attempt, so a resume sees the same config."""
    focus = config.task.focus
    if focus is None or not Path(focus).is_file() or Path(focus).read_text(encoding="utf-8").strip():
        return config
    say(f"stage {name}: {focus} lists no missed prompt (the sampled model solved every one): training on the whole "
        "train split")
    config.task.focus = None
    return config


def _continue_config(config: RunConfig, directory: Path, say: Callable[[str], None]) -> RunConfig:
    """Resume from the stage's newest complete checkpoint; a stage killed before its first one (SIGKILL) is
    moved aside, never deleted, and starts again."""
    if directory.exists() and latest_good(directory / "checkpoints", log=say) is None:
        aside = directory.with_name(f"{directory.name}.incomplete-{time.strftime('%Y%m%d-%H%M%S')}")
        shutil.move(str(directory), str(aside))
        say(f"{directory} had no complete checkpoint; moved to {aside} and starting the stage again")
    config.checkpoint.resume = "auto"
    return config


def _eval_config(recipe: Recipe, model: str) -> RunConfig:
    data = recipe.evaluation.model_dump(mode="json")
    data["model"]["name_or_path"] = model
    data["output_dir"] = None
    return validate_config(data)

