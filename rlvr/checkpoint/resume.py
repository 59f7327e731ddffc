"""Saving and resuming a training run: where the run lives, what a checkpoint holds, how the logs
continue. The loop (grpo/loop.py) calls `open_run`, `save`, `restore`; the format is store.py's.

Layout: RUN/checkpoints/step-NNNNNN/{model/ (save_pretrained: safetensors + tokenizer), trainer_state.pt,
manifest.json, COMPLETE}. RUN/final/ stays the plain Hugging Face model of the last step (eval, vLLM).
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml
from pydantic import BaseModel
from yaml import YAMLError

from rlvr.checkpoint.rundir import CLAIM, claim_run_dir, open_run_dir, release_if_unused
from rlvr.checkpoint.state import (
    MODEL_DIR,
    CountingStream,
    TrainerState,
    config_differences,
    load_policy_weights,
    load_state,
    restore_rng,
    rng_state,
    save_state,
    with_current_defaults,
)
from rlvr.checkpoint.store import COMPLETE, Checkpoint, latest_good, list_checkpoints, prune, write_checkpoint
from rlvr.config.rules import with_dynamic_sampling_decided
from rlvr.config.run import ConfigError, RunConfig
from rlvr.distributed.context import SINGLE, DistContext, from_env
from rlvr.distributed.state import check_strategy, is_sharded, load_into_shards, rng_for_rank

CHECKPOINTS = "checkpoints"
LOGS = ("metrics.jsonl", "samples.jsonl", "eval.jsonl", "groups.jsonl")  # JSON lines, each with a "step"
FINISHED = "FINISHED"  # written by the end of a run whatever checkpoint.save_final keeps: {"step", "max_steps"}


class RunFinished(Exception):
    """The run to resume already ended at its max_steps: nothing to train (not an error, exit 0)."""

    def __init__(self, path: Path, message: str):
        super().__init__(message)
        self.path = path

    def __reduce__(self):  # torchrun: rank 0 broadcasts it (pickled) so every rank ends the same way
        return RunFinished, (self.path, str(self))


def mark_finished(run_dir: Path, step: int, max_steps: int) -> None:
    """The end-of-run marker: with checkpoint.save_final=model or none there is no checkpoint of the last step, so
    without it a resume could not tell a finished run from a stopped one and would train it again."""
    (run_dir / FINISHED).write_text(json.dumps({"step": step, "max_steps": max_steps}) + "\n", encoding="utf-8")


def _refuse_if_finished(config: RunConfig, path: Path) -> None:
    """RunFinished when `path`'s marker says it reached this config's max_steps (a run that max_minutes ended
    earlier is not finished here: a larger max_minutes goes on from its checkpoint)."""
    try:
        step = int(json.loads((path / FINISHED).read_text(encoding="utf-8"))["step"])
    except (OSError, ValueError, KeyError, TypeError):
        return
    if step >= config.max_steps:
        where = path / "final" if (path / "final" / "config.json").is_file() else path
        raise RunFinished(where, f"{path} already finished: the run already reached max_steps={config.max_steps} "
                                 f"(it ended at step {step}); nothing to train (set a larger max_steps, with a "
                                 "checkpoint to go on from, or start a new run with another output_dir)")


def open_run(config: RunConfig, run_dir: Path | None) -> tuple[Path, Checkpoint | None]:
    """The run directory and the checkpoint to continue from (None: a fresh run, claimed as before). With
    resume=auto the same line starts a run and continues it after every stop: a run stopped before its first
    checkpoint was complete starts again (_start_again) when it was started with this config (or before it wrote
    its config.yaml). One started with another config, or whose complete checkpoints all fail verification, is
    refused: those are for the user to look at, not to start over."""
    path, resumed = open_run_dir(config, run_dir, "run", lambda target: _start_again_if_stopped_early(config, target))
    if not resumed:
        return path, None
    if not (path / "config.yaml").is_file():
        raise ConfigError(f"checkpoint.resume: {str(path)!r} is not an rlvr run directory (no config.yaml)")
    _refuse_if_finished(config, path)
    checkpoint = latest_good(path / CHECKPOINTS, log=_say)
    if checkpoint is None and (path / "final" / "config.json").is_file():  # checkpoint.save_final=model
        raise ConfigError(f"{path} finished (its model is in {path / 'final'}) and kept no checkpoint to go on from "
                          "(checkpoint.save_final=model); start a new run from that model with another output_dir")
    if checkpoint is None:
        raise ConfigError(f"{path} has no complete checkpoint to resume from (set save_every=N to write them; "
                          "SIGTERM also writes one); start a new run with another output_dir")
    differences = _differences(config, _saved_config(path / "config.yaml"))
    if differences and not config.checkpoint.resume_force:
        raise ConfigError("resuming with a different config would not continue the run exactly: "
                          + "; ".join(differences) + " (set checkpoint.resume_force=true to resume anyway)")
    return path, checkpoint


def _start_again_if_stopped_early(config: RunConfig, target: Path) -> Path | None:
    """resume=auto on a directory that holds files: RunFinished if it finished, the directory to start afresh in if
    it stopped before its first checkpoint, else None (continue it)."""
    _refuse_if_finished(config, target)
    return _start_again(target) if _stopped_before_its_first_checkpoint(config, target) else None


def _differences(config: RunConfig, saved: dict[str, Any]) -> list[str]:
    """The keys of the saved config that the requested one changes, as config_differences lists them."""
    # a GRPO run saves what ran (dynamic sampling's "auto" decided, rlvr/config/rules.py); decide this one the
    # same way. Other runs (SFT) save it undecided, as they never use it.
    rollout = saved.get("rollout")
    sampling = rollout.get("dynamic_sampling") if isinstance(rollout, dict) else None
    decided = not (isinstance(sampling, dict) and sampling.get("enabled") == "auto")
    current = with_dynamic_sampling_decided(config, from_env()[1]) if decided else config
    return config_differences(with_current_defaults(saved), current.model_dump(mode="json"))


def _stopped_before_its_first_checkpoint(config: RunConfig, target: Path) -> bool:
    """An rlvr run directory (its claim) with no complete checkpoint, whose config.yaml is this config's, or
    missing, or torn by the stop itself."""
    if not (target / CLAIM).is_file() or any((c.path / COMPLETE).is_file()
                                               for c in list_checkpoints(target / CHECKPOINTS)):
        return False
    if (target / "final" / "config.json").is_file():  # finished with checkpoint.save_final=model: not to redo
        return False
    if not (target / "config.yaml").is_file():
        return True
    try:
        saved = _saved_config(target / "config.yaml")
    except ConfigError:
        return True
    return config.checkpoint.resume_force or not _differences(config, saved)


def _saved_config(file: Path) -> dict[str, Any]:
    """The run's config.yaml as written by dump_config; ConfigError naming the file when it is not one."""
    try:
        saved = yaml.safe_load(file.read_text(encoding="utf-8"))
    except (OSError, ValueError, YAMLError) as err:  # ValueError: bytes that are not UTF-8
        reason = " ".join(str(err).split())
        raise ConfigError(f"{file} is unreadable ({reason}); it is the config the run's checkpoints were "
                          "trained with: restore it to resume") from None
    if not isinstance(saved, dict):
        raise ConfigError(f"{file} does not hold a run's config (a mapping of sections; it holds "
                          f"{type(saved).__name__} {str(saved)[:40]!r}); restore it to resume")
    for name, field in RunConfig.model_fields.items():
        section = isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)
        if section and name in saved and not isinstance(saved[name], dict):
            raise ConfigError(f"{file} is damaged: its section {name} is {str(saved[name])[:40]!r}, not a mapping "
                              "of settings; restore it to resume")
    return saved


def _say(text: str) -> None:
    print(f"rlvr: {text}", flush=True)


def _start_again(target: Path) -> Path:
    """resume=auto on a run stopped before its first checkpoint (killed in set-up, before its config.yaml even):
    the run starts again, unless its trainer is still alive (hold_run_lock refuses). A directory holding only the
    claim is taken over as it is; one holding files is moved aside to NAME.incomplete-DATE-TIME-XXXX, never deleted,
    and a fresh one is claimed in its place."""
    lock = hold_run_lock(target)
    try:
        if {p.name for p in target.iterdir()} <= {CLAIM}:
            _say(f"{target} holds no file yet (stopped before writing any): starting the run in it")
            return target
        # a new empty directory of its own (never an earlier copy's), which the rename replaces
        aside = Path(tempfile.mkdtemp(prefix=f"{target.name}.incomplete-{time.strftime('%Y%m%d-%H%M%S')}-",
                                      dir=target.parent))
        target.rename(aside)
    finally:
        os.close(lock)
    _say(f"{target} has no complete checkpoint (stopped before its first one); moved to {aside} and starting the "
         "run again")
    return claim_run_dir(target)


def hold_run_lock(run_dir: Path) -> int:
    """An exclusive lock on the run's claim file for this process's lifetime: two trainers never share a run."""
    fd = os.open(run_dir / CLAIM, os.O_CREAT | os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ConfigError(f"{run_dir} is in use by another rlvr process") from None
    return fd


def run_in_directory(config: RunConfig, run_dir: Path | None, setup: Callable[[RunConfig, Path], Any],
                     loop: Callable[[Any, Checkpoint | None], Path],
                     close: Callable[[Any], None] = lambda run: None, ranks: DistContext = SINGLE) -> Path:
    """What every training command (train, sft) does around its loop: open or claim the run directory, lock it,
    set up; a fresh directory is released again when set-up fails before writing anything. Under torchrun rank 0
    alone claims and locks the directory, and the others take its path and checkpoint from it."""
    try:
        run_dir, checkpoint, lock = _open_on_main(config, run_dir, ranks)
    except RunFinished as done:  # nothing moved, locked or loaded
        if ranks.is_main:
            _say(str(done))
        return done.path
    config.output_dir = str(run_dir)  # the resolved config names the directory it lives in
    try:
        run = setup(config, run_dir)
    except BaseException:
        if checkpoint is None and ranks.is_main:
            release_if_unused(run_dir)
        if lock is not None:
            os.close(lock)
        raise
    try:
        return loop(run, checkpoint)
    finally:
        close(run)
        if lock is not None:
            os.close(lock)


def _open_on_main(config: RunConfig, run_dir: Path | None, ranks: DistContext
                  ) -> tuple[Path, Checkpoint | None, int | None]:
    """(run directory, checkpoint, lock fd or None on ranks > 0); a refusal on rank 0 stops every rank."""
    opened, lock, failure = None, None, None
    if ranks.is_main:
        try:
            opened = open_run(config, run_dir)
            lock = hold_run_lock(opened[0])
            print(f"run directory: {opened[0]}" + (f" (resuming from {opened[1].path.name})" if opened[1] else ""),
                  flush=True)
        except Exception as err:  # noqa: BLE001 - any failure here must reach the other ranks, or they would wait
            failure = err
    finished = isinstance(failure, RunFinished)
    shared = ranks.broadcast(opened if failure is None else failure if finished
                             else f"rank 0 could not open the run directory: {failure}")
    if failure is not None:
        raise failure
    if isinstance(shared, RunFinished):
        raise shared
    if isinstance(shared, str):
        raise ConfigError(shared)
    return shared[0], shared[1], lock


@dataclass
class Parts:
    """What a checkpoint saves and restores, taken from the loop's Run."""

    policy: Any
    tokenizer: Any
    optimizer: Any
    scheduler: Any
    prompt_stream: CountingStream
    curriculum: Any | None
    critic: Any | None


def save(run_dir: Path, step: int, parts: Parts, elapsed_s: float, guard: dict[str, int], keep: int,
         model_from: Path | None = None, extra: dict[str, Any] | None = None) -> Checkpoint:
    """Write the step's checkpoint atomically, then delete the ones past `keep`. `model_from`: a saved HF
    model directory of this very step (final/) to hard-link instead of writing the weights again. `extra`:
    TrainerState.extra (torchrun: every rank's RNG state, rlvr.distributed.state.rank_rngs)."""
    state = TrainerState(step=step, prompts_drawn=parts.prompt_stream.drawn, rng=rng_state(),
                         optimizer=parts.optimizer.state_dict(), scheduler=parts.scheduler.state_dict(),
                         elapsed_s=elapsed_s, curriculum=_state_of(parts.curriculum),
                         critic=_state_of(parts.critic), extra=dict(extra or {}), **guard)

    def fill(directory: Path) -> None:
        if model_from is not None:
            _link_tree(model_from, directory / MODEL_DIR)
        else:
            parts.policy.save_pretrained(directory / MODEL_DIR)
            parts.tokenizer.save_pretrained(directory / MODEL_DIR)
        save_state(state, directory)

    checkpoint = write_checkpoint(run_dir / CHECKPOINTS, step, fill)
    prune(run_dir / CHECKPOINTS, keep, checkpoint)
    return checkpoint


def restore(checkpoint: Checkpoint, parts: Parts, make_stream: Callable[[], Any], run_dir: Path,
            ranks: DistContext = SINGLE) -> TrainerState:
    """Load everything back into the freshly built parts; rebuild the prompt stream at its cursor; cut the
    logs back to the checkpoint's step so they continue without duplicate or missing steps. Under torchrun
    every rank loads the same files (DDP: the same weights and optimizer state; FSDP2: its shard of them) and its
    own RNG state."""
    state = load_state(checkpoint.path)
    rng = rng_for_rank(state.extra, state.rng, ranks)  # refuses a checkpoint of another world size
    check_strategy(state.optimizer, is_sharded(parts.policy))
    if is_sharded(parts.policy):  # FSDP2: every rank keeps its shard of the full weights and optimizer state
        load_into_shards(parts.policy, parts.optimizer, checkpoint.path / MODEL_DIR, state.optimizer)
    else:
        load_policy_weights(parts.policy, checkpoint.path / MODEL_DIR)
        parts.optimizer.load_state_dict(state.optimizer)
    parts.scheduler.load_state_dict(state.scheduler)
    if parts.curriculum is not None and state.curriculum is not None:
        parts.curriculum.load_state_dict(state.curriculum)
    if parts.critic is not None and state.critic is not None:
        parts.critic.load_state_dict(state.critic)
    parts.prompt_stream = CountingStream(make_stream(), skip=state.prompts_drawn)
    if ranks.is_main:
        truncate_logs(run_dir, state.step)
    restore_rng(rng)  # last: loading models and replaying the stream must not shift it
    return state


def truncate_logs(run_dir: Path, step: int) -> None:
    """Keep the lines of steps <= step (later ones belong to steps that will run again); atomic per file."""
    for name in LOGS:
        path = run_dir / name
        if not path.is_file():
            continue
        kept = [line for line in path.read_bytes().splitlines(keepends=True)
                if line.strip() and _step_of(line) <= step]
        staging = path.with_name(f".{name}.{os.getpid()}")
        staging.write_bytes(b"".join(kept))
        os.replace(staging, path)


def _step_of(line: bytes) -> float:
    try:
        return float(json.loads(line).get("step", 0))
    except (ValueError, AttributeError, TypeError):  # ValueError: UnicodeDecodeError too
        return float("inf")  # a line torn by a crash mid-write: drop it


def _state_of(component: Any | None) -> dict | None:
    return None if component is None else component.state_dict()


def _link_tree(source: Path, target: Path) -> None:
    target.mkdir(parents=True)
    for path in source.iterdir():
        if path.is_dir():  # e.g. a LoRA run's adapter/ beside the merged weights
            _link_tree(path, target / path.name)
        elif path.is_file():
            try:
                os.link(path, target / path.name)  # same inode: no second copy of the weights on disk
            except OSError:
                shutil.copy2(path, target / path.name)


def final_save_message(mode: str, where: Path) -> str:
    """The console line of checkpoint.save_final's end-of-run save (`where`: RUN/final, or with none the run)."""
    if mode == "full":  # "saved final checkpoint": bench/memory_plan.py tells the final evaluation's phase by it
        return (f"saved final checkpoint to {where} (the model) and under {where.parent / CHECKPOINTS} (with the "
                "optimizer state, for --resume)")
    if mode == "model":
        return (f"saved final model to {where} (checkpoint.save_final=model: no optimizer state, so --resume can "
                "only go on from an earlier save_every checkpoint)")
    return (f"checkpoint.save_final=none: no final model or checkpoint written; {where} keeps the logs, the "
            "evaluation and any save_every checkpoints")


def stop_message(run_dir: Path, step: int, signal_name: str, started: float) -> str:
    return (f"rlvr: stopped on {signal_name} after step {step} ({time.monotonic() - started:.0f} s in this process); "
            f"checkpoint saved. Resume with: rlvr train --resume {run_dir}")
