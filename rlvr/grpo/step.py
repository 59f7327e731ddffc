"""One GRPO step on one screen (docs/design.md principle 1; DeepSeekMath, Shao et al. 2024, Algorithm 1):

  prompts -> rollouts -> rewards -> advantages -> loss -> update -> sync

`grpo_step` calls each stage (stages.py) by name, handing it the parts of the run and of the StepPlan it uses.
With the in-process transformers engine the rollout model *is* the policy, so the sync is a no-op. With
rollout.engine.max_staleness=1 the next step's prompts go to the engine before the update, which then overlaps
their generation (rollout/pipelined.py).
"""
from __future__ import annotations

import time
from dataclasses import replace
from typing import Callable

from rlvr.distributed.gather import global_step_view
from rlvr.distributed.wrap import gathered
from rlvr.grpo import stages
from rlvr.grpo.setup import Optimisation, Run
from rlvr.grpo.step_log import sample_rows, step_record
from rlvr.training.update import UpdateStats, train_step
from rlvr.types import TrainBatch


def grpo_step(run: Run, step: int) -> tuple[dict, list[dict], dict | None]:
    """One step, each stage one call. Returns the logs: the metrics record, sample rows and the group view."""
    plan, models, feed = run.plan, run.models, run.feed
    clock = [time.monotonic()]
    drawn = stages.draw_batch(feed, run.service, plan.draw, run.ranks)  # prompts -> rollouts (-> rewards, dynamic)
    rollouts = drawn.rollouts
    stages.prefetch_next(feed, plan.draw, step)  # max_staleness 1: the engine samples step + 1 during the update
    clock.append(time.monotonic())
    # FSDP2: a pi_old forward of the policy (mu > 1) needs its whole weights; at mu = 1 there is none to gather for
    with gathered(models.wrapped if plan.scoring.needs_old_logprobs else None):
        old, ref = stages.scoring_logprobs(models, rollouts, plan.scoring)  # the verifiers work meanwhile
    clock.append(time.monotonic())
    scored = stages.finish_scoring(drawn, feed.curriculum)
    clock.append(time.monotonic())
    components = stages.reward_components(rollouts, scored, plan.reward)
    kl_in_reward = stages.kl_for_reward(rollouts, old, ref, plan.kl)
    advantages = run.estimator(rollouts, components, scored.scorable, kl_in_reward)
    clock.append(time.monotonic())
    lr = run.optim.scheduler.get_last_lr()[0]
    batch = stages.make_train_batch(rollouts, advantages.values, old, ref, plan.mask_truncated, plan.kl)
    stats = update(models.trainer, run.optim, batch, plan.updates_per_batch, run.logger.message)
    critic_stats = stages.train_critic(models.critic, rollouts, advantages.critic_targets, plan.updates_per_batch)
    clock.append(time.monotonic())
    # engines with their own weights: push, then check agreement (max_staleness 1: queued behind the next batch's
    # generation, so time/sync_s also holds what of it the update did not hide)
    synced = stages.sync_engine(feed, models.policy, step, rollouts, plan.sync)
    clock.append(time.monotonic())
    group = stages.group_view_row(plan.group_view, models, run.ranks.enabled, step, rollouts, scored,
                                  advantages.values, old, ref, drawn.pass_rates)  # the update's ratios, the KL
    clock.append(time.monotonic())
    timings = dict(zip(("rollout", "logprobs", "verify_wait", "advantages", "train", "sync", "group_view"),
                       (b - a for a, b in zip(clock, clock[1:]))))
    extra = {"reward_shaped_mean": advantages.shaped_reward_mean, **advantages.extra, **critic_stats,
             **stages.draw_metrics(drawn), **synced}
    # torchrun: the record is the global batch's (every rank's rollouts and rewards; the update's totals are
    # already reduced); timings stay rank 0's.
    rollouts, scored, service, extra = global_step_view(run.ranks, rollouts, scored, run.service.stats(), extra)
    record = step_record(step, rollouts, scored, stats, timings, lr, service, extra, plan.reflection_phrases)
    return record, sample_rows(step, rollouts, scored, plan.samples_per_step), group


def update(trainer, optim: Optimisation, batch: TrainBatch, passes: int, say: Callable[[str], None]) -> UpdateStats:
    """mu (`passes`) optimizer steps on the batch; an out-of-memory retry's smaller micro-batch is kept in `optim`
    for the later steps, which then do not run out of memory again first."""
    results = [train_step(trainer, batch, optim.optimizer, optim.update_settings, optim.scheduler)
               for _ in range(passes)]
    used = int(min(p.micro_batch_size for p in results))
    if used < optim.update_settings.micro_batch_size:  # an out-of-memory retry halved it: keep the size that fit
        say(f"out of memory at micro-batch {optim.update_settings.micro_batch_size}; continuing with "
            f"{used} rows per micro-batch (the step is the same: the loss's denominator is global)")
        optim.update_settings = replace(optim.update_settings, micro_batch_size=used)
    # mu > 1: log the mean over the passes (the first pass alone always has ratio 1 and no clipping). The
    # correction compares pi_old with the sampler, neither of which a pass changes: the first pass's is the batch's.
    mean = {k: sum(getattr(p, k) for p in results) / len(results) for k in vars(results[0]) if k != "correction"}
    mean["kl_max"] = max(p.kl_max for p in results)  # the largest single token: of all passes, not their average
    return UpdateStats(**mean, correction=results[0].correction)
