"""The static-KV-cache decode step (rlvr/rollout/graph_step.py) run eagerly on the CPU: the very
step a GPU records into CUDA graphs. It must compute what the eager fused step computes, sample the same tokens
for the same seed (through bucket drops and sparse finish checks), and read the policy's CURRENT weights on
every generate call although its buffers and copies are made once."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from rlvr.rollout.base import SamplingParams
from rlvr.rollout.decode_steps import FusedStepper
from rlvr.rollout.graph_step import StaticDecoders, bucket_for, buckets, row_capacity, static_supported
from rlvr.rollout.hf import HFRolloutEngine
from test_decode_steps import assert_steps_agree  # same models
from test_decode_steps import left_padded_prompts as prompts
from test_decode_steps import tiny as tiny_model

STOPS = [1, 2, 3, 4, 5, 6, 7, 8]  # 8 of 64 tokens stop a row: most rows finish within 24 tokens, so rows drop


def tiny(bias: bool = False):
    return tiny_model("llama-bias" if bias else "llama")


def engine(model, static: bool, sync_every: int | None = None) -> HFRolloutEngine:
    e = HFRolloutEngine.__new__(HFRolloutEngine)
    e.model, e.tokenizer, e.stop_ids = model, SimpleNamespace(pad_token_id=0), STOPS
    e.static_decode, e.sync_every, e.cuda_graphs = static, sync_every, False
    return e


def test_buckets_halve_down_to_eight_rows() -> None:
    assert buckets(64) == [64, 32, 16, 8]
    assert buckets(48) == [48, 32, 16, 8]  # the batch itself, then powers of two below it
    assert buckets(8) == [8] and buckets(5) == [5]
    assert bucket_for(33, buckets(64)) == 64 and bucket_for(32, buckets(64)) == 32 and bucket_for(1, [16, 8]) == 8
    assert [row_capacity(n) for n in (1, 8, 9, 16, 17, 96)] == [8, 8, 16, 16, 32, 128]


def test_one_decoder_serves_smaller_batches_on_its_first_rows() -> None:
    """Dynamic sampling's top-ups come in any row count: a batch of 5 rows after one of 16 reuses the 16-row
    decoder (no new buffers, no new graphs on a GPU), on its first 5 rows, and samples the eager path's tokens;
    a batch of 24 rows builds a 32-row decoder in its place."""
    model = tiny()
    ids, mask = prompts()
    sampling = SamplingParams(1.0, 1.0, 16, seed=5)
    static = engine(model, static=True)
    static.sample(ids, mask, 8, sampling)
    (first,) = static.decoders.by_shape.values()
    small = static.sample(ids[1:], mask[1:], 5, sampling)  # the left-padded prompt alone: rows 0-4 of 16
    assert list(static.decoders.by_shape.values()) == [first] and first.rows == 16
    eager_ids, eager_lp = engine(model, static=False).sample(ids[1:], mask[1:], 5, sampling)
    assert torch.equal(small[0], eager_ids)
    torch.testing.assert_close(small[1], eager_lp, rtol=0, atol=1e-5)
    static.sample(ids, mask, 12, sampling)
    (grown,) = static.decoders.by_shape.values()
    assert grown is not first and grown.rows == 32


@pytest.mark.parametrize("bias", [False, True])
def test_static_step_logits_equal_the_fused_step(bias: bool) -> None:
    """Same tokens fed to both for 10 steps, 8 rows per prompt; after 5 steps 7 rows leave (16 -> 9 live rows:
    the static decoder keeps running the 16-row bucket, with its 7 spare rows ignored). fp32, 1e-5."""
    model = tiny(bias)
    ids, mask = prompts()
    with torch.no_grad():
        fused = FusedStepper(model, ids, mask, 8, 10)
        static = StaticDecoders(graphs=False).stepper(model, torch.float32, ids, mask, 8, 10)
        torch.testing.assert_close(static.first_logits, fused.first_logits, rtol=0, atol=1e-5)
        assert_steps_agree(fused, static, steps=10, drop_at=5, keep=torch.tensor([0, 2, 3, 5, 8, 9, 11, 14, 15]))


@pytest.mark.parametrize("sampling", [SamplingParams(1.0, 1.0, 24, seed=11), SamplingParams(0.7, 0.9, 24, seed=12),
                                      SamplingParams(0.0, 1.0, 24, seed=13)], ids=["T1", "T0.7-top0.9", "greedy"])
def test_static_engine_samples_the_eager_engines_tokens(sampling: SamplingParams) -> None:
    """The whole loop: eager fused step checking after every token, against the static step checking every 8
    tokens (the GPU cadence) with rows leaving at the bucket of 8. Same ids, same width, log-probs to 1e-5."""
    model = tiny()
    ids, mask = prompts()
    eager_ids, eager_lp = engine(model, static=False).sample(ids, mask, 8, sampling)
    static_engine = engine(model, static=True, sync_every=8)
    static_ids, static_lp = static_engine.sample(ids, mask, 8, sampling)
    assert torch.equal(static_ids, eager_ids)
    torch.testing.assert_close(static_lp, eager_lp, rtol=0, atol=1e-5)
    (decoder,) = static_engine.decoders.by_shape.values()
    if sampling.temperature > 0:  # sampled rows finish at different times: the batch must have shrunk
        assert decoder.live <= 8, "rows never left: the bucket drop went untested"


def test_sparse_finish_checks_cut_the_trailing_pad_columns() -> None:
    """Checking every 8 tokens decodes up to 7 steps past the last finish; those all-pad columns are cut, so the
    batch is exactly as wide as when every token is checked (the longest completion with its stop token)."""
    model = tiny()
    ids, mask = prompts()
    sampling = SamplingParams(1.0, 1.0, 40, seed=21)
    every, sparse = (engine(model, static=False, sync_every=s).sample(ids, mask, 8, sampling) for s in (1, 8))
    assert every[0].shape[1] < 40, "every row hit the cap: nothing to cut"
    assert torch.equal(sparse[0], every[0]) and torch.equal(sparse[1], every[1])


def test_second_call_reads_the_updated_weights() -> None:
    """The decoder (buffers, weight copies) is reused across calls; a weight update in place between them must
    show in the next call's logits (a missing refresh() would replay the first call's weights)."""
    model = tiny()
    ids, mask = prompts()
    decoders = StaticDecoders(graphs=False)
    with torch.no_grad():
        first = decoders.stepper(model, torch.float32, ids, mask, 2, 4).step(torch.full((4,), 20))
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))  # in place, as AdamW updates
        second = decoders.stepper(model, torch.float32, ids, mask, 2, 4).step(torch.full((4,), 20))
        expected = FusedStepper(model, ids, mask, 2, 4).step(torch.full((4,), 20))
    assert len(decoders.by_shape) == 1  # the same decoder served both calls
    assert (second - first).abs().max() > 1e-2  # the weights moved enough to show
    torch.testing.assert_close(second, expected, rtol=0, atol=1e-5)


def assert_graphs_sample_the_plain_tokens(dtype: torch.dtype, atol: float, **graph_engine) -> None:
    """On CUDA: an engine replaying graphs (with the attributes in graph_engine set) against the static step run
    eagerly, over two calls (the second replays the graphs recorded in the first, through a drop to a smaller
    bucket): the same tokens, log-probs within atol. Also used by tests/test_compiled_decode.py."""
    model = tiny().to("cuda")
    if dtype != torch.float32:
        model.rlvr_compute_dtype = dtype  # what load_model records for a mixed-precision policy
    ids, mask = (t.to("cuda") for t in prompts())
    sampling = SamplingParams(1.0, 1.0, 24, seed=11)
    eager, graphs = engine(model, static=True), engine(model, static=True)
    eager.decode_attention = "sdpa"  # the reference is always SDPA (fp32's default is matmul)
    graphs.cuda_graphs = True
    for name, value in graph_engine.items():
        setattr(graphs, name, value)
    for _ in range(2):
        a, b = eager.sample(ids, mask, 8, sampling), graphs.sample(ids, mask, 8, sampling)
        assert torch.equal(a[0], b[0])
        torch.testing.assert_close(a[1], b[1], rtol=0, atol=atol)
    (decoder,) = graphs.decoders.by_shape.values()
    assert decoder.use_graphs and set(decoder.graphs) == {16, 8}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (CI has none): the recorded graphs themselves")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_replayed_graphs_compute_what_the_eager_static_step_computes(dtype: torch.dtype) -> None:
    """The graphs (recorded per bucket, replayed) against the same step run eagerly: the same kernels on the same
    inputs, so the same tokens."""
    assert_graphs_sample_the_plain_tokens(dtype, 1e-5 if dtype == torch.float32 else 1e-2, decode_attention="sdpa")


def lora_model():
    """The tiny Llama with LoRA on q/v/gate/down, its B matrices made non-zero (peft starts them at 0, where a
    dropped delta would go unseen)."""
    peft = pytest.importorskip("peft")
    model = tiny()
    peft.get_peft_model(model, peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "gate_proj",
                                                                                   "down_proj"]))
    torch.manual_seed(1)
    for name, p in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.3)
    return model.eval()  # peft injected its layers into `model` in place: the loop keeps using the plain model


def test_a_lora_policy_decodes_through_the_static_step_with_merged_weights() -> None:
    """A LoRA policy (rlvr/model/lora.py) took transformers' eager forward; the static step merges W + B A s per call.
    Same tokens as transformers' forward with the adapters, and an adapter update shows in the next call."""
    model = lora_model()
    assert static_supported(model)
    ids, mask = prompts()
    sampling = SamplingParams(1.0, 1.0, 16, seed=9)
    static = engine(model, static=True)
    for _ in range(2):
        got_ids, got_lp = static.sample(ids, mask, 4, sampling)
        want_ids, want_lp = engine(model, static=False).sample(ids, mask, 4, sampling)  # transformers + peft layers
        assert torch.equal(got_ids, want_ids)
        torch.testing.assert_close(got_lp, want_lp, rtol=0, atol=1e-5)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "lora_B" in name:
                    p.add_(0.5)  # the adapters train between calls; the base weights stay as they are
    (decoder,) = static.decoders.by_shape.values()  # one decoder served both calls: the second re-merged
    assert decoder.weights.model is model


def test_dora_layers_keep_transformers_forward() -> None:
    peft = pytest.importorskip("peft")
    model = tiny()
    peft.get_peft_model(model, peft.LoraConfig(r=2, target_modules=["q_proj"], use_dora=True))
    assert not static_supported(model)  # DoRA rescales the merged weight: not W + B A s
