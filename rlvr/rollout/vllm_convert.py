"""Pure conversions between vLLM's request/response shapes and rlvr's RolloutBatch (issue #11, item 2).

Kept apart from rollout/vllm.py, and free of any vllm import, so the part that can be wrong without a GPU (masks,
padding, truncation flags, which log-prob belongs to which token) is tested on CPU with stand-in objects
(tests/test_vllm_engine.py). The shapes read here are vLLM's documented `RequestOutput` / `CompletionOutput`:
`.outputs[j].index / .token_ids / .logprobs / .finish_reason` and `.prompt_logprobs`, where every log-prob entry is
a dict token id -> object with `.logprob` (the sampled or prompt token is always among the keys).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from rlvr.rollout.hf import completion_mask
from rlvr.types import Prompt, RolloutBatch

# 0.10.2 is the first release whose "processed_logprobs" include temperature (earlier ones returned logits that
# were only penalised; trl#4163 bumped to 0.10.2 for the same reason, prime-rl#697 patched the sampler instead).
MIN_VLLM_VERSION = (0, 10, 2)


class VLLMError(RuntimeError):
    """The vLLM engine cannot be built or returned something rlvr cannot read; one message for the user."""

    user_facing = True


def version_tuple(version: str) -> tuple[int, int, int]:
    """'0.11.0rc2.dev5+gabc' -> (0, 11, 0): each of the first three parts' leading digits (a pre-release compares
    as its release)."""
    numbers = [int(m.group()) if (m := re.match(r"\d+", part)) else 0 for part in version.split(".")[:3]]
    major, minor, patch = (numbers + [0, 0, 0])[:3]
    return major, minor, patch


def check_vllm_version(version: str) -> None:
    if version_tuple(version) < MIN_VLLM_VERSION:
        need = ".".join(map(str, MIN_VLLM_VERSION))
        raise VLLMError(f"vLLM {version} is too old: rollout.engine.kind=vllm needs vLLM >= {need}, whose "
                        f"logprobs_mode='processed_logprobs' returns the log-probs of the tempered distribution the "
                        f"tokens were drawn from (pip install -U 'rlvr[vllm]')")


def request_seeds(seed: int | None, prompts: int) -> list[int | None]:
    """One seed per prompt request, derived from the call's seed: the same call seed gives the same draws, and two
    prompts never share a seed (equal seeds would correlate their groups). vLLM derives each of the n samples'
    seeds from its request's seed."""
    if seed is None:
        return [None] * prompts
    generator = torch.Generator().manual_seed(seed)
    return [int(s) for s in torch.randint(0, 2**62, (prompts,), generator=generator)]


def unpadded_prompts(prompt_ids: torch.Tensor, prompt_mask: torch.Tensor) -> list[list[int]]:
    """[N, P] left-padded ids and mask -> each prompt's real tokens (what vLLM is given as prompt_token_ids)."""
    return [ids[mask.bool()].tolist() for ids, mask in zip(prompt_ids.cpu(), prompt_mask.cpu())]


def scoring_requests(rollouts: RolloutBatch) -> list[list[int]]:
    """Per row: its prompt's tokens then its completion's real tokens (the mask is a prefix: tokens up to and
    including the stop token), to be teacher-forced through vLLM's prompt log-probs."""
    prompts = unpadded_prompts(rollouts.prompt_ids, rollouts.prompt_mask)
    lengths = rollouts.completion_mask.sum(dim=1).tolist()
    rows = rollouts.completion_ids.cpu()
    return [prompts[b // rollouts.group_size] + rows[b, :int(n)].tolist() for b, n in enumerate(lengths)]


def _logprob_of(entry: Any, token: int, where: str) -> float:
    if entry is None or token not in entry:
        raise VLLMError(f"vLLM returned no log-prob for token {token} at {where}; the engine must be built with "
                        f"logprobs=0 / prompt_logprobs=0 requests (rlvr/rollout/vllm.py)")
    return float(entry[token].logprob)


@dataclass(frozen=True)
class SampledRow:
    """One completion as vLLM returned it."""

    token_ids: list[int]  # len L <= max_new_tokens, the stop token kept when the row stopped
    logprobs: list[float]  # len L, log-prob of each token under the distribution it was drawn from
    finish_reason: str  # "stop" | "length"


def sampled_rows(outputs: Sequence[Any], group_size: int) -> list[SampledRow]:
    """Request outputs (one per prompt, in prompt order) -> B = N*G rows grouped by prompt, samples in index
    order (vLLM may finish the n samples of a request in any order)."""
    rows: list[SampledRow] = []
    for i, request in enumerate(outputs):
        samples = sorted(request.outputs, key=lambda o: getattr(o, "index", 0))
        if len(samples) != group_size:
            raise VLLMError(f"vLLM returned {len(samples)} completions for prompt {i}, expected n={group_size}")
        for sample in samples:
            tokens = list(sample.token_ids)
            if sample.logprobs is None or len(sample.logprobs) != len(tokens):
                raise VLLMError(f"vLLM returned no per-token log-probs for prompt {i} (requests must set logprobs=0)")
            values = [_logprob_of(e, t, f"prompt {i}, position {p}")
                      for p, (e, t) in enumerate(zip(sample.logprobs, tokens))]
            rows.append(SampledRow(tokens, values, str(sample.finish_reason)))
    return rows


def rollout_from_outputs(outputs: Sequence[Any], prompts: list[Prompt], group_size: int, prompt_ids: torch.Tensor,
                         prompt_mask: torch.Tensor, stop_ids: list[int], pad_id: int,
                         decode: Callable[[torch.Tensor], list[str]]) -> RolloutBatch:
    """vLLM request outputs -> the RolloutBatch HFRolloutEngine.generate builds: completions right-padded with
    `pad_id` to the longest row, mask up to and including the first stop token (completion_mask), log-probs 0 on
    padding, truncated = no stop token reached, texts decoded from the masked ids by `decode` (the trainer's
    tokenizer, so texts equal the in-process engine's)."""
    rows = sampled_rows(outputs, group_size)
    width = max([len(r.token_ids) for r in rows] + [1])
    device = prompt_ids.device
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)  # [B, C]
    logprobs = torch.zeros((len(rows), width), dtype=torch.float32)  # [B, C]
    for b, row in enumerate(rows):
        ids[b, :len(row.token_ids)] = torch.tensor(row.token_ids, dtype=torch.long)
        logprobs[b, :len(row.logprobs)] = torch.tensor(row.logprobs, dtype=torch.float32)
    ids, logprobs = ids.to(device), logprobs.to(device)
    mask = completion_mask(ids, stop_ids)  # [B, C]
    stopped = (torch.isin(ids, torch.tensor(stop_ids, device=device)) & (mask > 0)).any(dim=-1)  # [B]
    _check_finish_reasons(rows, stopped.tolist())
    shown = ids.masked_fill(mask == 0, pad_id)
    return RolloutBatch(prompts=list(prompts), group_size=group_size, prompt_ids=prompt_ids, prompt_mask=prompt_mask,
                        completion_ids=ids, completion_mask=mask, sampling_logprobs=logprobs * mask,
                        completions=decode(shown), truncated=~stopped)


def _check_finish_reasons(rows: list[SampledRow], stopped: list[bool]) -> None:
    """vLLM's reason must agree with the tokens: "stop" only with a stop token, "length" only without one (an
    aborted request, or a stop string rlvr never sets, would otherwise be read as a finished answer)."""
    for b, (row, hit) in enumerate(zip(rows, stopped)):
        if row.finish_reason not in ("stop", "length") or (row.finish_reason == "stop") != hit:
            raise VLLMError(f"vLLM finished completion {b} with reason {row.finish_reason!r} but its tokens "
                            f"{'contain' if hit else 'lack'} a stop token; only EOS stops are expected")


def completion_logprobs(outputs: Sequence[Any], rollouts: RolloutBatch) -> torch.Tensor:
    """Prompt log-probs of the scoring requests (scoring_requests, one per row, in row order) -> [B, C] log-probs
    of each row's completion tokens, 0 on padding. A request's prompt_logprobs has one entry per token, the first
    None (no context); completion token t of row b sits at index P_b + t."""
    requests = scoring_requests(rollouts)
    lengths = [int(n) for n in rollouts.completion_mask.sum(dim=1).tolist()]
    out = torch.zeros(rollouts.completion_ids.shape, dtype=torch.float32)  # [B, C]
    if len(outputs) != len(requests):
        raise VLLMError(f"vLLM scored {len(outputs)} sequences, expected {len(requests)}")
    for b, (request, tokens, n) in enumerate(zip(outputs, requests, lengths)):
        entries = request.prompt_logprobs
        if entries is None or len(entries) != len(tokens):
            raise VLLMError(f"vLLM returned no prompt log-probs for row {b} (requests must set prompt_logprobs=0)")
        start = len(tokens) - n
        for t in range(n):
            out[b, t] = _logprob_of(entries[start + t], tokens[start + t], f"row {b}, completion position {t}")
    return out.to(rollouts.completion_ids.device) * rollouts.completion_mask
