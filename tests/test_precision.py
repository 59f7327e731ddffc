"""Mixed precision (rlvr/model/precision.py) on the tiny random Llama, on the CPU: bf16 forwards over
fp32 master weights and fp32 AdamW state, fp32 log-probs and loss terms, the pure-bf16 alternative, the fused
autograd nodes under autocast, LoRA, the memory plan and the config's refusals. CPU autocast casts the same ops to
bf16 as CUDA's (matrix products; norms, softmax and reductions stay fp32), so the logic is tested here.
"""
from __future__ import annotations

import contextlib

import pytest
import torch

import rlvr.model.logprobs as logprobs_module
from conftest import tiny_llama
from rlvr.algorithms.loss import LossSpec, policy_loss
from rlvr.algorithms.objectives import ClipRange
from rlvr.config.run import ConfigError, ModelConfig, load_config
from rlvr.grpo.memory_plan import plan_memory
from rlvr.model import precision
from rlvr.model.fused_head import head_logprobs_fused
from rlvr.model.load import load_model
from rlvr.model.logprobs import batched_logprobs, completion_logprobs, token_logprobs
from rlvr.sft.batching import MicroBatch
from rlvr.sft.step import target_nll
from rlvr.training.critic import Critic, CriticSettings
from rlvr.training.update import UpdateSettings, train_step
from rlvr.types import TrainBatch
from test_memory_plan import UNTIED_PARAMS, small_run, tiny_config

torch.set_num_threads(1)

VOCAB = 103  # the tiny model directory's character vocabulary (conftest.build_tiny_model)
MIXED, PURE, FP32 = ("bfloat16", "float32"), ("bfloat16", "same"), ("float32", "float32")


def load(model_dir, setting, trainable=True):
    dtype, master = setting
    return load_model(ModelConfig(name_or_path=str(model_dir), dtype=dtype, master_weights=master), trainable=trainable)


def rollout_tensors(vocab: int = VOCAB):
    """2 prompts of 5 tokens (the second left-padded by 2), G = 2 completions each, lengths 6, 3, 1, 4."""
    g = torch.Generator().manual_seed(0)
    prompt_mask = torch.tensor([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]])
    prompt_ids = torch.randint(0, vocab, (2, 5), generator=g).masked_fill(prompt_mask == 0, 0)
    completion_ids = torch.randint(0, vocab, (4, 6), generator=g)
    completion_mask = torch.tensor([[1.0] * n + [0.0] * (6 - n) for n in (6, 3, 1, 4)])
    return prompt_ids, prompt_mask, torch.tensor([0, 0, 1, 1]), completion_ids, completion_mask


@contextlib.contextmanager
def linear_output_dtypes(module):
    """The dtypes of every plain nn.Linear's output while inside (the forward ran in bf16 iff it sees bf16)."""
    seen: set[torch.dtype] = set()
    hooks = [m.register_forward_hook(lambda _m, _i, out: seen.add(out.dtype)) for m in module.modules()
             if type(m) is torch.nn.Linear]
    try:
        yield seen
    finally:
        for hook in hooks:
            hook.remove()


# ---------------------------------------------------------------- config and loading
def test_config_defaults_and_refusals():
    default = load_config(None, []).model
    assert (default.dtype, default.master_weights) == ("float32", "float32")
    assert load_config(None, ["model.dtype=bfloat16"]).model.master_weights == "float32"  # bf16 = mixed by default
    with pytest.raises(ConfigError) as err:  # mixed fp16 would need a loss scaler
        load_config(None, ["model.dtype=float16"])
    assert "model.master_weights=float32" in str(err.value) and "model.dtype=bfloat16" in str(err.value)
    load_config(None, ["model.dtype=float16", "model.master_weights=same"])  # pure fp16 stays available
    with pytest.raises(ConfigError) as err:
        load_config(None, ["model.master_weights=half"])
    assert "model.master_weights" in str(err.value) and "'same'" in str(err.value)


@pytest.mark.parametrize("setting, stored, computed", [(FP32, torch.float32, torch.float32),
                                                       (MIXED, torch.float32, torch.bfloat16),
                                                       (PURE, torch.bfloat16, torch.bfloat16)])
@pytest.mark.parametrize("trainable", [True, False])  # the frozen reference follows the same rule
def test_load_stores_and_records(tiny_model_dir, setting, stored, computed, trainable):
    model = load(tiny_model_dir, setting, trainable)
    assert {p.dtype for p in model.parameters()} == {stored}
    assert precision.compute_dtype(model) == computed
    assert precision.is_mixed(model) == (setting == MIXED)
    assert isinstance(precision.autocast(model), torch.autocast) == (setting == MIXED)


def test_a_model_not_loaded_by_rlvr_computes_in_its_own_dtype():
    model = tiny_llama()
    assert precision.compute_dtype(model) == torch.float32 and not precision.is_mixed(model)
    assert isinstance(precision.autocast(model), contextlib.nullcontext)


# ---------------------------------------------------------------- every forward site runs in the compute dtype
def _train_forward(model, batch):
    completion_logprobs(model, *batch)[0].sum().backward()


def _score_forward(model, batch):
    batched_logprobs(model, *batch, 1.0, 2)


def _sft_forward(model, batch):
    ids = batch[3][:1]  # one row of 6 tokens, the last 3 trained on
    micro = MicroBatch(ids, torch.arange(6)[None], torch.ones_like(ids), torch.tensor([[False] * 3 + [True] * 3]), 1)
    target_nll(model, micro).backward()


@pytest.mark.parametrize("site", [_train_forward, _score_forward, _sft_forward])
@pytest.mark.parametrize("setting, expected", [(MIXED, torch.bfloat16), (FP32, torch.float32)])
def test_forward_sites_run_in_the_compute_dtype(tiny_model_dir, site, setting, expected):
    model = load(tiny_model_dir, setting)
    with linear_output_dtypes(model) as seen:
        site(model, rollout_tensors())
    assert seen == {expected}


@pytest.mark.parametrize("setting, expected", [(MIXED, torch.bfloat16), (FP32, torch.float32)])
def test_critic_backbone_in_the_compute_dtype_values_in_fp32(tiny_model_dir, setting, expected):
    dtype, master = setting
    critic = Critic(ModelConfig(name_or_path=str(tiny_model_dir), dtype=dtype, master_weights=master),
                    CriticSettings(1e-3, (0.9, 0.99), 0.0, 1.0, None, 2))
    with linear_output_dtypes(critic.model.base_model) as seen:
        values = critic.values(*rollout_tensors())
    assert seen == {expected} and values.dtype == torch.float32
    assert {p.dtype for p in critic.model.parameters()} == {torch.float32}


# ---------------------------------------------------------------- fp32 log-probs and loss terms
@pytest.mark.parametrize("setting", [MIXED, PURE])
@pytest.mark.parametrize("entropy_grad", [False, True])  # the fused head, and the plain head(h).float() path
def test_logprobs_entropy_and_loss_terms_are_fp32(tiny_model_dir, setting, entropy_grad):
    model = load(tiny_model_dir, setting)
    batch = rollout_tensors()
    logprobs, entropy = completion_logprobs(model, *batch, 0.7, with_entropy=True, entropy_grad=entropy_grad)
    assert logprobs.dtype == entropy.dtype == torch.float32
    scored = batched_logprobs(model, *batch, 0.7, 2)
    assert scored.dtype == torch.float32
    spec = LossSpec("ppo_clip", ClipRange(0.2, 0.2), "sequence_mean", "k3", 0.04, 0.01)
    terms = policy_loss(logprobs, scored, scored + 0.1, torch.tensor([1.0, -1.0, 0.5, -0.5]), batch[4], spec, 4.0,
                        entropy)
    assert {terms.loss.dtype, terms.policy_loss.dtype, terms.kl.dtype, terms.entropy.dtype} == {torch.float32}


# ---------------------------------------------------------------- fp32 master weights and optimizer state
def _one_adam_step(model, lr: float):
    """One train_step with AdamW as rlvr/grpo/setup.py builds it (fused), weight decay 0. Adam's first step is
    lr * m_hat / (sqrt(v_hat) + eps) with m_hat = g, v_hat = g^2: every weight with |g| >> eps moves by lr."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0, fused=True)
    settings = UpdateSettings(LossSpec("ppo_clip", ClipRange(0.2, 0.2), "sequence_mean", "k3", 0.0, 0.0),
                              temperature=1.0, micro_batch_size=2, max_grad_norm=1e9, max_length=6)
    prompt_ids, prompt_mask, rows, completion_ids, completion_mask = rollout_tensors()
    batch = TrainBatch(prompt_ids, prompt_mask, rows, completion_ids, completion_mask,
                       torch.tensor([1.0, -1.0, 0.5, -0.5]), None, None)
    train_step(model, batch, optimizer, settings)
    return optimizer


def test_mixed_step_keeps_fp32_weights_and_adam_state_and_small_steps_survive(tiny_model_dir):
    model = load(tiny_model_dir, MIXED)
    norm = model.model.layers[0].input_layernorm.weight
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    optimizer = _one_adam_step(model, lr=1e-5)
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    state = [s for s in optimizer.state.values()]
    assert state and {s["exp_avg"].dtype for s in state} == {s["exp_avg_sq"].dtype for s in state} == {torch.float32}
    assert all(not torch.equal(before[n], p) for n, p in model.named_parameters())  # every tensor moved
    # the norm weights start at 1.0 and move by lr = 1e-5: fp32 resolves that (its spacing at 1 is 2^-23 = 1.2e-7)
    torch.testing.assert_close((norm.detach() - before["model.layers.0.input_layernorm.weight"]).abs(),
                               torch.full_like(norm, 1e-5), rtol=0, atol=2e-7)


def test_pure_bf16_stores_bf16_and_small_steps_round_away(tiny_model_dir):
    model = load(tiny_model_dir, PURE)
    norm = model.model.layers[0].input_layernorm.weight
    optimizer = _one_adam_step(model, lr=1e-5)
    assert {p.dtype for p in model.parameters()} == {s["exp_avg"].dtype for s in optimizer.state.values()} \
        == {torch.bfloat16}
    # the cost of pure bf16: 1 - 1e-5 rounds back to 1.0 (bf16's spacing just below 1 is 2^-8 = 0.0039)
    assert torch.equal(norm.detach(), torch.ones_like(norm))


# ---------------------------------------------------------------- the fused autograd nodes under autocast
def test_fused_head_backward_runs_as_autocast_would():
    """Under autocast the fused head's gradients equal the plain `head(h).float()` path's exactly (measured 0): its
    backward replays the forward's bf16 autocast. Running the backward's products in fp32 instead (the node's earlier
    version) differs by ~5e-3 of the largest entry."""
    g = torch.Generator().manual_seed(0)
    states = (torch.randn(40, 16, generator=g) * 3).requires_grad_()
    weight = torch.randn(97, 16, generator=g).requires_grad_()
    targets, upstream = torch.randint(0, 97, (40,), generator=g), torch.randn(40, generator=g)
    results = []
    for fused in (True, False):
        states.grad = weight.grad = None
        with torch.autocast("cpu", dtype=torch.bfloat16):
            if fused:
                values = head_logprobs_fused(states, weight, targets, 1.0, False)[0]
            else:
                values = token_logprobs(torch.nn.functional.linear(states, weight).float(), targets, False)[0]
        (values * upstream).sum().backward()
        results.append((states.grad.clone(), weight.grad.clone()))
    for fast, plain in zip(*results):
        assert fast.dtype == torch.float32 and (fast - plain).abs().max() / plain.abs().max() < 1e-5


def test_fused_layers_under_autocast_equal_transformers_modules(monkeypatch):
    """The packed training forward with model/fused_layers.py's nodes and with transformers' own modules, both under
    mixed bf16: equal log-probs, gradients within 1e-5 of the largest entry (measured 1e-7; the fused SwiGLU node run
    on the bf16 projections instead of transformers' forward: 9e-3; bf16 against fp32: 1e-2)."""
    model = precision.record_compute_dtype(tiny_llama(tied=True), torch.bfloat16)
    batch = rollout_tensors(vocab=64)
    results = []
    for fused in (True, False):
        if not fused:
            monkeypatch.setattr(logprobs_module, "fused_layers_on", lambda m: contextlib.nullcontext())
        model.zero_grad(set_to_none=True)
        values = completion_logprobs(model, *batch)[0]
        values.sum().backward()
        results.append((values.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}))
    (fused_values, fused_grads), (plain_values, plain_grads) = results
    torch.testing.assert_close(fused_values, plain_values, rtol=0, atol=1e-6)
    for name, plain in plain_grads.items():
        assert (fused_grads[name] - plain).abs().max() / plain.abs().max() < 1e-5, name


# ---------------------------------------------------------------- the frozen reference, LoRA
def test_reference_scores_exactly_as_the_policy_before_any_update(tiny_model_dir):
    """The mixed reference keeps fp32 weights and runs under autocast like the policy, so the KL starts at exactly 0
    (a reference stored in bf16 instead differs by ~1e-3 per token)."""
    policy, reference = load(tiny_model_dir, MIXED), load(tiny_model_dir, MIXED, trainable=False)
    batch = rollout_tensors()
    assert torch.equal(batched_logprobs(policy, *batch, 1.0, 2), batched_logprobs(reference, *batch, 1.0, 2))


def test_lora_policy_and_reference_run_in_bf16(tiny_model_dir):
    pytest.importorskip("peft")
    from rlvr.config.run import LoraConfig
    from rlvr.model.lora import AdapterOffReference, wrap_policy

    wrapped = wrap_policy(load(tiny_model_dir, MIXED), LoraConfig(enabled=True, r=4))
    reference = AdapterOffReference(wrapped)
    assert precision.compute_dtype(wrapped) == precision.compute_dtype(reference) == torch.bfloat16  # through peft
    for model in (wrapped.get_base_model(), reference):
        with linear_output_dtypes(wrapped) as seen:
            batched_logprobs(model, *rollout_tensors(), 1.0, 2)
        assert seen == {torch.bfloat16}


# ---------------------------------------------------------------- memory plan
def test_memory_plan_counts_fp32_storage_and_bf16_compute():
    """tiny_llama untied: 22688 parameters (tests/test_memory_plan.py). Mixed stores them in 4 bytes (weights,
    gradients, two AdamW moments, the reference), pure in 2; the update's activations are bf16 in both, and mixed
    adds autocast's bf16 copy of every weight, 22688 x 2 = 45376 bytes."""
    mixed, pure = (plan_memory(small_run(f"model.dtype={d}", f"model.master_weights={w}"), tiny_config(), "cpu",
                               prompt_tokens=6) for d, w in (MIXED, PURE))
    assert mixed.weights == mixed.gradients == mixed.reference == UNTIED_PARAMS * 4 == 2 * pure.weights
    assert mixed.optimizer == 2 * UNTIED_PARAMS * 4 == 2 * pure.optimizer
    assert mixed.activations - pure.activations == UNTIED_PARAMS * 2


def test_the_fsdp2_decode_view_keeps_the_policys_compute_dtype():
    """Under FSDP2 the engine decodes through ShardedLM (rlvr/distributed/wrap.py); a mixed-precision policy seen
    through it must still be mixed, or its rollouts would run in fp32 while the trainer runs in bf16."""
    from types import SimpleNamespace

    from rlvr.distributed.wrap import ShardedLM

    model = precision.record_compute_dtype(tiny_llama(), torch.bfloat16)
    view = ShardedLM(SimpleNamespace(model=model, trainer=None, strategy="fsdp2"))
    assert precision.compute_dtype(view) == torch.bfloat16 and precision.is_mixed(view)
    assert not precision.is_mixed(ShardedLM(SimpleNamespace(model=tiny_llama(), trainer=None, strategy="fsdp2")))


def test_cudnn_attention_is_off_by_default_and_on_when_asked(tiny_model_dir):
    """model.cudnn_attention: SDPA's cuDNN backend is switched off for the process when the model loads,
    unless asked for (the flag is global in PyTorch, and harmless on a CPU, so the switch itself is checked here)."""
    before = torch.backends.cuda.cudnn_sdp_enabled()
    try:
        torch.backends.cuda.enable_cudnn_sdp(True)
        load_model(ModelConfig(name_or_path=str(tiny_model_dir), cudnn_attention=True))
        assert torch.backends.cuda.cudnn_sdp_enabled()  # true leaves PyTorch's choice alone
        load_model(ModelConfig(name_or_path=str(tiny_model_dir)))
        assert not torch.backends.cuda.cudnn_sdp_enabled()  # the default: off
    finally:
        torch.backends.cuda.enable_cudnn_sdp(before)


def test_tf32_lets_fp32_matmuls_use_tf32_only_when_asked(tiny_model_dir):
    """model.tf32: off by default (PyTorch's exact fp32 products stay), on when asked, for the process."""
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        load_model(ModelConfig(name_or_path=str(tiny_model_dir)))
        assert not torch.backends.cuda.matmul.allow_tf32
        load_model(ModelConfig(name_or_path=str(tiny_model_dir), tf32=True))
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before
