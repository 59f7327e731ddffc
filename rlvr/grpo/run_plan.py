"""What a run prints before its first step: the batch accounting, the family member that runs, and the
memory plan."""
from __future__ import annotations

from rlvr.config.run import RunConfig
from rlvr.grpo.memory_plan import available_memory_bytes, plan_lines, plan_memory, run_prompt_tokens
from rlvr.grpo.plan import kl_plan
from rlvr.metrics.logger import batch_accounting


def start_of_run_lines(config: RunConfig, model_config, task, tokenizer) -> list[str]:
    return [batch_accounting(config), *memory_plan_lines(config, model_config, task, tokenizer),
            describe_algorithm(config)]


def memory_plan_lines(config: RunConfig, model_config, task, tokenizer) -> list[str]:
    """The plan, or one line saying why there is none: it is a diagnostic, never the reason a run does not start
    (an architecture the plan cannot build on the meta device, a task without prompts to measure...)."""
    try:
        plan = plan_memory(config, model_config, config.model.device,
                           prompt_tokens=run_prompt_tokens(task, tokenizer, config))
        return plan_lines(plan, available_memory_bytes(config.model.device))
    except Exception as err:  # noqa: BLE001
        return [f"memory plan: unavailable ({type(err).__name__}: {err})"]


def describe_algorithm(config: RunConfig) -> str:
    """One log line naming the family member that runs, so a run log says what was optimised."""
    a, placed = config.algorithm, kl_plan(config.algorithm)
    where = "reward" if placed.in_reward else "loss"  # the plan's reading of kl_placement
    kl = f"KL {placed.estimator} in the {where}, beta {placed.beta:g}" if placed.beta > 0 else "no KL (no reference)"
    parts = [f"advantage {a.advantage}", f"objective {a.objective} (clip {a.clip_epsilon:g}/{a.clip_high:g})",
             f"aggregation {a.aggregation}", kl, f"mu {a.updates_per_batch}"]
    if config.rollout.dynamic_sampling.enabled:
        parts.append(f"dynamic sampling (<= {config.rollout.dynamic_sampling.max_extra_prompts} extra prompts)")
    if config.curriculum.enabled:
        parts.append("pass-rate curriculum")
    if config.reward.overlong_buffer:
        parts.append(f"overlong buffer {config.reward.overlong_buffer}")
    k = config.rollout.correction
    if k.mode != "none":
        parts.append(f"rollout correction {k.mode} ({k.level}, cap {k.cap:g})")
    if k.max_mismatch_kl and config.rollout.top_p == 1:
        parts.append(f"engine agreement check (mismatch KL <= {k.max_mismatch_kl:g})")
    return "algorithm: " + " | ".join(parts)
