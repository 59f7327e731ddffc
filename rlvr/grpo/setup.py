"""What a GRPO run holds between steps, and `setup`, which builds it once.

The run's state is split by what uses it: `Models` (scoring, the update, the group view), `RolloutFeed` (the
sampling state the draw and sync stages change), `Optimisation` (the update's; the out-of-memory retry shrinks its
micro-batch). `Run` only carries them through the lifecycle (checkpoint/resume.run_in_directory: setup -> loop ->
close); the stages receive the parts, never the run. Which family member runs is the `StepPlan` (plan.py).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from rlvr.agents.process_reward import build_process_reward
from rlvr.agents.scoring import EpisodeScoring
from rlvr.agents.wiring import EpisodeParts, episode_engine, episode_parts, episode_plan, episode_rewarder
from rlvr.checkpoint.state import CountingStream
from rlvr.config.rules import with_dynamic_sampling_decided
from rlvr.config.run import ConfigError, ModelConfig, RunConfig
from rlvr.distributed.checks import seed_rank
from rlvr.distributed.context import SINGLE, DistContext
from rlvr.distributed.wrap import WrappedPolicy, distribute_policy
from rlvr.evaluation.sets import evaluation_prompts
from rlvr.grpo.backends import build_engine, build_reward_service
from rlvr.grpo.curriculum import PassRateCurriculum
from rlvr.grpo.estimators import AdvantageEstimator, TurnCreditEstimator, build_estimator
from rlvr.grpo.plan import StepPlan, step_plan
from rlvr.metrics.logger import RunLogger
from rlvr.metrics.sinks import build_sinks
from rlvr.model.load import load_model, load_tokenizer
from rlvr.model.lora import AdapterOffReference, LoraPolicy, wrap_policy
from rlvr.rewards.control import ControlledService, training_weights
from rlvr.rewards.functions import PassedFunctions
from rlvr.rewards.pool import VerifierPool
from rlvr.rewards.rewarder import Rewarder, batch_columns, build_rewarder, reward_functions
from rlvr.rollout.pipelined import Prefetched
from rlvr.seeding import seed_everything
from rlvr.tasks import Task, build_task
from rlvr.tasks.screening import screen_prompt_lengths
from rlvr.training.optim import build_optimizer
from rlvr.training.update import UpdateSettings
from rlvr.types import Prompt


@dataclass
class Models:
    policy: object
    reference: object | None  # None when beta = 0: no second model is loaded
    tokenizer: object
    lora: LoraPolicy | None = None  # model.lora: saves merged weights + adapter/ (reference = adapter off)
    wrapped: WrappedPolicy | None = None  # the policy under DDP / FSDP2 when ranks.enabled
    critic: object | None = None  # rlvr.training.critic.Critic for the PPO baseline (advantage=gae)

    @property
    def trainer(self):
        """What the update trains: the DDP/FSDP2-wrapped policy under torchrun, else the policy itself."""
        return self.wrapped.trainer if self.wrapped is not None else self.policy


@dataclass
class RolloutFeed:
    """Where rollouts come from, and what of it changes from step to step."""

    engine: Any  # RolloutEngine; a SyncedEngine when it holds its own weights (rollout/base.py)
    prompt_stream: CountingStream[Prompt]  # counts what it handed out: the cursor a checkpoint saves
    curriculum: PassRateCurriculum | None
    engine_weights: object  # what a SyncedEngine is sent: the policy, or lora.MergedWeights
    engine_version: int = 0  # the trainer step whose weights a SyncedEngine holds (the last push)
    prefetched: Prefetched | None = None  # max_staleness 1: the next step's batch, being generated


@dataclass
class Optimisation:
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    update_settings: UpdateSettings  # an out-of-memory retry may replace it with a smaller micro-batch


@dataclass
class Run:
    """Everything the loop holds; built once by `setup`."""

    config: RunConfig
    plan: StepPlan
    run_dir: Path
    models: Models
    feed: RolloutFeed
    optim: Optimisation
    estimator: AdvantageEstimator
    task: Task
    rewarder: Rewarder  # in-process, for evaluation
    service: VerifierPool  # verifier pool (workers or Ray actors), overlapped with the log-prob forwards
    logger: RunLogger
    ranks: DistContext = SINGLE  # torchrun's ranks; SINGLE in one process
    eval_prompts: list[Prompt] | None = None  # eval.sets' prompts (evaluation/sets.py); None = the task's own


def setup(config: RunConfig, run_dir: Path, ranks: DistContext = SINGLE, passed: PassedFunctions | None = None) -> Run:
    """`passed`: train()'s reward functions that config.yaml cannot record (rlvr/rewards/functions.py)."""
    config = with_dynamic_sampling_decided(config, ranks.world_size)
    seed_everything(config.seed)
    if config.threads:
        torch.set_num_threads(config.threads)
    # Task and verifiers first: a bad dataset or verifier fails before any model loads.
    task = build_task(config.task)
    if hasattr(task, "check_trainable"):  # a benchmark without a train split refuses here (humaneval)
        task.check_trainable()
    episodes = episode_parts(task, config)  # None unless the task plays multi-turn episodes
    single_turn_only(config, episodes, passed)
    # + reward.model_path, reward.functions
    rewarder = build_rewarder(config, passed) if episodes is None else episode_rewarder(episodes)
    if episodes is None and reward_functions(rewarder):  # a column named as TRL's own arguments: refused now, not
        batch_columns([next(task.train_prompts(config.seed))])  # at the first step (a dataset's rows share columns)
    # eval.sets: each set's task is built here, so a bad set fails before any model; the task's own held-out split is
    # read at the first evaluation, but a dataset that held none out fails now, not after the whole run has trained
    eval_prompts = evaluation_prompts(config, task) if config.eval.sets is not None else None
    if config.eval.at_end and eval_prompts is None and getattr(task, "held_out", None) == []:
        task.eval_prompts(1)  # its DatasetError says what to do
    weights = training_weights(rewarder.components, config.reward.control)
    plan = step_plan(config) if episodes is None else episode_plan(step_plan(episodes.config), rewarder)
    # every component the rewarder weighs (reward functions and the reward model too) reaches the advantages, with
    # the control's weights; step_plan alone knows only task.verifiers
    plan = replace(plan, reward=replace(plan.reward, verifiers=tuple(weights.items())))
    # a missing tensorboard/wandb fails before any model
    sinks = build_sinks(config.logging, config.model_dump(mode="json"), run_dir, writes=ranks.is_main)
    models = build_models(config, plan, task, ranks)
    optim = build_optimisation(config, plan, models, ranks)
    service = reward_service(config, rewarder, episodes)  # worker processes, or Ray actors (backends.py)
    if config.reward.control != "none":  # the update sees the control's reward; evaluation the real one
        service = ControlledService(service, config.reward.control, weights)
    curriculum = PassRateCurriculum(config.curriculum, config.seed) if config.curriculum.enabled else None
    if ranks.enabled:
        seed_rank(config.seed, ranks)  # each rank samples its own completions
    # what an engine with its own weights receives: the policy, or with LoRA the plain weights, adapters merged in
    engine_weights = models.lora.merged_weights() if models.lora is not None else models.policy
    try:  # an engine that fails to start (its process, a Ray actor) must not leave the verifier pool running
        engine = build_engine(config, models.policy, models.tokenizer, models.wrapped, engine_weights)
        if episodes is not None:  # turns played on the engine's continue_tokens (rlvr/agents/episodes.py)
            engine = episode_engine(engine, models.tokenizer, episodes)
    except BaseException:
        service.close()
        raise
    logger = RunLogger(run_dir, config.max_steps, writes=ranks.is_main, sinks=sinks,
                       progress_mode=config.logging.progress, interval_s=config.logging.progress_interval_s)
    if passed is not None and passed.warning():
        logger.message(passed.warning())
    feed = RolloutFeed(engine, CountingStream(task.train_prompts(config.seed)), curriculum, engine_weights)
    estimator = build_estimator(plan.advantage, plan.kl.beta, models.critic)
    if episodes is not None and config.episode.credit == "process":  # per-turn credit
        scorer = build_process_reward(config.episode, config.reward, config.model)
        estimator = TurnCreditEstimator(estimator, scorer, config.episode.process_weight,
                                        config.algorithm.std_epsilon)
    return Run(config, plan, run_dir, models, feed, optim, estimator, task, rewarder, service, logger, ranks,
               eval_prompts)


def single_turn_only(config: RunConfig, episodes: EpisodeParts | None, passed: PassedFunctions | None) -> None:
    """train()'s unrecordable functions are wired for single-turn tasks: a multi-turn task's reward also holds its
    environment's state check, and its functions come from the recorded config only."""
    if episodes is None:
        return
    if passed is not None and passed.unrecorded:
        raise ConfigError(f"reward functions {', '.join(passed.unrecorded)} cannot be recorded, and a multi-turn task "
                          "takes its functions from reward.functions only: define them in an importable module")


def reward_service(config: RunConfig, rewarder, episodes: EpisodeParts | None):
    """The verifier pool; for episodes, the pool of the task's answer verifiers (none for a task scored by its
    environment's state alone) wrapped to add the state verdict (rlvr/agents/scoring.py)."""
    if episodes is None:
        return build_reward_service(config, rewarder)
    pool = build_reward_service(episodes.config, rewarder.answers) if episodes.has_answer_verifiers else None
    return EpisodeScoring(pool, episodes.environment, episodes.state_weight)


def build_models(config: RunConfig, plan: StepPlan, task: Task, ranks: DistContext) -> Models:
    """Tokenizer, then (after the prompts are screened against the context) policy, reference and critic."""
    tokenizer = load_tokenizer(config.model)
    screen_prompt_lengths(task, tokenizer, config)
    policy, reference, lora = build_policy(config.model, reference=plan.kl.beta > 0)
    # torchrun: wrapped before the optimizer is built (FSDP2 replaces the parameters by their shards)
    wrapped = distribute_policy(policy, config.distributed.strategy, ranks) if ranks.enabled else None
    critic = build_critic(config) if plan.advantage.critic else None
    return Models(policy, reference, tokenizer, lora, wrapped, critic)


def build_policy(model: ModelConfig, reference: bool) -> tuple[object, object | None, LoraPolicy | None]:
    """(policy, reference or None, LoraPolicy or None). With model.lora the reference is the policy with its
    adapter off: one model in memory instead of two."""
    policy = load_model(model, trainable=True)
    if not model.lora.enabled:
        return policy, load_model(model, trainable=False) if reference else None, None
    wrapped = wrap_policy(policy, model.lora)
    frozen = AdapterOffReference(wrapped) if reference else None
    return wrapped.get_base_model(), frozen, LoraPolicy(wrapped)


def build_critic(config: RunConfig):
    from rlvr.training.critic import Critic, CriticSettings

    o, k = config.optimizer, config.critic
    return Critic(config.model, CriticSettings(lr=k.lr, betas=o.betas, weight_decay=o.weight_decay,
                                               max_grad_norm=o.max_grad_norm, value_clip=k.value_clip,
                                               micro_batch_size=config.micro_batch_size))


def build_optimisation(config: RunConfig, plan: StepPlan, models: Models, ranks: DistContext) -> Optimisation:
    o = config.optimizer
    trainable = [p for p in models.trainer.parameters() if p.requires_grad]  # LoRA: the adapters
    optimizer, scheduler = build_optimizer(trainable, o, distributed=models.wrapped is not None)
    settings = UpdateSettings(plan.loss, config.rollout.temperature, config.micro_batch_size, o.max_grad_norm,
                              config.rollout.max_new_tokens, plan.correction, ranks)
    return Optimisation(optimizer, scheduler, settings)

