"""GRPO, the whole loop on one screen (DeepSeekMath, Shao et al. 2024, Algorithm 1):

  prompts -> rollouts -> rewards -> advantages -> train batch -> update -> log -> checkpoint / evaluate

The helpers below each do one stage; `train` calls them in order. With the in-process transformers engine
the rollout model *is* the policy, so the weight-sync stage is a no-op here.
"""
from __future__ import annotations

import itertools
import json
import math
import random
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from rlvr.advantages import ADVANTAGES, tied_groups
from rlvr.config import RunConfig, dump_config
from rlvr.evaluate import EvalResult, evaluate
from rlvr.logprobs import batched_logprobs
from rlvr.metrics import RunLogger, batch_accounting
from rlvr.models import load_model, load_tokenizer, save_model
from rlvr.reward_service import RewardService
from rlvr.rewards import Rewarder, mean_scores, outcome_counts
from rlvr.rollout.base import SamplingParams
from rlvr.rollout.hf import HFRolloutEngine
from rlvr.rundir import claim_run_dir, release_if_unused
from rlvr.tasks import Task, build_task
from rlvr.types import RolloutBatch, ScoredBatch, TrainBatch
from rlvr.update import UpdateSettings, UpdateStats, train_step


class TrainingDiverged(RuntimeError):
    """The loss stopped being a number; stop before writing a broken checkpoint."""


@dataclass
class Run:
    """Everything the loop holds; built once by `setup`."""

    config: RunConfig
    run_dir: Path
    policy: object
    reference: object | None
    tokenizer: object
    engine: HFRolloutEngine
    task: Task
    rewarder: Rewarder  # in-process, for evaluation
    service: RewardService  # worker pool for training rewards, overlapped with the log-prob forwards
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    logger: RunLogger


def setup(config: RunConfig, run_dir: Path) -> Run:
    random.seed(config.seed)
    torch.manual_seed(config.seed)
    if config.threads:
        torch.set_num_threads(config.threads)
    # Task and verifiers first: a bad dataset or verifier fails before any model loads.
    task, rewarder = build_task(config.task), Rewarder.from_task(config.task)
    tokenizer = load_tokenizer(config.model)
    policy = load_model(config.model, trainable=True)
    reference = load_model(config.model, trainable=False) if config.algorithm.beta > 0 else None
    o = config.optimizer
    optimizer = torch.optim.AdamW(policy.parameters(), lr=o.lr, betas=o.betas, weight_decay=o.weight_decay)
    warmup = max(o.warmup_steps, 1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / warmup))
    r = config.reward
    service = RewardService(config.task, workers=r.workers, deadline_s=r.deadline_s, retries=r.retries)
    return Run(config, run_dir, policy, reference, tokenizer, HFRolloutEngine(policy, tokenizer), task, rewarder,
               service, optimizer, scheduler, RunLogger(run_dir, config.max_steps))


def scoring_logprobs(run: Run, rollouts: RolloutBatch) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(pi_old, reference) log-probs [B, C] of the sampled tokens; None where not needed."""
    c = run.config
    rows = torch.arange(rollouts.size) // rollouts.group_size
    inputs = (rollouts.prompt_ids, rollouts.prompt_mask, rows, rollouts.completion_ids, rollouts.completion_mask)
    scored_logprobs = lambda model: batched_logprobs(  # noqa: E731
        model, *inputs, c.rollout.temperature, c.micro_batch_size)
    # mu = 1 needs no pi_old forward: the ratio is taken against the detached current log-probs.
    old = scored_logprobs(run.policy) if c.algorithm.updates_per_batch > 1 else None
    ref = scored_logprobs(run.reference) if run.reference is not None else None
    return old, ref


def make_train_batch(rollouts: RolloutBatch, advantages: torch.Tensor, old: torch.Tensor | None,
                     ref: torch.Tensor | None) -> TrainBatch:
    rows = torch.arange(rollouts.size) // rollouts.group_size
    return TrainBatch(rollouts.prompt_ids, rollouts.prompt_mask, rows, rollouts.completion_ids,
                      rollouts.completion_mask.float(), advantages, old, ref)


def update(run: Run, batch: TrainBatch) -> UpdateStats:
    c = run.config
    settings = UpdateSettings(c.algorithm.clip_epsilon, c.algorithm.beta, c.algorithm.aggregation,
                              c.algorithm.kl_estimator, c.rollout.temperature, c.micro_batch_size,
                              c.optimizer.max_grad_norm)
    passes = [train_step(run.policy, batch, run.optimizer, settings, run.scheduler)
              for _ in range(c.algorithm.updates_per_batch)]
    # mu > 1: log the mean over the passes (the first pass alone always has ratio 1 and no clipping).
    return UpdateStats(**{k: sum(getattr(p, k) for p in passes) / len(passes) for k in vars(passes[0])})


def step_record(step: int, rollouts: RolloutBatch, scored: ScoredBatch, stats: UpdateStats,
                timings: dict[str, float], lr: float, service_stats: dict[str, int]) -> dict:
    lengths = rollouts.completion_mask.sum(dim=1).float()
    return {
        "step": step, "reward_mean": scored.rewards.mean().item(), "reward_std": scored.rewards.std().item(),
        "loss": stats.loss, "policy_loss": stats.policy_loss, "kl": stats.kl, "clip_fraction": stats.clip_fraction,
        "entropy": stats.entropy, "grad_norm": stats.grad_norm, "lr": lr,
        "completion_length": lengths.mean().item(), "completion_length_max": lengths.max().item(),
        "truncated_fraction": rollouts.truncated.float().mean().item(),
        "zero_std_fraction": tied_groups(scored.rewards, rollouts.group_size).float().mean().item(),
        **{f"reward/{k}": v for k, v in mean_scores(scored).items()},
        **{f"outcomes/{k}": v for k, v in outcome_counts(scored).items()},
        "unscorable": int((~scored.scorable).sum()),
        **{f"time/{k}_s": round(v, 3) for k, v in timings.items()},
        **{f"reward_service/{k}": v for k, v in service_stats.items()},
    }


def sample_rows(step: int, rollouts: RolloutBatch, scored: ScoredBatch, limit: int) -> list[dict]:
    rows = []
    stride = max(1, rollouts.size // max(limit, 1))  # spread over groups, not the first group's samples
    for i in list(range(0, rollouts.size, stride))[:limit]:
        prompt = rollouts.prompt_of(i)
        rows.append({"step": step, "prompt_id": prompt.id, "question": prompt.messages[-1]["content"],
                     "reference": prompt.reference, "completion": rollouts.completions[i],
                     "reward": scored.rewards[i].item(),
                     "verdicts": {name: v[i].as_json() for name, v in scored.verdicts.items()}})
    return rows


def run_eval(run: Run, step: int) -> EvalResult:
    c = run.config
    result = evaluate(run.engine, run.rewarder, run.task.eval_prompts(c.eval.size), c.eval, c.rollout.max_new_tokens)
    with (run.run_dir / "eval.jsonl").open("a") as f:
        f.write(json.dumps({"step": step, **result.as_json()}) + "\n")
    run.logger.message(f"eval @ step {step}: pass@1 {result.pass_at_1:.3f} (n={result.samples_per_problem}, "
                       f"T={result.temperature}) | greedy {result.greedy:.3f} | {result.problems} problems")
    return result


def grpo_step(run: Run, step: int, prompts: list, sampling: SamplingParams) -> tuple[dict, list[dict]]:
    """One GRPO step, each stage one call: rollouts -> rewards -> advantages -> update. Returns the logs."""
    c = run.config
    t0 = time.monotonic()
    rollouts = run.engine.generate(prompts, c.rollout.group_size, sampling)
    t1 = time.monotonic()
    pending = run.service.submit_rollout(rollouts)  # verification runs while the forwards below do
    old, ref = scoring_logprobs(run, rollouts)
    t2 = time.monotonic()
    scored = pending.result()
    advantages = ADVANTAGES[c.algorithm.advantage](scored.rewards, c.rollout.group_size, c.algorithm.std_epsilon,
                                                   valid=scored.scorable)
    t3 = time.monotonic()
    lr = run.scheduler.get_last_lr()[0]
    stats = update(run, make_train_batch(rollouts, advantages, old, ref))
    t4 = time.monotonic()
    timings = {"rollout": t1 - t0, "logprobs": t2 - t1, "verify_wait": t3 - t2, "train": t4 - t3}
    record = step_record(step, rollouts, scored, stats, timings, lr, run.service.stats())
    return record, sample_rows(step, rollouts, scored, c.samples_per_step)


def train(config: RunConfig, run_dir: Path | str | None = None) -> Path:
    """Run GRPO for config.max_steps steps; returns the final checkpoint directory.

    The run directory (run_dir, else config.output_dir, else a new runs/<date-time>) must be new or empty;
    it is claimed before any model loads and removed again if the run fails before writing anything.
    """
    target = run_dir if run_dir is not None else config.output_dir
    run_dir = claim_run_dir(Path(target) if target else None)
    config.output_dir = str(run_dir)  # the resolved config names the directory it lives in
    print(f"run directory: {run_dir}", flush=True)
    try:
        run = setup(config, run_dir)
    except BaseException:
        release_if_unused(run_dir)
        raise
    try:
        dump_config(config, run_dir / "config.yaml")
        run.logger.message(batch_accounting(config))
        r = config.rollout
        sampling = SamplingParams(r.temperature, r.top_p, r.max_new_tokens)
        prompt_stream = run.task.train_prompts(config.seed)
        for step in range(1, config.max_steps + 1):
            record, samples = grpo_step(run, step, list(itertools.islice(prompt_stream, r.prompts_per_step)), sampling)
            run.logger.log_step(record)
            run.logger.log_samples(samples)
            if record["unscorable"] == config.batch_size:
                run.logger.message(f"WARNING: every completion of step {step} is unscorable: the verifiers "
                                   f"{sorted(config.task.verifiers)} cannot read this task's references "
                                   f"(see 'detail' in samples.jsonl); nothing is learned from such steps")
            if not math.isfinite(record["loss"]):
                raise TrainingDiverged(f"loss is {record['loss']} at step {step}: training diverged (try a lower "
                                       f"optimizer.lr); metrics and earlier checkpoints in {run_dir} are kept")
            if config.save_every and step % config.save_every == 0 and step < config.max_steps:
                save_model(run.policy, run.tokenizer, run_dir / "checkpoints" / f"step-{step:06d}")
            if config.eval.every and step % config.eval.every == 0 and step < config.max_steps:
                run_eval(run, step)
        final = save_model(run.policy, run.tokenizer, run_dir / "final")
        run.logger.message(f"saved final checkpoint to {final}")
        if config.eval.at_end:
            run_eval(run, config.max_steps)
        return final
    finally:
        run.service.close()
