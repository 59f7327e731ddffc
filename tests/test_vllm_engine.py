"""The vLLM rollout engine.

On CPU: the pure conversion from vLLM-shaped outputs to a RolloutBatch (rlvr/rollout/vllm/convert.py) against
hand-derived tensors, the engine's glue with a stand-in `vllm.LLM` (sleep/wake, seeds, weight push), and the
build errors. With vLLM installed and a CUDA GPU: the real engine (shapes, seeded repeats, agreement after a
sync, a skipped sync caught)."""
from __future__ import annotations

import os
import sys
import types
from dataclasses import dataclass, field

import pytest
import torch

from rlvr.config.run import load_config
from rlvr.errors import UserFacingError
from rlvr.grpo.backends import vllm_settings
from rlvr.rollout.base import SamplingParams
from rlvr.rollout.vllm.convert import (
    VLLMError,
    check_vllm_version,
    completion_logprobs,
    request_seeds,
    rollout_from_outputs,
    scoring_requests,
    version_tuple,
)
from rlvr.types import Prompt, RolloutBatch

STOP = 9


@dataclass
class Logprob:  # vllm.sequence.Logprob: only .logprob is read
    logprob: float


@dataclass
class Completion:  # vllm.outputs.CompletionOutput
    index: int
    token_ids: list[int]
    logprobs: list[dict[int, Logprob]] | None
    finish_reason: str
    text: str = ""


@dataclass
class RequestOutput:  # vllm.outputs.RequestOutput
    outputs: list[Completion] = field(default_factory=list)
    prompt_logprobs: list[dict[int, Logprob] | None] | None = None


def completion(index: int, tokens: list[int], logprobs: list[float], reason: str) -> Completion:
    # vLLM returns the sampled token plus (with logprobs=k > 0) others: a distractor checks the right key is read
    entries = [{t: Logprob(v), t + 1: Logprob(-50.0)} for t, v in zip(tokens, logprobs)]
    return Completion(index, tokens, entries, reason)


def sampled_outputs() -> list[RequestOutput]:
    """2 prompts x G=2, max_tokens=3. Prompt 0's samples arrive out of index order."""
    return [RequestOutput([completion(1, [7, 8, 7], [-1.0, -2.0, -3.0], "length"),
                           completion(0, [5, STOP], [-0.5, -0.25], "stop")]),
            RequestOutput([completion(0, [STOP], [-0.125], "stop"),
                           completion(1, [4, 4, STOP], [-1.0, -1.0, -0.5], "stop")])]


PROMPTS = [Prompt("p0", ({"role": "user", "content": "a"},), "1"),
           Prompt("p1", ({"role": "user", "content": "b"},), "2")]
PROMPT_IDS = torch.tensor([[0, 1, 2], [3, 4, 5]])  # [N=2, P=3], left-padded: prompt 0 is [1, 2]
PROMPT_MASK = torch.tensor([[0, 1, 1], [1, 1, 1]])


def letters(pad: int):
    return lambda ids: ["".join(chr(ord("a") + t) for t in row.tolist() if t != pad) for row in ids]


def convert(pad: int, outputs=None) -> RolloutBatch:
    return rollout_from_outputs(outputs or sampled_outputs(), PROMPTS, 2, PROMPT_IDS, PROMPT_MASK, [STOP], pad,
                                letters(pad))


@pytest.mark.parametrize("pad", [0, STOP])  # pad != EOS, and pad == EOS (EOS still counts, design principle 6)
def test_outputs_to_rollout_batch(pad):
    batch = convert(pad)
    # rows: p0 sample 0 [5, STOP], p0 sample 1 [7, 8, 7] (hit max_tokens), p1 [STOP], p1 [4, 4, STOP]; width 3
    assert batch.completion_ids.tolist() == [[5, STOP, pad], [7, 8, 7], [STOP, pad, pad], [4, 4, STOP]]
    assert batch.completion_mask.tolist() == [[1, 1, 0], [1, 1, 1], [1, 0, 0], [1, 1, 1]]
    assert batch.sampling_logprobs.tolist() == [[-0.5, -0.25, 0.0], [-1.0, -2.0, -3.0], [-0.125, 0.0, 0.0],
                                                [-1.0, -1.0, -0.5]]
    assert batch.truncated.tolist() == [False, True, False, False]
    # decode sees the masked ids: the stop token (9 -> "j") is kept as a token, only padding is dropped
    assert batch.completions == (["fj", "hih", "j", "eej"] if pad == 0 else ["f", "hih", "", "ee"])
    assert batch.group_size == 2 and batch.prompts == PROMPTS and batch.prompt_ids is PROMPT_IDS


def test_malformed_outputs_are_one_clear_error():
    outputs = sampled_outputs()
    outputs[1].outputs.pop()
    with pytest.raises(VLLMError, match="returned 1 completions for prompt 1, expected n=2"):
        convert(0, outputs)
    outputs = sampled_outputs()
    outputs[0].outputs[1] = completion(0, [5, 6], [-0.5, -0.25], "abort")  # aborted: not a finished answer
    with pytest.raises(VLLMError, match="reason 'abort'"):
        convert(0, outputs)
    outputs = sampled_outputs()
    outputs[0].outputs[1] = completion(0, [5, 6], [-0.5, -0.25], "stop")  # a stop string rlvr never sets
    with pytest.raises(VLLMError, match="lack a stop token"):
        convert(0, outputs)
    outputs = sampled_outputs()
    outputs[0].outputs[0].logprobs = None
    with pytest.raises(VLLMError, match="logprobs=0"):
        convert(0, outputs)


def test_teacher_forced_logprobs_read_the_completion_positions():
    batch = convert(0)
    requests = scoring_requests(batch)
    # prompt tokens without padding, then the completion's real tokens (stop kept, padding dropped)
    assert requests == [[1, 2, 5, STOP], [1, 2, 7, 8, 7], [3, 4, 5, STOP], [3, 4, 5, 4, 4, STOP]]
    # stand-in prompt log-probs: the entry of token j is -(10 b + j); the first entry is None (no context)
    outputs = [RequestOutput(prompt_logprobs=[None] + [{t: Logprob(-(10.0 * b + j)), t + 1: Logprob(-99.0)}
                                                       for j, t in enumerate(tokens) if j > 0])
               for b, tokens in enumerate(requests)]
    scores = completion_logprobs(outputs, batch)
    # row 0: completion starts at index 2 -> -2, -3; row 1 at 2 -> -12, -13, -14; row 2 at 3 -> -23;
    # row 3 at 3 -> -33, -34, -35; padding 0
    assert scores.tolist() == [[-2.0, -3.0, 0.0], [-12.0, -13.0, -14.0], [-23.0, 0.0, 0.0], [-33.0, -34.0, -35.0]]
    with pytest.raises(VLLMError, match="prompt_logprobs=0"):
        completion_logprobs([RequestOutput()] * 4, batch)


def test_request_seeds_repeat_and_differ():
    assert request_seeds(None, 3) == [None, None, None]
    seeds = request_seeds(7, 3)
    assert seeds == request_seeds(7, 3) and len(set(seeds)) == 3 and seeds != request_seeds(8, 3)


def test_version_gate():
    assert version_tuple("0.11.0rc2.dev5+gabc") == (0, 11, 0) and version_tuple("1") == (1, 0, 0)
    check_vllm_version("0.10.2")
    check_vllm_version("0.33.0")
    with pytest.raises(VLLMError, match="vLLM 0.10.1 is too old"):
        check_vllm_version("0.10.1")


# --- build errors (no vLLM here; stand-in modules where a vLLM must appear installed) ---

def vllm_config(*extra: str):
    return load_config(None, ["rollout.engine.kind=vllm", *extra])


def settings_of(*extra: str):
    """The engine's settings, built as the run builds them (rlvr/grpo/backends.py)."""
    return vllm_settings(vllm_config(*extra))


def fake_vllm(version: str = "0.11.0", tempered_prompt_logprobs: bool = False) -> types.ModuleType:
    module = types.ModuleType("vllm")
    module.__version__ = version
    fields = ("n", "temperature") + (("prompt_logprobs_temperature",) if tempered_prompt_logprobs else ())
    module.SamplingParams = type("SamplingParams", (), {"__struct_fields__": fields,
                                                        "__init__": lambda self, **kw: self.__dict__.update(kw)})
    return module


def test_the_engine_settings_carry_the_training_temperature():
    # the agreement probe scores at rollout.temperature (eval and sample have temperatures of their own)
    settings = settings_of("rollout.temperature=0.7", "eval.temperature=0.5")
    assert settings.temperature == 0.7 and settings.engine.kind == "vllm"


def test_missing_vllm_is_one_clear_error(monkeypatch):
    from rlvr.rollout.vllm.engine import build_vllm_engine

    monkeypatch.setitem(sys.modules, "vllm", None)  # `import vllm` raises ImportError, installed or not
    with pytest.raises(VLLMError, match=r"pip install 'rlvr\[vllm\]'") as err:
        build_vllm_engine(settings_of(), policy=None, tokenizer=None)
    assert isinstance(err.value, UserFacingError)


def test_build_errors(monkeypatch):
    from rlvr.rollout.vllm.engine import build_vllm_engine

    monkeypatch.setitem(sys.modules, "vllm", fake_vllm("0.9.2"))
    with pytest.raises(VLLMError, match="too old"):
        build_vllm_engine(settings_of(), None, None)
    monkeypatch.setitem(sys.modules, "vllm", fake_vllm())
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(VLLMError, match="needs a CUDA GPU"):
        build_vllm_engine(settings_of(), None, None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises(VLLMError, match="without temperature"):
        build_vllm_engine(settings_of("rollout.temperature=0.7"), None, None)
    server = ("rollout.engine.vllm_mode=server", "rollout.engine.vllm_server_url=http://127.0.0.1:9")
    with pytest.raises(VLLMError, match=r"vllm_mode=server needs vLLM >= 0\.22 on the trainer"):  # no weight_transfer
        build_vllm_engine(settings_of(*server), None, None)


def fake_weight_transfer(monkeypatch, packed_on: str) -> None:
    """vllm.distributed.weight_transfer.nccl_engine with its info dataclasses as before 0.28 (`packed` on the
    update info) or since (on the init info)."""
    from dataclasses import make_dataclass

    module = types.ModuleType("vllm.distributed.weight_transfer.nccl_engine")
    base = [("master_address", str), ("master_port", int), ("rank_offset", int), ("world_size", int)]
    update = [("names", list), ("dtype_names", list), ("shapes", list)]
    module.NCCLWeightTransferInitInfo = make_dataclass("Init", base + ([("packed", bool)] if packed_on == "init"
                                                                       else []))
    module.NCCLWeightTransferUpdateInfo = make_dataclass("Update", update + ([("packed", bool)]
                                                                             if packed_on == "update" else []))
    package = types.ModuleType("vllm.distributed.weight_transfer")
    package.nccl_engine = module
    for name, value in [("vllm.distributed", types.ModuleType("vllm.distributed")),
                        ("vllm.distributed.weight_transfer", package), (module.__name__, module)]:
        monkeypatch.setitem(sys.modules, name, value)


@pytest.mark.parametrize("packed_on", ["update", "init"])
def test_the_nccl_sender_puts_the_packed_flag_where_the_installed_vllm_reads_it(monkeypatch, packed_on):
    from rlvr.rollout.vllm.weights import NCCLWeightSender

    monkeypatch.setitem(sys.modules, "vllm", fake_vllm("0.29.0" if packed_on == "init" else "0.25.0"))
    fake_weight_transfer(monkeypatch, packed_on)
    sender = NCCLWeightSender()
    assert sender.init_fields == ({"packed": False} if packed_on == "init" else {})
    assert sender.update_fields == ({"packed": False} if packed_on == "update" else {})


# --- the engine's glue, with a stand-in vllm.LLM that holds its own transformers copy of the weights ---

class FakeWorker:
    """What RlvrWorkerExtension is mixed into: a vLLM worker whose model_runner holds the served model."""

    def __init__(self, model):
        class Served:  # vLLM models take HF-named tensors through load_weights and return the names they loaded
            @staticmethod
            def load_weights(weights):
                own = dict(model.named_parameters())
                names = set()
                for name, value in weights:
                    own[name].data.copy_(value)
                    names.add(name)
                return names

        self.model_runner = types.SimpleNamespace(model=Served())


class FakeLLM:
    """vllm.LLM's documented surface, backed by a transformers model: seeded token draws for generate, exact
    untempered prompt log-probs for scoring, weight loads through the worker extension."""

    def __init__(self, model: str, worker_extension_cls: str, **kwargs):
        from rlvr.config.run import ModelConfig
        from rlvr.model.load import load_model

        self.kwargs, self.calls, self.sampling = kwargs, [], []
        self.model = load_model(ModelConfig(name_or_path=model), trainable=False)
        module, name = worker_extension_cls.rsplit(".", 1)
        extension = getattr(sys.modules[module], name)
        self.worker = type("Worker", (FakeWorker, extension), {})(self.model)
        self.eos = self.model.config.eos_token_id

    def generate(self, requests, sampling_params, use_tqdm=True):
        params = sampling_params
        if isinstance(params, list):
            self.sampling = params
            return [self._sample(r["prompt_token_ids"], p) for r, p in zip(requests, params)]
        return [self._score(r["prompt_token_ids"]) for r in requests]

    def _sample(self, prompt: list[int], p) -> RequestOutput:
        generator = torch.Generator().manual_seed(p.seed)
        out = RequestOutput()
        for j in range(p.n):
            length = int(torch.randint(1, p.max_tokens + 1, (1,), generator=generator))
            tokens = torch.randint(3, 60, (length,), generator=generator).tolist()
            stopped = length < p.max_tokens
            tokens[-1] = self.eos if stopped else tokens[-1]
            out.outputs.append(completion(j, tokens, [-0.5] * length, "stop" if stopped else "length"))
        return out

    @torch.no_grad()
    def _score(self, ids: list[int]) -> RequestOutput:
        logprobs = torch.log_softmax(self.model(torch.tensor([ids])).logits[0].float(), dim=-1)  # [L, V]
        return RequestOutput(prompt_logprobs=[None] + [{t: Logprob(float(logprobs[j - 1, t]))}
                                                       for j, t in enumerate(ids) if j > 0])

    def collective_rpc(self, method, args=(), timeout=None):
        self.calls.append(method)
        return [getattr(self.worker, method)(*args)]

    def sleep(self, level):
        self.calls.append(f"sleep{level}")

    def wake_up(self):
        self.calls.append("wake_up")

    def reset_prefix_cache(self):
        self.calls.append("reset_prefix_cache")

    def shutdown(self):
        self.calls.append("shutdown")


@pytest.fixture
def fake_engine(tiny_model_dir, monkeypatch):
    from rlvr.model.load import load_model, load_tokenizer
    from rlvr.rollout.vllm.engine import build_vllm_engine

    module = fake_vllm()
    module.LLM = FakeLLM
    monkeypatch.setitem(sys.modules, "vllm", module)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")  # restored after the test
    config = vllm_config(f"model.name_or_path={tiny_model_dir}")
    policy = load_model(config.model, trainable=True)
    engine = build_vllm_engine(vllm_settings(config), policy, load_tokenizer(config.model))
    yield engine, policy, config
    engine.close()


def test_engine_glue_with_a_stand_in_llm(fake_engine):
    from rlvr.algorithms.correction import EngineMismatch
    from rlvr.rollout.agreement import check_after_sync
    from rlvr.rollout.hf import HFRolloutEngine

    engine, policy, config = fake_engine
    llm = engine.llm
    assert os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"  # in-process core: tensors passed by reference
    assert llm.kwargs["logprobs_mode"] == "processed_logprobs" and llm.kwargs["enable_sleep_mode"]
    assert llm.calls == ["rlvr_load_weights", "reset_prefix_cache"]  # the policy is pushed once at build
    prompts = PROMPTS
    batch = engine.generate(prompts, 2, SamplingParams(temperature=1.0, top_p=0.9, max_new_tokens=5, seed=11))
    assert llm.calls[-1] == "sleep1" and engine.asleep  # the update comes next
    hf_ids, hf_mask = HFRolloutEngine(policy, engine.tokenizer).encode(prompts)
    assert torch.equal(batch.prompt_ids, hf_ids) and torch.equal(batch.prompt_mask, hf_mask)
    assert [p.seed for p in llm.sampling] == request_seeds(11, 2)
    assert {(p.n, p.top_p, p.max_tokens, p.logprobs, p.detokenize) for p in llm.sampling} == {(2, 0.9, 5, 0, False)}
    assert llm.sampling[0].stop_token_ids == engine.stop_ids
    assert batch.completion_ids.shape[0] == 4 and batch.sampling_logprobs.shape == batch.completion_ids.shape

    with torch.no_grad():  # the update changes the policy; without a sync the probe must catch the stale engine
        for p in policy.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    with pytest.raises(EngineMismatch):
        check_after_sync(engine, policy, batch, 1.0, rows=2, threshold=config.rollout.correction.max_mismatch_kl)
    engine.sync_weights(policy, version=1)
    assert llm.calls[-3:] == ["wake_up", "rlvr_load_weights", "reset_prefix_cache"] and engine.version == 1
    agreement = check_after_sync(engine, policy, batch, 1.0, rows=2, threshold=1e-6)
    assert agreement is not None and agreement.rows == 2 and abs(agreement.mismatch_kl) < 1e-6
    with pytest.raises(VLLMError, match="without temperature"):  # this stand-in scores untempered only
        engine.teacher_forced_logprobs(batch, 0.7)
    engine.close()
    assert llm.calls[-1] == "shutdown" and engine.llm is None


# --- the real engine: only where vLLM and a CUDA GPU exist ---

def _real_engine_or_skip():
    pytest.importorskip("vllm", reason="vLLM is not installed (pip install 'rlvr[vllm]'); real-engine tests skipped")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU: the real vLLM engine tests need one")


@pytest.fixture(scope="module")
def vllm_model_dir(tmp_path_factory):
    """The tiny test Llama widened to head_dim 64, a size vLLM's GPU attention kernels accept."""
    _real_engine_or_skip()
    from transformers import LlamaConfig, LlamaForCausalLM

    from conftest import build_tiny_model  # rootdir-relative, as reward_service_helpers is imported

    target = build_tiny_model(tmp_path_factory.mktemp("vllm-tiny"))
    config = LlamaConfig.from_pretrained(target)
    config.update({"hidden_size": 128, "intermediate_size": 256, "num_attention_heads": 2, "num_key_value_heads": 1})
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(target)
    return target


@pytest.fixture(scope="module")
def real_engine(vllm_model_dir):
    from rlvr.model.load import load_model, load_tokenizer
    from rlvr.rollout.vllm.engine import build_vllm_engine

    config = vllm_config(f"model.name_or_path={vllm_model_dir}", "model.device=cuda",
                         "rollout.engine.vllm_gpu_memory_utilization=0.2")
    policy = load_model(config.model, trainable=True)
    engine = build_vllm_engine(vllm_settings(config), policy, load_tokenizer(config.model))
    yield engine, policy, config
    engine.close()


def test_real_engine_generates_repeats_and_syncs(real_engine):
    from rlvr.algorithms.correction import EngineMismatch
    from rlvr.rollout.agreement import check_after_sync

    engine, policy, config = real_engine
    sampling = SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=6, seed=3)
    batch = engine.generate(PROMPTS, 3, sampling)
    assert batch.completion_ids.shape[0] == 6 and batch.completion_ids.shape[1] <= 6
    assert batch.sampling_logprobs.shape == batch.completion_mask.shape and len(batch.completions) == 6
    assert bool((batch.sampling_logprobs <= 0).all()) and bool((batch.completion_mask.sum(1) >= 1).all())
    again = engine.generate(PROMPTS, 3, sampling)
    assert torch.equal(batch.completion_ids, again.completion_ids)  # same seed, same weights: same draws
    threshold = config.rollout.correction.max_mismatch_kl
    assert check_after_sync(engine, policy, batch, 1.0, rows=3, threshold=threshold) is not None
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    with pytest.raises(EngineMismatch):  # a skipped sync is caught by the probe
        check_after_sync(engine, policy, batch, 1.0, rows=3, threshold=threshold)
    engine.sync_weights(policy, version=1)
    assert check_after_sync(engine, policy, batch, 1.0, rows=3, threshold=threshold) is not None
