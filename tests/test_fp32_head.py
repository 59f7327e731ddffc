"""model.lm_head_fp32 (rlvr/model/precision.py): under bf16 mixed precision the LM head's product
runs in fp32 in every place that makes logits: transformers' forward (prefill, eager decoding, SFT), the trainer's
fused log-prob head and the static decode step. Checked on the CPU, where autocast casts the same ops as on CUDA.

How a test tells fp32 logits from bf16 ones: a product computed in bf16 is rounded to bf16, so its logits survive a
round trip through bf16 unchanged; fp32 logits of random weights almost never do."""
from __future__ import annotations

import copy

import pytest
import torch

from rlvr.config.run import ConfigError, ModelConfig, load_config
from rlvr.model import precision
from rlvr.model.load import load_model
from rlvr.model.logprobs import completion_hidden_states, completion_logprobs
from rlvr.rollout.graph_step import StaticDecoders
from test_decode_steps import left_padded_prompts
from test_precision import rollout_tensors

VOCAB = 103  # the tiny model directory's vocabulary (conftest.build_tiny_model)


def mixed(model_dir, head_fp32: bool):
    return load_model(ModelConfig(name_or_path=str(model_dir), dtype="bfloat16", lm_head_fp32=head_fp32))


def bf16_share(logits: torch.Tensor) -> float:
    """The share of logits a bf16 round trip leaves unchanged (1.0: computed in bf16)."""
    return float((logits.float().to(torch.bfloat16).float() == logits.float()).float().mean())


@pytest.mark.parametrize("head_fp32", [False, True])
def test_transformers_forward_makes_fp32_logits_only_with_the_option(tiny_model_dir, head_fp32):
    model = mixed(tiny_model_dir, head_fp32)
    ids = torch.randint(3, VOCAB, (2, 7), generator=torch.Generator().manual_seed(1))
    with torch.no_grad(), precision.autocast(model):
        logits = model(input_ids=ids).logits
    assert bf16_share(logits) < 0.1 if head_fp32 else bf16_share(logits) == 1.0


def test_the_trainer_s_log_probs_are_those_of_an_fp32_head(tiny_model_dir):
    """completion_logprobs (the fused head) against log_softmax(h W^T) taken in fp32 from the same bf16-body hidden
    states: equal to fp32 rounding with the option, ~bf16 rounding apart without it (the thing the option changes)."""
    inputs = rollout_tensors(VOCAB)
    gaps = {}
    for head_fp32 in (False, True):
        model = mixed(tiny_model_dir, head_fp32)
        with torch.no_grad():
            model.get_output_embeddings().weight.mul_(4.0)  # logits of a realistic size (as test_precision_run)
            got, _ = completion_logprobs(model, *inputs, 1.0)
            with precision.autocast(model):
                states = completion_hidden_states(model, *inputs)
            exact = torch.log_softmax(states.float() @ model.get_output_embeddings().weight.t(), dim=-1)
            want = exact.gather(-1, inputs[3][..., None])[..., 0]
        gaps[head_fp32] = float(((got - want) * inputs[4]).abs().max())
    assert gaps[True] < 2e-6, gaps  # fp32 rounding of a 32-term sum and a softmax
    assert gaps[False] > 20 * gaps[True], gaps  # measured ~1e-3: the head rounded to bf16


@pytest.mark.parametrize("head_fp32", [False, True])
def test_the_static_decode_step_samples_from_fp32_logits_only_with_the_option(tiny_model_dir, head_fp32):
    model = mixed(tiny_model_dir, head_fp32)
    ids, mask = left_padded_prompts()
    ids = ids % VOCAB
    with torch.no_grad():
        stepper = StaticDecoders(graphs=False).stepper(model, torch.bfloat16, ids, mask, 4, 6)
        logits = stepper.step(torch.full((8,), 5))
    assert bf16_share(logits) < 0.1 if head_fp32 else bf16_share(logits) == 1.0


def test_every_model_loaded_with_the_option_has_the_fp32_head(tiny_model_dir):
    """The policy, and the KL reference / an engine's own copy (loaded frozen): the sampler and the trainer alike."""
    config = ModelConfig(name_or_path=str(tiny_model_dir), dtype="bfloat16", lm_head_fp32=True)
    for trainable in (True, False):
        head = load_model(config, trainable=trainable).get_output_embeddings()
        assert precision.head_is_fp32(head) and head.weight.dtype == torch.float32


def test_a_head_stored_in_bf16_cannot_be_made_fp32(tiny_model_dir):
    pure = load_model(ModelConfig(name_or_path=str(tiny_model_dir), dtype="bfloat16", master_weights="same"))
    with pytest.raises(ValueError, match="needs fp32 master weights"):
        precision.keep_head_fp32(pure)


def test_a_copied_model_s_head_multiplies_by_its_own_weight(tiny_model_dir):
    model = mixed(tiny_model_dir, True)
    twin = copy.deepcopy(model)
    with torch.no_grad():
        twin.get_output_embeddings().weight.zero_()
        states = torch.randn(3, model.config.hidden_size)
        assert float(twin.get_output_embeddings()(states).abs().max()) == 0.0  # its own (zeroed) weight
        assert float(model.get_output_embeddings()(states).abs().max()) > 0.0


@pytest.mark.parametrize(("overrides", "words"), [
    (["model.lm_head_fp32=true"], "computes in fp32 already"),
    (["model.lm_head_fp32=true", "model.dtype=bfloat16", "model.master_weights=same"], "no fp32 weight is left"),
    (["model.lm_head_fp32=true", "model.dtype=bfloat16", "rollout.engine.kind=vllm"], "vLLM computes its own head")])
def test_an_fp32_head_without_mixed_precision_is_refused(overrides, words):
    with pytest.raises(ConfigError, match=words):
        load_config(None, overrides)
