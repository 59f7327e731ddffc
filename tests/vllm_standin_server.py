"""A stand-in for `VLLM_SERVER_DEV_MODE=1 vllm serve MODEL --weight-transfer-config '{"backend":"nccl"}'
--logprobs-mode processed_logprobs`, for CPU tests of rlvr/rollout/vllm/server.py (tests/test_vllm_server.py).

It serves the subset of vLLM's HTTP routes and payload shapes rlvr uses, backed by rlvr.rollout.host.EngineHost
on a (tiny) transformers model, and receives weights over gloo (rlvr.rollout.vllm.weights.GlooWeightSender's
group) where vLLM uses NCCL. Sampling is EngineHost's seeded sampler run on the request's prompt, n and seed, so
a request samples exactly what the in-process engine samples for that prompt and seed.

Test hooks (not vLLM's): GET /rlvr_standin/calls lists the control-plane routes called so far (and clears the
list); POST /rlvr_standin/fault {"update": "apply" | "drop" | "fail"}: receive and apply an update, receive and
discard it (a sync that silently does not apply), or refuse it with HTTP 500.

Usage: python tests/vllm_standin_server.py MODEL_DIR [--logprobs-mode MODE] [--max-model-len N]
Prints "PORT <port>" once it listens on 127.0.0.1; exits when its parent does.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere

from rlvr.config.run import ModelConfig  # noqa: E402
from rlvr.rollout.base import SamplingParams  # noqa: E402
from rlvr.rollout.host import EngineHost, HostSettings  # noqa: E402
from rlvr.rollout.vllm.weights import GLOO_PREFIX  # noqa: E402

CONTROL_ROUTES = {"/pause", "/resume", "/start_weight_update", "/update_weights", "/finish_weight_update",
                  "/reset_prefix_cache", "/init_weight_transfer_engine"}
GROUP_TIMEOUT_S = 60.0


class HTTPFailure(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


class StandIn:
    def __init__(self, model_dir: str, logprobs_mode: str, max_model_len: int):
        self.host = EngineHost(HostSettings(ModelConfig(name_or_path=model_dir), threads=1))
        self.model_name, self.logprobs_mode, self.max_model_len = model_dir, logprobs_mode, max_model_len
        self.lock = threading.Lock()  # one forward or weight load at a time
        self.calls: list[str] = []
        self.update_fault = "apply"
        self.group = None

    # --- generation ---
    def completions(self, body: dict) -> dict:
        if body.get("model") != self.model_name:
            raise HTTPFailure(404, f"The model `{body.get('model')}` does not exist.")
        prompt = body["prompt"]
        if len(prompt) + int(body.get("max_tokens", 16)) > self.max_model_len:
            raise HTTPFailure(400, f"This model's maximum context length is {self.max_model_len} tokens. However, "
                                   f"you requested {len(prompt) + int(body['max_tokens'])} tokens.")
        if body.get("prompt_logprobs") is not None:
            return {"object": "text_completion", "choices": [self._scored(prompt, body)]}
        return {"object": "text_completion", "choices": self._sampled(prompt, body)}

    def _sampled(self, prompt: list[int], body: dict) -> list[dict]:
        sampling = SamplingParams(temperature=body["temperature"], top_p=body["top_p"],
                                  max_new_tokens=body["max_tokens"], seed=body.get("seed"))
        ids = torch.tensor([prompt])
        with self.lock:
            tokens, logprobs = self.host.engine.sample(ids, torch.ones_like(ids), body["n"], sampling)
        stops = set(body["stop_token_ids"]) | set(self.host.engine.stop_ids)
        choices = []
        for j, (row, values) in enumerate(zip(tokens.tolist(), logprobs.tolist())):
            ends = [p for p, t in enumerate(row) if t in stops]
            length = ends[0] + 1 if ends else len(row)
            names = [f"token_id:{t}" for t in row[:length]]
            values = [max(v, -9999.0) for v in values[:length]]  # vLLM clamps -inf so JSON can carry it
            choices.append({"index": j, "text": "", "finish_reason": "stop" if ends else "length",
                            "logprobs": {"tokens": names, "token_logprobs": values, "text_offset": [0] * length,
                                         "top_logprobs": [{n: v} for n, v in zip(names, values)]}})
        return choices

    @torch.no_grad()
    def _scored(self, prompt: list[int], body: dict) -> dict:
        temperature = float(body.get("prompt_logprobs_temperature", 1.0))
        with self.lock:
            logits = self.host.model(torch.tensor([prompt])).logits[0].float()  # [L, V]
        logprobs = torch.log_softmax(logits / temperature, dim=-1)
        entries = [None] + [{str(t): {"logprob": float(logprobs[j - 1, t]), "rank": 1, "decoded_token": ""}}
                            for j, t in enumerate(prompt) if j > 0]
        return {"index": 0, "text": "", "finish_reason": "length", "logprobs": None, "prompt_logprobs": entries}

    # --- weight transfer ---
    def init_transfer(self, info: dict) -> None:
        from torch.distributed import PrefixStore, ProcessGroupGloo, TCPStore

        timeout = timedelta(seconds=GROUP_TIMEOUT_S)
        store = TCPStore(info["master_address"], info["master_port"], info["world_size"], False, timeout=timeout)
        self.group = ProcessGroupGloo(PrefixStore(GLOO_PREFIX, store), info["rank_offset"], info["world_size"],
                                      timeout)

    def update(self, info: dict) -> None:
        if self.update_fault == "fail":
            raise HTTPFailure(500, "stand-in told to refuse this weight update")
        received = []
        for name, dtype, shape in zip(info["names"], info["dtype_names"], info["shapes"]):
            buffer = torch.empty(shape, dtype=getattr(torch, dtype))
            self.group.broadcast(buffer, 0).wait()
            received.append((name, buffer))
        if self.update_fault == "apply":
            with self.lock:
                self.host.load_parameters(received, self.host.version + 1)

    def handle(self, method: str, path: str, body: dict) -> dict:
        if path in CONTROL_ROUTES:
            self.calls.append(path.strip("/"))
        routes = {
            ("GET", "/v1/models"): lambda: {"object": "list", "data": [{"id": self.model_name, "object": "model"}]},
            ("GET", "/server_info"): lambda: {"vllm_config": {"model_config": {"logprobs_mode": self.logprobs_mode}}},
            ("GET", "/get_world_size"): lambda: {"world_size": 1},
            ("GET", "/rlvr_standin/calls"): self._take_calls,
            ("POST", "/rlvr_standin/fault"): lambda: self._set_fault(body),
            ("POST", "/v1/completions"): lambda: self.completions(body),
            ("POST", "/init_weight_transfer_engine"): lambda: self.init_transfer(body["init_info"]),
            ("POST", "/update_weights"): lambda: self.update(body["update_info"]),
        }
        if (method, path) in routes:
            return routes[(method, path)]() or {"status": "ok"}
        if method == "POST" and path in CONTROL_ROUTES:
            return {"status": "ok"}
        raise HTTPFailure(404, "Not Found")

    def _take_calls(self) -> dict:
        calls, self.calls = self.calls, []
        return {"calls": calls}

    def _set_fault(self, body: dict) -> dict:
        self.update_fault = body["update"]
        return {"update": self.update_fault}


def make_handler(standin: StandIn):
    class Handler(BaseHTTPRequestHandler):
        def _serve(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                reply, status = standin.handle(method, urlsplit(self.path).path, json.loads(raw) if raw else {}), 200
            except HTTPFailure as err:  # vLLM's error body: {"error": {"message", "type", "code"}}
                reply, status = {"error": {"message": err.message, "type": "BadRequestError", "code": err.status}}, \
                    err.status
            except Exception as err:  # noqa: BLE001 - a bug in a handler is a 500 with its text, as FastAPI's
                reply, status = {"detail": f"{type(err).__name__}: {err}"}, 500
            data = json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            self._serve("GET")

        def do_POST(self) -> None:  # noqa: N802
            self._serve("POST")

        def log_message(self, *args) -> None:  # quiet: the tests read stdout for the port
            pass

    return Handler


def _exit_with_parent() -> None:
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(3)

    threading.Thread(target=watch, daemon=True).start()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model_dir")
    parser.add_argument("--logprobs-mode", default="processed_logprobs")
    parser.add_argument("--max-model-len", type=int, default=512)
    args = parser.parse_args()
    _exit_with_parent()
    torch.set_num_threads(1)
    standin = StandIn(args.model_dir, args.logprobs_mode, args.max_model_len)
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(standin))
    server.daemon_threads = True
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
