"""Thinking budgets: cap the think section at B tokens, then force the answer.

Budget forcing as in s1 (Muennighoff et al. 2025, "s1: Simple test-time scaling"): a completion's first B
tokens are its thinking allowance. A sample that has not written `</think>` (nor stopped) within them gets the
end-of-thinking delimiter appended (R1's `</think>`) and `answer_tokens` more tokens to state its answer. A
sample that closed `</think>` within B tokens goes on unchanged up to max_new_tokens in all (max(B,
max_new_tokens) when B is larger), so for it the budget changes nothing: sampling in two calls draws from the
same distribution as one call. Budget None means no cap (the wrapped engine runs as it is).

The second call re-reads prompt + first part as a new prompt (no KV cache is carried over): simple, and the
cost is one prefill per row. Forced delimiter tokens were not sampled: their sampling log-prob is 0 and they
are marked in `BudgetedRollout.forced`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from rlvr.rollout.base import SamplingParams
from rlvr.rollout.hf import HFRolloutEngine
from rlvr.types import Prompt, RolloutBatch

THINK_CLOSE = "</think>"  # DeepSeek-R1's end-of-thinking delimiter (what the format verifiers look for)
CLOSE_TEXT = "\n</think>\n"  # appended when the budget runs out; the newlines keep it on its own line


@dataclass
class BudgetedRollout(RolloutBatch):
    # [B] bool: the budget closed </think> for this row (keyword-only: RolloutBatch's last field has a default)
    forced: torch.Tensor = field(kw_only=True)


@dataclass
class _Part:
    """One row's tokens so far (a plain list: rows grow by different amounts)."""

    tokens: list[int]
    logprobs: list[float]
    stopped: bool  # ended with a stop token


class BudgetedEngine:
    """An HFRolloutEngine whose completions spend at most `think_budget` tokens before `</think>`."""

    def __init__(self, engine: HFRolloutEngine, think_budget: int | None, answer_tokens: int):
        if think_budget is not None and think_budget < 1:
            raise ValueError(f"think budget must be >= 1 token (or None for no cap), got {think_budget}")
        if answer_tokens < 1:
            raise ValueError(f"answer budget must be >= 1 token, got {answer_tokens}")
        self.engine, self.think_budget, self.answer_tokens = engine, think_budget, answer_tokens
        self.tokenizer = engine.tokenizer
        self.close_ids: list[int] = self.tokenizer(CLOSE_TEXT, add_special_tokens=False)["input_ids"]

    def generate(self, prompts: list[Prompt], group_size: int, sampling: SamplingParams) -> RolloutBatch:
        if self.think_budget is None:
            return self.engine.generate(prompts, group_size, sampling)
        prompt_ids, prompt_mask = self.engine.encode(prompts)
        think = SamplingParams(sampling.temperature, sampling.top_p, self.think_budget)
        parts = self._parts(*self.engine.sample(prompt_ids, prompt_mask, group_size, think))
        contexts = [ids[mask > 0].tolist() for ids, mask in zip(prompt_ids, prompt_mask)]
        context = lambda row: contexts[row // group_size]  # noqa: E731
        closed = [THINK_CLOSE in self.tokenizer.decode(p.tokens, skip_special_tokens=False) for p in parts]
        forced = [not p.stopped and not c for p, c in zip(parts, closed)]
        for row in [r for r, f in enumerate(forced) if f]:
            parts[row].tokens += self.close_ids
            parts[row].logprobs += [0.0] * len(self.close_ids)
        rest = sampling.max_new_tokens - self.think_budget
        self._extend(parts, [r for r, p in enumerate(parts) if closed[r] and not p.stopped], context, sampling, rest)
        self._extend(parts, [r for r, f in enumerate(forced) if f], context, sampling, self.answer_tokens)
        return self._batch(prompts, group_size, prompt_ids, prompt_mask, parts, forced)

    def _parts(self, ids: torch.Tensor, logprobs: torch.Tensor) -> list[_Part]:
        """[R, C] sampled ids and log-probs -> per-row lists, cut after the first stop token."""
        stops = set(self.engine.stop_ids)
        parts = []
        for row_ids, row_logprobs in zip(ids.tolist(), logprobs.tolist()):
            stop = next((i for i, t in enumerate(row_ids) if t in stops), None)
            end = len(row_ids) if stop is None else stop + 1
            parts.append(_Part(row_ids[:end], row_logprobs[:end], stop is not None))
        return parts

    def _extend(self, parts: list[_Part], rows: list[int], context, sampling: SamplingParams, tokens: int) -> None:
        """Sample up to `tokens` more for `rows`, each continuing from its prompt + tokens so far."""
        if not rows or tokens < 1:
            return
        sequences = [context(row) + parts[row].tokens for row in rows]
        width = max(map(len, sequences))
        pad = self.tokenizer.pad_token_id
        device = next(self.engine.model.parameters()).device
        ids = torch.tensor([[pad] * (width - len(s)) + s for s in sequences], device=device)  # [R, L] left-padded
        mask = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in sequences], device=device)  # [R, L]
        more = self._parts(*self.engine.sample(ids, mask, 1, SamplingParams(sampling.temperature, sampling.top_p,
                                                                             tokens)))
        for row, extra in zip(rows, more):
            parts[row].tokens += extra.tokens
            parts[row].logprobs += extra.logprobs
            parts[row].stopped = extra.stopped

    def _batch(self, prompts: list[Prompt], group_size: int, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor,
               parts: list[_Part], forced: list[bool]) -> BudgetedRollout:
        width = max(len(p.tokens) for p in parts)
        pad = self.tokenizer.pad_token_id
        device = prompt_ids.device
        ids = torch.tensor([p.tokens + [pad] * (width - len(p.tokens)) for p in parts], device=device)  # [B, C]
        mask = torch.tensor([[1] * len(p.tokens) + [0] * (width - len(p.tokens)) for p in parts], device=device)
        logprobs = torch.tensor([p.logprobs + [0.0] * (width - len(p.logprobs)) for p in parts], device=device)
        texts = self.tokenizer.batch_decode([p.tokens for p in parts], skip_special_tokens=True)
        return BudgetedRollout(
            prompts=list(prompts), group_size=group_size, prompt_ids=prompt_ids, prompt_mask=prompt_mask,
            completion_ids=ids, completion_mask=mask, sampling_logprobs=logprobs, completions=texts,
            truncated=torch.tensor([not p.stopped for p in parts], device=device),
            forced=torch.tensor(forced, device=device))
