"""Supervised fine-tuning: the R1 cold start and the SFT on rejection-sampled traces.

  rows -> assistant-token masks -> steps of sft.batch_size rows -> micro-batches -> AdamW -> log -> checkpoint

The run directory is the one `rlvr train` writes (config.yaml, metrics.jsonl, checkpoints/step-N in the
atomic format of rlvr/checkpoint, final/ in Hugging Face format), claimed and locked the same way, and
resumed the same way (checkpoint.resume=auto or a run directory): the trainer state saves the optimizer,
the schedule, every RNG and how many rows the data stream has handed out, so a resumed run continues bit
for bit. SIGTERM/SIGINT finishes the optimizer step in flight, checkpoints and returns the checkpoint.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from rlvr.checkpoint import resume
from rlvr.checkpoint.rundir import disk_use_line
from rlvr.checkpoint.state import STATE_FILE, CountingStream
from rlvr.checkpoint.stop import GracefulStop
from rlvr.checkpoint.store import Checkpoint, checkpoint_name
from rlvr.config.run import RunConfig, dump_config
from rlvr.metrics.logger import RunLogger
from rlvr.metrics.sinks import build_sinks
from rlvr.model.architectures import note_random_run
from rlvr.model.load import context_length, load_model, load_tokenizer, save_model
from rlvr.model.lora import refuse_outside_grpo
from rlvr.seeding import seed_everything
from rlvr.sft.batching import row_stream, total_steps
from rlvr.sft.data import BadRow, RowScreen, SFTDataError, check_mix, data_source, load_chat_rows, source_name
from rlvr.sft.masking import Example, encode_row
from rlvr.sft.mix import draw_mix, mix_source_config, say_mix
from rlvr.sft.step import StepSettings, sft_step
from rlvr.training.guards import check_skips
from rlvr.training.optim import build_optimizer

DATA_FILE = "sft_rows.json"  # rows and fingerprint of the tokenised data, checked on resume


class SFTLogger(RunLogger):
    """metrics.jsonl as for GRPO; the progress line shows what SFT has (no rewards, no KL)."""

    def _progress_line(self, r: dict[str, Any]) -> str:
        step, elapsed = r["step"], r["elapsed_s"]
        eta = elapsed / step * (self.max_steps - step)

        def f(key: str, spec: str) -> str:  # None: a non-finite value the logger blanked out
            return "nan" if r.get(key) is None else format(r[key], spec)
        return (f"sft step {step:>4}/{self.max_steps} | loss {f('loss', '.4f')} | lr {f('lr', '.2e')} | "
                f"grad {f('grad_norm', '.3f')} | tokens {r['tokens']} | epoch {r['epoch']:.2f} | "
                f"{elapsed / step:.1f} s/step | eta {eta / 60:.1f} min")


@dataclass
class SFTRun:
    """Everything the loop holds; built once by `setup`."""

    config: RunConfig
    run_dir: Path
    policy: Any
    tokenizer: Any
    examples: list[Example]
    stream: CountingStream[int]  # row indices in training order; counts what it handed out (the cursor)
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    settings: StepSettings
    steps: int
    logger: SFTLogger


def load_examples(config: RunConfig, tokenizer, max_length: int) -> list[Example]:
    """Every usable row of sft.data, then the rows drawn from sft.mix_data (rlvr/sft/mix.py), tokenised with
    their masks; bad rows are counted in one line per source (or stop the run)."""
    examples = _encoded(config, tokenizer, max_length)
    if config.sft.mix_ratio == 0:
        return examples
    pool = _encoded(mix_source_config(config), tokenizer, max_length)
    draw = draw_mix(len(pool), len(examples), config.sft.mix_ratio, config.seed)
    if not draw.indices:  # the share rounds to no row: the setting would be ignored without a word
        raise SFTDataError(f"sft.mix_ratio={config.sft.mix_ratio} of {len(examples)} rows of sft.data rounds to 0 "
                           "mixed rows; raise it, or unset sft.mix_data and sft.mix_ratio")
    say_mix(draw, len(examples), config)
    return examples + [pool[i] for i in draw.indices]


def _encoded(config: RunConfig, tokenizer, max_length: int) -> list[Example]:
    screen = RowScreen(source_name(config), config.sft.bad_rows)
    examples = []
    for row in load_chat_rows(config, screen):
        try:
            examples.append(encode_row(tokenizer, row, config.sft.train_on, max_length))
        except BadRow as bad:
            screen.reject(row.index, str(bad), bad.reason)
    screen.report(len(examples))
    return examples


def setup(config: RunConfig, run_dir: Path) -> SFTRun:
    seed_everything(config.seed)
    if config.threads:
        torch.set_num_threads(config.threads)
    # Data first: a bad dataset (or a missing tensorboard/wandb package) fails before any weights load.
    sinks = build_sinks(config.logging, config.model_dump(mode="json"), run_dir)
    tokenizer = load_tokenizer(config.model)
    limit = min(config.sft.max_length, context_length(config.model) or config.sft.max_length)
    examples = load_examples(config, tokenizer, limit)
    policy = load_model(config.model, trainable=True)
    optimizer, scheduler = build_optimizer(policy.parameters(), config.optimizer, distributed=False)  # fused
    s = config.sft
    steps = total_steps(len(examples), s.epochs, s.batch_size)
    settings = StepSettings(min(config.optimizer.micro_batch_size, s.batch_size), s.batching,
                            config.optimizer.max_grad_norm, tokenizer.pad_token_id)
    stream = CountingStream(row_stream(len(examples), s.epochs, config.seed))
    return SFTRun(config, run_dir, policy, tokenizer, examples, stream, optimizer, scheduler, settings, steps,
                  SFTLogger(run_dir, steps, sinks=sinks, progress_mode=config.logging.progress,
                            interval_s=config.logging.progress_interval_s))


def sft(config: RunConfig, run_dir: Path | str | None = None) -> Path:
    """Fine-tune config.model on config.sft.data; returns RUN/final (RUN with checkpoint.save_final=none), or the
    checkpoint written when a SIGTERM/SIGINT stopped the run early. The run directory (run_dir, else
    config.output_dir, else a new runs/<date-time>) must be new or empty, unless checkpoint.resume continues it."""
    refuse_outside_grpo(config.model.lora.enabled, "rlvr sft")
    data_source(config)  # sft.data unset or missing: one error before a run directory is claimed
    check_mix(config)
    return resume.run_in_directory(config, Path(run_dir) if run_dir is not None else None, setup, _loop,
                                   close=lambda run: run.logger.close())  # the bar, TensorBoard, W&B


def data_fingerprint(examples: list[Example]) -> str:
    """sha256 of every example's tokens and mask, in order: what the row cursor of a checkpoint indexes."""
    digest = hashlib.sha256()
    for e in examples:
        digest.update(e.input_ids.numpy().tobytes() + e.target_mask.numpy().tobytes() + b"|")
    return digest.hexdigest()


def check_same_data(run: SFTRun, checkpoint: Checkpoint) -> None:
    """A checkpoint's cursor counts rows of the data it was trained on; resuming on other rows (an edited
    file, another tokenizer or max_length) would silently train on a different sequence."""
    path = run.run_dir / DATA_FILE
    saved = json.loads(path.read_text()) if path.is_file() else None
    now = {"rows": len(run.examples), "sha256": data_fingerprint(run.examples)}
    if saved is not None and saved != now and not run.config.checkpoint.resume_force:
        raise SFTDataError(f"the SFT data differs from the data {checkpoint.path} was trained on ({saved['rows']} "
                           f"usable rows then, {now['rows']} now, or their tokens changed); resuming would not "
                           "continue the run exactly (set checkpoint.resume_force=true to resume anyway)")


def _parts(run: SFTRun) -> resume.Parts:
    return resume.Parts(run.policy, run.tokenizer, run.optimizer, run.scheduler, run.stream, None, None)


def describe(run: SFTRun) -> str:
    c, s = run.config, run.config.sft
    return (f"sft: {len(run.examples)} rows x {s.epochs} epoch(s) / {s.batch_size} rows per step = {run.steps} "
            f"steps; micro-batches of {run.settings.micro_batch_size} rows ({s.batching}); loss on "
            f"{'the last assistant turn' if s.train_on == 'last_assistant' else 'every assistant turn'}; "
            f"lr {c.optimizer.lr:g}, warm-up {c.optimizer.warmup_steps} steps")


def _resume(run: SFTRun, checkpoint: Checkpoint) -> tuple[int, dict[str, int]]:
    """Load the checkpoint into the run; returns (first step to run, skip guard)."""
    check_same_data(run, checkpoint)
    parts, s = _parts(run), run.config.sft
    try:
        state = resume.restore(checkpoint, parts, lambda: row_stream(len(run.examples), s.epochs, run.config.seed),
                               run.run_dir)
    except StopIteration:  # the cursor lies past the end of the (forced) new data's epochs
        raise SFTDataError(f"{checkpoint.path} drew more rows than sft.epochs x {len(run.examples)} rows hold "
                           "now; it cannot be resumed on this data") from None
    run.stream, run.logger.start = parts.prompt_stream, time.monotonic() - state.elapsed_s
    run.logger.message(f"resumed at step {state.step} from {checkpoint.path} ({state.prompts_drawn} rows drawn "
                       "so far)")
    return state.step + 1, {"consecutive_skips": state.consecutive_skips, "skipped_steps": state.skipped_steps}


def _loop(run: SFTRun, checkpoint: Checkpoint | None) -> Path:
    config, run_dir, keep = run.config, run.run_dir, run.config.checkpoint.save_total_limit
    first, guard = 1, {"consecutive_skips": 0, "skipped_steps": 0}
    if checkpoint is not None:
        first, guard = _resume(run, checkpoint)
    else:
        (run_dir / DATA_FILE).write_text(json.dumps({"rows": len(run.examples),
                                                     "sha256": data_fingerprint(run.examples)}) + "\n")
    dump_config(config, run_dir / "config.yaml")
    for line in note_random_run(run_dir, config.model, run.policy):
        run.logger.message(line)
    run.logger.message(describe(run))
    with GracefulStop(say=run.logger.message) as stop:
        for step in range(first, run.steps + 1):
            record = train_step(run, step)
            check_skips(record, guard, config.checkpoint.max_consecutive_skips, run_dir)
            run.logger.log_step(record)
            last = step == run.steps  # a stop during the last step simply finishes the run below
            if not last and (stop.requested or (config.save_every and step % config.save_every == 0)):
                saved = resume.save(run_dir, step, _parts(run), run.logger.elapsed(), guard, keep)
                if stop.requested:
                    run.logger.message(f"rlvr: stopped on {stop.signal_name} after step {step}; checkpoint saved. "
                                       f"Resume with: rlvr sft --resume {run_dir}")
                    return saved.path
    if first > run.steps and (run_dir / "final" / "config.json").is_file():
        run.logger.message(f"the run already finished its {run.steps} steps; to go on, raise sft.epochs with "
                           "checkpoint.resume_force=true")
        return run_dir / "final"
    final = _save_final(run, guard)
    full = config.checkpoint.save_final == "full"
    run.logger.message(disk_use_line(run_dir, run_dir / resume.CHECKPOINTS / checkpoint_name(run.steps) / STATE_FILE
                                     if full else None))
    return final


def _save_final(run: SFTRun, guard: dict[str, int]) -> Path:
    """RUN/final and its checkpoint, RUN/final alone, or nothing (checkpoint.save_final); returns RUN/final, or with
    none the run directory."""
    mode, run_dir = run.config.checkpoint.save_final, run.run_dir
    if mode == "none":
        run.logger.message(resume.final_save_message(mode, run_dir))
        return run_dir
    final = save_model(run.policy, run.tokenizer, run_dir / "final")
    if mode == "full":
        resume.save(run_dir, run.steps, _parts(run), run.logger.elapsed(), guard,
                    run.config.checkpoint.save_total_limit, model_from=final)
    run.logger.message(resume.final_save_message(mode, final))
    return final


def train_step(run: SFTRun, step: int) -> dict[str, Any]:
    """The next sft.batch_size rows of the stream (fewer at the very end) as one optimizer step."""
    examples = [run.examples[i] for i in itertools.islice(run.stream, run.config.sft.batch_size)]
    lr = run.scheduler.get_last_lr()[0]
    stats = sft_step(run.policy, examples, run.optimizer, run.scheduler, run.settings)
    return {"step": step, "loss": stats.loss, "lr": lr, "grad_norm": stats.grad_norm, "tokens": stats.tokens,
            "input_tokens": stats.input_tokens, "rows": stats.rows,
            "epoch": run.stream.drawn / len(run.examples), "skipped": stats.skipped}

