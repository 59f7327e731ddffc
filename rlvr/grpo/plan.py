"""The step's plan: every fact a GRPO step takes from the config, decided once before the first step.

docs/design.md principle 5, a variant is chosen once: `step_plan` reads the config and the stages receive the
parts they use, never the config. algorithm.kl_placement is read in `kl_plan` and nowhere else in the loop: past
it, where the KL is paid is two plain facts, `in_loss` and `in_reward`. Pure data: no model, no process.
"""
from __future__ import annotations

from dataclasses import dataclass

from rlvr.algorithms.advantages import ADVANTAGES, AdvantageFn
from rlvr.algorithms.correction import CorrectionSettings
from rlvr.algorithms.loss import LossSpec
from rlvr.algorithms.objectives import ClipRange
from rlvr.config.run import AlgorithmConfig, RunConfig
from rlvr.rollout.base import SamplingParams


@dataclass(frozen=True)
class KlPlan:
    """The KL to the frozen reference: its coefficient, estimator, and where it is paid (none of it when beta = 0)."""

    beta: float
    estimator: str  # a KL_ESTIMATORS name (algorithms/loss.py)
    in_loss: bool  # the reference log-probs go into the train batch and LossSpec.beta = beta (GRPO)
    in_reward: bool  # each token's KL is charged in its advantage before the update (PPO/RLHF)


@dataclass(frozen=True)
class DrawPlan:
    """prompts -> rollouts: how many, how they are sampled, and what dynamic sampling and prefetching do."""

    sampling: SamplingParams  # each generation call gets its own seed on top (stages.seeded)
    prompts_per_step: int
    group_size: int
    dynamic_sampling: bool  # draw more prompts until enough groups are informative (DAPO)
    max_extra_prompts: int
    step_credit: bool  # episode.credit=process: step rewards that differ make a group informative too
    prefetch: bool  # rollout.engine.max_staleness = 1: the next step's batch is generated during this update
    max_steps: int  # no batch is prefetched after the last step


@dataclass(frozen=True)
class ScoringPlan:
    """The no-gradient log-prob forwards of the sampled tokens (pi_old, reference; the group view's rescoring)."""

    temperature: float
    micro_batch_size: int
    needs_old_logprobs: bool  # a pi_old forward (see needs_old_logprobs)


@dataclass(frozen=True)
class RewardPlan:
    """The reward components: each verifier with its weight (in config order) and DAPO's overlong shaping."""

    verifiers: tuple[tuple[str, float], ...]
    overlong_buffer: int  # 0 = no length shaping
    overlong_penalty: float
    max_new_tokens: int


@dataclass(frozen=True)
class AdvantagePlan:
    """Which estimator turns rewards into advantages."""

    critic: bool  # advantage=gae: PPO's learned value function and GAE (a critic is built)
    outcome: AdvantageFn | None  # otherwise the group or batch estimator (advantages.ADVANTAGES)
    combination: str  # several verifiers: sum_then_normalize | normalize_then_sum
    std_epsilon: float
    gamma: float  # GAE's discount and lambda (critic only)
    lam: float


@dataclass(frozen=True)
class SyncPlan:
    """After each push to an engine with its own weights: the agreement probe (rollout/agreement.py)."""

    temperature: float
    agreement_rows: int
    max_mismatch_kl: float | None  # None or 0: no check


@dataclass(frozen=True)
class GroupViewPlan:
    """groups.jsonl's line per step: what its ratios are computed with and the clip range it marks."""

    temperature: float
    top_p: float
    micro_batch_size: int
    clip: tuple[float, float]  # (clip_epsilon, clip_epsilon_high)
    kl_estimator: str | None = None  # the loss's KL estimator (KL_ESTIMATORS name); None: no KL in the loss


@dataclass(frozen=True)
class StepPlan:
    draw: DrawPlan
    scoring: ScoringPlan
    reward: RewardPlan
    kl: KlPlan
    advantage: AdvantagePlan
    loss: LossSpec
    correction: CorrectionSettings | None  # rollout correction and its per-batch check; None at top_p < 1
    updates_per_batch: int  # mu: policy (and critic) passes over each batch
    mask_truncated: bool  # DAPO overlong filtering: no gradient from cut-off completions
    sync: SyncPlan
    group_view: GroupViewPlan | None  # None: logging.group_view off
    reflection_phrases: tuple[str, ...]
    samples_per_step: int


def kl_plan(a: AlgorithmConfig) -> KlPlan:
    paid = a.beta > 0  # beta = 0 loads no reference: there is no KL to place
    return KlPlan(a.beta, a.kl_estimator, in_loss=paid and a.kl_placement == "loss",
                  in_reward=paid and a.kl_placement == "reward")


def needs_old_logprobs(config: RunConfig) -> bool:
    """mu = 1 needs no pi_old forward: the ratio is taken against the detached current log-probs. The KL in the
    reward needs one only when the sampler's log-probs are of a top-p-truncated distribution."""
    kl_needs_old = kl_plan(config.algorithm).in_reward and config.rollout.top_p < 1
    return config.algorithm.updates_per_batch > 1 or kl_needs_old


def correction_settings(config: RunConfig) -> CorrectionSettings | None:
    """With top_p < 1 the sampler's log-probs are of the renormalised nucleus: neither the weights nor the agreement
    check would measure a disagreement (config rules refuse tis/mis there), so nothing is measured. Asynchronous
    rollouts are one update stale by design: the per-batch mismatch is then logged and corrected, and only the
    post-sync probe (stages.sync_engine) is held to the threshold."""
    k = config.rollout.correction
    per_batch_check = k.max_mismatch_kl if config.rollout.engine.max_staleness == 0 else None
    return CorrectionSettings(k.mode, k.level, k.cap, per_batch_check) if config.rollout.top_p == 1 else None


def step_plan(config: RunConfig) -> StepPlan:
    a, r, mbs = config.algorithm, config.rollout, config.micro_batch_size
    kl = kl_plan(a)
    ds = r.dynamic_sampling
    draw = DrawPlan(SamplingParams(r.temperature, r.top_p, r.max_new_tokens), r.prompts_per_step, r.group_size,
                    ds.enabled, ds.max_extra_prompts, config.episode.credit == "process", bool(r.engine.max_staleness),
                    config.max_steps)
    gae = a.advantage == "gae"
    advantage = AdvantagePlan(gae, None if gae else ADVANTAGES[a.advantage], a.reward_combination, a.std_epsilon,
                              config.critic.gamma, config.critic.lam)
    loss = LossSpec(objective=a.objective, clip=ClipRange(a.clip_epsilon, a.clip_high, a.dual_clip_c),
                    aggregation=a.aggregation, kl_estimator=a.kl_estimator, beta=a.beta if kl.in_loss else 0.0,
                    entropy_coef=a.entropy_coef)
    view = GroupViewPlan(r.temperature, r.top_p, mbs, (a.clip_epsilon, a.clip_high),
                         a.kl_estimator if kl.in_loss else None) if config.group_view else None
    return StepPlan(
        draw=draw, scoring=ScoringPlan(r.temperature, mbs, needs_old_logprobs(config)),
        reward=RewardPlan(tuple(config.task.verifiers.items()), config.reward.overlong_buffer,
                          config.reward.overlong_penalty, r.max_new_tokens),
        kl=kl, advantage=advantage, loss=loss, correction=correction_settings(config),
        updates_per_batch=a.updates_per_batch, mask_truncated=a.mask_truncated,
        sync=SyncPlan(r.temperature, r.engine.agreement_rows, r.correction.max_mismatch_kl),
        group_view=view, reflection_phrases=tuple(config.reflection_phrases), samples_per_step=config.samples_per_step)
