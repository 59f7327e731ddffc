"""rollout.engine.vllm_mode=server on CPU, against tests/vllm_standin_server.py: a process that
serves vLLM's HTTP routes and payload shapes (the subset rlvr uses) with a transformers copy of the tiny model and
receives weights over gloo instead of NCCL. Checked: generate returns the RolloutBatch the in-process engine
samples under the same per-request seeds; a sync follows pause -> start -> update -> finish -> reset -> resume,
moves the served weights and passes the agreement probe, while a dropped update is caught by the probe; an
unreachable, silent, failing or killed server is one VLLMError naming rollout.engine.vllm_server_url, never a
hang."""
from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from rlvr.algorithms.correction import EngineMismatch
from rlvr.config.run import load_config
from rlvr.errors import UserFacingError
from rlvr.model.load import load_model, load_tokenizer
from rlvr.rollout.agreement import check_after_sync
from rlvr.rollout.base import SamplingParams, SyncedEngine
from rlvr.rollout.hf import HFRolloutEngine
from rlvr.rollout.vllm.convert import VLLMError, parse_completion_reply, request_seeds
from rlvr.rollout.vllm.server import VLLMServerEngine, VLLMServerHTTPError, check_processed_logprobs
from rlvr.rollout.vllm.weights import GlooWeightSender, free_port
from rlvr.types import Prompt
from test_update import perturbed
from test_vllm_engine import vllm_model_dir  # noqa: F401 - a fixture: the tiny Llama vLLM's kernels accept

torch.set_num_threads(1)  # the stand-in runs with one thread too: the same kernels on both sides

STANDIN = Path(__file__).resolve().parent / "vllm_standin_server.py"
START_TIMEOUT_S = 120.0
TIMEOUT_S = 60  # rollout.engine.vllm_request_timeout_s of these tests
PROMPTS = [Prompt("p/0", ({"role": "user", "content": "What is 2 + 3?"},), "5"),
           Prompt("p/1", ({"role": "user", "content": "Say hi"},), "hi")]
SAMPLING = SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=8, seed=1234)
CONTROL_ORDER = ["pause", "start_weight_update", "update_weights", "finish_weight_update", "reset_prefix_cache",
                 "resume"]


def start_standin(model_dir) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "PYTHONPATH": str(STANDIN.parent.parent)}
    process = subprocess.Popen([sys.executable, str(STANDIN), str(model_dir)], stdout=subprocess.PIPE, env=env)
    ready, _, _ = select.select([process.stdout], [], [], START_TIMEOUT_S)
    line = process.stdout.readline().decode() if ready else ""
    if not line.startswith("PORT "):
        process.kill()
        raise RuntimeError(f"the stand-in server did not start: {line!r}")
    return process, f"http://127.0.0.1:{int(line.split()[1])}"


def stop(process: subprocess.Popen) -> None:
    process.kill()
    process.wait(timeout=30)


def standin_call(url: str, path: str, body: dict | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, method="GET" if body is None else "POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def server_config(model_dir, url: str, *extra: str):
    return load_config(None, [f"model.name_or_path={model_dir}", "rollout.engine.kind=vllm",
                              "rollout.engine.vllm_mode=server", f"rollout.engine.vllm_server_url={url}",
                              f"rollout.engine.vllm_request_timeout_s={TIMEOUT_S}", "threads=1", *extra])


def connect(config, policy, tokenizer) -> VLLMServerEngine:
    return VLLMServerEngine.connect(config.rollout.engine, policy, tokenizer, GlooWeightSender(TIMEOUT_S),
                                    scores_tempered=False)


@pytest.fixture(scope="module")
def served(tiny_model_dir):
    """(trainer policy, tokenizer, engine, stand-in url, control calls of the connect): one stand-in for the
    module (a start takes seconds)."""
    process, url = start_standin(tiny_model_dir)
    try:
        config = server_config(tiny_model_dir, url)
        policy, tokenizer = load_model(config.model), load_tokenizer(config.model)
        engine = connect(config, policy, tokenizer)
        yield policy, tokenizer, engine, url, standin_call(url, "/rlvr_standin/calls")["calls"]
        engine.close()
    finally:
        stop(process)


def per_prompt_reference(policy, tokenizer, prompts, group_size, sampling):
    """What the in-process engine samples for each prompt alone with that prompt's request seed."""
    engine = HFRolloutEngine(policy, tokenizer)
    return [engine.generate([p], group_size, replace(sampling, seed=seed))
            for p, seed in zip(prompts, request_seeds(sampling.seed, len(prompts)))]


def assert_same_rows(batch, references, group_size) -> None:
    for i, ref in enumerate(references):
        rows, width = slice(i * group_size, (i + 1) * group_size), ref.completion_ids.shape[1]
        assert torch.equal(batch.completion_ids[rows, :width], ref.completion_ids)
        assert torch.equal(batch.completion_mask[rows, :width], ref.completion_mask)
        assert int(batch.completion_mask[rows, width:].sum()) == 0
        torch.testing.assert_close(batch.sampling_logprobs[rows, :width], ref.sampling_logprobs, rtol=0, atol=1e-5)
        assert torch.equal(batch.truncated[rows], ref.truncated)
        assert batch.completions[rows] == ref.completions


def test_generate_returns_what_the_in_process_engine_samples(served):
    policy, tokenizer, engine, _, connect_calls = served
    assert isinstance(engine, SyncedEngine) and engine.version == -1
    assert connect_calls == ["init_weight_transfer_engine", *CONTROL_ORDER]  # the policy is pushed once at connect
    batch = engine.generate(PROMPTS, 3, SAMPLING)
    ids, mask = HFRolloutEngine(policy, tokenizer).encode(PROMPTS)
    assert torch.equal(batch.prompt_ids, ids) and torch.equal(batch.prompt_mask, mask)
    assert_same_rows(batch, per_prompt_reference(policy, tokenizer, PROMPTS, 3, SAMPLING), 3)
    assert batch.completion_mask.sum() > 6  # sanity: the comparison covered real tokens
    again = engine.generate(PROMPTS, 3, SAMPLING)
    assert torch.equal(again.completion_ids, batch.completion_ids)  # same seed, same weights, same draws


def test_a_sync_follows_the_control_order_moves_the_weights_and_passes_the_probe(served):
    policy, tokenizer, engine, url, _ = served
    rollouts = engine.generate(PROMPTS, 4, SAMPLING)
    changed = perturbed(policy, seed=7, scale=0.2)  # the trainer after a (large) update
    standin_call(url, "/rlvr_standin/calls")
    engine.sync_weights(changed, version=5)
    assert standin_call(url, "/rlvr_standin/calls")["calls"] == CONTROL_ORDER and engine.version == 5
    agreement = check_after_sync(engine, changed, rollouts, 1.0, rows=4, threshold=1e-3)
    assert agreement is not None and agreement.rows == 4 and agreement.mismatch_kl < 1e-8  # fp32 noise only
    ours = engine.generate(PROMPTS, 2, SAMPLING)  # the server now samples what the changed trainer samples
    assert_same_rows(ours, per_prompt_reference(changed, tokenizer, PROMPTS, 2, SAMPLING), 2)
    engine.sync_weights(policy, version=6)  # back to the fixture's weights for the other tests


def test_a_dropped_update_is_caught_by_the_agreement_probe(served):
    policy, _, engine, url, _ = served
    rollouts = engine.generate(PROMPTS, 4, SAMPLING)
    changed = perturbed(policy, seed=8, scale=0.2)
    standin_call(url, "/rlvr_standin/fault", {"update": "drop"})  # received, never applied (trl#2923's kind)
    try:
        engine.sync_weights(changed, version=7)  # every call succeeds: only the probe can tell
        with pytest.raises(EngineMismatch):
            check_after_sync(engine, changed, rollouts, 1.0, rows=4, threshold=1e-3)
    finally:
        standin_call(url, "/rlvr_standin/fault", {"update": "apply"})
    engine.sync_weights(changed, version=8)
    assert check_after_sync(engine, changed, rollouts, 1.0, rows=4, threshold=1e-3) is not None
    engine.sync_weights(policy, version=9)


def test_server_errors_are_one_clear_error_with_the_servers_message(served):
    _, _, engine, _, _ = served
    with pytest.raises(VLLMError, match=r"vllm_server_url=http://127\.0\.0\.1:\d+ answered HTTP 400 to POST "
                                        r"/v1/completions .*maximum context length is 512") as err:
        engine.generate(PROMPTS, 2, replace(SAMPLING, max_new_tokens=1000))
    assert isinstance(err.value, UserFacingError)
    rollouts = engine.generate(PROMPTS, 2, SAMPLING)
    with pytest.raises(VLLMError, match="without temperature"):  # this engine was told vLLM cannot temper them
        engine.teacher_forced_logprobs(rollouts, 0.7)


def test_an_unreachable_server_is_one_clear_error_not_a_hang(tiny_model_dir):
    config = server_config(tiny_model_dir, f"http://127.0.0.1:{free_port()}")  # nothing listens there
    policy, tokenizer = load_model(config.model), load_tokenizer(config.model)
    started = time.monotonic()
    with pytest.raises(VLLMError, match=r"vllm_server_url=http://127\.0\.0\.1:\d+ is unreachable .*listing"):
        connect(config, policy, tokenizer)
    assert time.monotonic() - started < 10


def test_a_silent_server_hits_the_request_deadline(tiny_model_dir):
    with socket.socket() as silent:  # accepts connections (the kernel's backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        config = server_config(tiny_model_dir, url, "rollout.engine.vllm_request_timeout_s=1")
        policy, tokenizer = load_model(config.model), load_tokenizer(config.model)
        started = time.monotonic()
        with pytest.raises(VLLMError, match=r"did not answer GET /v1/models within 1 s .*vllm_request_timeout_s"):
            connect(config, policy, tokenizer)
        assert time.monotonic() - started < 10


def test_a_refused_update_and_a_killed_server_are_one_clear_error(tiny_model_dir):
    process, url = start_standin(tiny_model_dir)
    engine = None
    try:
        config = server_config(tiny_model_dir, url)
        policy, tokenizer = load_model(config.model), load_tokenizer(config.model)
        engine = connect(config, policy, tokenizer)
        standin_call(url, "/rlvr_standin/calls")
        standin_call(url, "/rlvr_standin/fault", {"update": "fail"})
        with pytest.raises(VLLMError, match="answered HTTP 500 to POST /update_weights .*refuse this weight update"):
            engine.sync_weights(perturbed(policy, seed=9, scale=0.2), version=1)
        calls = standin_call(url, "/rlvr_standin/calls")["calls"]
        assert calls == ["pause", "start_weight_update", "update_weights", "resume"]  # not left paused
        assert engine.version == -1
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
        started = time.monotonic()
        with pytest.raises(VLLMError, match=r"vllm_server_url=http://127\.0\.0\.1:\d+ is unreachable .*generating"):
            engine.generate(PROMPTS, 2, SAMPLING)
        assert time.monotonic() - started < 10
    finally:
        if engine is not None:
            engine.close()
        stop(process)


def test_three_asynchronous_steps_train_through_the_server_engine(tiny_model_dir, tmp_path, monkeypatch):
    """The GRPO loop with this engine (rlvr/grpo/backends.py builds it; only the NCCL sender is swapped for gloo):
    every update is pushed and probed, and with max_staleness=1 each batch after the first is one update stale."""
    from rlvr.cli.main import main
    from rlvr.grpo import backends
    from test_train_tiny import tiny_overrides

    process, url = start_standin(tiny_model_dir)
    try:
        monkeypatch.setitem(backends.ENGINES, "vllm", lambda config, policy, tokenizer: connect(config, policy,
                                                                                                  tokenizer))
        out = tmp_path / "run"
        args = [*tiny_overrides(tiny_model_dir, out, steps=3), "eval.at_end=false", "threads=1", "reward.workers=1",
                "rollout.engine.kind=vllm", "rollout.engine.vllm_mode=server", f"rollout.engine.vllm_server_url={url}",
                f"rollout.engine.vllm_request_timeout_s={TIMEOUT_S}", "rollout.engine.max_staleness=1",
                "rollout.correction.mode=tis", "optimizer.lr=1e-2",
                "algorithm.entropy_coef=0.1"]  # the random model earns no reward: the bonus moves the weights
        assert main(["train", *args]) == 0
    finally:
        stop(process)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["engine/version"] for r in rows] == [1, 2, 3] and all(r["engine/agreement_kl"] < 1e-8 for r in rows)
    assert [r["rollout/staleness"] for r in rows] == [0, 1, 1]


# --- the pieces without a server ---

def test_replies_that_are_not_vllms_shape_are_one_clear_error():
    with pytest.raises(VLLMError, match="no 'choices' list"):
        parse_completion_reply({"error": "x"}, "prompt 0", sampled=True)
    text_tokens = {"choices": [{"index": 0, "finish_reason": "stop",
                                "logprobs": {"tokens": ["hi"], "token_logprobs": [-0.5]}}]}
    with pytest.raises(VLLMError, match="return_tokens_as_token_ids"):
        parse_completion_reply(text_tokens, "prompt 0", sampled=True)
    with pytest.raises(VLLMError, match="logprobs=0"):
        parse_completion_reply({"choices": [{"index": 0, "finish_reason": "stop"}]}, "prompt 0", sampled=True)
    no_values = {"choices": [{"index": 0, "finish_reason": "stop",
                              "logprobs": {"tokens": ["token_id:5"], "token_logprobs": [None]}}]}
    with pytest.raises(VLLMError, match="logprobs=0"):
        parse_completion_reply(no_values, "prompt 0", sampled=True)
    with pytest.raises(VLLMError, match="prompt_logprobs"):
        parse_completion_reply({"choices": [{"prompt_logprobs": [None, {"5": -1.0}]}]}, "row 0", sampled=False)
    parsed = parse_completion_reply({"choices": [{"prompt_logprobs": [None, {"5": {"logprob": -1.5}}]}]}, "row 0",
                                    sampled=False)
    assert parsed.prompt_logprobs[0] is None and parsed.prompt_logprobs[1][5].logprob == -1.5


class _ConfigClient:
    base_url = "http://server:8000"

    def __init__(self, info):
        self.info = info

    def call(self, method, path, body=None, doing=""):
        assert (method, path) == ("GET", "/server_info?config_format=json")
        return self.info


def test_a_server_without_processed_logprobs_is_refused():
    check_processed_logprobs(_ConfigClient({"vllm_config": {"model_config": {"logprobs_mode": "processed_logprobs"}}}))
    check_processed_logprobs(_ConfigClient({"vllm_config": "model=m, logprobs_mode='processed_logprobs', seed=0"}))
    with pytest.raises(VLLMError, match="logprobs_mode=raw_logprobs.*--logprobs-mode processed_logprobs"):
        check_processed_logprobs(_ConfigClient({"vllm_config": {"model_config": {"logprobs_mode": "raw_logprobs"}}}))
    with pytest.raises(VLLMError, match="logprobs_mode=raw_logprobs"):
        check_processed_logprobs(_ConfigClient({"vllm_config": "model=m, logprobs_mode=raw_logprobs, seed=0"}))


class _NoDevModeClient:
    base_url, timeout = "http://server:8000", 5.0

    def call(self, method, path, body=None, doing=""):
        raise VLLMServerHTTPError(f"the vLLM server answered HTTP 404 to {method} {path}: Not Found", 404)


def test_a_server_without_the_weight_transfer_routes_says_how_to_start_it():
    engine = VLLMServerEngine(_NoDevModeClient(), "m", GlooWeightSender(5), None, [0], torch.device("cpu"), False)
    with pytest.raises(VLLMError, match=r"HTTP 404 to GET /get_world_size.*VLLM_SERVER_DEV_MODE=1 and "
                                        r"--weight-transfer-config"):
        engine.init_weight_transfer()
    engine.close()


def test_server_mode_loads_with_a_url_and_asynchronous_rollouts():
    config = load_config(None, ["rollout.engine.kind=vllm", "rollout.engine.vllm_mode=server",
                                "rollout.engine.vllm_server_url=http://gpu-node:8000",
                                "rollout.engine.max_staleness=1"])
    assert config.rollout.engine.vllm_server_url == "http://gpu-node:8000"
    assert config.rollout.engine.vllm_request_timeout_s == 600.0


# --- the real `vllm serve`: only where vLLM >= 0.22 and two CUDA GPUs exist (NCCL needs one GPU per rank) ---

@pytest.fixture(scope="module")
def real_server(vllm_model_dir):  # vllm_model_dir skips without vLLM or CUDA
    if torch.cuda.device_count() < 2:
        pytest.skip("the real vLLM server test needs two CUDA GPUs: the server's and the trainer's")
    model_dir = vllm_model_dir
    port = free_port()
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir), "--port",
               str(port), "--weight-transfer-config", '{"backend": "nccl"}', "--logprobs-mode",
               "processed_logprobs", "--generation-config", "vllm", "--enforce-eager", "--gpu-memory-utilization",
               "0.3"]
    env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1", "CUDA_VISIBLE_DEVICES": "1"}
    process = subprocess.Popen(command, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and process.poll() is None:
        try:
            standin_call(url, "/v1/models")
            break
        except OSError:
            time.sleep(2)
    else:
        process.kill()
        pytest.fail(f"`vllm serve` did not come up at {url} (exit code {process.poll()})")
    yield model_dir, url
    process.terminate()
    process.wait(timeout=60)


def test_real_server_generates_repeats_and_syncs(real_server):
    from rlvr.grpo.backends import vllm_settings
    from rlvr.rollout.vllm.engine import build_vllm_engine

    model_dir, url = real_server
    config = server_config(model_dir, url, "model.device=cuda")
    policy, tokenizer = load_model(config.model, trainable=True), load_tokenizer(config.model)
    engine = build_vllm_engine(vllm_settings(config), policy, tokenizer)
    try:
        batch = engine.generate(PROMPTS, 3, SAMPLING)
        assert batch.completion_ids.shape[0] == 6 and bool((batch.sampling_logprobs <= 0).all())
        assert torch.equal(engine.generate(PROMPTS, 3, SAMPLING).completion_ids, batch.completion_ids)
        threshold = config.rollout.correction.max_mismatch_kl
        assert check_after_sync(engine, policy, batch, 1.0, rows=3, threshold=threshold) is not None
        with torch.no_grad():
            for p in policy.parameters():
                p.add_(torch.randn_like(p) * 0.5)
        with pytest.raises(EngineMismatch):  # not synced yet: the probe sees the server's old weights
            check_after_sync(engine, policy, batch, 1.0, rows=3, threshold=threshold)
        engine.sync_weights(policy, version=1)
        assert check_after_sync(engine, policy, batch, 1.0, rows=3, threshold=threshold) is not None
    finally:
        engine.close()
