"""Rejection sampling (DeepSeek-R1 stage 3): N samples per prompt, verified, best k kept.

  distinct train prompts -> batches of batch_size x N samples -> task rewarder -> RUN/progress.jsonl
  -> (at the end) best k correct per prompt, de-duplicated, + general rows -> SFT dataset JSONL + report.json

With model = a larger teacher and sample.student set, the same run is distillation (R1 sec. 2.4); the
student's tokenizer is checked before anything is sampled (tokenizers.py). The run directory is claimed
like a training run's; progress is appended per finished batch, each batch's sampling RNG is seeded from
(seed, batch index), so a run stopped by SIGTERM and re-run with checkpoint.resume=auto skips the finished
prompts and ends with the very dataset an uninterrupted run writes.
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from rlvr.checkpoint.resume import hold_run_lock
from rlvr.checkpoint.rundir import open_run_dir, release_if_unused
from rlvr.checkpoint.stop import GracefulStop
from rlvr.config.run import ConfigError, RunConfig, dump_config
from rlvr.metrics.progress import Reporter, clear_bars
from rlvr.model.architectures import note_random_run
from rlvr.model.lora import refuse_outside_grpo
from rlvr.sampling import SampleError
from rlvr.sampling.mix import plan_mix, read_general_rows, shuffled
from rlvr.sampling.records import (
    PROGRESS,
    Drawn,
    PromptRecord,
    append_progress,
    batch_seed,
    dataset_rows,
    draw_distinct,
    load_progress,
    model_step,
    write_atomic,
)
from rlvr.sampling.select import Candidate, gating_components, is_correct, select_best
from rlvr.seeding import seed_everything
from rlvr.types import Outcome, Prompt

REPORT = "report.json"
# The prompts not solved by every sample, one {"id", "correct", "samples"} per line: what a last RL stage trains on
# (task.focus, rlvr/tasks/focus.py; R1 sec. 2.3.4 after rejection sampling).
MISSES = "misses.jsonl"
DEFAULT_OUTPUT = "sft_data.jsonl"
# Settings that decide what is sampled: a resume with any of them changed would not continue the same run.
# keep / select / mix / output are applied at the end from progress.jsonl, so they may change on a resume.
SAMPLED_BY = ("model.", "task.", "rollout.max_new_tokens", "seed", "sample.samples", "sample.prompts",
              "sample.temperature", "sample.top_p", "sample.batch_size", "reward.model_")


@dataclass
class SampleResult:
    """What a sampling run did. The dataset at `output` is written only when `complete`."""

    path: Path  # the SFT dataset (JSONL, "messages" column); written only when complete
    run_dir: Path
    complete: bool  # False: stopped by SIGTERM/SIGINT; re-run with checkpoint.resume=auto to finish
    prompts_done: int  # prompts sampled so far
    prompts_wanted: int  # sample.prompts
    split_exhausted: bool  # the train split held fewer distinct prompts than wanted
    sampled: int  # completions generated
    correct: int  # completions every gating verifier accepted and that ended their turn (duplicates included)
    cut: int  # completions cut by rollout.max_new_tokens: never kept, whatever the verifiers say
    rows_kept: int  # rejection-sampled rows in the dataset
    rows_general: int  # general rows mixed in
    outcomes: dict[str, int] = field(default_factory=dict)  # "math/correct" -> count, every component/outcome

    @property
    def acceptance_rate(self) -> float:
        """Verified-correct share of the samples, before the best-k cut."""
        return self.correct / self.sampled if self.sampled else 0.0

    def line(self) -> str:
        """The one-line summary `rlvr sample` ends with."""
        head = (f"{self.prompts_done} prompts, {self.sampled} sampled, {self.correct} correct (acceptance rate "
                f"{self.acceptance_rate:.1%}; {self.cut} cut by the token budget), {self.rows_kept} kept")
        if not self.complete:
            return (f"stopped: {head} so far; finish with checkpoint.resume=auto output_dir={self.run_dir} "
                    "(same command)")
        return head + (f" + {self.rows_general} general" if self.rows_general else "") + f" -> {self.path}"

    def summary(self) -> dict[str, Any]:
        """The statistics as JSON (report.json holds them, plus provenance)."""
        return {**{k: str(v) if isinstance(v, Path) else v for k, v in vars(self).items()},
                "acceptance_rate": round(self.acceptance_rate, 6)}


@dataclass
class Sampler:
    """What the loop needs; the model is loaded only when a batch is left to sample."""

    config: RunConfig
    run_dir: Path
    output: Path
    drawn: Drawn
    rewarder: Any  # rlvr.rewards.rewarder.Rewarder
    general: list[dict[str, Any]] | None
    say: Callable[[str], None]
    engine: Any = None  # rlvr.rollout.hf.HFRolloutEngine, built on first use

    @property
    def weights(self) -> dict[str, float]:
        """The components that decide correctness (reward functions do not: rlvr/rewards/functions.py)."""
        return {name: weight for name, (component, weight) in self.rewarder.components.items()
                if getattr(component, "gates_correctness", True)}


def make_rewarder(config: RunConfig):
    """The training reward of the run's task: the same verifiers and weights (rlvr.rewards.rewarder.build_rewarder)."""
    from rlvr.rewards.rewarder import build_rewarder

    return build_rewarder(config)


def _say(text: str) -> None:
    with clear_bars(sys.stdout):  # above the live bar of the prompts sampled, not through it
        print(text, flush=True)


def rejection_sample(config: RunConfig, run_dir: Path | str | None = None,
                     say: Callable[[str], None] = _say) -> SampleResult:
    """Sample, verify, select and write the SFT dataset; see the module docstring. run_dir: the run directory
    (default config.output_dir, else a new runs/<date-time>); checkpoint.resume=auto continues it."""
    refuse_outside_grpo(config.model.lora.enabled, "rlvr sample")
    rewarder, general = _check_inputs(config, say)
    run_dir, resumed = open_sampling_run(config, Path(run_dir) if run_dir is not None else None)
    lock = hold_run_lock(run_dir)
    try:
        try:
            sampler = _setup(config, run_dir, resumed, rewarder, general, say)
        except BaseException:
            if not resumed:
                release_if_unused(run_dir)
            raise
        return _run(sampler)
    finally:
        os.close(lock)


def _check_inputs(config: RunConfig, say: Callable[[str], None]) -> tuple[Any, list[dict[str, Any]] | None]:
    """Everything that can be wrong with the inputs, found before a run directory is claimed or a model loads."""
    from rlvr.sampling.tokenizers import check_distillation

    s = config.sample
    if s.mix_ratio > 0 and s.mix_path is None:
        raise SampleError(f"sample.mix_ratio={s.mix_ratio} needs sample.mix_path (a JSONL file of chat rows)")
    general = read_general_rows(s.mix_path) if s.mix_path is not None and s.mix_ratio > 0 else None
    rewarder = make_rewarder(config)
    if not gating_components({name: w for name, (_, w) in rewarder.components.items()}):
        raise SampleError(f"task.verifiers={dict(config.task.verifiers)}: rejection sampling keeps only "
                          "completions a verifier accepts; give at least one verifier a positive weight")
    check_distillation(config, on_info=say)
    return rewarder, general


def open_sampling_run(config: RunConfig, run_dir: Path | None) -> tuple[Path, bool]:
    """(run directory, resumed?), chosen as for a training run (rlvr.checkpoint.rundir.open_run_dir): no
    checkpoint.resume -> a new or empty directory; 'auto' -> continue output_dir if it holds files, else start it; a
    path -> continue it. A run to continue must be a sampling run, with the same sampling settings."""
    path, resumed = open_run_dir(config, run_dir, "sampling run")
    if not resumed:
        return path, False
    if not (path / "config.yaml").is_file() or not (path / PROGRESS).is_file():
        raise ConfigError(f"checkpoint.resume: {str(path)!r} is not an rlvr sampling run (no config.yaml and "
                          f"{PROGRESS}); start a new one with another output_dir")
    saved = yaml.safe_load((path / "config.yaml").read_text(encoding="utf-8"))
    differences = sampling_differences(saved, config.model_dump(mode="json"))
    if differences and not config.checkpoint.resume_force:
        raise ConfigError("resuming with different sampling settings would mix two runs' samples: "
                          + "; ".join(differences) + " (set checkpoint.resume_force=true to resume anyway)")
    return path, True


def _flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def sampling_differences(saved: dict[str, Any], requested: dict[str, Any]) -> list[str]:
    """'key: old -> new' for the SAMPLED_BY settings that differ between two dumped configs."""
    a, b = _flatten(saved or {}), _flatten(requested)
    keys = sorted(k for k in set(a) | set(b) if any(k == p or (p[-1] in "._" and k.startswith(p)) for p in SAMPLED_BY))
    return [f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in keys if a.get(k) != b.get(k)]


def _setup(config: RunConfig, run_dir: Path, resumed: bool, rewarder: Any, general: list | None,
           say: Callable[[str], None]) -> Sampler:
    import torch

    output = Path(config.sample.output) if config.sample.output else run_dir / DEFAULT_OUTPUT
    _check_output(output, run_dir, resumed)
    config.output_dir = str(run_dir)  # the resolved config names the directory it lives in
    dump_config(config, run_dir / "config.yaml")
    (run_dir / PROGRESS).touch()
    say(f"run directory: {run_dir}" + (" (resuming)" if resumed else ""))
    for line in note_random_run(run_dir, config.model):  # samples of random weights
        say(line)
    seed_everything(config.seed)
    if config.threads:
        torch.set_num_threads(config.threads)
    from rlvr.agents.wiring import refuse_episodes
    from rlvr.model.load import load_tokenizer
    from rlvr.tasks import build_task
    from rlvr.tasks.screening import screen_prompt_lengths

    task = build_task(config.task)
    refuse_episodes(task, "rlvr sample")
    screen_prompt_lengths(task, load_tokenizer(config.model), config)
    drawn = draw_distinct(task.train_prompts(config.seed), config.sample.prompts)
    if drawn.exhausted:
        say(f"the train split of {task.name} holds only {len(drawn.prompts)} distinct prompts "
            f"({config.sample.prompts} wanted; {drawn.draws} draws): sampling all of them")
    return Sampler(config, run_dir, output, drawn, rewarder, general, say)


def _check_output(output: Path, run_dir: Path, resumed: bool) -> None:
    """Never overwrite a file this run did not write (a re-run of a finished run rewrites its own output)."""
    if output.is_dir():
        raise SampleError(f"sample.output {str(output)!r} is a directory; give a .jsonl file path")
    if not output.exists():
        return
    report = run_dir / REPORT
    written = json.loads(report.read_text(encoding="utf-8")).get("path") if report.is_file() else None
    if not (resumed and written == str(output)):
        raise SampleError(f"sample.output {str(output)!r} already exists; choose a new path (nothing is overwritten)")


def _run(sampler: Sampler) -> SampleResult:
    s = sampler.config.sample
    done = load_progress(sampler.run_dir)
    prompts = sampler.drawn.prompts
    batches = [prompts[i:i + s.batch_size] for i in range(0, len(prompts), s.batch_size)]
    finished = sum(p.id in done for p in prompts)
    if done:
        sampler.say(f"resuming: {finished} of {len(prompts)} prompts already sampled")
    show = Reporter.from_config(sampler.config.logging, sys.stdout)
    with GracefulStop(say=sampler.say) as stop, show("sampling", len(prompts), "prompts", initial=finished) as bar:
        for index, batch in enumerate(batches):
            if all(p.id in done for p in batch):
                continue
            records = sample_batch(sampler, batch, index)
            append_progress(sampler.run_dir, records)
            done.update((r.prompt_id, r) for r in records)
            bar.advance_to(sum(p.id in done for p in prompts))
            sampler.say(_batch_line(sampler, index, len(batches), records, done))
            if stop.requested and any(p.id not in done for p in prompts):
                sampler.say(f"rlvr: stopped on {stop.signal_name}; the finished batches are in "
                            f"{sampler.run_dir / PROGRESS}")
                return _result(sampler, done, complete=False, rows_kept=0, rows_general=0)
    return finish(sampler, done)


def sample_batch(sampler: Sampler, prompts: tuple[Prompt, ...], index: int) -> list[PromptRecord]:
    """N samples for each prompt of one batch, scored; the RNG is seeded from (seed, batch index)."""
    import torch

    from rlvr.rollout.base import SamplingParams

    c, s = sampler.config, sampler.config.sample
    if sampler.engine is None:
        sampler.engine = _load_engine(c)
    torch.manual_seed(batch_seed(c.seed, index))
    params = SamplingParams(s.temperature, s.top_p, c.rollout.max_new_tokens)
    rollouts = sampler.engine.generate(list(prompts), s.samples, params)
    scored = sampler.rewarder.score_rollout(rollouts)
    lengths = rollouts.completion_mask.sum(dim=-1).tolist()  # [N*G] tokens per completion, EOS included
    truncated = rollouts.truncated.tolist()  # [N*G] cut by max_new_tokens before the end-of-turn token
    records = []
    for g, prompt in enumerate(prompts):
        rows = range(g * s.samples, (g + 1) * s.samples)
        candidates = tuple(Candidate(
            index=j, text=rollouts.completions[row], length=int(lengths[row]), reward=float(scored.rewards[row]),
            verdicts={name: verdicts[row].outcome for name, verdicts in scored.verdicts.items()},
            scorable=bool(scored.scorable[row]), ended=not truncated[row]) for j, row in enumerate(rows))
        records.append(PromptRecord(prompt.id, index, candidates))
    return records


def _load_engine(config: RunConfig):
    from rlvr.model.load import load_model, load_tokenizer
    from rlvr.rollout.hf import HFRolloutEngine

    return HFRolloutEngine.configured(load_model(config.model, trainable=False), load_tokenizer(config.model),
                                      config.rollout)


def _batch_line(sampler: Sampler, index: int, batches: int, records: list[PromptRecord],
                done: dict[str, PromptRecord]) -> str:
    sampled = [c for r in records for c in r.candidates]
    correct = sum(is_correct(c, sampler.weights) for c in sampled)
    finished = sum(p.id in done for p in sampler.drawn.prompts)
    return (f"batch {index + 1}/{batches}: {finished}/{len(sampler.drawn.prompts)} prompts; "
            f"{correct}/{len(sampled)} samples correct")


def finish(sampler: Sampler, done: dict[str, PromptRecord]) -> SampleResult:
    """Select from every prompt's samples, mix, shuffle, and write the dataset and the report atomically."""
    c, s = sampler.config, sampler.config.sample
    step = model_step(c.model.name_or_path)
    rows: list[dict[str, Any]] = []
    misses: list[dict[str, Any]] = []
    for prompt in sampler.drawn.prompts:
        selection = select_best(done[prompt.id].candidates, s.keep, s.select, sampler.weights)
        rows += dataset_rows(prompt, done[prompt.id], selection, c.model.name_or_path, step)
        if selection.correct < len(done[prompt.id].candidates):
            misses.append({"id": prompt.id, "correct": selection.correct, "samples": len(done[prompt.id].candidates)})
    kept = len(rows)
    mix = plan_mix(sampler.general, kept, s.mix_ratio, c.seed) if sampler.general is not None else None
    if mix is not None and mix.with_replacement:
        sampler.say(f"sample.mix_path holds {mix.available} rows but {len(mix.rows)} are wanted "
                    f"(mix_ratio {s.mix_ratio}): drawing them with replacement")
    rows = shuffled(rows + list(mix.rows if mix else ()), c.seed)
    write_atomic(sampler.output, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    write_atomic(sampler.run_dir / MISSES, "".join(json.dumps(miss, ensure_ascii=False) + "\n" for miss in misses))
    result = _result(sampler, done, complete=True, rows_kept=kept, rows_general=len(mix.rows) if mix else 0)
    report = {**result.summary(), "model": c.model.name_or_path, "step": step, "student": s.student,
              "draws": sampler.drawn.draws, "mix_with_replacement": bool(mix and mix.with_replacement),
              "select": s.select, "keep": s.keep, "prompts_missed": len(misses)}
    write_atomic(sampler.run_dir / REPORT, json.dumps(report, indent=2) + "\n")
    return result


def _result(sampler: Sampler, done: dict[str, PromptRecord], complete: bool, rows_kept: int,
            rows_general: int) -> SampleResult:
    records = [done[p.id] for p in sampler.drawn.prompts if p.id in done]
    candidates = [c for r in records for c in r.candidates]
    weights = sampler.weights
    correct = sum(is_correct(c, weights) for c in candidates)
    outcomes = {f"{name}/{o.value}": sum(c.verdicts.get(name) is o for c in candidates)
                for name in weights for o in Outcome}
    return SampleResult(path=sampler.output, run_dir=sampler.run_dir, complete=complete, prompts_done=len(records),
                        prompts_wanted=sampler.config.sample.prompts, split_exhausted=sampler.drawn.exhausted,
                        sampled=len(candidates), correct=correct, cut=sum(not c.ended for c in candidates),
                        rows_kept=rows_kept, rows_general=rows_general,
                        outcomes=outcomes)


