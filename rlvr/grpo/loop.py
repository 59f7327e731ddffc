"""GRPO and its family, the whole loop on one screen (DeepSeekMath, Shao et al. 2024, Algorithm 1):

  prompts -> rollouts -> rewards -> advantages -> train batch -> update -> log -> checkpoint / evaluate

The stages live in recipes/stages.py; `grpo_step` calls them in order and `train` repeats it. Which family
member runs (estimator, objective, aggregation, KL placement, dynamic sampling, curriculum, critic) is decided
once in `setup`. With the in-process transformers engine the rollout model *is* the policy, so the weight-sync
stage is a no-op here. With rollout.engine.max_staleness=1 the next step's prompts go to the engine before the
update, which then overlaps their generation (rollout/pipelined.py, issue #11).
"""
from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, replace
from typing import Any
from functools import partial
from pathlib import Path

import torch

from rlvr.algorithms.advantages import ADVANTAGES
from rlvr.checkpoint import resume
from rlvr.checkpoint.stop import GracefulStop
from rlvr.checkpoint.state import MODEL_DIR, CountingStream, rng_state
from rlvr.checkpoint.store import Checkpoint, checkpoint_name
from rlvr.config.run import RunConfig, dump_config
from rlvr.config.rules import with_dynamic_sampling_decided
from rlvr.algorithms.correction import CorrectionSettings
from rlvr.grpo.curriculum import PassRateCurriculum
from rlvr.distributed.checks import check_supported, seed_rank
from rlvr.distributed.context import SINGLE, DistContext, from_env, init_distributed, shutdown
from rlvr.distributed.gather import global_step_view
from rlvr.distributed.state import rank_rngs, savable
from rlvr.distributed.wrap import WrappedPolicy, distribute_policy, gathered
from rlvr.evaluation.evaluate import EvalResult, evaluate
from rlvr.model.lora import AdapterOffReference, LoraPolicy, wrap_policy
from rlvr.algorithms.loss import LossSpec
from rlvr.metrics.logger import RunLogger
from rlvr.model.load import context_length, load_model, load_tokenizer, save_model
from rlvr.algorithms.objectives import ClipRange
from rlvr.grpo import stages
from rlvr.grpo.step_log import sample_rows, step_record
from rlvr.grpo.run_plan import start_of_run_lines
from rlvr.metrics.diagnostics import Diagnostics, RunFacts
from rlvr.metrics.sinks import build_sinks
from rlvr.grpo.backends import build_engine, build_reward_service
from rlvr.rewards.service import RewardService
from rlvr.rewards.rewarder import Rewarder, build_rewarder
from rlvr.rollout.base import SamplingParams
from rlvr.rollout.pipelined import Prefetched, saved_cursor
from rlvr.tasks import Task, build_task
from rlvr.tasks.screening import prompt_fits
from rlvr.training.divergence import check_skips
from rlvr.types import Prompt, TrainBatch
from rlvr.training.update import UpdateSettings, UpdateStats, train_step


@dataclass
class Run:
    """Everything the loop holds; built once by `setup`."""

    config: RunConfig
    run_dir: Path
    policy: object
    reference: object | None  # None when beta = 0: no second model is loaded
    tokenizer: object
    engine: Any  # RolloutEngine; a SyncedEngine when it holds its own weights (rollout/base.py)
    task: Task
    prompt_stream: CountingStream[Prompt]  # counts what it handed out: the cursor a checkpoint saves
    rewarder: Rewarder  # in-process, for evaluation
    service: RewardService  # verifier pool (workers or Ray actors), overlapped with the log-prob forwards
    estimator: stages.AdvantageEstimator
    critic: object | None  # rlvr.training.critic.Critic for the PPO baseline (advantage=gae)
    curriculum: PassRateCurriculum | None
    update_settings: UpdateSettings
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    logger: RunLogger
    lora: LoraPolicy | None = None  # model.lora: saves merged weights + adapter/ (reference = adapter off)
    ranks: DistContext = SINGLE  # torchrun's ranks (issue #11); SINGLE in one process
    wrapped: WrappedPolicy | None = None  # the policy under DDP / FSDP2 when ranks.enabled
    engine_version: int = 0  # the trainer step whose weights a SyncedEngine holds (the last push)
    prefetched: Prefetched | None = None  # max_staleness 1: the next step's batch, being generated (issue #11)
    engine_weights: object = None  # what a SyncedEngine is sent: the policy, or lora.MergedWeights

    @property
    def trainer(self):
        """What the update trains: the DDP/FSDP2-wrapped policy under torchrun, else the policy itself."""
        return self.wrapped.trainer if self.wrapped is not None else self.policy


def loss_spec(config: RunConfig) -> LossSpec:
    a = config.algorithm
    return LossSpec(objective=a.objective, clip=ClipRange(a.clip_epsilon, a.clip_high, a.dual_clip_c),
                    aggregation=a.aggregation, kl_estimator=a.kl_estimator,
                    beta=a.beta if a.kl_placement == "loss" else 0.0, entropy_coef=a.entropy_coef)


def build_estimator(config: RunConfig, critic) -> stages.AdvantageEstimator:
    a = config.algorithm
    if critic is not None:
        return stages.CriticEstimator(critic, config.critic.gamma, config.critic.lam, a.beta)
    return stages.OutcomeEstimator(ADVANTAGES[a.advantage], a.reward_combination, a.std_epsilon, a.beta)


def build_critic(config: RunConfig):
    if config.algorithm.advantage != "gae":
        return None
    from rlvr.training.critic import Critic, CriticSettings

    o, k = config.optimizer, config.critic
    return Critic(config.model, CriticSettings(lr=k.lr, betas=o.betas, weight_decay=o.weight_decay,
                                               max_grad_norm=o.max_grad_norm, value_clip=k.value_clip,
                                               micro_batch_size=config.micro_batch_size))


def setup(config: RunConfig, run_dir: Path, ranks: DistContext = SINGLE) -> Run:
    config = with_dynamic_sampling_decided(config, ranks.world_size)
    random.seed(config.seed)
    torch.manual_seed(config.seed)
    if config.threads:
        torch.set_num_threads(config.threads)
    # Task and verifiers first: a bad dataset or verifier fails before any model loads.
    task, rewarder = build_task(config.task), build_rewarder(config)  # + reward.model_path when set (issue #10)
    sinks = build_sinks(config, run_dir, writes=ranks.is_main)  # a missing tensorboard/wandb fails before any model
    tokenizer = load_tokenizer(config.model)
    screen_prompt_lengths(task, tokenizer, config)
    policy, reference, lora = build_policy(config)
    # torchrun: wrapped before the optimizer is built (FSDP2 replaces the parameters by their shards)
    wrapped = distribute_policy(policy, config.distributed.strategy, ranks) if ranks.enabled else None
    critic = build_critic(config)
    o = config.optimizer
    trainable = [p for p in (wrapped.trainer if wrapped else policy).parameters() if p.requires_grad]  # LoRA: adapters
    # fused: one kernel over all tensors (measured on SmolLM2-135M, CPU: 90 ms a step instead of 230 for foreach,
    # issue #12); the sharded DTensors of FSDP2 keep the default implementation
    optimizer = torch.optim.AdamW(trainable, lr=o.lr, betas=o.betas, weight_decay=o.weight_decay,
                                  fused=True if wrapped is None else None)
    warmup = max(o.warmup_steps, 1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / warmup))
    service = build_reward_service(config, rewarder)  # worker processes, or Ray actors (backends.py)
    curriculum = PassRateCurriculum(config.curriculum, config.seed) if config.curriculum.enabled else None
    k = config.rollout.correction
    # With top_p < 1 the sampler's log-probs are of the renormalised nucleus: neither the weights nor the agreement
    # check would measure a disagreement (config_rules refuses tis/mis there), so nothing is measured.
    # Asynchronous rollouts are one update stale by design: the per-batch mismatch is then logged and corrected, and
    # only the post-sync probe (stages.sync_engine) is held to the threshold.
    per_batch_check = k.max_mismatch_kl if config.rollout.engine.max_staleness == 0 else None
    correction = CorrectionSettings(k.mode, k.level, k.cap, per_batch_check) if config.rollout.top_p == 1 else None
    settings = UpdateSettings(loss_spec(config), config.rollout.temperature, config.micro_batch_size,
                              o.max_grad_norm, config.rollout.max_new_tokens, correction, ranks)
    if ranks.enabled:
        seed_rank(config.seed, ranks)  # each rank samples its own completions
    # what an engine with its own weights receives: the policy, or with LoRA the plain weights, adapters merged in
    engine_weights = lora.merged_weights() if lora is not None else policy
    try:  # an engine that fails to start (its process, a Ray actor) must not leave the verifier pool running
        engine = build_engine(config, policy, tokenizer, wrapped, engine_weights)
    except BaseException:
        service.close()
        raise
    logger = RunLogger(run_dir, config.max_steps, writes=ranks.is_main, sinks=sinks,
                       progress_mode=config.logging.progress, interval_s=config.logging.progress_interval_s)
    return Run(config, run_dir, policy, reference, tokenizer, engine, task,
               CountingStream(task.train_prompts(config.seed)), rewarder, service, build_estimator(config, critic), critic,
               curriculum, settings, optimizer, scheduler, logger, lora, ranks, wrapped, engine_weights=engine_weights)


def build_policy(config: RunConfig) -> tuple[object, object | None, LoraPolicy | None]:
    """(policy, reference or None when beta = 0, LoraPolicy or None). With model.lora the reference is the
    policy with its adapter off (issue #11, item 6): one model in memory instead of two."""
    policy = load_model(config.model, trainable=True)
    if not config.model.lora.enabled:
        return policy, load_model(config.model, trainable=False) if config.algorithm.beta > 0 else None, None
    wrapped = wrap_policy(policy, config.model.lora)
    reference = AdapterOffReference(wrapped) if config.algorithm.beta > 0 else None
    return wrapped.get_base_model(), reference, LoraPolicy(wrapped)


def screen_prompt_lengths(task: Task, tokenizer, config: RunConfig) -> None:
    """Rows whose prompt leaves less than max_new_tokens of the context are bad rows (issue #9), found before
    any weights load. Tasks with generated prompts (arithmetic) have no such rows and no `screen_prompts`."""
    screen = getattr(task, "screen_prompts", None)
    limit = context_length(config.model) if screen is not None else None
    if screen is not None and limit is not None:
        screen(prompt_fits(tokenizer, limit - config.rollout.max_new_tokens))


def update(run: Run, batch: TrainBatch) -> UpdateStats:
    passes = [train_step(run.trainer, batch, run.optimizer, run.update_settings, run.scheduler)
              for _ in range(run.config.algorithm.updates_per_batch)]
    used = int(min(p.micro_batch_size for p in passes))
    if used < run.update_settings.micro_batch_size:  # an out-of-memory retry halved it: keep the size that fit
        run.logger.message(f"out of memory at micro-batch {run.update_settings.micro_batch_size}; continuing with "
                           f"{used} rows per micro-batch (the step is the same: the loss's denominator is global)")
        run.update_settings = replace(run.update_settings, micro_batch_size=used)
    # mu > 1: log the mean over the passes (the first pass alone always has ratio 1 and no clipping). The
    # correction compares pi_old with the sampler, neither of which a pass changes: the first pass's is the batch's.
    mean = {k: sum(getattr(p, k) for p in passes) / len(passes) for k in vars(passes[0]) if k != "correction"}
    mean["kl_max"] = max(p.kl_max for p in passes)  # the largest single token: of all passes, not their average
    return UpdateStats(**mean, correction=passes[0].correction)


def run_eval(run: Run, step: int) -> EvalResult:
    c = run.config
    # torchrun: every rank evaluates (under FSDP2 each decode needs all ranks to gather); rank 0 writes.
    result = evaluate(run.engine, run.rewarder, run.task.eval_prompts(c.eval.size), c.eval, c.rollout.max_new_tokens,
                      progress=run.logger.progress)
    if run.ranks.is_main:
        with (run.run_dir / "eval.jsonl").open("a") as f:
            f.write(json.dumps({"step": step, **result.as_json()}) + "\n")
    run.logger.message(f"eval @ step {step}: {result.summary()}")
    return result


def grpo_step(run: Run, step: int, sampling: SamplingParams) -> tuple[dict, list[dict], dict | None]:
    """One step, each stage one call: rollouts -> rewards -> advantages -> update. Returns the logs."""
    clock = [time.monotonic()]
    drawn = stages.draw_batch(run, sampling)  # prompts -> rollouts (-> rewards, with dynamic sampling)
    rollouts = drawn.rollouts
    stages.prefetch_next(run, sampling, step)  # max_staleness 1: the engine samples step + 1 during the update
    clock.append(time.monotonic())
    # FSDP2: a pi_old forward of the policy (mu > 1) needs its whole weights; at mu = 1 there is none to gather for
    with gathered(run.wrapped if stages.needs_old_logprobs(run.config) else None):
        old, ref = stages.scoring_logprobs(run, rollouts)  # the verifiers work meanwhile
    clock.append(time.monotonic())
    scored = stages.finish_scoring(run, drawn)
    clock.append(time.monotonic())
    components = stages.reward_components(run, rollouts, scored)
    advantages = run.estimator(rollouts, components, scored.scorable, stages.kl_for_reward(run, rollouts, old, ref))
    clock.append(time.monotonic())
    lr = run.scheduler.get_last_lr()[0]
    stats = update(run, stages.make_train_batch(run, rollouts, advantages.values, old, ref))
    critic_stats = stages.train_critic(run, rollouts, advantages.critic_targets)
    clock.append(time.monotonic())
    # engines with their own weights: push, then check agreement (max_staleness 1: queued behind the next batch's
    # generation, so time/sync_s also holds what of it the update did not hide)
    synced = stages.sync_engine(run, step, rollouts)
    clock.append(time.monotonic())
    group = stages.group_view_row(run, step, rollouts, scored, advantages.values, old)  # the update's ratios
    clock.append(time.monotonic())
    timings = dict(zip(("rollout", "logprobs", "verify_wait", "advantages", "train", "sync", "group_view"),
                       (b - a for a, b in zip(clock, clock[1:]))))
    extra = {"reward_shaped_mean": advantages.shaped_reward_mean, **advantages.extra, **critic_stats,
             **stages.draw_metrics(drawn), **synced}
    # torchrun: the record is the global batch's (every rank's rollouts and rewards; the update's totals are
    # already reduced); timings stay rank 0's.
    rollouts, scored, service, extra = global_step_view(run.ranks, rollouts, scored, run.service.stats(), extra)
    record = step_record(step, rollouts, scored, stats, timings, lr, service, extra, run.config.reflection_phrases)
    return record, sample_rows(step, rollouts, scored, run.config.samples_per_step), group


def train(config: RunConfig, run_dir: Path | str | None = None) -> Path:
    """Run GRPO up to config.max_steps; returns the final model directory, or the checkpoint written when a
    SIGTERM/SIGINT stopped the run early.

    A fresh run directory (run_dir, else config.output_dir, else a new runs/<date-time>) must be new or empty;
    it is claimed before any model loads and removed again if the run fails before writing anything. With
    checkpoint.resume the run continues from its newest complete checkpoint instead (rlvr/checkpoint/).
    """
    rank, world, local = from_env()  # torchrun's settings are checked before any process group or model
    check_supported(config, DistContext(rank, world, local, None))
    ranks = init_distributed(config.distributed.backend)
    try:
        final = resume.run_in_directory(config, Path(run_dir) if run_dir is not None else None,
                                        partial(setup, ranks=ranks), _train_loop,
                                        close=_close, ranks=ranks)
    except BaseException:
        shutdown(ranks, finished=False)
        raise
    shutdown(ranks)
    return final


def _close(run: Run) -> None:
    try:
        run.service.close()
        if hasattr(run.engine, "close"):  # an engine process, vLLM or a Ray actor
            run.engine.close()
    finally:
        run.logger.close()  # the steps' bar, TensorBoard's event file, the W&B run


def _parts(run: Run) -> resume.Parts:
    return resume.Parts(run.lora or run.policy, run.tokenizer, run.optimizer, run.scheduler, run.prompt_stream,
                        run.curriculum, run.critic)


def _train_loop(run: Run, checkpoint: Checkpoint | None) -> Path:
    config, run_dir = run.config, run.run_dir
    first, guard = 1, {"consecutive_skips": 0, "skipped_steps": 0}
    if checkpoint is not None:
        parts = _parts(run)
        state = resume.restore(checkpoint, parts, lambda: run.task.train_prompts(config.seed), run_dir, run.ranks)
        if run.lora is not None:  # restore() loaded the merged weights, which do not give the adapter back
            run.lora.restore_adapter(checkpoint.path / MODEL_DIR)
        run.prompt_stream, run.logger.start = parts.prompt_stream, time.monotonic() - state.elapsed_s
        stages.push_weights(run, state.step)  # the engine loaded the base model; it must sample the checkpoint's
        first = state.step + 1
        guard = {"consecutive_skips": state.consecutive_skips, "skipped_steps": state.skipped_steps}
        run.logger.message(f"resumed at step {state.step} from {checkpoint.path} ({state.prompts_drawn} prompts "
                           "drawn so far)")
    if run.ranks.is_main:
        dump_config(config, run_dir / "config.yaml")
    for line in start_of_run_lines(config, run.policy.config, run.task, run.tokenizer):
        run.logger.message(line)
    r = config.rollout
    sampling, started = SamplingParams(r.temperature, r.top_p, r.max_new_tokens), time.monotonic()
    diagnostics = Diagnostics(RunFacts.of(config))  # "is it working?" lines (issue #13), knowing the run (#24)
    with GracefulStop(say=run.logger.message) as stop:
        for step in range(first, config.max_steps + 1):
            record, samples, group = grpo_step(run, step, sampling)
            check_skips(record, guard, config.checkpoint.max_consecutive_skips, run_dir,
                        hint=" and check the rewards for NaN")
            last = step == config.max_steps  # a stop during the last step simply finishes the run below
            if config.eval.every and step % config.eval.every == 0 and not last:
                # held-out accuracy next to the training reward in the same row: reward hacking shows as reward
                # rising while eval/pass@1 does not (issue #10, item 4)
                record.update(run_eval(run, step).metrics())
            run.logger.log_step(record)
            run.logger.log_samples(samples)
            run.logger.log_group(group)
            for line in diagnostics.check(record):
                run.logger.message(line)
            if record["unscorable"] == config.batch_size:
                run.logger.message(f"WARNING: every completion of step {step} is unscorable: the verifiers "
                                   f"{sorted(config.task.verifiers)} cannot read this task's references "
                                   f"(see 'detail' in samples.jsonl); nothing is learned from such steps")
            # torchrun: a signal may reach the ranks in different steps; all stop after the same one
            stopping = bool(run.ranks.max([float(stop.requested)])[0])
            if (stopping and not last) or (config.save_every and step % config.save_every == 0 and not last):
                saved = _save(run, step, guard)
                if stopping:
                    run.logger.message(resume.stop_message(run_dir, step, stop.signal_name or "SIGTERM", started))
                    return saved
    if first > config.max_steps and (run_dir / "final" / "config.json").is_file():
        run.logger.message(f"the run already reached max_steps={config.max_steps}; set a larger max_steps to go on")
        return run_dir / "final"
    final = _save_final(run, guard)
    run.logger.message(f"saved final checkpoint to {final}")
    if config.eval.at_end:  # after the final model is safe on disk; an eval-only row closes the curve
        run.logger.log_eval(config.max_steps, run_eval(run, config.max_steps).metrics())
    return final


def _save(run: Run, step: int, guard: dict[str, int], model_from: Path | None = None) -> Path:
    """The step's checkpoint, written once. Under torchrun every rank joins the gathering (FSDP2's full state
    dicts, every rank's RNG state) and rank 0 writes while the others wait, so none runs ahead of it."""
    model, optimizer = savable(run.wrapped, run.optimizer)
    # A batch prefetched for the next step (max_staleness 1) is not saved: its prompts count as not drawn
    parts = replace(_parts(run), optimizer=optimizer, policy=model if model is not None else run.lora or run.policy,
                    prompt_stream=saved_cursor(run.prompt_stream.drawn, run.prefetched))
    extra = rank_rngs(run.ranks, rng_state())
    path = run.run_dir / resume.CHECKPOINTS / checkpoint_name(step)
    if run.ranks.is_main:
        path = resume.save(run.run_dir, step, parts, run.logger.elapsed(), guard,
                           run.config.checkpoint.save_total_limit, model_from, extra).path
    run.ranks.barrier()
    return path


def _save_final(run: Run, guard: dict[str, int]) -> Path:
    model, _ = savable(run.wrapped, None)
    final = run.run_dir / "final"
    if run.ranks.is_main:
        save_model(model if model is not None else run.lora or run.policy, run.tokenizer, final)
    _save(run, run.config.max_steps, guard, model_from=final)
    return final
