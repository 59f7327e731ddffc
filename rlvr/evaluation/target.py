"""What `rlvr eval` and `rlvr generate` run on: a run directory (its config and final/ checkpoint) or a model
(directory, hub id, 'embedded'), plus the command-line pieces both commands share. Torch-free."""
from __future__ import annotations

from pathlib import Path

from rlvr.config.model import EMBEDDED_ALIASES, EMBEDDED_MODEL
from rlvr.config.run import RunConfig, load_config
from rlvr.errors import UserFacingError
from rlvr.paths import local_or_hub


class InferenceInputError(UserFacingError, ValueError):
    """A bad command-line value for eval/generate, phrased for the user (rlvr.cli.main prints it as one line)."""


def resolve_target(target: str, task_name: str | None, overrides: list[str]) -> tuple[str, RunConfig]:
    """(model path, config): a run directory gives its config.yaml and final/ model, anything else the defaults or
    a config file given first (`rlvr eval embedded configs/agents/calculator.yaml`: the base model on a preset's
    task, as `rlvr train` reads it); `dotted.key=value` overrides and --task apply on top."""
    preset = overrides[0] if overrides and overrides[0].endswith((".yaml", ".yml")) else None
    if preset is not None:
        if not Path(preset).is_file():
            raise InferenceInputError(f"config file {preset!r} does not exist")
        overrides = overrides[1:]
    for item in overrides:
        if "=" not in item:
            raise InferenceInputError(f"{item!r} is not a dotted.key=value override (the model comes first, once, "
                                      "then a config file if any)")
    overrides = overrides + ([f"task.name={task_name}"] if task_name else [])
    path = Path(target)
    if (path / "config.yaml").is_file():
        if preset is not None:
            raise InferenceInputError(f"{target!r} is a run directory: it is evaluated with its own config.yaml; "
                                      f"give {preset!r} with a model instead (or dotted.key=value overrides)")
        config = load_config(path / "config.yaml", overrides)
        model = path / "final"
        if not (model / "config.json").is_file():
            raise InferenceInputError(_no_final_model(target, path, config))
        model_path = str(model)
    else:
        config, model_path = load_config(preset, overrides), target
    config.model = config.model.at(model_path)  # a random-init run's checkpoint is its trained weights
    return model_path, config


def check_model_target(target: str) -> None:
    """A model target that names a missing path, or a hub id while the hub cannot be reached: one line now, before
    anything loads (rlvr/paths.py), rather than a minute of the hub's retries. Called once the command's other
    inputs are checked, so a bad flag is reported as itself."""
    if target.lower() in EMBEDDED_ALIASES or target == EMBEDDED_MODEL or (Path(target) / "config.yaml").is_file():
        return
    local_or_hub(target, "model", InferenceInputError, "model or run directory")


def _no_final_model(target: str, path: Path, config: RunConfig) -> str:
    """Why a run directory has no final/ model, and which weights it does hold (checkpoint.save_final)."""
    newest = newest_checkpoint_model(path)
    hold = (f"; its newest checkpoint's weights are at {newest} (rlvr eval {newest})" if newest else
            "; it holds no checkpoint either")
    if config.checkpoint.save_final == "none":
        return f"run {target!r} has no final model: it ran with checkpoint.save_final=none" + hold
    return f"run {target!r} has no final checkpoint at {path / 'final'} (did training finish?)" + (
        hold if newest else "")


def newest_checkpoint_model(run_dir: Path) -> Path | None:
    """RUN/checkpoints/step-N/model of the highest complete step (torch-free: by name and marker, unverified)."""
    steps = sorted((p for p in (run_dir / "checkpoints").glob("step-*") if (p / "COMPLETE").is_file()
                    and (p / "model" / "config.json").is_file()), key=lambda p: (len(p.name), p.name))
    return steps[-1] / "model" if steps else None


def int_list(text: str, flag: str) -> list[int]:
    """'1,4,16' -> [1, 4, 16] (sorted, repeats dropped); anything else is one clear error naming the flag."""
    try:
        values = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise InferenceInputError(f"{flag} {text!r}: expected a comma-separated list of integers, e.g. 1,4,16"
                                  ) from None
    if not values:
        raise InferenceInputError(f"{flag} {text!r}: expected at least one integer")
    if values[0] < 1:
        raise InferenceInputError(f"{flag} {text!r}: every value must be >= 1")
    return values


def output_path(given: str | None, target: str, name: str) -> Path:
    """--output, else RUN/name for a run directory, else ./name; its folder must exist."""
    output = Path(given) if given else (Path(target) / name if (Path(target) / "config.yaml").is_file() else Path(name))
    if not output.parent.is_dir() or output.is_dir():
        raise InferenceInputError(f"--output {str(output)!r}: not a writable file path (its folder must exist)")
    return output
