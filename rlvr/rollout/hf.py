"""Rollouts with a transformers model in the trainer's process.

The policy object is shared with the trainer, so there is no weight sync (engines that hold their own copy,
such as vLLM or hf_process, are SyncedEngines). We run our own sampling loop instead of
`generate(num_return_sequences=G)`: `generate` prefills each prompt G times, while here a prompt is prefilled
once and its KV cache is copied to its G rows (the prompt is most of the tokens on short-answer tasks). The loop
also yields the exact log-prob of each sampled token under the distribution it was drawn from, sheds finished
rows, and takes its decode steps from rollout/decode_steps.py (a fused Llama-family step where possible).
"""
from __future__ import annotations

import contextlib

import torch

from rlvr.model import precision
from rlvr.rollout.base import SampledTurn, SamplingParams, sampling_generator
from rlvr.rollout.decode_steps import make_stepper
from rlvr.rollout.graph_step import GraphStepper, StaticDecoders, static_supported
from rlvr.rollout.prefill import SharedPrefix, left_pad, split_contexts
from rlvr.types import Prompt, RolloutBatch

# Finished rows leave the decode batch once at most this share of it is still running: each drop copies the KV
# cache once, so dropping at every finish would cost more than the rows it saves.
DROP_AT_LIVE_SHARE = 0.75
# On a GPU the loop asks the device whether rows finished only every SYNC_EVERY tokens: each
# question is a host sync that stalls the queue of launched steps; rows that finished meanwhile decode pad tokens
# that are masked out. On the CPU there is no queue to stall, so it asks after every token.
SYNC_EVERY = 8


def render_prompts(tokenizer, prompts: list[Prompt]) -> list[str]:
    """Apply the model's chat template, ending with the assistant header the model continues from."""
    return [tokenizer.apply_chat_template(list(p.messages), tokenize=False, add_generation_prompt=True)
            for p in prompts]


def stop_token_ids(model, tokenizer) -> list[int]:
    ids = model.generation_config.eos_token_id
    ids = [ids] if isinstance(ids, int) else list(ids or [])
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.append(tokenizer.eos_token_id)
    return ids


def completion_mask(completion_ids: torch.Tensor, stop_ids: list[int]) -> torch.Tensor:
    """[B, C] 1 up to and including the first stop token. Derived from the stop token, never from pad ids,
    so the EOS is kept even when pad == EOS (the simple_GRPO pitfall, docs/design.md principle 6)."""
    is_stop = torch.isin(completion_ids, torch.tensor(stop_ids, device=completion_ids.device)).long()
    stops_before = is_stop.cumsum(dim=-1) - is_stop  # stop tokens strictly before position t
    return (stops_before == 0).long()


def top_p_filter(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """Nucleus sampling (Holtzman et al. 2020): keep the smallest set of tokens whose mass reaches top_p."""
    if top_p >= 1.0:
        return logits
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
    mass_before = torch.softmax(sorted_logits, dim=-1).cumsum(dim=-1) - torch.softmax(sorted_logits, dim=-1)
    sorted_logits = sorted_logits.masked_fill(mass_before >= top_p, float("-inf"))  # top token always kept
    return torch.full_like(logits, float("-inf")).scatter(-1, order, sorted_logits)


def draw_from(probs: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
    """[B, V] probabilities (rows may sum to slightly off 1), [B] uniforms in [0, 1) -> [B] tokens, by inverting
    each row's cumulative distribution: token = the first index whose cumulative mass exceeds u x total. Exact
    sampling from the categorical, with one random number per row instead of torch.multinomial's V (measured
    on SmolLM2's 49k vocabulary: its exponential draws took 21 ms of a 172 ms decode step for 16 rows)."""
    cumulative = probs.cumsum(dim=-1)
    target = uniform[:, None].to(cumulative.dtype) * cumulative[:, -1:]
    token = torch.searchsorted(cumulative, target, right=True)[:, 0]  # never a zero-mass token: its cdf is flat
    return token.clamp(max=probs.shape[-1] - 1)


def pick_tokens(logits: torch.Tensor, sampling: SamplingParams, generator: torch.Generator | None = None,
                uniform: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """[B, V] next-token logits -> (token [B], its log-prob under the distribution it was drawn from [B]).
    `uniform` [B]: the rows' random numbers (drawn here from `generator` when not given)."""
    logits = logits.float()
    if sampling.temperature == 0:
        token = logits.argmax(dim=-1)
        return token, torch.log_softmax(logits, dim=-1).gather(-1, token[:, None])[:, 0]
    if sampling.temperature != 1.0:  # at 1 the division would only copy [B, V] every step
        logits = logits / sampling.temperature
    logprobs = torch.log_softmax(top_p_filter(logits, sampling.top_p), dim=-1)
    if uniform is None:
        uniform = torch.rand(logits.shape[0], generator=generator, device=logits.device)
    token = draw_from(logprobs.exp(), uniform)
    return token, logprobs.gather(-1, token[:, None])[:, 0]


def _should_drop(stepper, live: int, active: int) -> bool:
    """Leave finished rows now? The graph stepper decides by its recorded buckets, the others by live share."""
    decide = getattr(stepper, "drop_at", None)
    return decide(live) if decide is not None else live <= DROP_AT_LIVE_SHARE * active


def _scatter(values: torch.Tensor, active: torch.Tensor, rows: int, fill: float) -> torch.Tensor:
    """[A] values of the active rows -> [rows], `fill` elsewhere."""
    return torch.full((rows,), fill, dtype=values.dtype, device=values.device).index_put((active,), values)


class HFRolloutEngine:
    fused = True  # the fused Llama-family decode step where the model allows it (rollout/decode_steps.py)
    cuda_graphs = True  # on a GPU: static KV cache + CUDA graphs (rollout/graph_step.py)
    static_decode: bool | None = None  # the static-cache step: None = on a GPU only; True also on the CPU (tests)
    sync_every: int | None = None  # tokens between checks for finished rows: None = 1 on the CPU, SYNC_EVERY else
    decoders: StaticDecoders | None = None  # kept across calls, by batch shape
    compile_backend: str | None = None  # torch.compile backend of the static step's layer (rollout.compile_decode)
    decode_attention: str | None = None  # the static step's attention (graph_step.ATTENTION); None = by dtype

    def __init__(self, model, tokenizer, fused: bool = True, cuda_graphs: bool = True, compile_decode: bool = False,
                 decode_attention: str | None = None):
        self.model = model
        self.tokenizer = tokenizer
        self.stop_ids = stop_token_ids(model, tokenizer)
        self.fused = fused
        self.cuda_graphs = cuda_graphs
        self.compile_backend = "inductor" if compile_decode else None
        self.decode_attention = decode_attention

    @classmethod
    def configured(cls, model, tokenizer, rollout) -> HFRolloutEngine:
        """The engine as a run's RolloutConfig sets it up (its cuda_graphs, compile_decode and decode_attention)."""
        attention = None if rollout.decode_attention == "auto" else rollout.decode_attention
        return cls(model, tokenizer, cuda_graphs=rollout.cuda_graphs, compile_decode=rollout.compile_decode,
                   decode_attention=attention)

    def _stepper(self, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, group_size: int, max_new: int,
                 shared: SharedPrefix | None = None):
        """The static-cache step on a GPU, and for a mixed-precision model anywhere (it makes its own compute-dtype
        weight copies); else the eager fused step, or transformers' forward (under autocast when
        the model is mixed)."""
        model = self.model
        static = self.static_decode if self.static_decode is not None else prompt_ids.device.type == "cuda"
        if self.fused and (static or precision.is_mixed(model)) and static_supported(model):
            if self.decoders is None:
                self.decoders = StaticDecoders(graphs=self.cuda_graphs, compile_backend=self.compile_backend,
                                               attention=self.decode_attention)
            return self.decoders.stepper(model, precision.compute_dtype(model), prompt_ids, prompt_mask,
                                         group_size, max_new, shared)
        with precision.autocast(model):
            return make_stepper(model, prompt_ids, prompt_mask, group_size, max_new,
                                self.fused and not precision.is_mixed(model), shared)

    def encode(self, prompts: list[Prompt]) -> tuple[torch.Tensor, torch.Tensor]:
        device = next(self.model.parameters()).device
        encoded = self.tokenizer(render_prompts(self.tokenizer, prompts), return_tensors="pt", padding=True,
                                 add_special_tokens=False).to(device)
        return encoded["input_ids"], encoded["attention_mask"]

    @torch.no_grad()
    def sample(self, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, group_size: int,
               sampling: SamplingParams, shared: SharedPrefix | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """-> (completion ids [N*G, C], sampling log-probs [N*G, C]); rows past a stop token hold pad ids.
        With `shared`, prompt_ids/mask are the rows' rests after their shared openings (rollout/prefill.py)."""
        device = prompt_ids.device
        stepper = self._stepper(prompt_ids, prompt_mask, group_size, sampling.max_new_tokens, shared)
        logits = stepper.first_logits
        stops = torch.tensor(self.stop_ids, device=device)
        rows = logits.shape[0]
        active = torch.arange(rows, device=device)  # rows still in the forward batch
        finished = torch.zeros(rows, dtype=torch.bool, device=device)
        tokens, logprobs = [], []
        generator = sampling_generator(sampling.seed, device)
        sync_every = self.sync_every or (1 if device.type == "cpu" else SYNC_EVERY)
        # transformers' forward needs the autocast on every step; the static step casts for itself
        steps_in = contextlib.nullcontext() if isinstance(stepper, GraphStepper) else precision.autocast(self.model)
        for step in range(sampling.max_new_tokens):
            # Every row's random number is drawn each step, also for rows already dropped from the batch: a row's
            # draws then do not depend on when the others finish, so dropping rows changes no token.
            uniform = torch.rand(rows, generator=generator, device=device)[active]
            token, logprob = pick_tokens(logits, sampling, uniform=uniform)
            token = token.masked_fill(finished[active], self.tokenizer.pad_token_id)
            tokens.append(_scatter(token, active, rows, self.tokenizer.pad_token_id))
            logprobs.append(_scatter(logprob.masked_fill(finished[active], 0.0), active, rows, 0.0))
            finished[active] |= torch.isin(token, stops)
            if len(tokens) == sampling.max_new_tokens:
                break
            if (step + 1) % sync_every == 0:
                if finished.all():
                    break
                live = ~finished[active]
                if _should_drop(stepper, int(live.sum()), active.numel()):  # drop finished rows and their cache
                    keep = live.nonzero().squeeze(1)  # only now and then: each drop copies the cache once
                    stepper.keep(keep)
                    active, token = active[keep], token[keep]
            with steps_in:
                logits = stepper.step(token)
        ids, logprobs = torch.stack(tokens, dim=1), torch.stack(logprobs, dim=1)
        # Steps taken after the last row finished (between two syncs) hold only pad: cut them, so the batch is
        # as wide as when every step checks (the longest completion, its stop token included).
        width = max(int(completion_mask(ids, self.stop_ids).sum(dim=1).max()), 1)
        return ids[:, :width], logprobs[:, :width]

    def continue_tokens(self, contexts: list[list[int]], group_size: int, sampling: SamplingParams
                        ) -> list[SampledTurn]:
        """Multi-turn episodes: a turn after each token context, ids in and ids out, never through text.
        Contexts are left-padded into one batch and sampled by the same loop as `generate` (group_size rows share
        one prefill of their context; later turns' rows that open alike, a group's prompt, share its prefill:
        rollout/prefill.py)."""
        device = next(self.model.parameters()).device
        split = split_contexts(contexts) if group_size == 1 else None
        if split is None:
            ids, mask = left_pad(contexts, self.tokenizer.pad_token_id, device)
            sampled, logprobs = self.sample(ids, mask, group_size, sampling)
        else:
            openings, row_opening, rests = split
            ids, mask = left_pad(rests, self.tokenizer.pad_token_id, device)
            shared = SharedPrefix(*left_pad(openings, self.tokenizer.pad_token_id, device),
                                  torch.tensor(row_opening, dtype=torch.long, device=device))
            sampled, logprobs = self.sample(ids, mask, 1, sampling, shared)
        kept = completion_mask(sampled, self.stop_ids)
        stops = torch.isin(sampled, torch.tensor(self.stop_ids, device=device)) & (kept > 0)
        lengths, stopped = kept.sum(dim=1).tolist(), stops.any(dim=1).tolist()
        sampled, logprobs = sampled.tolist(), logprobs.tolist()
        return [SampledTurn(sampled[r][:n], logprobs[r][:n], stop) for r, (n, stop) in enumerate(zip(lengths, stopped))]

    def _sample_prompts(self, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, group_size: int,
                        sampling: SamplingParams) -> tuple[torch.Tensor, torch.Tensor]:
        """`sample` over left-padded prompts; prompts that open alike (every prompt of a task: the system turn and
        the one-shot pair, ~70 of the arithmetic prompt's ~90 tokens) prefill that opening once (rollout/prefill.py).
        Small on this CPU, where decoding dominates: a level-3 evaluation of 50 x (4 + 1) samples took 76 s instead
        of 80; the same tokens either way (tests/test_prefill.py)."""
        rows = [ids[mask.bool()].tolist() for ids, mask in zip(prompt_ids, prompt_mask)]
        split = split_contexts(rows) if len(rows) > 1 else None
        if split is None:
            return self.sample(prompt_ids, prompt_mask, group_size, sampling)
        openings, row_opening, rests = split
        device = prompt_ids.device
        ids, mask = left_pad(rests, self.tokenizer.pad_token_id, device)
        shared = SharedPrefix(*left_pad(openings, self.tokenizer.pad_token_id, device),
                              torch.tensor(row_opening, dtype=torch.long, device=device))
        return self.sample(ids, mask, group_size, sampling, shared)

    def generate(self, prompts: list[Prompt], group_size: int, sampling: SamplingParams) -> RolloutBatch:
        prompt_ids, prompt_mask = self.encode(prompts)
        completion_ids, logprobs = self._sample_prompts(prompt_ids, prompt_mask, group_size, sampling)
        mask = completion_mask(completion_ids, self.stop_ids)
        stopped = (torch.isin(completion_ids, torch.tensor(self.stop_ids, device=mask.device)) & (mask > 0)).any(-1)
        shown = completion_ids.masked_fill(mask == 0, self.tokenizer.pad_token_id)
        texts = self.tokenizer.batch_decode(shown, skip_special_tokens=True)
        return RolloutBatch(
            prompts=list(prompts), group_size=group_size, prompt_ids=prompt_ids, prompt_mask=prompt_mask,
            completion_ids=completion_ids, completion_mask=mask, sampling_logprobs=logprobs * mask,
            completions=texts, truncated=~stopped)
