"""Which rollout engine and which verifier pool a run uses, chosen once from the config. The GRPO loop only sees the
RolloutEngine / SyncedEngine protocols (rollout/base.py) and the reward
service's submit/stats/close; heavy back-ends (vLLM, Ray) are imported only when chosen.

The one place that turns the run config into each engine's settings (design.md principle 8): an engine
takes its own settings object (HostSettings, VLLMSettings, a config section), never the whole RunConfig."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from rlvr.rollout.hf import HFRolloutEngine
from rlvr.rollout.host import HostSettings

if TYPE_CHECKING:
    from rlvr.config.run import RunConfig
    from rlvr.distributed.wrap import WrappedPolicy
    from rlvr.rewards.rewarder import Rewarder
    from rlvr.rollout.vllm.engine import VLLMSettings


def host_settings(config: RunConfig) -> HostSettings:
    """What an engine with its own transformers copy (an engine process, a Ray actor) loads and runs with."""
    return HostSettings(config.model, config.rollout.engine.threads)


def vllm_settings(config: RunConfig) -> VLLMSettings:
    """What the vLLM engine (colocated or a server) is built from."""
    from rlvr.rollout.vllm.engine import VLLMSettings

    return VLLMSettings(config.rollout.engine, config.model, config.rollout.temperature)


def _hf(config: RunConfig, policy, tokenizer) -> Any:
    return HFRolloutEngine.configured(policy, tokenizer, config.rollout)


def _hf_process(config: RunConfig, policy, tokenizer) -> Any:
    from rlvr.rollout.process import ProcessEngine

    return ProcessEngine.start(host_settings(config), policy, tokenizer)


def _vllm(config: RunConfig, policy, tokenizer) -> Any:
    from rlvr.rollout.vllm.engine import build_vllm_engine

    return build_vllm_engine(vllm_settings(config), policy, tokenizer)


ENGINES: dict[str, Callable[..., Any]] = {"hf": _hf, "hf_process": _hf_process, "vllm": _vllm}


def build_engine(config: RunConfig, policy, tokenizer, wrapped: WrappedPolicy | None = None,
                 weights: Any = None) -> Any:
    """The run's rollout engine. Under torchrun the in-process engine decodes through the wrapped policy (FSDP2:
    with all weights gathered); engines with their own weights are refused there (distributed/checks.py).
    `weights`: what an engine with its own weights is sent (default the policy; LoRA: lora.MergedWeights)."""
    weights = policy if weights is None else weights
    if wrapped is not None:
        from rlvr.distributed.wrap import DistributedEngine, ShardedLM

        model = ShardedLM(wrapped) if wrapped.strategy == "fsdp2" else policy
        return DistributedEngine(HFRolloutEngine(model, tokenizer), wrapped)
    if config.ray.enabled:
        from rlvr.cluster.ray_backend import RayEngine

        return RayEngine.start(config.ray, host_settings(config), weights, tokenizer)
    return ENGINES[config.rollout.engine.kind](config, policy if config.rollout.engine.kind == "hf" else weights,
                                               tokenizer)


def build_reward_service(config: RunConfig, rewarder: Rewarder) -> Any:
    """The verifier pool for training rewards: local worker processes, or Ray actors with ray.enabled."""
    from rlvr.rewards.rewarder import reward_functions

    r = config.reward
    if config.ray.enabled and config.ray.trainer_ranks == 1:  # Ray trainer ranks score in-process, as torchrun's
        from rlvr.cluster.ray_backend import RayRewardService

        return RayRewardService.start(config.ray, config.task, r, reward_functions(rewarder))
    from rlvr.rewards.service import RewardService

    return RewardService.start(config.task, workers=r.workers, deadline_s=r.deadline_s, retries=r.retries,
                               reward_functions=reward_functions(rewarder))  # a reward model runs here, not in workers
