"""The stages of one step, each a function of the Run (recipes/grpo.py calls them in order).

Systems code only: every formula it applies lives in advantages.py, gae.py, shaping.py, loss.py or objectives.py.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

import torch

from rlvr.algorithms.advantages import AdvantageFn, combined_advantages
from rlvr.grpo.curriculum import CurriculumStats, group_pass_rates
from rlvr.grpo.dynamic_sampling import DrawStats, draw_informative_groups
from rlvr.algorithms.gae import gae_advantages, masked_whiten, outcome_token_rewards
from rlvr.model.logprobs import batched_logprobs
from rlvr.algorithms.loss import KL_ESTIMATORS
from rlvr.grpo import group_view
from rlvr.rollout import pipelined
from rlvr.rollout.agreement import check_after_sync
from rlvr.rollout.base import SamplingParams, SyncedEngine, draw_seed
from rlvr.algorithms.shaping import kl_penalty_to_go, soft_overlong_penalty, weighted_total
from rlvr.types import RolloutBatch, ScoredBatch, TrainBatch

if TYPE_CHECKING:
    from rlvr.config.run import RunConfig
    from rlvr.training.critic import Critic
    from rlvr.grpo.loop import Run


@dataclass
class _Scored:
    """A finished ScoredBatch behind the same .result() as the reward service's pending one."""

    scored: ScoredBatch

    def result(self) -> ScoredBatch:
        return self.scored


@dataclass
class Drawn:
    rollouts: RolloutBatch
    pending: Any  # .result() -> ScoredBatch; still running in the reward workers when nothing had to wait
    draw: DrawStats | None = None  # dynamic sampling's accounting (None when off)
    curriculum: CurriculumStats | None = None
    staleness: int = 0  # updates between the weights that sampled and the weights this step updates


def _next_prompts(run: Run, n: int, stats: list[CurriculumStats]) -> list:
    if run.curriculum is None:
        return list(itertools.islice(run.prompt_stream, n))
    prompts, taken = run.curriculum.take(run.prompt_stream, n)
    stats.append(taken)
    return prompts


def _merge(stats: list[CurriculumStats]) -> CurriculumStats | None:
    if not stats:
        return None
    return CurriculumStats(*(sum(getattr(s, k) for s in stats) for k in ("skipped", "admitted", "forced")))


def draw_batch(run: Run, sampling: SamplingParams) -> Drawn:
    """prompts -> rollouts -> (pending) rewards for rollout.prompts_per_step groups.

    Without dynamic sampling the verification runs in the reward workers while the caller computes the
    log-prob forwards; with it, scores are needed first to tell which groups to keep.
    """
    c, curriculum_stats = run.config, []
    wanted, G = c.rollout.prompts_per_step, c.rollout.group_size
    if run.prefetched is not None:  # max_staleness = 1: sampled during the previous step's update
        rollouts, staleness = pipelined.take(run.prefetched), run.engine_version - run.prefetched.version
        run.prefetched = None
        return Drawn(rollouts, run.service.submit_rollout(rollouts), staleness=staleness)

    def generate_and_score(n: int) -> tuple[RolloutBatch, ScoredBatch]:
        rollouts = run.engine.generate(_next_prompts(run, n, curriculum_stats), G, seeded(sampling))
        scored = run.service.submit_rollout(rollouts).result()
        observe_pass_rates(run, rollouts, scored)
        return rollouts, scored

    if c.rollout.dynamic_sampling.enabled:
        rollouts, scored, stats = draw_informative_groups(generate_and_score, wanted,
                                                          c.rollout.dynamic_sampling.max_extra_prompts)
        return Drawn(rollouts, _Scored(scored), stats, _merge(curriculum_stats))
    # torchrun: every rank draws the step's prompts from the same seeded stream and rolls out its own slice
    # of whole groups (DistContext.share); one process keeps them all.
    rollouts = run.engine.generate(run.ranks.share(_next_prompts(run, wanted, curriculum_stats)), G, seeded(sampling))
    return Drawn(rollouts, run.service.submit_rollout(rollouts), None, _merge(curriculum_stats))


def prefetch_next(run: Run, sampling: SamplingParams, step: int) -> None:
    """max_staleness = 1 (issue #11, item 4): submit the next step's prompts now, before this step's update, so
    the engine samples them (with the weights of the last sync) while the trainer updates. None after the last
    step. Dynamic sampling and the curriculum are refused with it (config_rules), so the prompts are plain."""
    c = run.config
    if not c.rollout.engine.max_staleness or step >= c.max_steps:
        return
    prompts = _next_prompts(run, c.rollout.prompts_per_step, [])
    run.prefetched = pipelined.submit(run.engine, prompts, c.rollout.group_size, seeded(sampling),
                                      run.engine_version)


def push_weights(run: Run, version: int) -> bool:
    """Engines with their own weights get the policy's current ones (after an update, or after a resume loaded
    the checkpoint into the policy); False for the in-process engine, which is the policy."""
    if not isinstance(run.engine, SyncedEngine):
        return False
    pipelined.before_sync(run.prefetched)
    run.engine.sync_weights(run.policy if run.engine_weights is None else run.engine_weights, version)
    run.engine_version = version
    return True


def seeded(sampling: SamplingParams) -> SamplingParams:
    """Every generation call gets its own seed from the run's RNG: an engine in another process then samples what
    the in-process one would, and a resumed run replays the same draws (rollout/base.py)."""
    return replace(sampling, seed=draw_seed())


def sync_engine(run: Run, step: int, rollouts: RolloutBatch) -> dict[str, float]:
    """Engines with their own weights: push the updated policy, then check on a few of this step's sequences that
    the engine scores them as the trainer does (rollout/agreement.py). The in-process engine is the policy."""
    if not push_weights(run, step):
        return {}
    # Both sides score the full tempered distribution here, so unlike the per-batch check the probe is valid at top_p < 1
    r = run.config.rollout
    agreement = check_after_sync(run.engine, run.policy, rollouts, r.temperature, r.engine.agreement_rows,
                                 r.correction.max_mismatch_kl)
    return {} if agreement is None else {"engine/agreement_kl": agreement.mismatch_kl, "engine/version": step}


def finish_scoring(run: Run, drawn: Drawn) -> ScoredBatch:
    """Wait for the verifiers; feed the curriculum (dynamic sampling already fed it every draw). The scores come
    from the verifiers on the host and go on to the rollouts' device here (issue #23)."""
    scored = drawn.pending.result().to(drawn.rollouts.completion_mask.device)
    if drawn.draw is None:
        observe_pass_rates(run, drawn.rollouts, scored)
    return scored


def draw_metrics(drawn: Drawn) -> dict[str, float | int]:
    out: dict[str, float | int] = {"rollout/staleness": drawn.staleness}
    if drawn.draw is not None:
        d = drawn.draw
        out.update({"dynamic_sampling/extra_prompts": d.extra_prompts, "dynamic_sampling/rounds": d.rounds,
                    "dynamic_sampling/informative_groups": d.informative_groups,
                    "dynamic_sampling/topped_up": d.topped_up})
    if drawn.curriculum is not None:
        k = drawn.curriculum
        out.update({"curriculum/skipped": k.skipped, "curriculum/skipped_share": k.skipped_share,
                    "curriculum/forced": k.forced})
    return out


def observe_pass_rates(run: Run, rollouts: RolloutBatch, scored: ScoredBatch) -> None:
    if run.curriculum is not None:
        rates = group_pass_rates(scored.rewards, scored.scorable, rollouts.group_size,
                                 run.config.curriculum.pass_threshold)
        run.curriculum.observe(rollouts.prompts, rates)


def needs_old_logprobs(c: RunConfig) -> bool:
    """mu = 1 needs no pi_old forward: the ratio is taken against the detached current log-probs. The KL in the
    reward needs one only when the sampler's log-probs are of a top-p-truncated distribution."""
    kl_needs_old = c.algorithm.kl_placement == "reward" and c.algorithm.beta > 0 and c.rollout.top_p < 1
    return c.algorithm.updates_per_batch > 1 or kl_needs_old


def scoring_logprobs(run: Run, rollouts: RolloutBatch) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(pi_old, reference) log-probs [B, C] of the sampled tokens; None where not needed."""
    c = run.config
    inputs = (rollouts.prompt_ids, rollouts.prompt_mask, rollouts.prompt_index, rollouts.completion_ids,
              rollouts.completion_mask)
    scored_logprobs = lambda model: batched_logprobs(  # noqa: E731
        model, *inputs, c.rollout.temperature, c.micro_batch_size)
    old = scored_logprobs(run.policy) if needs_old_logprobs(c) else None
    ref = scored_logprobs(run.reference) if run.reference is not None else None
    return old, ref


def reward_components(run: Run, rollouts: RolloutBatch, scored: ScoredBatch) -> dict[str, tuple[torch.Tensor, float]]:
    """name -> (values [B], weight): each verifier's score (0 where unscorable) and the length shaping."""
    c = run.config
    components = {name: (scored.scores[name].masked_fill(~scored.scorable, 0.0), weight)
                  for name, weight in c.task.verifiers.items()}
    if c.reward.overlong_buffer:
        lengths = rollouts.completion_mask.sum(dim=1)  # a truncated one has L_max tokens: penalty -1
        penalty = soft_overlong_penalty(lengths, c.rollout.max_new_tokens, c.reward.overlong_buffer)
        components["overlong"] = (penalty, c.reward.overlong_penalty)
    return components


@dataclass
class Advantages:
    values: torch.Tensor  # [B] per completion, or [B, C] per token (KL in the reward, critic)
    shaped_reward_mean: float  # mean total reward after shaping and the KL penalty, before normalisation
    critic_targets: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None  # returns, old values, mask [B, C]
    extra: dict[str, float] = field(default_factory=dict)  # metrics, e.g. the KL paid in the reward


class AdvantageEstimator(Protocol):
    def __call__(self, rollouts: RolloutBatch, components: dict[str, tuple[torch.Tensor, float]],
                 valid: torch.Tensor, kl_per_token: torch.Tensor | None) -> Advantages: ...


def _kl_metrics(kl_per_token: torch.Tensor | None, mask: torch.Tensor) -> dict[str, float]:
    return {} if kl_per_token is None else {"kl_in_reward": float((kl_per_token * mask).sum(dim=1).mean())}


@dataclass
class OutcomeEstimator:
    """Advantages from the rewards of a group or batch (advantages.ADVANTAGES); with the KL in the reward,
    each token's advantage also pays the KL from that token on (shaping.kl_penalty_to_go)."""

    estimator: AdvantageFn
    combination: str
    eps: float
    beta: float

    def __call__(self, rollouts, components, valid, kl_per_token) -> Advantages:
        mask = rollouts.completion_mask.float()
        total = weighted_total(components)
        advantages = combined_advantages(self.estimator, components, self.combination, rollouts.group_size,
                                         self.eps, valid=valid)
        if kl_per_token is None:
            return Advantages(advantages, float(total.mean()))
        to_go = kl_penalty_to_go(kl_per_token, mask, self.beta)
        shaped = float((total - to_go[:, 0]).mean())  # to_go at t = 0 is the whole sequence's penalty
        per_token = (advantages[:, None] - to_go) * mask * valid[:, None]  # unscorable rows learn nothing
        return Advantages(per_token, shaped, None, _kl_metrics(kl_per_token, mask))


@dataclass
class CriticEstimator:
    """PPO's baseline: per-token advantages from a learned value function and GAE (Schulman et al. 2016)."""

    critic: Critic
    gamma: float
    lam: float
    beta: float

    def __call__(self, rollouts, components, valid, kl_per_token) -> Advantages:
        mask = rollouts.completion_mask.float()
        total = weighted_total(components)
        penalty = None if kl_per_token is None else self.beta * kl_per_token
        token_rewards = outcome_token_rewards(total, mask, penalty)
        values = self.critic.values(rollouts.prompt_ids, rollouts.prompt_mask, rollouts.prompt_index,
                                    rollouts.completion_ids, mask)
        advantages, returns = gae_advantages(token_rewards, values, mask, self.gamma, self.lam)
        # Unscorable rows: no reward was observed, so neither the policy nor the critic learns from them.
        learn = mask * valid[:, None]
        extra = {"value_mean": float((values * mask).sum() / mask.sum().clamp(min=1)),
                 **_kl_metrics(kl_per_token, mask)}
        shaped = float(token_rewards.sum(dim=1).mean())
        return Advantages(masked_whiten(advantages, learn), shaped, (returns, values, learn), extra)


def kl_for_reward(run: Run, rollouts: RolloutBatch, old: torch.Tensor | None,
                  ref: torch.Tensor | None) -> torch.Tensor | None:
    """Per-token KL estimate [B, C] for the KL-in-reward placement (None for the in-loss placement).

    The policy side is pi_old: its forward pass when there is one (mu > 1, or top_p < 1), else the sampler's
    own log-probs (the same distribution, logits / temperature, without a second forward). With top_p < 1 the
    sampler's log-probs are of the truncated, renormalised distribution and would bias the KL upward."""
    a = run.config.algorithm
    if a.kl_placement != "reward" or ref is None:
        return None
    policy = old if old is not None else rollouts.sampling_logprobs
    return KL_ESTIMATORS[a.kl_estimator](policy, ref) * rollouts.completion_mask


def train_critic(run: Run, rollouts: RolloutBatch,
                 targets: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None) -> dict[str, float]:
    """mu critic steps towards the GAE returns (PPO baseline only), as many as the policy takes, so that the
    value clip around the old values can bind from the second on; metrics of the mean, prefixed critic/."""
    if run.critic is None or targets is None:
        return {}
    returns, old_values, mask = targets
    passes = [vars(run.critic.train_step(rollouts.prompt_ids, rollouts.prompt_mask, rollouts.prompt_index,
                                         rollouts.completion_ids, mask, returns, old_values))
              for _ in range(run.config.algorithm.updates_per_batch)]
    return {f"critic/{k}": sum(float(p[k]) for p in passes) / len(passes) for k in passes[0]}


def make_train_batch(run: Run, rollouts: RolloutBatch, advantages: torch.Tensor, old: torch.Tensor | None,
                     ref: torch.Tensor | None) -> TrainBatch:
    mask = rollouts.completion_mask.float()
    if run.config.algorithm.mask_truncated:  # DAPO overlong filtering: no gradient from cut-off completions
        mask = mask * (~rollouts.truncated)[:, None]
    ref_in_loss = ref if run.config.algorithm.kl_placement == "loss" else None
    return TrainBatch(rollouts.prompt_ids, rollouts.prompt_mask, rollouts.prompt_index, rollouts.completion_ids, mask,
                      advantages, old, ref_in_loss, rollouts.sampling_logprobs)


def group_view_row(run: Run, step: int, rollouts: RolloutBatch, scored: ScoredBatch, advantages: torch.Tensor,
                   old: torch.Tensor | None) -> dict | None:
    """groups.jsonl's line for this step (after the update, which the ratios measure); None when turned off."""
    c = run.config
    if not c.group_view:
        return None
    g = rollouts.group_size
    group = group_view.pick_group(scored.rewards, g, scored.scorable, step)
    rescore = None if run.ranks.enabled else lambda rows: batched_logprobs(  # noqa: E731 (sharded under torchrun)
        run.policy, rollouts.prompt_ids, rollouts.prompt_mask, rollouts.prompt_index[rows],
        rollouts.completion_ids[rows], rollouts.completion_mask[rows], c.rollout.temperature, c.micro_batch_size)
    with torch.no_grad():
        rows = torch.arange(group * g, (group + 1) * g, device=rollouts.completion_ids.device)  # issue #23
        ratios = group_view.token_ratios(old, rollouts.sampling_logprobs, c.rollout.top_p, rows, rescore)
    return group_view.group_row(step, rollouts, scored, advantages, group, run.tokenizer.decode,
                                (c.algorithm.clip_epsilon, c.algorithm.clip_high), ratios)
