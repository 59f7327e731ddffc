"""The rollout engine as a Ray actor: an EngineHost (rlvr/rollout/host.py) with its own
copy of the weights, placed on whichever node has `ray.engine_cpus` / `ray.engine_gpus` free. The trainer (the
driver) pushes its parameters through the object store after every update; sampling is seeded by the trainer
(SamplingParams.seed), so the actor draws exactly the completions the in-process engine would.

Every call waits with a deadline: a dead actor, a timeout or an error inside the actor is one RayBackendError,
never a hang. Used when the trainer is the driver (ray.trainer_ranks=1); Ray trainer ranks (trainers.py) each keep
an in-process engine, as torchrun's ranks do."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from rlvr.cluster.ray_rewards import RayRewardService
from rlvr.cluster.session import RayBackendError, acquire, check_resources, get, release
from rlvr.rollout.base import SamplingParams
from rlvr.rollout.host import EngineHost, HostSettings, synced_parameters
from rlvr.types import Prompt, RolloutBatch

if TYPE_CHECKING:
    from rlvr.config.sections import RayConfig

START_TIMEOUT_S = 600.0  # placement, then the model load (first use on a node may also fill its caches)
CALL_TIMEOUT_S = 1800.0  # one generate / weight load / scoring call; far above a healthy step, far below forever


class EngineActor:
    """What runs inside the actor: EngineHost's calls, nothing else (no algorithm code in the Ray layer)."""

    def __init__(self, settings: HostSettings):
        self.host = EngineHost(settings)

    def ready(self) -> int:
        return self.host.version

    def generate(self, prompts: list[Prompt], group_size: int, sampling: SamplingParams) -> RolloutBatch:
        return self.host.generate(prompts, group_size, sampling)

    def load_parameters(self, named: list[tuple[str, torch.Tensor]], version: int) -> int:
        self.host.load_parameters(named, version)
        return self.host.version

    def teacher_forced_logprobs(self, rollouts: RolloutBatch, temperature: float) -> torch.Tensor:
        return self.host.teacher_forced_logprobs(rollouts, temperature)  # [B, C]


class RayEngine:
    """SyncedEngine (rlvr/rollout/base.py) whose model lives in a Ray actor."""

    def __init__(self, ray: Any, actor: Any, timeout_s: float = CALL_TIMEOUT_S):
        self._ray, self._actor, self.timeout_s = ray, actor, timeout_s
        self.version = -1  # the trainer step whose weights the actor holds
        self._closed = False

    @classmethod
    def start(cls, cluster: RayConfig, host: HostSettings, policy: torch.nn.Module, tokenizer: Any) -> RayEngine:
        """Place the actor (cluster: Ray's address and the actor's resources), load host.model there and push the
        policy's current weights (a resumed run's policy differs from the checkpoint on disk the actor loaded)."""
        ray, actor = acquire(cluster.address), None
        try:
            check_resources(ray, {"CPU": cluster.engine_cpus, "GPU": cluster.engine_gpus},
                            "the Ray rollout engine actor")
            remote = ray.remote(num_cpus=cluster.engine_cpus, num_gpus=cluster.engine_gpus,
                                max_restarts=0)(EngineActor)
            actor = remote.remote(host)
            engine = cls(ray, actor)
            engine._call(actor.ready, (), "starting the Ray rollout engine actor", START_TIMEOUT_S)
            engine.sync_weights(policy, 0)
        except BaseException:
            if actor is not None:
                ray.kill(actor, no_restart=True)
            release()
            raise
        return engine

    def _call(self, method: Any, args: tuple, what: str, timeout_s: float | None = None) -> Any:
        if self._closed:
            raise RayBackendError(f"{what}: the Ray rollout engine is closed")
        return get(self._ray, method.remote(*args), self.timeout_s if timeout_s is None else timeout_s,
                   f"{what} (Ray rollout engine actor)", on_error=self._stop)

    def generate(self, prompts: list[Prompt], group_size: int, sampling: SamplingParams) -> RolloutBatch:
        return self._call(self._actor.generate, (prompts, group_size, sampling), "generate")

    def sync_weights(self, model: torch.nn.Module, version: int) -> None:
        """One object-store copy of the parameters (CPU tensors, in synced_parameters' order), loaded by the actor
        onto its own device; the trainer's tensors may be on a GPU the actor's node does not have."""
        named = [(name, p.detach().to("cpu", copy=True)) for name, p in synced_parameters(model)]
        ref = self._ray.put(named)
        try:
            self.version = self._call(self._actor.load_parameters, (ref, version), f"weight sync to step {version}")
        finally:
            del ref  # the object store frees the copy once the actor has loaded it

    def teacher_forced_logprobs(self, rollouts: RolloutBatch, temperature: float) -> torch.Tensor:
        return self._call(self._actor.teacher_forced_logprobs, (rollouts, temperature), "agreement scoring")

    def _stop(self) -> None:
        # A timed-out actor may still be running; a failed one is of no further use. Either way it goes.
        if not self._closed:
            self._ray.kill(self._actor, no_restart=True)

    def close(self) -> None:
        """Stop the actor and release the cluster (shut down if we started it). Idempotent."""
        if self._closed:
            return
        self._stop()
        self._closed = True
        release()


__all__ = ["EngineActor", "RayBackendError", "RayEngine", "RayRewardService"]
