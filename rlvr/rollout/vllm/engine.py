"""The vLLM rollout engine: a SyncedEngine whose RolloutBatch equals HFRolloutEngine's.

Written against vLLM 0.11.0 (V1 engine) and its documented offline API, which later releases keep: `vllm.LLM(...,
enable_sleep_mode, gpu_memory_utilization, logprobs_mode, worker_extension_cls)`, `LLM.generate` on token-id prompts,
`LLM.sleep(level=1)` / `LLM.wake_up()`, `LLM.collective_rpc`, `LLM.reset_prefix_cache`, and `vllm.SamplingParams(n,
temperature, top_p, max_tokens, seed, stop_token_ids, logprobs, prompt_logprobs, detokenize)`. vLLM >= 0.10.2 is
required (vllm_convert.MIN_VLLM_VERSION). Only this module and rollout/vllm/weights.py's NCCL sender import vllm.

Log-probs. The sampling log-probs must be those of the distribution each token was drawn from (after temperature
and top-p), which is what the update's importance ratio and rollout correction compare against (correction.py).
vLLM's default `logprobs_mode="raw_logprobs"` returns the untempered model's; the engine is built with
`logprobs_mode="processed_logprobs"` (values after temperature, top-k/top-p), requested per token with
`logprobs=0` (the sampled token only).

Teacher forcing (the post-sync agreement probe) uses prompt log-probs of prompt+completion (`prompt_logprobs=0`).
vLLM computes those from the raw logits, without temperature (Trinity-RFT#384 and vLLM PR #37082, which proposes a
`prompt_logprobs_temperature` sampling parameter). So scoring at temperature != 1 uses that parameter where the
installed vLLM has it and is otherwise one clear error, never a silently wrong probe.

Modes (rollout.engine.vllm_mode). colocate: vllm.LLM in the trainer's process on the same GPU, asleep
(level 1: weights to host memory, KV cache freed) from the end of each generate until the next sync or generate, so
the update has the memory; weights are pushed by a worker extension that loads the trainer's named parameters with
the model's own `load_weights` (HF names; vLLM fuses q/k/v and gate/up itself). server: a separate `vllm serve`
driven over HTTP, weights sent with vLLM's native NCCL weight-transfer API (rollout/vllm/server.py and
rollout/vllm/weights.py, which import vllm only inside the NCCL sender).
"""
from __future__ import annotations

import gc
import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from rlvr.rollout.base import SamplingParams
from rlvr.rollout.hf import stop_token_ids
from rlvr.rollout.host import synced_parameters
from rlvr.rollout.vllm.convert import (
    UNTEMPERED_PROMPT_LOGPROBS,
    VLLMError,
    check_vllm_version,
    completion_logprobs,
    encode_prompts,
    request_seeds,
    rollout_from_outputs,
    scoring_requests,
    unpadded_prompts,
)
from rlvr.types import Prompt, RolloutBatch

if TYPE_CHECKING:
    from rlvr.config.run import ModelConfig
    from rlvr.config.sections import EngineConfig

SYNC_TIMEOUT_S = 600.0  # a weight load that takes longer than this is a hung worker, not a slow copy


class RlvrWorkerExtension:
    """Mixed into vLLM's GPU worker through `worker_extension_cls` (vLLM's documented hook for RLHF weight updates);
    its methods are called with `LLM.collective_rpc`. It must not import vllm at module level: rlvr imports this
    module without vllm installed."""

    def rlvr_load_weights(self, named: list[tuple[str, torch.Tensor]]) -> int:
        """Copy the trainer's tensors (HF names) into the served model; returns how many the model accepted."""
        runner = self.model_runner  # type: ignore[attr-defined]  # set by vLLM's Worker
        model = runner.get_model() if hasattr(runner, "get_model") else runner.model
        loaded = model.load_weights(weights=iter(named))
        return len(loaded) if loaded is not None else len(named)


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as err:
        raise VLLMError("rollout.engine.kind=vllm needs vLLM, which is not installed: pip install 'rlvr[vllm]' "
                        f"(a CUDA GPU is required) — import failed with: {err}") from err
    check_vllm_version(getattr(vllm, "__version__", "0"))
    return vllm


def _prompt_temperature_supported(vllm: Any) -> bool:
    """Does this vLLM scale prompt log-probs by a temperature (vLLM PR #37082)? Feature-detected, not versioned."""
    cls = vllm.SamplingParams  # a msgspec.Struct: its field names are __struct_fields__
    fields = getattr(cls, "__struct_fields__", None) or tuple(getattr(cls, "__annotations__", {}))
    return "prompt_logprobs_temperature" in fields


class VLLMEngine:
    """A SyncedEngine over one `vllm.LLM` in the trainer's process (colocate mode)."""

    def __init__(self, llm: Any, vllm: Any, tokenizer, stop_ids: list[int], device: torch.device, sleep: bool):
        self.llm = llm
        self.vllm = vllm
        self.tokenizer = tokenizer
        self.stop_ids = stop_ids
        self.device = device
        self.sleep_enabled = sleep
        self.asleep = False
        self.version = -1  # the trainer step whose weights are loaded (-1: the checkpoint on disk)
        self.scores_tempered = _prompt_temperature_supported(vllm)
        # One caller at a time: with asynchronous rollouts (max_staleness 1) a generate may be issued from another
        # thread than the sync, and sleep/wake/load must not interleave with a generate.
        self._lock = threading.Lock()

    # --- memory: asleep only between a generate and the next sync/generate (the update's window) ---
    def _wake(self) -> None:
        if self.asleep:
            self.llm.wake_up()
            self.asleep = False

    def _sleep(self) -> None:
        if self.sleep_enabled and not self.asleep:
            self.llm.sleep(level=1)  # level 1 keeps a host copy of the weights: wake_up restores them exactly
            self.asleep = True

    def encode(self, prompts: list[Prompt]) -> tuple[torch.Tensor, torch.Tensor]:
        return encode_prompts(self.tokenizer, prompts, self.device)

    def _sampling_params(self, group_size: int, sampling: SamplingParams, seed: int | None) -> Any:
        return self.vllm.SamplingParams(
            n=group_size, temperature=sampling.temperature, top_p=sampling.top_p, max_tokens=sampling.max_new_tokens,
            seed=seed, stop_token_ids=list(self.stop_ids), logprobs=0,
            detokenize=False)  # texts are decoded by the trainer's tokenizer, as the in-process engine does

    def generate(self, prompts: list[Prompt], group_size: int, sampling: SamplingParams) -> RolloutBatch:
        prompt_ids, prompt_mask = self.encode(prompts)
        requests = [{"prompt_token_ids": ids} for ids in unpadded_prompts(prompt_ids, prompt_mask)]
        params = [self._sampling_params(group_size, sampling, seed)
                  for seed in request_seeds(sampling.seed, len(prompts))]
        with self._lock:
            self._wake()
            outputs = self.llm.generate(requests, sampling_params=params, use_tqdm=False)
            self._sleep()  # the update comes next: give it the memory
        return rollout_from_outputs(
            outputs, prompts, group_size, prompt_ids, prompt_mask, self.stop_ids, self.tokenizer.pad_token_id,
            lambda ids: self.tokenizer.batch_decode(ids, skip_special_tokens=True))

    @torch.no_grad()
    def sync_weights(self, model: torch.nn.Module, version: int) -> None:
        """Load `model`'s parameters into the engine. The engine core runs in this process (see build_vllm_engine),
        so the tensors are handed over by reference, not serialized."""
        named = [(name, tensor.detach()) for name, tensor in synced_parameters(model)]
        with self._lock:
            self._wake()
            counts = self.llm.collective_rpc("rlvr_load_weights", args=(named,), timeout=SYNC_TIMEOUT_S)
            if not counts or min(counts) == 0:
                raise VLLMError(f"weight sync to vLLM loaded no parameters (worker replies: {counts}); trainer and "
                                f"engine must load the same architecture")
            self.llm.reset_prefix_cache()  # cached KV blocks were computed with the old weights
            self.version = version

    @torch.no_grad()
    def teacher_forced_logprobs(self, rollouts: RolloutBatch, temperature: float) -> torch.Tensor:
        """[B, C] log-probs of the completion tokens under the engine's weights at `temperature`, 0 on padding,
        read from vLLM's prompt log-probs of prompt+completion."""
        tempered = abs(temperature - 1.0) > 1e-6
        if tempered and not self.scores_tempered:
            raise VLLMError(UNTEMPERED_PROMPT_LOGPROBS.format(temperature=temperature))
        extra = {"prompt_logprobs_temperature": temperature} if self.scores_tempered else {}
        params = self.vllm.SamplingParams(max_tokens=1, temperature=1.0, prompt_logprobs=0, detokenize=False, **extra)
        requests = [{"prompt_token_ids": ids} for ids in scoring_requests(rollouts)]
        with self._lock:
            self._wake()
            outputs = self.llm.generate(requests, sampling_params=params, use_tqdm=False)
        return completion_logprobs(outputs, rollouts)

    def close(self) -> None:
        """Free the engine's GPU memory (the trainer may build another engine in the same process)."""
        with self._lock:
            llm, self.llm = self.llm, None
        if llm is None:
            return
        shutdown = getattr(llm, "shutdown", None)
        if callable(shutdown):
            shutdown()
        del llm
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


@dataclass(frozen=True)
class VLLMSettings:
    """What the vLLM engine is built from, and nothing else of the run (design.md principle 8;
    rlvr/grpo/backends.py builds it from the run config)."""

    engine: EngineConfig  # rollout.engine: the mode, colocate's memory share and sleep, the server, agreement_rows
    model: ModelConfig  # the checkpoint vLLM loads, with its dtype and trust_remote_code
    temperature: float  # rollout.temperature: the agreement probe scores prompt log-probs at it


def _check_supported(settings: VLLMSettings, vllm: Any) -> None:
    """Refuse, before the engine takes the GPU, what it cannot do with these settings."""
    if not torch.cuda.is_available():
        raise VLLMError("rollout.engine.kind=vllm needs a CUDA GPU and none is visible (torch.cuda.is_available() is "
                        "False); use rollout.engine.kind=hf or hf_process on CPU")
    tempered = abs(settings.temperature - 1.0) > 1e-6
    if settings.engine.agreement_rows > 0 and tempered and not _prompt_temperature_supported(vllm):
        raise VLLMError(UNTEMPERED_PROMPT_LOGPROBS.format(temperature=settings.temperature))


def build_vllm_engine(settings: VLLMSettings, policy, tokenizer) -> Any:
    """The engine rlvr/grpo/backends.py builds for rollout.engine.kind=vllm: VLLMEngine (colocate) or, in server mode,
    rollout/vllm/server.py's VLLMServerEngine with the NCCL weight sender. Errors (each one VLLMError,
    user-facing): vLLM missing or older than 0.10.2 (server mode: without the weight-transfer API of 0.22), no
    CUDA, an unscorable temperature, and in server mode an unreachable or misconfigured server."""
    from rlvr.model.load import resolve_model_path

    e, m = settings.engine, settings.model
    vllm = _import_vllm()
    _check_supported(settings, vllm)
    if e.vllm_mode == "server":
        from rlvr.rollout.vllm.server import VLLMServerEngine
        from rlvr.rollout.vllm.weights import NCCLWeightSender

        return VLLMServerEngine.connect(e, policy, tokenizer, NCCLWeightSender(),
                                        scores_tempered=_prompt_temperature_supported(vllm))
    # In-process engine core: collective_rpc then passes the trainer's CUDA tensors to the worker by reference
    # (no serialization, no copy through host memory), and the engine dies with the trainer process.
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    path = resolve_model_path(m.name_or_path)
    llm = vllm.LLM(
        model=path, tokenizer=path, dtype=m.dtype, trust_remote_code=m.trust_remote_code,
        gpu_memory_utilization=e.vllm_gpu_memory_utilization, enable_sleep_mode=e.vllm_sleep,
        logprobs_mode="processed_logprobs", worker_extension_cls=f"{__name__}.RlvrWorkerExtension",
        generation_config="vllm",  # no sampling defaults from the checkpoint (a hidden top_k would change the draws)
        seed=0)
    engine = VLLMEngine(llm, vllm, tokenizer, stop_token_ids(policy, tokenizer), next(policy.parameters()).device,
                        sleep=e.vllm_sleep)
    engine.sync_weights(policy, -1)  # the policy may differ from the files on disk (a resumed run's weights)
    return engine
