"""The fused Llama-family decode step (rlvr/rollout/decode_steps.py) computes what transformers'
forward computes: the same next-token logits step by step, hence the same tokens under the same seed."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM, Qwen2Config, Qwen2ForCausalLM

from rlvr.rollout.base import SamplingParams
from rlvr.rollout.decode_steps import FusedStepper, HFStepper, Projection, fused_supported
from rlvr.rollout.hf import HFRolloutEngine

torch.set_num_threads(1)
SIZES = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=128)  # 2 query heads per KV head (grouped-query)


def tiny(kind: str):
    torch.manual_seed(0)
    if kind == "llama":
        model = LlamaForCausalLM(LlamaConfig(**SIZES))
    elif kind == "llama-bias":  # attention_bias / mlp_bias: the fused products must carry the biases
        model = LlamaForCausalLM(LlamaConfig(**SIZES, attention_bias=True, mlp_bias=True))
    elif kind == "qwen2":  # q/k/v biases, no o_proj bias
        model = Qwen2ForCausalLM(Qwen2Config(**SIZES, use_sliding_window=False))
    else:
        raise ValueError(kind)
    for module in model.modules():  # transformers starts biases at 0, where a dropped bias would go unseen
        if isinstance(module, torch.nn.Linear) and module.bias is not None:
            torch.nn.init.normal_(module.bias, std=0.5)
    return model.float().eval()


def left_padded_prompts():
    """Prompts of 6 and 3 tokens, the second left-padded by 3 (mask 0)."""
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(4, 64, (2, 6), generator=g)
    mask = torch.tensor([[1] * 6, [0, 0, 0, 1, 1, 1]])
    return ids.masked_fill(mask == 0, 0), mask


def assert_steps_agree(reference, candidate, steps: int, drop_at: int, keep: torch.Tensor) -> None:
    """Feed two steppers the same random tokens (each row's, [4, 64)) for `steps` steps; at step `drop_at` both
    keep only the rows `keep`. Every step's logits must agree to 1e-5 (fp32 sums in another order)."""
    g, rows = torch.Generator().manual_seed(5), reference.first_logits.shape[0]
    for step in range(steps):
        if step == drop_at:
            reference.keep(keep)
            candidate.keep(keep)
            rows = keep.numel()
        tokens = torch.randint(4, 64, (rows,), generator=g)
        a, b = reference.step(tokens), candidate.step(tokens)
        assert a.shape == b.shape == (rows, 64)
        torch.testing.assert_close(b, a, rtol=0, atol=1e-5)


@pytest.mark.parametrize("kind", ["llama", "llama-bias", "qwen2"])
def test_fused_logits_equal_transformers_step_by_step(kind: str) -> None:
    """Both steppers are fed the same tokens for 8 steps (3 rows per prompt); after a drop of row 1 they go on
    with the rest. Logits agree to 1e-5 (fp32 sums in another order)."""
    model = tiny(kind)
    ids, mask = left_padded_prompts()
    with torch.no_grad():
        plain, fused = HFStepper(model, ids, mask, 3, 8), FusedStepper(model, ids, mask, 3, 8)
        torch.testing.assert_close(fused.first_logits, plain.first_logits, rtol=0, atol=1e-5)
        assert_steps_agree(plain, fused, steps=8, drop_at=4, keep=torch.tensor([0, 2, 3, 4, 5]))


@pytest.mark.parametrize("sampling", [SamplingParams(1.0, 1.0, 12, seed=11), SamplingParams(0.7, 0.9, 12, seed=12),
                                      SamplingParams(0.0, 1.0, 12, seed=13)], ids=["T1", "T0.7-top0.9", "greedy"])
def test_fused_engine_samples_what_the_plain_engine_samples(sampling: SamplingParams) -> None:
    model = tiny("llama")
    ids, mask = left_padded_prompts()
    runs = []
    for fused in (False, True):
        engine = HFRolloutEngine.__new__(HFRolloutEngine)
        engine.model, engine.tokenizer, engine.stop_ids = model, SimpleNamespace(pad_token_id=0), [1]
        engine.fused = fused
        runs.append(engine.sample(ids, mask, 4, sampling))
    (plain_ids, plain_lp), (fused_ids, fused_lp) = runs
    assert torch.equal(plain_ids, fused_ids)
    torch.testing.assert_close(fused_lp, plain_lp, rtol=0, atol=1e-5)


def test_fused_path_only_where_the_layers_are_plain() -> None:
    assert fused_supported(tiny("llama")) and fused_supported(tiny("qwen2"))
    torch.manual_seed(0)
    windowed = MistralForCausalLM(MistralConfig(**SIZES, sliding_window=16))
    assert not fused_supported(windowed)  # windowed attention stays on transformers' path
    peft = pytest.importorskip("peft")
    lora = peft.get_peft_model(tiny("llama"), peft.LoraConfig(r=2, target_modules=["q_proj"])).get_base_model()
    assert not fused_supported(lora)  # q_proj is a LoRA layer: its adapter would be skipped by a fused copy


@pytest.mark.parametrize("rows", [16, 5, 1])
@pytest.mark.parametrize("with_bias", [False, True])
def test_prepacked_projection_equals_linear(rows: int, with_bias: bool) -> None:
    g = torch.Generator().manual_seed(0)
    weight, x = torch.randn(96, 40, generator=g), torch.randn(rows, 40, generator=g)
    bias = torch.randn(96, generator=g) if with_bias else None
    projection = Projection(weight, bias)
    assert projection.packed is not None  # fp32 on this CPU: the prepacked path is the one under test
    torch.testing.assert_close(projection(x), torch.nn.functional.linear(x, weight, bias), rtol=1e-5, atol=1e-5)
    assert Projection(weight.double(), None).packed is None  # other dtypes keep F.linear
