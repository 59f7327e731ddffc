"""Mixed bf16 end to end on the tiny model directory, on the CPU: the sampler's log-probs agree
with the trainer's within a derived bound, fp32 agreement is much tighter, and `rlvr train model.dtype=bfloat16`
runs and saves fp32 weights."""
from __future__ import annotations

import json
import math

import pytest
import torch
from safetensors.torch import load_file

from rlvr.cli.main import main
from rlvr.config.run import ModelConfig
from rlvr.model.load import load_model, load_tokenizer
from rlvr.model.logprobs import batched_logprobs, completion_hidden_states
from rlvr.rollout.base import SamplingParams
from rlvr.rollout.hf import HFRolloutEngine
from rlvr.types import Prompt
from test_train_tiny import tiny_overrides

HIDDEN = 32  # the tiny model's hidden size: the length of each logit's sum
UNIT_ROUNDOFF = {"bfloat16": 2.0 ** -8, "float32": 2.0 ** -24}  # 8 and 24 significand bits
FP32_UNIT_ROUNDOFF = 2.0 ** -24


def agreement_bound(dtype: str, scale: torch.Tensor) -> torch.Tensor:
    """Per token, |log p_sampler - log p_trainer| <= (12 u + 4 H u32) S, derived here:
    - log p_t = z_t - logsumexp(z) and logsumexp moves by at most max_j |dz_j|: |d log p_t| <= 2 max_j |dz_j|;
    - each side computes z_j = sum_i h_i w_ji from h and w rounded to the compute dtype (relative error <= u each, so
      <= 2u + u^2 per term), accumulates in fp32 (recursive summation of H terms: <= H u32 sum |terms|, Higham 2002,
      eq. 4.4) and rounds z_j to the compute dtype (<= u |z_j|): within (3u + H u32) S of the exact product, with
      S = max_j sum_i |h_i w_ji| (the head's accumulated magnitude, from the fp32 hidden states);
    - two sides: |dz_j| <= 2 (3u + H u32) S, so |d log p| <= 4 (3u + H u32) S = (12 u + 4 H u32) S.
    This counts the LM head's roundings only: upstream layers round the same fp32 values at the same points on both
    sides, so they differ only where an accumulation-order difference flips a rounding (measured: the worst token at
    1/150 of its bound in bf16, 1/30 in fp32). bf16: 0.047 S; fp32: 8.3e-6 S."""
    return (12 * UNIT_ROUNDOFF[dtype] + 4 * HIDDEN * FP32_UNIT_ROUNDOFF) * scale


def sampled_and_scored(model_dir, dtype: str):
    """32 rollouts from the in-process engine and the trainer's log-probs of the same tokens, with S per token."""
    config = ModelConfig(name_or_path=str(model_dir), dtype=dtype)
    model, tokenizer = load_model(config, trainable=True), load_tokenizer(config)
    with torch.no_grad():  # logits x 4, so the distributions are not near-uniform (log-probs -5.7 to -1.7)
        model.get_output_embeddings().weight.mul_(4.0)
    prompts = [Prompt(id="a", messages=({"role": "user", "content": "what is 2+3?"},), reference="5"),
               Prompt(id="b", messages=({"role": "user", "content": "hello there, 7*8"},), reference="56")]
    # The engine picks its own path: for a mixed model, the static-cache step with compute-dtype weight copies
    # (rollout/graph_step.py); it enters no autocast from here, so this checks the rollout's own precision wiring.
    engine = HFRolloutEngine(model, tokenizer)
    batch = engine.generate(prompts, 16, SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=16, seed=3))
    inputs = (batch.prompt_ids, batch.prompt_mask, batch.prompt_index, batch.completion_ids, batch.completion_mask)
    trainer = batched_logprobs(model, *inputs, 1.0, 16)
    with torch.no_grad():
        head = model.get_output_embeddings().weight.abs()
        scale = (completion_hidden_states(model, *inputs).abs() @ head.t()).amax(dim=-1)  # S [B, C]
    real = batch.completion_mask.bool()
    return (trainer - batch.sampling_logprobs)[real].abs(), scale[real]


def test_sampler_and_trainer_logprobs_agree_in_bf16_and_much_tighter_in_fp32(tiny_model_dir):
    bf16_gap, bf16_scale = sampled_and_scored(tiny_model_dir, "bfloat16")
    fp32_gap, fp32_scale = sampled_and_scored(tiny_model_dir, "float32")
    assert bf16_gap.numel() > 100 and bf16_scale.max() > 1.0  # enough tokens, logits of a realistic size
    assert (bf16_gap <= agreement_bound("bfloat16", bf16_scale)).all()  # measured worst 8.4e-4, bounds >= 0.10
    assert (fp32_gap <= agreement_bound("float32", fp32_scale)).all()  # measured worst 7e-7, bounds >= 1.8e-5
    # Both bf16 sides round the same values at the same points, so most tokens agree to fp32 noise (measured 92 %).
    # A sampler left in fp32 (no autocast), a trainer whose forward skipped autocast, or log-probs taken in bf16
    # instead of fp32 make every token differ (measured 0 %).
    assert (bf16_gap <= 1e-6).float().mean() >= 0.5
    assert fp32_gap.max() * 100 < bf16_gap.max()  # measured ~1200x tighter


def test_train_in_mixed_bf16_end_to_end(tiny_model_dir, tmp_path):
    """`rlvr train model.dtype=bfloat16` on the tiny model: 2 steps with the KL reference and the final evaluation;
    the saved weights are the fp32 master weights."""
    out = tmp_path / "run"
    assert main(["train", *tiny_overrides(tiny_model_dir, out), "model.dtype=bfloat16", "threads=1"]) == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if "loss" in r]
    assert [r["step"] for r in steps] == [1, 2]
    assert all(math.isfinite(r[k]) for r in steps for k in ("loss", "kl", "entropy", "grad_norm"))
    saved = load_file(out / "final" / "model.safetensors")
    assert {t.dtype for t in saved.values()} == {torch.float32}


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_bound_formula_by_hand(dtype):
    """S = 2: bf16 (12 / 256 + 128 / 2^24) x 2 = 0.09375 + 1.53e-5; fp32 (12 + 128) / 2^24 x 2 = 1.669e-5."""
    expected = {"bfloat16": 0.09375 + 128 * 2 / 2 ** 24, "float32": 140 * 2 / 2 ** 24}[dtype]
    assert float(agreement_bound(dtype, torch.tensor(2.0))) == pytest.approx(expected, rel=1e-12)
