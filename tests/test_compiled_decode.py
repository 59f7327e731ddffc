"""rollout.compile_decode (rlvr/rollout/graph_step.py): the static step's decoder layer under
torch.compile. On the CPU the backend is aot_eager (dynamo's trace plus AOT functionalization of the in-place
cache writes, without a C++ build), which is what would break: a compiled layer that samples other tokens, or one
that recompiles for every shape it meets (past dynamo's limit of 8 it silently runs uncompiled). A GPU test runs
inductor itself inside recorded graphs (ran on an H100, fp32 and bf16, 2026-11-27)."""
from __future__ import annotations

import shutil

import pytest
import torch
from torch._dynamo import lookup_backend
from torch._dynamo.utils import counters

from rlvr.config.run import load_config
from rlvr.grpo.backends import _hf
from rlvr.model.load import load_model, load_tokenizer
from rlvr.rollout.base import SamplingParams
from rlvr.rollout.graph_step import StaticDecoders
from test_decode_steps import left_padded_prompts as prompts
from test_graph_step import assert_graphs_sample_the_plain_tokens, engine, tiny


class CountingBackend:
    """aot_eager, counting the graphs dynamo hands it (one per compile)."""

    def __init__(self):
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return lookup_backend("aot_eager")(gm, example_inputs)


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()  # compiled code is cached per code object: each test counts its own compiles
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize("bias", [False, True], ids=["llama", "with-biases"])
def test_the_layer_compiles_once_per_bucket_not_once_per_layer(bias: bool) -> None:
    """20 steps at one bucket of a 2-layer model: one compile, shared by both layers (their weights are arguments,
    so dynamo guards on shapes and dtypes, not on which layer), and one graph (a graph break in the layer, which
    would leave eager kernels between the fused ones, is an error under fullgraph=True)."""
    model, backend = tiny(bias), CountingBackend()
    assert len(model.model.layers) >= 2
    ids, mask = prompts()
    with torch.no_grad():
        plain = StaticDecoders(graphs=False).stepper(model, torch.float32, ids, mask, 4, 24)
        compiled = StaticDecoders(graphs=False, compile_backend=backend).stepper(model, torch.float32, ids, mask, 4, 24)
        tokens = torch.arange(8) + 10
        for _ in range(20):
            expected, got = plain.step(tokens), compiled.step(tokens)
            torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)
    assert backend.graphs == 1
    assert compiled.decoder.column.item() == plain.decoder.column.item() == ids.shape[1] + 20  # advanced each step
    # the compiled layer wrote the 20 steps' keys into the cache (in place, an input mutation), as the plain one did
    written = compiled.decoder.keys[1][:, :, ids.shape[1]:ids.shape[1] + 20]
    assert bool((written.abs().sum(dim=-1) > 0).all()), "the compiled layer left cache columns unwritten"
    torch.testing.assert_close(compiled.decoder.keys[1], plain.decoder.keys[1], rtol=0, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16-mixed"])
def test_a_compiled_engine_samples_the_plain_engines_tokens(dtype: torch.dtype) -> None:
    """Sampled generation with rows finishing (so the decoder drops to smaller buckets, each compiled once):
    the same tokens as the uncompiled static step, log-probs within float rounding."""
    model, backend = tiny(), CountingBackend()
    if dtype != torch.float32:
        model.rlvr_compute_dtype = dtype  # what load_model records for a mixed-precision policy
    ids, mask = prompts()
    sampling = SamplingParams(1.0, 1.0, 24, seed=11)
    plain = engine(model, static=True, sync_every=8)
    compiled = engine(model, static=True, sync_every=8)
    compiled.compile_backend = backend
    plain_ids, plain_lp = plain.sample(ids, mask, 8, sampling)
    compiled_ids, compiled_lp = compiled.sample(ids, mask, 8, sampling)
    assert torch.equal(compiled_ids, plain_ids)
    torch.testing.assert_close(compiled_lp, plain_lp, rtol=0, atol=1e-5 if dtype == torch.float32 else 1e-2)
    (decoder,) = compiled.decoders.by_shape.values()
    assert decoder.live <= 8, "rows never left: the smaller buckets went untested"
    assert 2 <= backend.graphs <= len(decoder.sizes)  # one compile per bucket that ran


def test_new_bucket_and_capacity_shapes_recompile_a_bounded_number_of_times() -> None:
    """A training run meets several KV capacities (prompt length + max_new, rounded to 64) and row buckets. With
    dynamic=False each pair would compile anew (here 3 capacities x 2 buckets = 6, and a real run passes dynamo's
    limit of 8, after which the layer silently runs uncompiled); automatic dynamic shapes stop at 3."""
    model, backend = tiny(), CountingBackend()
    ids, mask = prompts()
    compiled = engine(model, static=True, sync_every=8)
    compiled.compile_backend = backend
    capacities = set()
    for max_new in (24, 90, 150):
        compiled.sample(ids, mask, 8, SamplingParams(0.0, 1.0, max_new, seed=3))  # greedy: all rows, one bucket
        compiled.sample(ids[:1], mask[:1], 4, SamplingParams(0.0, 1.0, max_new, seed=3))  # 4 rows: the 8 bucket
        capacities |= set(c for c, _ in compiled.decoders.by_shape)
    assert len(capacities) == 3
    assert backend.graphs <= 3


@pytest.mark.skipif(shutil.which("g++") is None, reason="inductor on a CPU builds C++ (no g++ here)")
@pytest.mark.skipif(tuple(int(p) for p in torch.__version__.split(".")[:2]) < (2, 13),
                    reason="bit for bit with torch 2.13 (CI's); with torch 2.11 (the H100 machine's CPU, 2026-11-27) "
                           "the compiled layer's logits were not equal to the plain step's")
@pytest.mark.parametrize("attention", ["sdpa", "matmul"])
def test_inductor_keeps_eagers_bf16_roundings(attention: str) -> None:
    """The real backend on the CPU (~25 s of C++ builds): a bf16-mixed model's compiled layer gives the plain static
    step's logits exactly, step after step. Fusing the SiLU gate, the rotary products and the norm's cast in fp32
    with one rounding at the end (inductor's default) put them 0.002 apart in log-prob on this model; the trainer's
    autocast forward rounds like the plain step, so that gap would be a sampler-trainer mismatch."""
    model = tiny()
    model.rlvr_compute_dtype = torch.bfloat16
    ids, mask = prompts()
    tokens = torch.arange(8) + 10
    with torch.no_grad():
        plain = StaticDecoders(graphs=False, attention=attention).stepper(model, torch.bfloat16, ids, mask, 4, 24)
        compiled = StaticDecoders(graphs=False, compile_backend="inductor", attention=attention).stepper(
            model, torch.bfloat16, ids, mask, 4, 24)
        for _ in range(6):
            expected, got = plain.step(tokens), compiled.step(tokens)
            assert got.dtype == torch.bfloat16 and torch.equal(got, expected)
    assert counters["stats"]["unique_graphs"] >= 1  # inductor compiled the layer (not a silent eager fallback)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (CI has none): inductor's kernels in graphs")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_inductor_layers_replayed_from_graphs_sample_the_plain_tokens(dtype: torch.dtype) -> None:
    assert_graphs_sample_the_plain_tokens(dtype, 1e-4 if dtype == torch.float32 else 2e-2, compile_backend="inductor")


def test_the_setting_reaches_the_training_engine(tiny_model_dir):
    """rollout.compile_decode=true gives the run's in-process engine inductor (false: none), and cuda_graphs too."""
    model_config = load_config(None, [f"model.name_or_path={tiny_model_dir}"]).model
    policy, tokenizer = load_model(model_config), load_tokenizer(model_config)
    on = _hf(load_config(None, ["rollout.compile_decode=true", "rollout.cuda_graphs=false"]), policy, tokenizer)
    off = _hf(load_config(None, []), policy, tokenizer)
    assert (on.compile_backend, on.cuda_graphs) == ("inductor", False)
    assert (off.compile_backend, off.cuda_graphs) == (None, True)
