"""Pure conversions between vLLM's request/response shapes and rlvr's RolloutBatch.

Kept apart from rollout/vllm.py, and free of any vllm import, so the part that can be wrong without a GPU (masks,
padding, truncation flags, which log-prob belongs to which token) is tested on CPU with stand-in objects
(tests/test_vllm_engine.py). Server mode's JSON replies are read into the same shapes (parse_completion_reply), so
both modes share one conversion. The shapes read here are vLLM's documented `RequestOutput` / `CompletionOutput`:
`.outputs[j].index / .token_ids / .logprobs / .finish_reason` and `.prompt_logprobs`, where every log-prob entry is
a dict token id -> object with `.logprob` (the sampled or prompt token is always among the keys).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from rlvr.errors import UserFacingError
from rlvr.rollout.hf import completion_mask, render_prompts
from rlvr.types import Prompt, RolloutBatch

# 0.10.2 is the first release whose "processed_logprobs" include temperature (earlier ones returned logits that
# were only penalised; trl#4163 bumped to 0.10.2 for the same reason, prime-rl#697 patched the sampler instead).
MIN_VLLM_VERSION = (0, 10, 2)


class VLLMError(UserFacingError, RuntimeError):
    """The vLLM engine cannot be built or returned something rlvr cannot read; one message for the user."""


# vLLM computes prompt log-probs from the raw logits (Trinity-RFT#384; vLLM PR #37082 proposes a
# `prompt_logprobs_temperature` sampling parameter): both modes refuse to probe at another temperature without it.
UNTEMPERED_PROMPT_LOGPROBS = (
    "the installed vLLM computes prompt log-probs without temperature, so the post-sync agreement probe cannot score "
    "at rollout.temperature={temperature}: set rollout.temperature=1.0, or rollout.engine.agreement_rows=0 (no probe; "
    "a sync that did not apply is then not caught), or install a vLLM whose SamplingParams has "
    "prompt_logprobs_temperature")


def encode_prompts(tokenizer, prompts: list[Prompt], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """[N, P] left-padded ids and mask, tokenized exactly as HFRolloutEngine.encode does."""
    encoded = tokenizer(render_prompts(tokenizer, prompts), return_tensors="pt", padding=True,
                        add_special_tokens=False)
    return encoded["input_ids"].to(device), encoded["attention_mask"].to(device)


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
    generator = torch.Generator().manual_seed(seed)  # host: seeds for vLLM's requests, as ints
    # host: with the host generator above; read back as Python ints
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
                        f"logprobs=0 / prompt_logprobs=0 requests (rlvr/rollout/vllm/engine.py)")
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
    # host: filled row by row from vLLM's Python lists, then moved to `device` once
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)  # [B, C]
    logprobs = torch.zeros((len(rows), width), dtype=torch.float32)  # [B, C]; host: as ids
    for b, row in enumerate(rows):
        ids[b, :len(row.token_ids)] = torch.tensor(row.token_ids, dtype=torch.long)  # host: as ids
        logprobs[b, :len(row.logprobs)] = torch.tensor(row.logprobs, dtype=torch.float32)  # host: as ids
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
    # host: filled entry by entry from vLLM's Python lists, then moved to the rollouts' device
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


# --- server mode: the OpenAI-compatible /v1/completions JSON, read into the same shapes as vLLM's RequestOutput ---
# With `return_tokens_as_token_ids` vLLM names every token "token_id:<id>" in `logprobs.tokens` (so ids survive
# detokenization); `logprobs.token_logprobs` holds the sampled token's log-prob; `prompt_logprobs` (a vLLM extension
# of the choice) is a list whose first entry is None and whose others map a token id (a JSON string key) to
# {"logprob": ..., "rank": ..., "decoded_token": ...}.
_TOKEN_ID = re.compile(r"token_id:(-?\d+)$")


@dataclass(frozen=True)
class TokenLogprob:
    """vllm.sequence.Logprob's one field rlvr reads."""

    logprob: float


@dataclass(frozen=True)
class ParsedCompletion:
    """One choice of a /v1/completions reply, shaped as vLLM's CompletionOutput."""

    index: int
    token_ids: list[int]
    logprobs: list[dict[int, TokenLogprob]]
    finish_reason: str


@dataclass(frozen=True)
class ParsedRequest:
    """One /v1/completions reply, shaped as vLLM's RequestOutput (outputs, prompt_logprobs)."""

    outputs: list[ParsedCompletion]
    prompt_logprobs: list[dict[int, TokenLogprob] | None] | None


def _token_id(text: Any, where: str) -> int:
    match = _TOKEN_ID.match(text) if isinstance(text, str) else None
    if match is None:
        raise VLLMError(f"the vLLM server named a token {text!r} at {where}, not 'token_id:<id>': the request must "
                        f"set return_tokens_as_token_ids (rlvr/rollout/vllm/server.py)")
    return int(match.group(1))


def _parsed_choice(choice: dict, where: str) -> ParsedCompletion:
    logprobs = choice.get("logprobs") or {}
    tokens, values = logprobs.get("tokens"), logprobs.get("token_logprobs")
    if not isinstance(tokens, list) or not isinstance(values, list) or len(tokens) != len(values) \
            or not all(isinstance(v, (int, float)) for v in values):
        raise VLLMError(f"the vLLM server returned no per-token log-probs for {where} (requests must set logprobs=0)")
    ids = [_token_id(t, f"{where}, position {p}") for p, t in enumerate(tokens)]
    entries = [{t: TokenLogprob(float(v))} for t, v in zip(ids, values)]
    return ParsedCompletion(int(choice.get("index", 0)), ids, entries, str(choice.get("finish_reason")))


def _parsed_prompt_logprobs(entries: Any, where: str) -> list[dict[int, TokenLogprob] | None] | None:
    if entries is None:
        return None
    try:
        return [None if e is None else {int(k): TokenLogprob(float(v["logprob"])) for k, v in e.items()}
                for e in entries]
    except (AttributeError, KeyError, TypeError, ValueError):
        raise VLLMError(f"the vLLM server's prompt_logprobs for {where} are not a list of token id -> "
                        f"{{'logprob': ...}} maps") from None


def parse_completion_reply(reply: Any, where: str, sampled: bool) -> ParsedRequest:
    """A /v1/completions JSON reply (one prompt, n choices) -> the RequestOutput shape sampled_rows (`sampled`:
    the choices' tokens and log-probs) or completion_logprobs (the prompt log-probs) read. Anything else is one
    VLLMError naming `where`."""
    choices = reply.get("choices") if isinstance(reply, dict) else None
    if not isinstance(choices, list) or not choices or not all(isinstance(c, dict) for c in choices):
        raise VLLMError(f"the vLLM server's reply for {where} has no 'choices' list: {str(reply)[:200]}")
    if sampled:
        return ParsedRequest([_parsed_choice(c, f"{where}, choice {j}") for j, c in enumerate(choices)], None)
    return ParsedRequest([], _parsed_prompt_logprobs(choices[0].get("prompt_logprobs"), where))
