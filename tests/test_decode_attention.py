"""The static decode step's two attentions (rlvr/rollout/graph_step.py ATTENTION): PyTorch's fused
SDPA and the batched-product form written for fp32 on a GPU. Both must compute the same attention; the engine must
sample the eager step's tokens with either."""
from __future__ import annotations

import math

import pytest
import torch

from rlvr.config.run import load_config
from rlvr.grpo.backends import _hf
from rlvr.model.load import load_model, load_tokenizer
from rlvr.rollout.base import SamplingParams
from rlvr.rollout.graph_step import ATTENTION, default_attention, matmul_attention, sdpa_attention
from test_decode_steps import left_padded_prompts as prompts
from test_graph_step import assert_graphs_sample_the_plain_tokens, engine, tiny


@pytest.mark.parametrize("attend", [matmul_attention, sdpa_attention], ids=["matmul", "sdpa"])
def test_attention_by_hand(attend) -> None:
    """One row, one KV head, one query head, d = 1, two cached columns; scale 1.
    q = 1, keys = [0, ln 3] -> scores [0, ln 3] -> softmax [1/4, 3/4]; values [4, 8] -> 4/4 + 8 * 3/4 = 7.
    With the second column masked (-inf) only the first is attended: 4."""
    q = torch.ones(1, 1, 1, 1)
    keys = torch.tensor([0.0, math.log(3.0)]).view(1, 1, 2, 1)
    values = torch.tensor([4.0, 8.0]).view(1, 1, 2, 1)
    open_mask, masked = torch.zeros(1, 1, 1, 2), torch.tensor([0.0, float("-inf")]).view(1, 1, 1, 2)
    assert attend(q, keys, values, open_mask, 1.0).item() == pytest.approx(7.0, abs=1e-6)
    assert attend(q, keys, values, masked, 1.0).item() == pytest.approx(4.0, abs=1e-6)
    # the scale multiplies the scores: scale 2 -> scores [0, 2 ln 3] -> [1/10, 9/10] -> 0.4 + 7.2 = 7.6
    assert attend(q, keys, values, open_mask, 2.0).item() == pytest.approx(7.6, abs=1e-5)


@pytest.mark.parametrize("dtype,atol", [(torch.float32, 1e-6), (torch.bfloat16, 2e-2)])
def test_matmul_attention_equals_sdpa_at_decode_shapes(dtype: torch.dtype, atol: float) -> None:
    """The decode step's shapes: 16 rows, 3 KV heads of 3 query heads each, d 64, 128 columns of which each row has
    written a different number (the rest -inf, as the static cache masks them)."""
    torch.manual_seed(0)
    q = torch.randn(16, 3, 3, 64, dtype=dtype)
    keys, values = (torch.randn(16, 3, 128, 64, dtype=dtype) for _ in range(2))
    written = torch.randint(1, 129, (16,))
    mask = torch.zeros(16, 1, 1, 128).masked_fill(torch.arange(128) >= written[:, None, None, None], float("-inf"))
    mask = mask.to(dtype)
    got, want = matmul_attention(q, keys, values, mask, 0.125), sdpa_attention(q, keys, values, mask, 0.125)
    assert got.dtype == dtype and got.shape == (16, 3, 3, 64)
    torch.testing.assert_close(got.float(), want.float(), rtol=0, atol=atol)


def test_a_static_engine_with_either_attention_samples_the_eager_tokens() -> None:
    """The whole sampling loop (rows leaving at buckets, finish checks every 8 tokens) through the static step with
    each attention set by name, against the eager fused step (SDPA): same ids, log-probs to 1e-5. fp32's default is
    matmul, so the sdpa engine shows the setting arrived (an engine that dropped it would attend with matmul)."""
    model = tiny()
    ids, mask = prompts()
    sampling = SamplingParams(1.0, 1.0, 24, seed=11)
    eager_ids, eager_lp = engine(model, static=False).sample(ids, mask, 8, sampling)
    for name, function in (("sdpa", sdpa_attention), ("matmul", matmul_attention)):
        static = engine(model, static=True, sync_every=8)
        static.decode_attention = name
        got_ids, got_lp = static.sample(ids, mask, 8, sampling)
        assert torch.equal(got_ids, eager_ids)
        torch.testing.assert_close(got_lp, eager_lp, rtol=0, atol=1e-5)
        (decoder,) = static.decoders.by_shape.values()
        assert decoder.attend is function


def test_fp16_scores_are_taken_in_fp32() -> None:
    """fp16's largest value is 65504: q . k = 64 x 32 x 32 = 65536 overflows an fp16 product (inf, then NaN in the
    softmax). Taken in fp32, the one open column's value comes back: 3."""
    q = torch.full((1, 1, 1, 64), 32.0, dtype=torch.float16)
    keys = torch.full((1, 1, 2, 64), 32.0, dtype=torch.float16)
    values = torch.tensor([3.0, 5.0], dtype=torch.float16).view(1, 1, 2, 1)
    mask = torch.tensor([0.0, float("-inf")], dtype=torch.float16).view(1, 1, 1, 2)
    out = matmul_attention(q, keys, values, mask, 1.0)
    assert out.dtype == torch.float16 and out.item() == 3.0


def test_the_setting_reaches_the_training_engine(tiny_model_dir):
    """rollout.decode_attention=matmul gives the run's in-process engine that attention; auto leaves it to the
    decoder (default_attention by compute dtype)."""
    model_config = load_config(None, [f"model.name_or_path={tiny_model_dir}"]).model
    policy, tokenizer = load_model(model_config), load_tokenizer(model_config)
    assert _hf(load_config(None, ["rollout.decode_attention=matmul"]), policy, tokenizer).decode_attention == "matmul"
    assert _hf(load_config(None, ["rollout.decode_attention=sdpa"]), policy, tokenizer).decode_attention == "sdpa"
    assert _hf(load_config(None, []), policy, tokenizer).decode_attention is None


def test_auto_takes_matmul_for_fp32_and_sdpa_for_half_precision() -> None:
    assert default_attention(torch.float32) == "matmul"
    assert default_attention(torch.bfloat16) == default_attention(torch.float16) == "sdpa"
    assert set(ATTENTION) == {"sdpa", "matmul"}


def test_an_engine_left_to_auto_decodes_fp32_with_matmul_and_bf16_with_sdpa() -> None:
    """The rule reaches the decoder the engine builds (a decoder built without it would attend with SDPA)."""
    model = tiny()
    ids, mask = prompts()
    sampling = SamplingParams(1.0, 1.0, 4, seed=3)
    fp32 = engine(model, static=True)
    fp32.sample(ids, mask, 2, sampling)
    assert next(iter(fp32.decoders.by_shape.values())).attend is matmul_attention
    model.rlvr_compute_dtype = torch.bfloat16  # a mixed-precision policy (what load_model records)
    mixed = engine(model, static=True)
    mixed.sample(ids, mask, 2, sampling)
    assert next(iter(mixed.decoders.by_shape.values())).attend is sdpa_attention


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (CI has none): the recorded graphs themselves")
def test_replayed_graphs_with_matmul_attention_sample_the_sdpa_tokens() -> None:
    """Graphs with matmul attention against the static step run eagerly with SDPA (the helper pins it)."""
    assert_graphs_sample_the_plain_tokens(torch.float32, 1e-5, decode_attention="matmul")
