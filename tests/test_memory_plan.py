"""Start-of-run memory plan: every part counted by hand for a tiny Llama, the peak taken over
phases, the warning only above the available memory, and what LoRA and beta = 0 remove."""
from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig

from conftest import tiny_llama
from rlvr.config.run import load_config
from rlvr.grpo.memory_plan import (
    RUNTIME_BYTES_CPU,
    available_memory_bytes,
    model_shape,
    plan_lines,
    plan_memory,
    update_activations,
)
from rlvr.model.logprobs import completion_logprobs

# tiny_llama()'s shapes: vocabulary 64, hidden 32, MLP 64, 2 layers, 4 query heads / 2 KV heads of 8 dims
TINY = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=128)
# Parameters by hand: embedding 64 x 32 = 2048, LM head 2048 (untied); per layer q 32x32 = 1024, k and v
# 32x16 = 512 each (2 KV heads x 8), o 1024, gate/up/down 32x64 = 2048 each, two norms 32 each:
# 1024 + 512 + 512 + 1024 + 3 x 2048 + 64 = 9280; 2 layers 18560; final norm 32.
UNTIED_PARAMS = 2048 + 2048 + 2 * 9280 + 32  # 22688 -> 90752 bytes in fp32
TIED_PARAMS = UNTIED_PARAMS - 2048  # the head is the embedding: 20640


def tiny_config(tied: bool = False) -> LlamaConfig:
    return LlamaConfig(**TINY, tie_word_embeddings=tied)


def small_run(*extra: str):
    # 1 prompt x G 2, 4 new tokens, one micro-batch of 2; no dynamic sampling; evaluation of 1 prompt x 3 samples
    return load_config(None, ["rollout.group_size=2", "rollout.prompts_per_step=1", "rollout.max_new_tokens=4",
                              "optimizer.micro_batch_size=2", "rollout.dynamic_sampling.enabled=false",
                              "eval.size=1", "eval.samples=3", "eval.greedy=false", *extra])


def test_weights_count_exactly_the_parameters_of_tiny_llama():
    for tied, by_hand in ((False, UNTIED_PARAMS), (True, TIED_PARAMS)):
        model = tiny_llama(tied=tied)
        plan = plan_memory(small_run(), model.config, "cpu", prompt_tokens=6)
        assert plan.weights == by_hand * 4 == sum(p.numel() for p in model.parameters()) * 4
        # full fine-tuning: one gradient and two AdamW moments per parameter; the reference is a second copy
        assert plan.gradients == plan.weights and plan.optimizer == 2 * plan.weights
        assert plan.reference == plan.weights


def test_kv_cache_of_a_rollout_batch_by_hand():
    plan = plan_memory(small_run(), tiny_config(), "cpu", prompt_tokens=6)
    # KV per token: 2 layers x (K and V) x 2 KV heads x 8 dims x 4 bytes = 256 B; 2 rows x (6 + 4) tokens: 5120.
    # First logits kept by the stepper: 2 rows x 64 x 4 = 512. Largest transient of: prefill cache 1 x 6 x 256 =
    # 1536; the step's 4 vocabulary buffers (T = 1, top_p = 1) 4 x 2 x 64 x 4 = 2048; a row drop 0.75 x 5120 / 2 =
    # 1920 -> 2048.
    assert plan.kv_cache == 5120 + 512 + 2048
    # evaluation: 3 rows at T 0.6, top_p 0.95: KV 3 x 10 x 256 = 7680, first logits 768, 10 buffers of 768 = 7680
    assert plan.evaluation == 7680 + 768 + 7680


def test_update_activations_by_hand():
    s = model_shape(tiny_config())
    # 1 prompt of 6 tokens + 2 rows x (4 - 1) inputs = T 12 packed tokens; 3 blocks (prompt, 2 rows) of up to
    # Q = 6 queries and S = 6 + 3 = 9 keys. Per layer: tokens 12 x ((5 x 32 + 3 x 64) x 4 + 2 x 4) = 16992;
    # attention (2 x 3x6x4x8 + 2 x 3x9x2x8 + 3x6x9) x 4 + 3x4x6 x 4 = (1152 + 864 + 162) x 4 + 288 = 9000.
    # 2 layers: 51984. Then: final norm input, scale and cos/sin 12 x ((32 + 16) x 4 + 4) = 2352; int64 indices
    # 8 x (3 x (6 + 9) + 24 + 16) = 680; states and row sums 8 x (128 + 4) = 1056; logits 8 x 64 x 4 = 2048; the
    # head weight's gradient 64 x 32 x 4 = 8192.
    assert update_activations(s, 2, 2, 1, 6, 4, 4) == 51984 + 2352 + 680 + 1056 + 2048 + 8192


def test_update_activations_match_what_autograd_keeps():
    """The same micro-batch through the real packed forward: the bytes torch's saved-tensor hooks see (parameters
    excluded, each storage once) are the plan's, less the head gradient (made in the backward) and the 8-byte
    bool row mask the plan leaves out."""
    model = tiny_llama().requires_grad_(True)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}

    def keep(t: torch.Tensor) -> torch.Tensor:
        if t.untyped_storage().data_ptr() not in params:
            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    torch.manual_seed(0)
    completions = torch.randint(3, 60, (2, 4))
    with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
        completion_logprobs(model, torch.arange(3, 9)[None], torch.ones(1, 6, dtype=torch.long),
                            torch.zeros(2, dtype=torch.long), completions, torch.ones(2, 4, dtype=torch.long),
                            with_entropy=True)
    planned = update_activations(model_shape(model.config), 2, 2, 1, 6, 4, 4) - 64 * 32 * 4
    assert sum(seen.values()) == planned + 2 * 4  # the [2, 4] bool mask of real completion tokens


def test_peak_is_the_largest_phase_not_the_sum_of_parts():
    plan = plan_memory(small_run(), tiny_config(), "cpu", prompt_tokens=6)
    held = plan.runtime + plan.weights + plan.reference + plan.optimizer
    phases = {p.name: p.bytes for p in plan.phases}
    assert phases.keys() == {"rollout", "update", "scoring", "evaluation"}  # scoring: the reference's forward
    assert phases["rollout"] == held + plan.engine_weights + plan.kv_cache
    assert phases["update"] == held + plan.gradients + plan.activations
    assert phases["evaluation"] == held + plan.engine_weights + plan.evaluation
    assert plan.peak == max(phases.values()) == phases[plan.peak_phase]
    everything = held + plan.gradients + plan.activations + plan.engine_weights + plan.kv_cache + plan.evaluation
    assert plan.peak < everything
    # a large evaluation batch moves the peak there; no evaluation at all removes the phase
    big_eval = plan_memory(small_run("eval.size=64", "eval.batch_size=64", "eval.samples=16"), tiny_config(), "cpu",
                           prompt_tokens=6)
    assert big_eval.peak_phase == "evaluation"
    none = plan_memory(small_run("eval.at_end=false"), tiny_config(), "cpu", prompt_tokens=6)
    assert none.evaluation == 0 and "evaluation" not in {p.name for p in none.phases}


def test_an_engine_process_is_counted_beside_every_phase():
    inline = plan_memory(small_run(), tiny_config(), "cpu", prompt_tokens=6)
    apart = plan_memory(small_run("rollout.engine.kind=hf_process"), tiny_config(), "cpu", prompt_tokens=6)
    # the child holds its own runtime, a copy of the weights, its decode copies and its largest generation call
    # (evaluation here) for the whole run; the trainer then generates nothing itself
    child = RUNTIME_BYTES_CPU + UNTIED_PARAMS * 4 + inline.engine_weights + inline.evaluation
    held = inline.runtime + inline.weights + inline.reference + inline.optimizer
    phases = {p.name: p.bytes for p in apart.phases}
    assert phases["rollout"] == phases["evaluation"] == held + child
    assert phases["update"] == held + inline.gradients + inline.activations + child


def test_decode_weight_copies_and_runtime_depend_on_the_device():
    cpu = plan_memory(small_run(), tiny_config(), "cpu", prompt_tokens=6)
    cuda = plan_memory(small_run(), tiny_config(), "cuda:0", prompt_tokens=6)
    # CPU fp32: every Linear weight repacked for oneDNN: 2 x (1024 + 512 + 512 + 1024 + 3 x 2048) + head 2048
    assert cpu.engine_weights == (2 * 9216 + 2048) * 4 and cpu.runtime == RUNTIME_BYTES_CPU
    # elsewhere only the concatenated q/k/v and gate/up: 2 x (1024 + 512 + 512 + 2048 + 2048) = 12288; and the
    # CUDA context is outside torch's allocator, which is what peak_memory_gb reads there
    assert cuda.engine_weights == 12288 * 4 and cuda.runtime == 0
    # cpu:0 (the device trap's name for the policy's device) is planned as the CPU
    assert plan_memory(small_run(), tiny_config(), "cpu:0", prompt_tokens=6) == cpu


def test_beta_zero_drops_the_reference_and_its_forward():
    plan = plan_memory(small_run("algorithm.beta=0"), tiny_config(), "cpu", prompt_tokens=6)
    assert plan.reference == 0
    assert "scoring" not in {p.name for p in plan.phases}  # mu = 1 needs no pi_old forward either
    warning = plan_lines(plan, 1)[-1]
    assert "algorithm.beta=0" not in warning and "model.lora.enabled=true" in warning


def test_lora_keeps_gradients_and_moments_of_the_adapters_only():
    peft = pytest.importorskip("peft")
    config = small_run("model.lora.enabled=true", "model.lora.r=2", "model.lora.target_modules=[q_proj, v_proj]")
    plan = plan_memory(config, tiny_config(), "cpu", prompt_tokens=6)
    # adapters: r x (in + out) per targeted Linear: q 2 x (32 + 32) = 128, v 2 x (32 + 16) = 96; 2 layers: 448
    adapters = 2 * (128 + 96)
    wrapped = peft.get_peft_model(tiny_llama(), peft.LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
    assert adapters == sum(p.numel() for p in wrapped.parameters() if p.requires_grad)
    assert plan.gradients == adapters * 4 and plan.optimizer == 2 * adapters * 4
    assert plan.weights == (UNTIED_PARAMS + adapters) * 4
    assert plan.reference == 0  # the reference is the policy with its adapter switched off
    assert plan.engine_weights == 0  # LoRA layers are not plain Linear: transformers' own decode, no copies
    assert "model.lora.enabled=true" not in plan_lines(plan, 1)[-1]


def test_warning_only_above_the_available_memory():
    plan = plan_memory(small_run("eval.size=64", "eval.batch_size=64", "eval.samples=16"), tiny_config(), "cpu",
                       prompt_tokens=6)
    fits = plan_lines(plan, plan.peak)
    assert len(fits) == 1 and fits[0].startswith("memory plan: ~") and "peak in evaluation" in fits[0]
    assert len(plan_lines(plan, None)) == 1 and "available" not in plan_lines(plan, None)[0]  # no comparison
    over = plan_lines(plan, plan.peak - 1)
    assert len(over) == 2 and over[0].startswith("memory plan: ~")
    assert over[1].startswith("WARNING:") and "eval.batch_size" in over[1] and "eval.samples" in over[1]
    assert "algorithm.beta=0" in over[1]


def test_unmeasured_prompts_are_said_to_be_assumed():
    lines = plan_lines(plan_memory(small_run(), tiny_config(), "cpu"), None)
    assert lines[1] == "memory plan: not counted or assumed: prompts assumed 128 tokens"


def test_available_memory_on_cpu_is_positive_and_below_the_machine():
    with open("/proc/meminfo") as f:
        total_kib = int(next(line for line in f if line.startswith("MemTotal:")).split()[1])
    available = available_memory_bytes("cpu")
    assert 0 < available <= total_kib * 1024
