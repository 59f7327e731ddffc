"""rollout.engine.vllm_mode=server: a SyncedEngine over a separate `vllm serve` process.

Start the server with (vLLM >= 0.22; VLLM_SERVER_DEV_MODE exposes the weight-transfer and cache routes):

    VLLM_SERVER_DEV_MODE=1 vllm serve MODEL --weight-transfer-config '{"backend":"nccl"}' \\
        --logprobs-mode processed_logprobs --generation-config vllm

`--logprobs-mode processed_logprobs` is required: the sampling log-probs must be those of the tempered, top-p
filtered distribution each token was drawn from (rollout/vllm.py's docstring; vLLM's default is the raw model's).
rlvr reads the server's config (GET /server_info) and refuses another mode. `--generation-config vllm` keeps the
checkpoint's sampling defaults (a hidden top_k) out; every request also sets top_k/min_p/repetition_penalty
explicitly.

Generation: one POST /v1/completions per prompt (token-id prompt, n = group size, the per-request seed colocate
mode derives with vllm_convert.request_seeds, stop_token_ids, logprobs=0 = the sampled token's log-prob,
return_tokens_as_token_ids so tokens come back as ids), sent concurrently so the server batches them; the replies
are converted by vllm_convert into the RolloutBatch colocate mode builds. Teacher forcing (the agreement probe):
prompt = prompt + completion, max_tokens=1, vLLM's `prompt_logprobs=0` extension (untempered unless the installed
vLLM has prompt_logprobs_temperature, as in colocate mode; a server that ignores that field makes the probe fail
loudly, not pass wrongly).

Weight sync with vLLM's native weight-transfer API (docs.vllm.ai/en/latest/training/weight_transfer/, example
examples/rl/rlhf_http_nccl.py). Control plane over HTTP: GET /get_world_size and POST /init_weight_transfer_engine
once (concurrently with rank 0 joining the group), then per sync POST /pause, /start_weight_update,
/update_weights (concurrently with the data plane's broadcast, rollout/vllm/weights.py), /finish_weight_update,
/reset_prefix_cache (while paused: no request can reuse KV blocks computed with the old weights), /resume.

Never a hang: every HTTP call has a deadline (rollout.engine.vllm_request_timeout_s) and every failure is one
VLLMError naming rollout.engine.vllm_server_url: unreachable, an HTTP error status (with the server's message), a
malformed reply, a sync that failed or did not finish.
"""
from __future__ import annotations

import http.client
import json
import logging
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import urlsplit

import torch

from rlvr.rollout.base import SamplingParams
from rlvr.rollout.hf import stop_token_ids
from rlvr.rollout.host import synced_parameters
from rlvr.rollout.vllm.convert import (
    UNTEMPERED_PROMPT_LOGPROBS,
    VLLMError,
    completion_logprobs,
    encode_prompts,
    parse_completion_reply,
    request_seeds,
    rollout_from_outputs,
    scoring_requests,
    unpadded_prompts,
)
from rlvr.rollout.vllm.weights import WeightSender, address_seen_by, free_port
from rlvr.types import Prompt, RolloutBatch

if TYPE_CHECKING:
    from rlvr.config.sections import EngineConfig

log = logging.getLogger(__name__)

MAX_CONCURRENT_REQUESTS = 64  # prompts of one generate in flight at once; the server batches them
POLL_S = 0.05  # how often a wait on concurrent work checks for a failure or its deadline
SETTING = "rollout.engine.vllm_server_url"
TIMEOUT_SETTING = "rollout.engine.vllm_request_timeout_s"


class VLLMServerHTTPError(VLLMError):
    """The server answered with an error status."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


def _server_message(body: bytes) -> str:
    """The error text of a vLLM / FastAPI error body: {"error": {"message"}}, {"message"} or {"detail"}."""
    try:
        reply = json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace").strip()[:500] or "(empty body)"
    if isinstance(reply, dict):
        error = reply.get("error")
        found = error.get("message") if isinstance(error, dict) else error
        return str(found or reply.get("message") or reply.get("detail") or reply)[:500]
    return str(reply)[:500]


class ServerClient:
    """JSON over HTTP with a deadline on every call (stdlib urllib; no proxy: the server is the trainer's own)."""

    def __init__(self, base_url: str, timeout_s: float):
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout_s
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def call(self, method: str, path: str, body: Any = None, doing: str = "") -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base_url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        where = f"the vLLM server at {SETTING}={self.base_url}"
        late = f"{where} did not answer {method} {path} within {self.timeout:g} s while {doing} ({TIMEOUT_SETTING})"
        try:
            # urllib's timeout bounds each blocking socket operation; a non-streamed vLLM reply sends nothing
            # until it is complete, so it bounds the whole request
            with self.opener.open(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as err:
            raise VLLMServerHTTPError(f"{where} answered HTTP {err.code} to {method} {path} while {doing}: "
                                      f"{_server_message(err.read())}", err.code) from None
        except (TimeoutError, socket.timeout):
            raise VLLMError(late) from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as err:
            reason = getattr(err, "reason", None) or err
            if isinstance(reason, (TimeoutError, socket.timeout)):
                raise VLLMError(late) from None
            raise VLLMError(f"{where} is unreachable ({reason}) while {doing}; is `vllm serve` running there "
                            f"(see rlvr/rollout/vllm/server.py for the command)?") from None
        try:
            return json.loads(raw) if raw.strip() else {}
        except ValueError:
            raise VLLMError(f"{where} answered {method} {path} with something that is not JSON while {doing}: "
                            f"{raw[:200]!r}") from None


class _Task:
    """A call run on a daemon thread (a stuck one never blocks the trainer's exit)."""

    def __init__(self, what: str, work: Callable[[], Any]):
        self.what, self.value, self.error = what, None, None
        self.done = threading.Event()
        threading.Thread(target=self._run, args=(work,), name=f"rlvr-vllm-{what}", daemon=True).start()

    def _run(self, work: Callable[[], Any]) -> None:
        try:
            self.value = work()
        except BaseException as err:  # noqa: BLE001 - re-raised by wait_all in the caller's thread
            self.error = err
        finally:
            self.done.set()


def wait_all(tasks: list[_Task], limit_s: float, base_url: str) -> list[Any]:
    """Wait for tasks that must all finish (both ends of a rendezvous): the first failure is raised at once,
    a task past the deadline is one VLLMError."""
    deadline = time.monotonic() + limit_s
    while True:
        for task in tasks:
            if task.done.is_set() and task.error is not None:
                if isinstance(task.error, VLLMError):
                    raise task.error
                raise VLLMError(f"weight sync with the vLLM server at {SETTING}={base_url} failed while "
                                f"{task.what}: {type(task.error).__name__}: {task.error}") from task.error
        pending = [t for t in tasks if not t.done.is_set()]
        if not pending:
            return [t.value for t in tasks]
        if time.monotonic() > deadline:
            raise VLLMError(f"weight sync with the vLLM server at {SETTING}={base_url} did not finish "
                            f"{pending[0].what} within {limit_s:g} s ({TIMEOUT_SETTING})")
        pending[0].done.wait(POLL_S)


def _logprobs_mode(info: Any) -> str | None:
    """The server's logprobs_mode, wherever /server_info puts it (a JSON config, or its text rendering)."""
    if isinstance(info, dict):
        if "logprobs_mode" in info:
            return str(info["logprobs_mode"])
        found = [_logprobs_mode(v) for v in info.values()]
        return next((f for f in found if f is not None), None)
    if isinstance(info, list):
        return next((f for f in map(_logprobs_mode, info) if f is not None), None)
    match = re.search(r"logprobs_mode\W{0,4}([A-Za-z_.]+)", info) if isinstance(info, str) else None
    return match.group(1) if match else None


def check_processed_logprobs(client: ServerClient) -> None:
    """Refuse a server whose sampling log-probs are not those of the tempered distribution."""
    try:
        info = client.call("GET", "/server_info?config_format=json", doing="reading the server's config")
    except VLLMServerHTTPError:
        info = None
    mode = _logprobs_mode(info)
    if mode is None:
        log.warning("could not read the vLLM server's logprobs_mode from /server_info; it must be started with "
                    "--logprobs-mode processed_logprobs")
    elif "processed_logprobs" not in mode:
        raise VLLMError(f"the vLLM server at {SETTING}={client.base_url} runs logprobs_mode={mode}: its sampling "
                        "log-probs are not those of the tempered distribution the tokens were drawn from; restart "
                        "it with --logprobs-mode processed_logprobs")


class VLLMServerEngine:
    """A SyncedEngine over `vllm serve` (see the module docstring). Use `connect`."""

    def __init__(self, client: ServerClient, model_name: str, sender: WeightSender, tokenizer, stop_ids: list[int],
                 device: torch.device, scores_tempered: bool):
        self.client, self.model_name, self.sender = client, model_name, sender
        self.tokenizer, self.stop_ids, self.device = tokenizer, stop_ids, device
        self.scores_tempered = scores_tempered
        self.version = -1  # the trainer step whose weights are loaded (-1: the checkpoint the server loaded)
        # A sync pauses the server: no generate or probe of ours may be in flight meanwhile (with max_staleness 1
        # a generate runs on another thread; rollout/pipelined.py waits for it, this makes it a rule here too).
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(MAX_CONCURRENT_REQUESTS, thread_name_prefix="rlvr-vllm-request")

    @classmethod
    def connect(cls, settings: EngineConfig, policy, tokenizer, sender: WeightSender,
                scores_tempered: bool) -> VLLMServerEngine:
        """Check the server at settings.vllm_server_url, form the weight-transfer group, and push the policy's
        current weights (a resumed run's policy is not the checkpoint the server loaded)."""
        client = ServerClient(settings.vllm_server_url, settings.vllm_request_timeout_s)
        models = client.call("GET", "/v1/models", doing="listing the served model")
        names = [m.get("id") for m in models.get("data", []) if isinstance(m, dict)] if isinstance(models, dict) \
            else []
        if not names:
            raise VLLMError(f"the vLLM server at {SETTING}={client.base_url} lists no model at /v1/models: {models}")
        check_processed_logprobs(client)
        engine = cls(client, str(names[0]), sender, tokenizer, stop_token_ids(policy, tokenizer),
                     next(policy.parameters()).device, scores_tempered)
        try:
            engine.init_weight_transfer()
            engine.sync_weights(policy, -1)
        except BaseException:
            engine.close()
            raise
        return engine

    def _post(self, path: str, body: Any, doing: str) -> Any:
        return self.client.call("POST", path, body, doing)

    def init_weight_transfer(self) -> None:
        """Rank 0 (this trainer) and ranks 1..W (the server's workers) join one group; both calls block until
        everyone has joined, so they run concurrently."""
        try:
            reply = self.client.call("GET", "/get_world_size", doing="reading the server's world size")
        except VLLMServerHTTPError as err:
            if err.status != 404:
                raise
            raise VLLMError(f"{err}; the weight-transfer routes exist only on a server started with "
                            "VLLM_SERVER_DEV_MODE=1 and --weight-transfer-config '{\"backend\":\"nccl\"}' "
                            "(vLLM >= 0.22)") from None
        if not isinstance(reply, dict) or not isinstance(reply.get("world_size"), int):
            raise VLLMError(f"the vLLM server at {SETTING}={self.client.base_url} answered /get_world_size with "
                            f"{reply!r}, not {{'world_size': <int>}}")
        world_size = reply["world_size"] + 1
        url = urlsplit(self.client.base_url)
        master, port = address_seen_by(url.hostname or "127.0.0.1", url.port or 80), free_port()
        init_info = {"master_address": master, "master_port": port, "rank_offset": 1, "world_size": world_size,
                     **self.sender.init_fields}
        server = _Task("joining the weight-transfer group (server side)", lambda: self._post(
            "/init_weight_transfer_engine", {"init_info": init_info}, "joining the weight-transfer group"))
        trainer = _Task("joining the weight-transfer group (trainer side)",
                        lambda: self.sender.init(master, port, world_size))
        wait_all([server, trainer], self.client.timeout, self.client.base_url)

    # --- SyncedEngine -------------------------------------------------------------------------------------------

    def _request_all(self, bodies: list[dict], doing: str, sampled: bool) -> list[Any]:
        futures = [self._pool.submit(self._post, "/v1/completions", body, f"{doing} (request {i})")
                   for i, body in enumerate(bodies)]
        return [parse_completion_reply(f.result(), f"{doing}, request {i}", sampled) for i, f in enumerate(futures)]

    def _sampling_body(self, prompt: list[int], group_size: int, sampling: SamplingParams, seed: int | None) -> dict:
        body = {"model": self.model_name, "prompt": prompt, "n": group_size, "temperature": sampling.temperature,
                "top_p": sampling.top_p, "max_tokens": sampling.max_new_tokens, "stop_token_ids": list(self.stop_ids),
                "logprobs": 0, "return_tokens_as_token_ids": True,
                # explicit, so no default of the server's generation config changes the draws (top_k 0 = off in
                # the vLLM >= 0.22 the weight-transfer API needs)
                "top_k": 0, "min_p": 0.0, "repetition_penalty": 1.0, "ignore_eos": False}
        return body if seed is None else {**body, "seed": seed}

    def generate(self, prompts: list[Prompt], group_size: int, sampling: SamplingParams) -> RolloutBatch:
        prompt_ids, prompt_mask = encode_prompts(self.tokenizer, prompts, self.device)
        bodies = [self._sampling_body(ids, group_size, sampling, seed) for ids, seed in
                  zip(unpadded_prompts(prompt_ids, prompt_mask), request_seeds(sampling.seed, len(prompts)))]
        with self._lock:
            outputs = self._request_all(bodies, "generating rollouts", sampled=True)
        return rollout_from_outputs(
            outputs, prompts, group_size, prompt_ids, prompt_mask, self.stop_ids, self.tokenizer.pad_token_id,
            lambda ids: self.tokenizer.batch_decode(ids, skip_special_tokens=True))

    @torch.no_grad()
    def sync_weights(self, model: torch.nn.Module, version: int) -> None:
        """pause -> start -> update (the server receives while this side broadcasts) -> finish -> reset the
        prefix cache -> resume. A failure resumes the server if it can and is one VLLMError."""
        named = [(name, tensor.detach()) for name, tensor in synced_parameters(model)]
        update_info = {"names": [n for n, _ in named], "dtype_names": [str(t.dtype).split(".")[-1] for _, t in named],
                       "shapes": [list(t.shape) for _, t in named], **self.sender.update_fields}
        with self._lock:
            self._post("/pause", {}, "pausing generation for a weight sync")
            try:
                self._post("/start_weight_update", {"is_checkpoint_format": True}, "starting a weight update")
                receive = _Task("receiving the weights (server side)", lambda: self._post(
                    "/update_weights", {"update_info": update_info}, "receiving the weights"))
                send = _Task("sending the weights (trainer side)", lambda: self.sender.send(named))
                wait_all([receive, send], self.client.timeout, self.client.base_url)
                self._post("/finish_weight_update", {}, "finishing a weight update")
                self._post("/reset_prefix_cache", {}, "dropping KV blocks of the old weights")
            except BaseException:
                self._resume_after_failure()
                raise
            self._post("/resume", {}, "resuming generation after a weight sync")
            self.version = version

    def _resume_after_failure(self) -> None:
        try:
            self._post("/resume", {}, "resuming generation after a failed weight sync")
        except VLLMError as err:  # the sync's own error is the one to report
            log.warning("could not resume the vLLM server after a failed sync: %s", err)

    @torch.no_grad()
    def teacher_forced_logprobs(self, rollouts: RolloutBatch, temperature: float) -> torch.Tensor:
        """[B, C] log-probs of the completion tokens under the server's weights, from its prompt log-probs of
        prompt+completion, 0 on padding."""
        if abs(temperature - 1.0) > 1e-6 and not self.scores_tempered:
            raise VLLMError(UNTEMPERED_PROMPT_LOGPROBS.format(temperature=temperature))
        extra = {"prompt_logprobs_temperature": temperature} if self.scores_tempered else {}
        bodies = [{"model": self.model_name, "prompt": ids, "max_tokens": 1, "temperature": 1.0,
                   "prompt_logprobs": 0, **extra} for ids in scoring_requests(rollouts)]
        with self._lock:
            outputs = self._request_all(bodies, "scoring the agreement probe", sampled=False)
        return completion_logprobs(outputs, rollouts)

    def close(self) -> None:
        """Leave the server running (it is not ours); drop the group and the request threads."""
        self.sender.close()
        self._pool.shutdown(wait=False, cancel_futures=True)
