"""Start-of-run memory plan: the peak memory of a run, estimated from the model's shapes and the
config before the first step, and a warning naming what to lower when it exceeds what the machine has.

The phases of a step do not overlap in time, so the peak is the largest phase, not the sum of every part:
- rollout: the decode engine's KV cache (preallocated at prompt + max_new_tokens for every row of the largest
  generation call: with dynamic sampling a later round may ask for max_extra_prompts prompts), its per-step
  [rows, vocabulary] buffers and, for the fused Llama step, its copies of the weights in the decode layout;
- scoring: the no-gradient reference (and pi_old) forward, one micro-batch at a time;
- update: gradients, AdamW's two moments and the tensors one micro-batch keeps for its backward (from the second
  micro-batch on, the accumulated gradient and a full set of saved tensors coexist);
- evaluation: as rollout, with eval.batch_size x eval.samples rows (the default run's largest generation).
Every phase also holds the runtime (interpreter, torch, transformers, tokenizer), the weights, the reference and
the optimizer state (AdamW's moments live from the first step to the end).

Each part is counted from tensor shapes and dtypes in the code paths the run takes (model/logprobs.py, fused_head.py,
fused_layers.py, blocked_attention.py, rollout/decode_steps.py), for the worst case of every completion reaching
max_new_tokens; only the runtime is a measured constant. The parameter counts come from the model built on the meta
device (exact for any architecture, no memory). Not modeled: vLLM (its share is vllm_gpu_memory_utilization), FSDP2's
sharding, the critic's own forward, and the allocator: tcmalloc keeps the update's freed blocks, which the final
evaluation's larger KV buffers reuse only in part, so the default run's RSS peaks ~1.2 GB above the plan's 5.1 GB
(bench/memory_plan.py, bench/README.md).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, fields

from rlvr.config.run import RunConfig
from rlvr.grpo.plan import needs_old_logprobs
from rlvr.model import precision
from rlvr.model.family import full_attention_llama
from rlvr.model.logprobs import HEAD_CHUNK_TOKENS
from rlvr.rollout.hf import DROP_AT_LIVE_SHARE

GB = 1e9
# RSS of an interpreter that has imported rlvr's training loop (torch 2.13 CPU, transformers 5.24) and loaded the
# SmolLM2 tokenizer, before any weights: 410 MB, measured 2026-11-25 on the project's 2-core CPU machine. The same
# process after setup() held 467 MB (the safetensors weights are mapped, not yet read).
RUNTIME_BYTES_CPU = 410_000_000
FLOAT32 = 4


@dataclass(frozen=True)
class Phase:
    name: str
    bytes: int


@dataclass(frozen=True)
class MemoryPlan:
    """Bytes of each part; `phases` are what is resident at once in each phase of a step."""

    weights: int  # the policy's parameters
    reference: int  # the frozen KL reference (0 when beta = 0 or LoRA, whose reference is the adapter switched off)
    gradients: int  # one per trainable parameter (LoRA: the adapters only)
    optimizer: int  # AdamW's exp_avg and exp_avg_sq
    activations: int  # saved tensors of one micro-batch's packed forward + its [tokens, vocab] fp32 logits buffer
    kv_cache: int  # largest rollout call: KV cache, first logits and the decode step's [rows, vocab] buffers
    evaluation: int  # the same for the evaluation's largest generation call (0 without evaluation)
    engine_weights: int  # the fused decode step's weight copies (oneDNN-packed on CPU, q/k/v and gate/up elsewhere)
    runtime: int  # interpreter and libraries (0 on CUDA: the context is outside torch's allocator)
    critic: int = 0  # PPO critic (advantage=gae): its weights and AdamW moments
    phases: tuple[Phase, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def peak(self) -> int:
        return max(p.bytes for p in self.phases)

    @property
    def peak_phase(self) -> str:
        return max(self.phases, key=lambda p: p.bytes).name


@dataclass(frozen=True)
class ModelShape:
    """What the plan reads from the model: counts from the meta-device model, sizes from its config."""

    params: int  # parameters, a tied embedding counted once
    linear_params: int  # weights of the Linear layers (decoder and LM head): what the CPU decode step repacks
    fused_copy_params: int  # q/k/v and gate/up weights: the concatenated copies of the decode step
    lora_params: int  # adapter parameters for model.lora (r x (in + out) per targeted Linear)
    head_params: int  # LM head weight (the critic drops it; 0 extra when tied to the embedding)
    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    llama: bool  # rlvr's fused paths apply (rlvr/model/family.py)


def model_shape(model_config, lora_targets: list[str] | None = None, lora_r: int = 0,
                trust_remote_code: bool = False) -> ModelShape:
    """Counts from the model built on the meta device from its HF config (no memory, any architecture)."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(model_config, trust_remote_code=trust_remote_code)
    linear, fused, lora = 0, 0, 0
    for name, module in model.named_modules():
        if not isinstance(module, torch.nn.Linear):
            continue
        linear += module.weight.numel()
        leaf = name.rsplit(".", 1)[-1]
        fused += module.weight.numel() if leaf in ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj") else 0
        lora += lora_r * (module.in_features + module.out_features) if leaf in (lora_targets or []) else 0
    head = model.get_output_embeddings()
    tied = head is not None and head.weight is model.get_input_embeddings().weight
    c = model_config
    heads = c.num_attention_heads
    return ModelShape(
        params=sum(p.numel() for p in model.parameters()), linear_params=linear, fused_copy_params=fused,
        lora_params=lora, head_params=0 if tied or head is None else head.weight.numel(),
        layers=c.num_hidden_layers, hidden=c.hidden_size,
        intermediate=getattr(c, "intermediate_size", None) or 4 * c.hidden_size,
        heads=heads, kv_heads=getattr(c, "num_key_value_heads", None) or heads,
        head_dim=getattr(c, "head_dim", None) or c.hidden_size // heads, vocab=c.vocab_size,
        llama=full_attention_llama(c))


def _distinct_prompts(micro: int, group_size: int, prompts: int) -> int:
    """Distinct prompts in a micro-batch: rows come group by group (logprobs.length_order), so a micro-batch holds
    micro / G whole groups, one more when groups straddle its edges, and never more than the batch has."""
    return min(prompts, math.ceil(micro / group_size) + (1 if micro % group_size else 0))


def update_activations(s: ModelShape, micro: int, group_size: int, prompts: int, prompt_tokens: int,
                       max_new: int, dtype_bytes: int) -> int:
    """Bytes one micro-batch's packed forward keeps for its backward (rlvr/model/logprobs.py), every completion at
    max_new tokens. Per layer and token (checked against torch's saved-tensor hooks on SmolLM2): the two norms'
    inputs and outputs (the outputs are the q/k/v and gate/up products' inputs), the o_proj input, and the MLP's
    gate, up and product (fused SwiGLU in fp32; transformers' MLP also keeps silu(gate), its norms a fp32 copy).
    Blocked attention keeps per block (each distinct prompt, each completion row) its gathered q, k, v, output,
    log-sum-exp and a float mask, padded to the longest block's queries and keys."""
    b, h, i, d = dtype_bytes, s.hidden, s.intermediate, s.head_dim
    distinct = _distinct_prompts(micro, group_size, prompts)
    # packed: each prompt once, then every completion but its last token (no state is needed after it)
    tokens = distinct * prompt_tokens + micro * (max_new - 1)
    fused = s.llama and dtype_bytes == FLOAT32  # rlvr/model/fused_layers.py applies to fp32 Llama-family modules only
    # + the two norms' per-token scales (fused) or fp32 input copies (transformers' norms), and the rotary cos/sin
    per_token = ((5 * h + 3 * i) * b + 2 * FLOAT32 if fused else (5 * h + 4 * i) * b + 2 * FLOAT32 * h)
    if s.llama:  # blocked attention: K blocks (a shared prompt opening is one more) x longest queries Q, keys S
        blocks = micro + distinct + (1 if distinct > 1 else 0)
        queries, keys = max(prompt_tokens, max_new - 1), prompt_tokens + max_new - 1
    else:  # one dense block over the packed sequence with a [T, T] mask
        blocks, queries, keys = 1, tokens, tokens
    attention = (2 * blocks * queries * s.heads * d + 2 * blocks * keys * s.kv_heads * d
                 + blocks * queries * keys) * b + blocks * s.heads * queries * FLOAT32
    completions = micro * max_new
    # the final norm's input and scale, rotary cos/sin, the int64 indices of the packing (blocks, token slots, input
    # ids, targets), the states that reach the head and their fp32 row sums, the head's fp32 [N, V] buffer (made in
    # chunks that are recomputed in the backward past HEAD_CHUNK_TOKENS rows), and the head weight's gradient that
    # the backward makes before adding it into .grad
    head = tokens * ((h + 2 * d) * b + FLOAT32) + 8 * (blocks * (queries + keys) + 2 * tokens + 2 * completions) \
        + completions * (h * b + FLOAT32) + min(completions, HEAD_CHUNK_TOKENS) * s.vocab * FLOAT32 + s.vocab * h * b
    return s.layers * (tokens * per_token + attention) + head


def vocab_buffers(temperature: float, top_p: float) -> int:
    """[rows, vocab] fp32 buffers alive at once in one sampling step (rollout/hf.py pick_tokens): the step's logits,
    log_softmax, its exp and the cumulative sum of draw_from; the division by T one more; the nucleus filter's sort
    (values + int64 indices = 3), two softmax passes, the masked copy and the scatter's two (5 more at its peak)."""
    if temperature == 0:
        return 2  # greedy: the logits and one log_softmax
    return 4 + (temperature != 1.0) + (5 if top_p < 1 else 0)


def generation_bytes(s: ModelShape, prompts: int, rows: int, prompt_tokens: int, max_new: int, dtype_bytes: int,
                     units: int, fused: bool) -> int:
    """Peak of one sampling call (rollout/decode_steps.py): the KV cache preallocated for prompt + max_new tokens,
    the first logits the stepper keeps, and the largest transient: transformers' prefill cache of the distinct
    prompts (before its copy into the G rows), one step's vocabulary buffers, or the fused step dropping finished
    rows (the kept rows' keys are copied while all the old ones still live)."""
    per_token = s.layers * 2 * s.kv_heads * s.head_dim * dtype_bytes
    kv = rows * (prompt_tokens + max_new) * per_token
    row_logits = s.vocab * FLOAT32
    prefill = prompts * prompt_tokens * per_token
    drop = int(DROP_AT_LIVE_SHARE * kv / 2) if fused else kv // s.layers
    return kv + rows * row_logits + max(prefill, units * rows * row_logits, drop)


def scoring_bytes(s: ModelShape, micro: int, group_size: int, prompts: int, prompt_tokens: int, max_new: int,
                  dtype_bytes: int) -> int:
    """The no-gradient forward of the reference (or pi_old): one layer's intermediates at a time (q/k/v, the MLP's
    gate, up and product) and the head's fp32 [N, V] buffer (rlvr/model/fused_head.py runs without gradients too)."""
    tokens = _distinct_prompts(micro, group_size, prompts) * prompt_tokens + micro * max_new
    completions = micro * max_new
    return tokens * (4 * s.hidden + 3 * s.intermediate) * dtype_bytes + \
        min(completions, HEAD_CHUNK_TOKENS) * s.vocab * FLOAT32


def _prepacked(device: str, dtype_bytes: int) -> bool:
    """Does the CPU decode step copy every Linear weight into oneDNN's layout (decode_steps.Projection)?"""
    import torch

    # cpu:0 is the CPU too (model.device=cpu:0: the device trap's spelling)
    return torch.device(device).type == "cpu" and dtype_bytes == FLOAT32 and torch.backends.mkldnn.is_available()


def _largest_round(config: RunConfig) -> int:
    """Prompts in the largest generation call of a step: with dynamic sampling a later round asks for up to
    max_extra_prompts (rlvr/dynamic_sampling.next_request)."""
    from rlvr.config.rules import dynamic_sampling_applies

    r = config.rollout
    if dynamic_sampling_applies(config, 1):
        return max(r.prompts_per_step, r.dynamic_sampling.max_extra_prompts)
    return r.prompts_per_step


def _eval_generation(config: RunConfig, s: ModelShape, prompt_tokens: int, b: int, fused: bool) -> int:
    e = config.eval
    if not (e.at_end or e.every):
        return 0
    prompts, new = min(e.size, e.batch_size), config.rollout.max_new_tokens
    sampled = generation_bytes(s, prompts, prompts * e.samples, prompt_tokens, new, b,
                               vocab_buffers(e.temperature, e.top_p), fused)
    greedy = generation_bytes(s, prompts, prompts, prompt_tokens, new, b, vocab_buffers(0.0, 1.0), fused)
    return max(sampled, greedy if e.greedy else 0)


ASSUMED_PROMPT_TOKENS = 128  # when the caller does not measure its prompts (the default task's are 87-89 tokens)


def plan_memory(config: RunConfig, model_config, device: str, *, prompt_tokens: int | None = None,
                runtime_bytes: int | None = None) -> MemoryPlan:
    """The plan for `config` with the model whose HF config is `model_config` on `device`. prompt_tokens: the
    longest rendered prompt (longest_prompt_tokens); runtime_bytes: replaces the measured RUNTIME_BYTES_CPU."""
    c, r, lora = config, config.rollout, config.model.lora
    # Mixed precision (model/precision.py): weights, gradients, AdamW moments and the decode (which does not
    # enter autocast yet) in the storage dtype b; the forwards' activations in the compute dtype
    b = precision.storage_dtype(c.model.dtype, c.model.master_weights).itemsize
    compute = precision.DTYPES[c.model.dtype].itemsize
    s = model_shape(model_config, lora.target_modules if lora.enabled else None, lora.r, c.model.trust_remote_code)
    notes = []
    if prompt_tokens is None:
        prompt_tokens = ASSUMED_PROMPT_TOKENS
        notes.append(f"prompts assumed {ASSUMED_PROMPT_TOKENS} tokens")
    trainable = s.lora_params if lora.enabled else s.params
    cuda = device.startswith("cuda")
    fused = s.llama and not lora.enabled  # decode_steps.fused_supported: plain Linear layers only
    if r.engine.kind == "vllm":
        fused = False
        notes.append("vLLM's memory (rollout.engine.vllm_gpu_memory_utilization) is not in the plan")
    copies = s.linear_params if _prepacked(device, b) else s.fused_copy_params
    backbone = s.params - s.head_params  # the critic is a copy without the LM head
    gae = c.algorithm.advantage == "gae"
    plan = dict(
        weights=(s.params + s.lora_params) * b,
        reference=s.params * b if c.algorithm.beta > 0 and not lora.enabled else 0,
        gradients=trainable * b, optimizer=2 * trainable * b,
        activations=update_activations(s, c.micro_batch_size, r.group_size, r.prompts_per_step, prompt_tokens,
                                       r.max_new_tokens, compute) + autocast_copies(s, b, compute),
        kv_cache=0, evaluation=0, engine_weights=copies * b if fused else 0,
        runtime=runtime_bytes if runtime_bytes is not None else (0 if cuda else RUNTIME_BYTES_CPU),
        critic=3 * backbone * b if gae else 0)
    if r.engine.kind != "vllm":
        rounds = _largest_round(c)
        plan["kv_cache"] = generation_bytes(s, rounds, rounds * r.group_size, prompt_tokens, r.max_new_tokens, b,
                                            vocab_buffers(r.temperature, r.top_p), fused)
        plan["evaluation"] = _eval_generation(c, s, prompt_tokens, b, fused)
    if gae:
        notes.append("the critic's forward is not in the plan")
    return _with_phases(MemoryPlan(**plan, notes=tuple(notes)), c, s, prompt_tokens, b, compute)


def autocast_copies(s: ModelShape, storage_bytes: int, compute_bytes: int) -> int:
    """Mixed precision: autocast's compute-dtype copy of every weight, made in a forward (and kept by the update's
    forward for its backward); 0 when weights are stored in the compute dtype."""
    return s.params * compute_bytes if compute_bytes != storage_bytes else 0


def _with_phases(p: MemoryPlan, c: RunConfig, s: ModelShape, prompt_tokens: int, b: int, compute: int
                 ) -> MemoryPlan:
    """Phase totals. An engine in its own process (hf_process) holds its weights, decode copies and generation
    buffers for the whole run beside the trainer: it is added to every phase (the machine's total)."""
    r = c.rollout
    held = p.runtime + p.weights + p.reference + p.optimizer + p.critic
    rollout, evaluation, engine = p.kv_cache, p.evaluation, p.engine_weights  # in the trainer's process
    beside = 0
    if r.engine.kind == "hf_process":
        beside = p.runtime + s.params * b + engine + max(rollout, evaluation)
        rollout, evaluation, engine = 0, 0, 0
    phases = [Phase("rollout", held + engine + rollout + beside),
              Phase("update", held + p.gradients + p.critic // 3 + p.activations + beside)]
    if p.reference or needs_old_logprobs(c):
        phases.append(Phase("scoring", held + beside + autocast_copies(s, b, compute) + scoring_bytes(
            s, c.micro_batch_size, r.group_size, r.prompts_per_step, prompt_tokens, r.max_new_tokens, compute)))
    if c.eval.at_end or c.eval.every:
        phases.append(Phase("evaluation", held + engine + evaluation + beside))
    return MemoryPlan(**{f.name: getattr(p, f.name) for f in fields(p) if f.name != "phases"}, phases=tuple(phases))


def _gb(n: int) -> str:
    return f"{n / GB:.2f}"


def plan_lines(plan: MemoryPlan, available_bytes: int | None) -> list[str]:
    """The start-of-run lines: the plan, and a WARNING naming what to lower when the peak exceeds the memory."""
    parts = [("weights", plan.weights), ("reference", plan.reference), ("gradients", plan.gradients),
             ("optimizer", plan.optimizer), ("activations", plan.activations), ("KV cache", plan.kv_cache),
             ("eval generation", plan.evaluation), ("decode weights", plan.engine_weights), ("critic", plan.critic),
             ("runtime", plan.runtime)]
    shown = ", ".join(f"{name} {_gb(n)}" for name, n in parts if n)
    room = f"; {_gb(available_bytes)} GB available" if available_bytes is not None else ""
    lines = [f"memory plan: ~{plan.peak / GB:.1f} GB peak in {plan.peak_phase} ({shown} GB){room}"]
    if plan.notes:
        lines.append("memory plan: not counted or assumed: " + "; ".join(plan.notes))
    if available_bytes is not None and plan.peak > available_bytes:
        lower, switch = _remedies(plan)
        lines.append(f"WARNING: the planned peak (~{plan.peak / GB:.1f} GB, {plan.peak_phase}) exceeds the "
                     f"{available_bytes / GB:.1f} GB available: lower {', '.join(lower)}"
                     + (f", or set {' or '.join(switch)}" if switch else ""))
    return lines


def _remedies(plan: MemoryPlan) -> tuple[list[str], list[str]]:
    """(settings to lower: those of the peak phase, settings to switch: those that shrink every phase)."""
    lower = {
        "update": ["optimizer.micro_batch_size", "rollout.max_new_tokens"],
        "rollout": ["rollout.group_size (G)", "rollout.prompts_per_step", "rollout.dynamic_sampling.max_extra_prompts",
                    "rollout.max_new_tokens"],
        "evaluation": ["eval.batch_size", "eval.samples", "rollout.max_new_tokens"],
        "scoring": ["optimizer.micro_batch_size", "rollout.max_new_tokens"]}[plan.peak_phase]
    switch = []
    if plan.gradients == plan.weights:  # full fine-tuning: adapters shrink gradients, moments and the reference
        switch.append("model.lora.enabled=true")
    if plan.reference:
        switch.append("algorithm.beta=0 (no reference model)")
    return lower, switch


def available_memory_bytes(device: str) -> int | None:
    """Memory this process can still use on `device`, counting what it already holds (the plan counts that too).

    CUDA: free device memory (torch.cuda.mem_get_info) + what torch has reserved in this process.
    CPU: MemAvailable from /proc/meminfo + this process's anonymous RSS. MemAvailable, not MemTotal: it is the
    kernel's estimate of what can be allocated without swapping, so memory other processes hold (on a shared
    machine, other runs) is left out and reclaimable page cache counted in; the mapped safetensors weights are page
    cache too, so only the anonymous part of this process is added. Without /proc (macOS): free pages from
    os.sysconf, else None (no comparison)."""
    if device.startswith("cuda"):
        import torch

        index = torch.device(device).index
        index = torch.cuda.current_device() if index is None else index
        free, _total = torch.cuda.mem_get_info(index)
        return free + torch.cuda.memory_reserved(index)
    available = _proc_kib("/proc/meminfo", "MemAvailable")
    if available is not None:
        return (available + (_proc_kib("/proc/self/status", "RssAnon") or 0)) * 1024
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _proc_kib(path: str, key: str) -> int | None:
    """A 'Key:   N kB' field of a /proc file, in KiB; None where the file or the field is missing."""
    try:
        with open(path) as f:
            for line in f:
                name, _, value = line.partition(":")
                if name == key:
                    return int(value.split()[0])
    except OSError:
        return None
    return None


def longest_prompt_tokens(tokenizer, prompts) -> int:
    """Tokens of the longest rendered prompt: the width a generation batch is padded to (rollout/hf.py)."""
    from rlvr.rollout.hf import render_prompts

    texts = render_prompts(tokenizer, list(prompts))
    return max((len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]), default=0)


PROMPT_SAMPLE = 64  # train prompts whose rendered length is measured (the stream is a fresh copy: no draw is used)


def run_prompt_tokens(task, tokenizer, config: RunConfig) -> int:
    """The longest prompt a run will render: the first evaluation batch (when the run evaluates) and the first
    PROMPT_SAMPLE train prompts of a fresh stream (the run's own stream and cursor are not touched)."""
    import itertools

    from rlvr.config.run import ConfigError
    from rlvr.evaluation.sets import evaluation_prompts

    prompts = list(itertools.islice(task.train_prompts(config.seed), PROMPT_SAMPLE))
    if config.eval.at_end or config.eval.every:
        try:  # with eval.sets: the first batch of each set (a harder level may have longer prompts)
            prompts += evaluation_prompts(config, task, min(config.eval.size, config.eval.batch_size))
        except ConfigError:  # an empty held-out split: the evaluation reports it in its own words
            pass
    return longest_prompt_tokens(tokenizer, prompts)
