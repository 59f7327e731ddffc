"""The stages of one step (grpo/step.py calls them in order). Each takes the parts of the run it uses and the
part of the StepPlan it reads: no stage sees the config or the whole run.

Systems code only: every formula it applies lives in advantages.py, gae.py, shaping.py, loss.py or objectives.py.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import torch

from rlvr.algorithms.loss import KL_ESTIMATORS
from rlvr.algorithms.shaping import soft_overlong_penalty
from rlvr.distributed.context import DistContext
from rlvr.grpo import group_view
from rlvr.grpo.curriculum import CurriculumStats, PassRateCurriculum, group_pass_rates
from rlvr.grpo.dynamic_sampling import DrawStats, draw_informative_groups
from rlvr.grpo.plan import DrawPlan, GroupViewPlan, KlPlan, RewardPlan, ScoringPlan, SyncPlan
from rlvr.grpo.setup import Models, RolloutFeed
from rlvr.model.logprobs import batched_logprobs
from rlvr.rewards.pool import VerifierPool
from rlvr.rollout import pipelined
from rlvr.rollout.agreement import check_after_sync
from rlvr.rollout.base import SamplingParams, SyncedEngine, draw_seed
from rlvr.types import RolloutBatch, ScoredBatch, TrainBatch

if TYPE_CHECKING:
    from rlvr.training.critic import Critic


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
    # [[prompt_id, pass rate]] of every group dynamic sampling drew, the tied ones it set aside included (None:
    # the batch holds every group drawn); groups.jsonl logs them (group_view.pass_rates)
    pass_rates: list | None = None


def _next_prompts(feed: RolloutFeed, n: int, stats: list[CurriculumStats]) -> list:
    if feed.curriculum is None:
        return list(itertools.islice(feed.prompt_stream, n))
    prompts, taken = feed.curriculum.take(feed.prompt_stream, n)
    stats.append(taken)
    return prompts


def _merge(stats: list[CurriculumStats]) -> CurriculumStats | None:
    if not stats:
        return None
    return CurriculumStats(*(sum(getattr(s, k) for s in stats) for k in ("skipped", "admitted", "forced")))


def draw_batch(feed: RolloutFeed, service: VerifierPool, draw: DrawPlan, ranks: DistContext) -> Drawn:
    """prompts -> rollouts -> (pending) rewards for rollout.prompts_per_step groups.

    Without dynamic sampling the verification runs in the reward workers while the caller computes the
    log-prob forwards; with it, scores are needed first to tell which groups to keep.
    """
    curriculum_stats, G = [], draw.group_size
    if feed.prefetched is not None:  # max_staleness = 1: sampled during the previous step's update
        rollouts, staleness = pipelined.take(feed.prefetched), feed.engine_version - feed.prefetched.version
        feed.prefetched = None
        return Drawn(rollouts, service.submit_rollout(rollouts), staleness=staleness)

    drawn_rates: list = []

    def generate_and_score(n: int) -> tuple[RolloutBatch, ScoredBatch]:
        rollouts = feed.engine.generate(_next_prompts(feed, n, curriculum_stats), G, seeded(draw.sampling))
        scored = service.submit_rollout(rollouts).result()
        observe_pass_rates(feed.curriculum, rollouts, scored)
        drawn_rates.extend(group_view.pass_rates(rollouts, scored))
        return rollouts, scored

    if draw.dynamic_sampling:
        rollouts, scored, stats = draw_informative_groups(generate_and_score, draw.prompts_per_step,
                                                          draw.max_extra_prompts, draw.step_credit)
        return Drawn(rollouts, _Scored(scored), stats, _merge(curriculum_stats), pass_rates=drawn_rates)
    # torchrun: every rank draws the step's prompts from the same seeded stream and rolls out its own slice
    # of whole groups (DistContext.share); one process keeps them all.
    prompts = ranks.share(_next_prompts(feed, draw.prompts_per_step, curriculum_stats))
    rollouts = feed.engine.generate(prompts, G, seeded(draw.sampling))
    return Drawn(rollouts, service.submit_rollout(rollouts), None, _merge(curriculum_stats))


def prefetch_next(feed: RolloutFeed, draw: DrawPlan, step: int) -> None:
    """max_staleness = 1: submit the next step's prompts now, before this step's update, so
    the engine samples them (with the weights of the last sync) while the trainer updates. None after the last
    step. Dynamic sampling and the curriculum are refused with it (config/rules), so the prompts are plain."""
    if not draw.prefetch or step >= draw.max_steps:
        return
    prompts = _next_prompts(feed, draw.prompts_per_step, [])
    feed.prefetched = pipelined.submit(feed.engine, prompts, draw.group_size, seeded(draw.sampling),
                                       feed.engine_version)


def push_weights(feed: RolloutFeed, version: int) -> bool:
    """Engines with their own weights get the policy's current ones (after an update, or after a resume loaded
    the checkpoint into the policy); False for the in-process engine, which is the policy."""
    if not isinstance(feed.engine, SyncedEngine):
        return False
    pipelined.before_sync(feed.prefetched)
    feed.engine.sync_weights(feed.engine_weights, version)
    feed.engine_version = version
    return True


def seeded(sampling: SamplingParams) -> SamplingParams:
    """Every generation call gets its own seed from the run's RNG: an engine in another process then samples what
    the in-process one would, and a resumed run replays the same draws (rollout/base.py)."""
    return replace(sampling, seed=draw_seed())


def sync_engine(feed: RolloutFeed, policy, step: int, rollouts: RolloutBatch, sync: SyncPlan) -> dict[str, float]:
    """Engines with their own weights: push the updated policy, then check on a few of this step's sequences that
    the engine scores them as the trainer does (rollout/agreement.py). The in-process engine is the policy."""
    if not push_weights(feed, step):
        return {}
    # Both sides score the full tempered distribution here, so unlike the per-batch check the probe is valid at
    # top_p < 1
    agreement = check_after_sync(feed.engine, policy, rollouts, sync.temperature, sync.agreement_rows,
                                 sync.max_mismatch_kl)
    return {} if agreement is None else {"engine/agreement_kl": agreement.mismatch_kl, "engine/version": step}


def finish_scoring(drawn: Drawn, curriculum: PassRateCurriculum | None) -> ScoredBatch:
    """Wait for the verifiers; feed the curriculum (dynamic sampling already fed it every draw). The scores come
    from the verifiers on the host and go on to the rollouts' device here."""
    scored = drawn.pending.result().to(drawn.rollouts.completion_mask.device)
    if drawn.draw is None:
        observe_pass_rates(curriculum, drawn.rollouts, scored)
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


def observe_pass_rates(curriculum: PassRateCurriculum | None, rollouts: RolloutBatch, scored: ScoredBatch) -> None:
    if curriculum is not None:
        rates = group_pass_rates(scored.rewards, scored.scorable, rollouts.group_size,
                                 curriculum.config.pass_threshold)
        curriculum.observe(rollouts.prompts, rates)


def scoring_logprobs(models: Models, rollouts: RolloutBatch, scoring: ScoringPlan
                     ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(pi_old, reference) log-probs [B, C] of the sampled tokens; None where not needed."""
    inputs = (rollouts.prompt_ids, rollouts.prompt_mask, rollouts.prompt_index, rollouts.completion_ids,
              rollouts.completion_mask)
    scored_logprobs = lambda model: batched_logprobs(  # noqa: E731
        model, *inputs, scoring.temperature, scoring.micro_batch_size)
    old = scored_logprobs(models.policy) if scoring.needs_old_logprobs else None
    ref = scored_logprobs(models.reference) if models.reference is not None else None
    return old, ref


def reward_components(rollouts: RolloutBatch, scored: ScoredBatch, reward: RewardPlan
                      ) -> dict[str, tuple[torch.Tensor, float]]:
    """name -> (values [B], weight): each verifier's score (0 where unscorable) and the length shaping."""
    components = {name: (scored.scores[name].masked_fill(~scored.scorable, 0.0), weight)
                  for name, weight in reward.verifiers}
    if reward.overlong_buffer:
        lengths = rollouts.completion_mask.sum(dim=1)  # a truncated one has L_max tokens: penalty -1
        penalty = soft_overlong_penalty(lengths, reward.max_new_tokens, reward.overlong_buffer)
        components["overlong"] = (penalty, reward.overlong_penalty)
    return components


def kl_for_reward(rollouts: RolloutBatch, old: torch.Tensor | None, ref: torch.Tensor | None,
                  kl: KlPlan) -> torch.Tensor | None:
    """Per-token KL estimate [B, C] for the KL-in-reward placement (None for the in-loss placement).

    The policy side is pi_old: its forward pass when there is one (mu > 1, or top_p < 1), else the sampler's
    own log-probs (the same distribution, logits / temperature, without a second forward). With top_p < 1 the
    sampler's log-probs are of the truncated, renormalised distribution and would bias the KL upward."""
    if not kl.in_reward:
        return None
    policy = old if old is not None else rollouts.sampling_logprobs
    return KL_ESTIMATORS[kl.estimator](policy, ref) * rollouts.completion_mask


def train_critic(critic: Critic | None, rollouts: RolloutBatch,
                 targets: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None, passes: int) -> dict[str, float]:
    """mu critic steps towards the GAE returns (PPO baseline only), as many as the policy takes, so that the
    value clip around the old values can bind from the second on; metrics of the mean, prefixed critic/."""
    if critic is None or targets is None:
        return {}
    returns, old_values, mask = targets
    stats = [vars(critic.train_step(rollouts.prompt_ids, rollouts.prompt_mask, rollouts.prompt_index,
                                    rollouts.completion_ids, mask, returns, old_values))
             for _ in range(passes)]
    return {f"critic/{k}": sum(float(p[k]) for p in stats) / len(stats) for k in stats[0]}


def make_train_batch(rollouts: RolloutBatch, advantages: torch.Tensor, old: torch.Tensor | None,
                     ref: torch.Tensor | None, mask_truncated: bool, kl: KlPlan) -> TrainBatch:
    mask = rollouts.completion_mask.float()
    if mask_truncated:  # DAPO overlong filtering: no gradient from cut-off completions
        mask = mask * (~rollouts.truncated)[:, None]
    ref_in_loss = ref if kl.in_loss else None
    return TrainBatch(rollouts.prompt_ids, rollouts.prompt_mask, rollouts.prompt_index, rollouts.completion_ids, mask,
                      advantages, old, ref_in_loss, rollouts.sampling_logprobs)


def group_view_row(view: GroupViewPlan | None, models: Models, sharded: bool, step: int, rollouts: RolloutBatch,
                   scored: ScoredBatch, advantages: torch.Tensor, old: torch.Tensor | None,
                   ref: torch.Tensor | None = None, drawn_rates: list | None = None) -> dict | None:
    """groups.jsonl's line for this step (after the update, which the ratios measure); None when turned off.
    `sharded` (torchrun): the policy's weights are split across ranks and it cannot rescore rows alone, so the
    line carries no ratios."""
    if view is None:
        return None
    g = rollouts.group_size
    group = group_view.pick_group(scored.rewards, g, scored.scorable, step)
    rescore = None if sharded else lambda rows: batched_logprobs(  # noqa: E731
        models.policy, rollouts.prompt_ids, rollouts.prompt_mask, rollouts.prompt_index[rows],
        rollouts.completion_ids[rows], rollouts.completion_mask[rows], view.temperature, view.micro_batch_size)
    with torch.no_grad():
        rows = torch.arange(group * g, (group + 1) * g, device=rollouts.completion_ids.device)
        ratios = group_view.token_ratios(old, rollouts.sampling_logprobs, view.top_p, rows, rescore)
        kl = group_view.token_kl(old, rollouts.sampling_logprobs, ref, view.top_p, rows, view.kl_estimator)
    return group_view.group_row(step, rollouts, scored, advantages, group, models.tokenizer.decode, view.clip, ratios,
                                kl, drawn_rates)
