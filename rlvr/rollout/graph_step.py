"""The Llama-family decode step over a static KV cache, replayed from CUDA graphs on a GPU.

On an H100 the eager decode step of SmolLM2-135M took ~10 ms for 64 rows while its 0.54 GB of fp32 weights take
~0.2 ms to read: ~300 small kernels a step, each launched from Python, so the step was bound by launches. A CUDA
graph launches a whole recorded step at once, but it replays fixed shapes at fixed addresses. Hence:
- every buffer a step touches is allocated once per capacity and reused across generate calls: the KV cache
  [R, kv heads, capacity, d], an additive mask [R, 1, 1, capacity], positions [R], the write column t [1], the
  token input [R]; the step attends over the whole capacity with not-yet-written columns masked (-inf). R is a
  power of two, and a batch of fewer rows uses the first ones: dynamic sampling's top-ups (any row count) then
  replay the graphs of a few buckets instead of recording new ones for every batch size;
- the weights a step reads are the model's own parameters (embedding, norms) or copies made once and refreshed
  in place each call (fused q/k/v and gate/up products, and every matmul weight in the compute dtype), so the
  graph recorded for the first call stays valid while the policy trains (AdamW updates in place);
- rows that finish leave only at bucket boundaries (64, 32, 16, 8 rows): live rows move to the front and the
  graph of the smaller bucket runs on the first rows of the same buffers (spare rows compute ignored values).
Mixed precision: the matmuls run in the compute dtype while the residual stream, norms and
rotary stay in the parameters' dtype, the order autocast gives the trainer's forward, so sampler and trainer
log-probs agree to bf16 rounding. Without a GPU (tests) the same step runs eagerly; tests/test_graph_step.py
checks it samples the very tokens of the eager FusedStepper for the same seed. rollout.compile_decode compiles the
layer (layer_step) with inductor before the graphs are recorded: fewer, fused kernels (1.42 ms a step at 64 rows in
bf16 on an H100 against 2.45 ms, docs/gpu.md).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from rlvr.model import precision
from rlvr.rollout.decode_steps import cat_bias, llama_blocks_supported, rope_rotate, signed_sin
from rlvr.rollout.prefill import SharedPrefix, prefill

CAPACITY_STEP = 64  # KV capacity is rounded up to this: fewer shapes to record, and aligned rows for the kernels
MIN_BUCKET = 8


def buckets(rows: int) -> list[int]:
    """Row counts graphs are recorded for, largest first: the batch, then powers of two down to MIN_BUCKET."""
    out, b = [rows], 1 << (rows - 1).bit_length() - 1
    while b >= MIN_BUCKET:
        if b < rows:
            out.append(b)
        b //= 2
    return out


def row_capacity(rows: int) -> int:
    """Rows a decoder is built with: the next power of two (at least MIN_BUCKET), so its buckets serve any batch."""
    return max(MIN_BUCKET, 1 << (rows - 1).bit_length())


def bucket_for(live: int, sizes: list[int]) -> int:
    """The smallest recorded bucket that holds `live` rows."""
    return min(b for b in sizes if b >= live)


def _lora_supported(linear) -> bool:
    """A peft LoRA layer over a plain Linear whose output is x (W + B A s)^T + b: no DoRA, no LoRA bias."""
    base = getattr(linear, "base_layer", None)
    if type(base) is not torch.nn.Linear or not hasattr(linear, "get_delta_weight"):
        return False
    names = list(linear.active_adapters)
    return not any(getattr(linear, "use_dora", {}).get(n) or getattr(linear, "lora_bias", {}).get(n) for n in names)


def effective_weight(linear) -> torch.Tensor:
    """The weight a forward multiplies by: a plain Linear's, or a LoRA layer's base weight plus its active adapters'
    deltas (peft's get_delta_weight: B A x scaling), so a LoRA policy decodes through the static step as well,
    at one merge per generate call instead of two extra products per projection per token."""
    if not hasattr(linear, "base_layer"):
        return linear.weight
    weight = linear.base_layer.weight
    if linear.merged or linear.disable_adapters:  # merged: the deltas are in the base weight already
        return weight
    for name in linear.active_adapters:
        if name in linear.lora_A:
            weight = weight + linear.get_delta_weight(name)
    return weight


@dataclass
class _LayerWeights:
    attn_norm: torch.Tensor  # the parameter itself (parameter dtype)
    qkv: torch.Tensor  # [(Hq + 2 Hkv) d, H] copy in the compute dtype
    qkv_bias: torch.Tensor | None
    o: torch.Tensor
    o_bias: torch.Tensor | None
    mlp_norm: torch.Tensor
    gate_up: torch.Tensor  # [2 I, H]
    gate_up_bias: torch.Tensor | None
    down: torch.Tensor
    down_bias: torch.Tensor | None


def _layer_sources(layer) -> dict[str, tuple]:
    a, m = layer.self_attn, layer.mlp
    return {"qkv": (a.q_proj, a.k_proj, a.v_proj), "o": (a.o_proj,), "gate_up": (m.gate_proj, m.up_proj),
            "down": (m.down_proj,)}


class DecodeWeights:
    """What a decode step reads. Products are copies in the compute dtype, refreshed in place by refresh() so their
    addresses never change; the embedding and norm weights are the model's parameters (checked by address)."""

    def __init__(self, model, compute_dtype: torch.dtype):
        inner = model.model
        self.model, self.dtype = model, compute_dtype
        self.layers = []
        with torch.no_grad():
            for layer in inner.layers:
                made = {}
                for name, linears in _layer_sources(layer).items():
                    made[name] = torch.cat([effective_weight(x) for x in linears]).to(compute_dtype)
                    bias = cat_bias(*linears)
                    made[name + "_bias"] = None if bias is None else bias.to(compute_dtype)
                self.layers.append(_LayerWeights(attn_norm=layer.input_layernorm.weight,
                                                 mlp_norm=layer.post_attention_layernorm.weight, **made))
            head = model.get_output_embeddings()
            # model.lm_head_fp32: the head's copy in fp32, and _mm casts the state to it
            head_dtype = torch.float32 if precision.head_is_fp32(head) else compute_dtype
            self.head = head.weight.detach().to(head_dtype).clone()
            self.head_bias = None if head.bias is None else head.bias.detach().to(head_dtype).clone()
        self.embed, self.final_norm = inner.embed_tokens.weight, inner.norm.weight
        self.norm_eps = [(layer.input_layernorm.variance_epsilon, layer.post_attention_layernorm.variance_epsilon)
                         for layer in inner.layers]
        self.final_eps = inner.norm.variance_epsilon
        self.addresses = self._referenced_addresses()

    def _referenced_addresses(self) -> list[int]:
        return [self.embed.data_ptr(), self.final_norm.data_ptr()] + \
               [p.data_ptr() for w in self.layers for p in (w.attn_norm, w.mlp_norm)]

    def still_valid(self) -> bool:
        """False when a referenced parameter was replaced (not updated in place): the graphs must be re-recorded."""
        return self.addresses == self._referenced_addresses()

    @torch.no_grad()
    def refresh(self) -> None:
        """Copy the model's current weights into the copies (the policy changed since the last generate call)."""
        for own, layer in zip(self.layers, self.model.model.layers):
            for name, linears in _layer_sources(layer).items():
                getattr(own, name).copy_(torch.cat([effective_weight(x) for x in linears]))
                bias = cat_bias(*linears)
                if bias is not None:
                    getattr(own, name + "_bias").copy_(bias)
        head = self.model.get_output_embeddings()
        self.head.copy_(head.weight)
        if self.head_bias is not None:
            self.head_bias.copy_(head.bias)


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' Llama RMSNorm: normalise in fp32, cast back to x's dtype, then scale (type promotion then
    gives fp32 for an fp32 master weight, as under autocast). One fused kernel when all is fp32."""
    if x.dtype == weight.dtype == torch.float32:
        return F.rms_norm(x, weight.shape, weight, eps)
    h = x.float()
    return weight * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def _mm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return F.linear(x.to(weight.dtype), weight, bias)


def sdpa_attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor,
                   scale: float) -> torch.Tensor:
    """q [b, kv heads, g, d] (a KV head's g query heads as its query rows), keys/values [b, kv heads, C, d], mask
    [b, 1, 1, C] additive -> [b, kv heads, g, d]: PyTorch's fused attention (cuDNN / flash / memory-efficient)."""
    return F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, scale=scale)


def matmul_attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor,
                     scale: float) -> torch.Tensor:
    """The same attention as two batched products around an fp32 softmax. Why: in fp32 on an H100 no flash kernel
    exists and the memory-efficient one tiles 64 query rows where a decode step has g = 3 (1.09 of 3.52 ms of kernel
    time a step, docs/gpu.md); a batched [g, d] x [d, C] product per (row, KV head) streams the cache once.
    Meant for fp32, where the scores are SDPA's to rounding. In bf16 the scores are rounded to bf16 before the fp32
    softmax (SDPA keeps them fp32): ~2-4x SDPA's error, so `auto` leaves bf16 to SDPA. fp16 products could overflow
    (max 65504), so fp16 scores are taken in fp32."""
    if q.dtype == torch.float16:
        q, keys = q.float(), keys.float()
    scores = torch.matmul(q, keys.transpose(-1, -2)).float() * scale + mask.float()  # [b, kv heads, g, C]
    return torch.matmul(scores.softmax(dim=-1).to(values.dtype), values)


ATTENTION = {"sdpa": sdpa_attention, "matmul": matmul_attention}  # the static step's attention, by name


def default_attention(compute_dtype: torch.dtype) -> str:
    """rollout.decode_attention=auto: matmul in fp32, where an H100 measured it faster (bench/decode_step.py at 64
    rows, 2026-11-27, docs/gpu.md: graphs 3.70 -> 3.43 ms a step, compiled 3.25 -> 2.80); SDPA in half
    precision (compiled bf16 measured 1.42 -> 1.28 ms with matmul, but its scores round to bf16: see above)."""
    return "matmul" if compute_dtype == torch.float32 else "sdpa"


def layer_step(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor, column: torch.Tensor,
               keys: torch.Tensor, values: torch.Tensor, layer: _LayerWeights, eps: tuple[float, float],
               shape: tuple[int, int, int], act, attend=sdpa_attention) -> torch.Tensor:
    """One decoder layer of one decode step: x [b, H] -> x [b, H]; writes this token's key and value into column
    `column` of keys/values [b, kv heads, capacity, d]. shape = (query heads, kv heads, head dim); attend: one of
    ATTENTION. Every layer calls this with tensors of the same shapes, so torch.compile (rollout.compile_decode)
    compiles it once for all layers."""
    heads, kv_heads, head_dim = shape
    rows, q_size, kv_size = x.shape[0], heads * head_dim, kv_heads * head_dim
    qkv = _mm(_rms(x, layer.attn_norm, eps[0]), layer.qkv, layer.qkv_bias)
    qk = rope_rotate(qkv[:, :q_size + kv_size].view(rows, heads + kv_heads, head_dim), cos, sin)
    keys.index_copy_(2, column, qk[:, heads:, None].to(keys.dtype))
    values.index_copy_(2, column, qkv[:, q_size + kv_size:].view(rows, kv_heads, 1, head_dim).to(values.dtype))
    # grouped-query attention without repeating K/V: a KV head's query heads become its query rows
    q = qk[:, :heads].reshape(rows, kv_heads, heads // kv_heads, head_dim).to(keys.dtype)
    attn = attend(q, keys, values, mask, head_dim ** -0.5)
    x = x + _mm(attn.reshape(rows, q_size), layer.o, layer.o_bias)
    gate, up = _mm(_rms(x, layer.mlp_norm, eps[1]), layer.gate_up, layer.gate_up_bias).chunk(2, dim=-1)
    return x + _mm(act(gate) * up, layer.down, layer.down_bias)


_COMPILED: dict[str, object] = {}


def compiled_layer_step(backend: str):
    """layer_step under torch.compile, one wrapper per backend for the process (dynamo's cache lives on the code).
    Why compile: under a CUDA graph the step is still ~20 small kernels a layer (norm, casts, rotary, cache
    writes, residual adds, SiLU); inductor fuses the elementwise ones around the matmuls and attention (on a CPU
    it gave 7 kernels a layer: norm, matmul, rotary with the cache writes and attention, matmul plus residual,
    norm, matmul, SiLU gate, matmul plus residual). dynamic=None: the first shape compiles static and a dimension
    seen to change (rows of a smaller bucket, another KV capacity) recompiles once as dynamic, so a run stays
    within dynamo's recompile limit (past it, the layer would run uncompiled)."""
    if backend not in _COMPILED:
        # inductor fuses bf16 elementwise chains in fp32 and rounds once; eager (and so the trainer's autocast
        # forward) rounds after every op. emulate_precision_casts keeps eager's roundings: on a CPU the compiled
        # mixed-precision layer then gives the plain step's logits bit for bit (0.002 apart without it; tested)
        options = {"emulate_precision_casts": True} if backend == "inductor" else None
        _COMPILED[backend] = torch.compile(layer_step, backend=backend, fullgraph=True, dynamic=None, options=options)
    return _COMPILED[backend]


class StaticDecoder:
    """Buffers and recorded graphs for one (rows, capacity). Lives across generate calls (the engine keeps it)."""

    def __init__(self, model, rows: int, capacity: int, compute_dtype: torch.dtype, graphs: bool,
                 compile_backend: str | None = None, attention: str = "sdpa"):
        """rows: a power of two (row_capacity); capacity: KV columns, a multiple of CAPACITY_STEP;
        compile_backend: a torch.compile backend for the layer step (rollout.compile_decode), None = as written;
        attention: a name in ATTENTION."""
        config, inner = model.config, model.model
        self.weights = DecodeWeights(model, compute_dtype)
        self.rotary, self.act = inner.rotary_emb, inner.layers[0].mlp.act_fn
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        self.shape = (self.heads, self.kv_heads, self.head_dim)
        self.layer_step = compiled_layer_step(compile_backend) if compile_backend else layer_step
        self.attend = ATTENTION[attention]
        self.rows, self.capacity = rows, capacity
        device = self.weights.embed.device
        shape = (rows, self.kv_heads, capacity, self.head_dim)
        self.keys = [torch.zeros(shape, dtype=compute_dtype, device=device) for _ in inner.layers]
        self.values = [torch.zeros(shape, dtype=compute_dtype, device=device) for _ in inner.layers]
        self.mask = torch.zeros((rows, 1, 1, capacity), dtype=compute_dtype, device=device)  # additive
        self.position = torch.zeros(rows, dtype=torch.long, device=device)  # next position of each row
        self.column = torch.zeros(1, dtype=torch.long, device=device)  # the cache column this step writes
        self.tokens = torch.zeros(rows, dtype=torch.long, device=device)
        self.sizes = buckets(rows)
        self.graphs: dict[int, tuple[torch.cuda.CUDAGraph, torch.Tensor]] = {}
        self.use_graphs = graphs and device.type == "cuda"

    def start(self, prompt_keys: list[torch.Tensor], prompt_values: list[torch.Tensor], prompt_mask: torch.Tensor,
              group_size: int) -> None:
        """Load the prompts' KV (N prompts, each repeated G times, into the first N G rows) and reset the state."""
        prompt_len, rows = prompt_mask.shape[1], prompt_mask.shape[0] * group_size
        with torch.no_grad():
            self.weights.refresh()
            for cache, prompt in zip(self.keys + self.values, prompt_keys + prompt_values):
                cache[:rows, :, :prompt_len].copy_(prompt.repeat_interleave(group_size, dim=0))
            mask = prompt_mask.repeat_interleave(group_size, dim=0).bool()  # [rows, P]
            self.mask.fill_(float("-inf"))
            self.mask[rows:, 0, 0, 0] = 0.0  # spare rows attend to one column: finite values nobody reads
            self.mask[:rows, 0, 0, :prompt_len].masked_fill_(mask, 0.0)
            self.position.zero_()
            self.position[:rows].copy_(mask.sum(dim=1))
            self.column.fill_(prompt_len)
        self.live = rows

    def _step_body(self, b: int) -> torch.Tensor:
        """One decode step of the first b rows: reads self.tokens[:b], writes column self.column of the cache,
        advances positions and the column; returns next-token logits [b, V] (compute dtype)."""
        w = self.weights
        position, mask = self.position[:b], self.mask[:b]
        x = F.embedding(self.tokens[:b], w.embed)  # [b, H] in the parameters' dtype
        cos, sin = self.rotary(x[:, None], position[:, None])  # [b, 1, d]
        sin = signed_sin(sin)
        mask.index_fill_(-1, self.column, 0.0)  # each row now attends to the token it is adding
        for layer, keys, values, eps in zip(w.layers, self.keys, self.values, w.norm_eps):
            x = self.layer_step(x, cos, sin, mask, self.column, keys[:b], values[:b], layer, eps, self.shape, self.act,
                                self.attend)
        position.add_(1)
        self.column.add_(1)
        return _mm(_rms(x, w.final_norm, w.final_eps), w.head, w.head_bias)

    def _record(self, b: int) -> None:
        """Warm up on a side stream (as torch.cuda.graphs asks), then record; the warm-up's writes are undone."""
        saved = (self.position.clone(), self.column.clone(), self.mask.clone())
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream), torch.no_grad():
            for _ in range(2):
                self._step_body(b)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        # thread_local: a pipelined engine decodes in a thread while the trainer's thread runs its own kernels
        with torch.cuda.graph(graph, capture_error_mode="thread_local"), torch.no_grad():
            logits = self._step_body(b)
        for buffer, value in zip((self.position, self.column, self.mask), saved):
            buffer.copy_(value)
        self.graphs[b] = (graph, logits)

    @torch.no_grad()
    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens [A] (A = live rows) -> next-token logits [A, V]."""
        live = tokens.shape[0]
        b = bucket_for(live, self.sizes)
        self.tokens[:live].copy_(tokens)
        if not self.use_graphs:
            return self._step_body(b)[:live]
        if b not in self.graphs:
            self._record(b)
        graph, logits = self.graphs[b]
        graph.replay()
        return logits[:live]

    @torch.no_grad()
    def keep(self, rows: torch.Tensor) -> None:
        """Move the rows that stay (indices into the current live rows) to the front of every buffer."""
        for buffer in self.keys + self.values + [self.mask, self.position]:
            buffer[:rows.numel()] = buffer[rows]  # advanced indexing gathers a copy first: no overlap hazard
        self.live = rows.numel()


class GraphStepper:
    """The Stepper (rollout/decode_steps.py) over a StaticDecoder: prefill with transformers' forward, then steps."""

    def __init__(self, decoder: StaticDecoder, first_logits: torch.Tensor):
        self.decoder, self.first_logits = decoder, first_logits

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.decoder.step(tokens)

    def keep(self, rows: torch.Tensor) -> None:
        self.decoder.keep(rows)

    def drop_at(self, live: int) -> bool:
        """Rows leave only when the live rows fit a smaller recorded bucket (each bucket runs its own graph)."""
        return bucket_for(live, self.decoder.sizes) < bucket_for(self.decoder.live, self.decoder.sizes)


class StaticDecoders:
    """The engine's StaticDecoders by (capacity, dtype), most recent last; one serves every batch up to its rows."""

    KEEP = 3

    def __init__(self, graphs: bool, compile_backend: str | None = None, attention: str | None = None):
        """attention: a name in ATTENTION, or None for default_attention (by compute dtype)."""
        self.graphs, self.compile_backend, self.attention, self.by_shape = graphs, compile_backend, attention, {}

    def stepper(self, model, compute_dtype: torch.dtype, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor,
                group_size: int, max_new: int, shared: SharedPrefix | None = None) -> GraphStepper:
        with torch.no_grad(), precision.autocast(model):  # the prefill is transformers' forward
            logits, cache, prompt_mask = prefill(model, prompt_ids, prompt_mask, shared)
        rows = prompt_mask.shape[0] * group_size
        capacity = -(-(prompt_mask.shape[1] + max_new) // CAPACITY_STEP) * CAPACITY_STEP
        key = (capacity, compute_dtype)
        decoder = self.by_shape.pop(key, None)
        if decoder is not None and (decoder.weights.model is not model or not decoder.weights.still_valid()
                                    or decoder.rows < rows):
            decoder = None  # a larger batch than it holds: rebuilt with more rows (its buffers freed first)
        if decoder is None:
            while len(self.by_shape) >= self.KEEP:
                self.by_shape.pop(next(iter(self.by_shape)))
            decoder = StaticDecoder(model, row_capacity(rows), capacity, compute_dtype, self.graphs,
                                    self.compile_backend, self.attention or default_attention(compute_dtype))
        self.by_shape[key] = decoder
        decoder.start([c.keys for c in cache.layers], [c.values for c in cache.layers], prompt_mask, group_size)
        return GraphStepper(decoder, logits.repeat_interleave(group_size, dim=0))


def static_supported(model) -> bool:
    """Llama-family blocks (rollout/decode_steps.py) whose projections are plain Linear layers or LoRA layers over
    them (merged per call), with RMSNorms."""
    norm = getattr(getattr(model, "model", None), "norm", None)
    return hasattr(norm, "variance_epsilon") and llama_blocks_supported(
        model, lambda x: type(x) is torch.nn.Linear or _lora_supported(x))
