"""Records passed between the stages of the loop (docs/design.md: typed records, masks from the source).

prompts -> RolloutBatch -> verdicts -> rewards -> advantages -> TrainBatch -> loss
Shapes: B = completions in the batch (prompts x G), P = prompt length, C = completion length.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # verifiers import this module in torch-free worker processes
    import torch


@dataclass(frozen=True)
class Prompt:
    """One verifiable problem: chat messages plus the reference answer the verifiers check against."""

    id: str  # stable identifier, e.g. "arithmetic/train/3 + 4"
    messages: tuple[dict[str, str], ...]  # chat turns (role, content); the chat template is applied later
    reference: str  # gold answer as text ("7", "\\frac{1}{2}", ...)
    columns: dict[str, Any] = field(default_factory=dict)  # extra dataset columns, passed to TRL-style reward funcs


class Outcome(str, enum.Enum):
    """What a verifier concluded. Only CORRECT may earn a full score (never a silent 1)."""

    CORRECT = "correct"
    WRONG = "wrong"
    UNPARSEABLE = "unparseable"  # no final answer could be extracted from the completion
    TIMEOUT = "timeout"  # the check ran past its time budget
    ERROR = "error"  # the verifier itself failed; counted, scored 0


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    score: float  # in [0, 1]
    detail: str = ""  # human-readable reason, e.g. "extracted 12, expected 13"
    # False when the *reference* is at fault (gold answer unparseable): the sample is then excluded from
    # its group's baseline and never rewarded (open-r1 PR#566 scored such samples 1.0).
    scorable: bool = True

    def as_json(self) -> dict[str, Any]:
        data = {"outcome": self.outcome.value, "score": self.score, "detail": self.detail}
        return data if self.scorable else {**data, "scorable": False}


@dataclass
class Turns:
    """Multi-turn episodes (rlvr/agents): where each model turn sits in a row's completion.

    An episode's completion is one token sequence: the sampled ids as sampled, the environment's turns tokenized
    and appended between them. RolloutBatch.completion_mask is 1 on sampled tokens only (they carry the loss and
    the KL); environment tokens are 0 there yet are real context: the log-prob forwards attend to every position
    up to a row's last sampled token (`row_extent`).
    """

    turn_of_token: torch.Tensor  # [B, C] long: index of the model turn that sampled the token; -1 elsewhere
    turn_rewards: torch.Tensor  # [B, T] float: the environment's step reward for each model turn (0 = none)
    turn_mask: torch.Tensor  # [B, T] bool: model turn t of the row is a step (every turn but a final answer)
    records: list[Any]  # len B rlvr.agents.protocol.EpisodeRecord: messages, final state, stop reason, call counts

    def to(self, device: "torch.device | str") -> "Turns":
        return Turns(self.turn_of_token.to(device), self.turn_rewards.to(device), self.turn_mask.to(device),
                     self.records)

    def rows(self, index: "torch.Tensor") -> "Turns":
        """The listed rows, in that order (dynamic sampling's chosen groups, grpo/dynamic_sampling.py)."""
        return Turns(self.turn_of_token[index], self.turn_rewards[index], self.turn_mask[index],
                     [self.records[int(i)] for i in index])


@dataclass
class RolloutBatch:
    """G sampled completions per prompt, grouped contiguously: rows [g*G, (g+1)*G) share prompts[g].

    Prompts are stored once per prompt, not once per completion: the G completions share the prompt's
    KV cache when sampling and when scoring (logprobs.py), so the prompt is never recomputed G times.
    """

    prompts: list[Prompt]  # len N = B / G
    group_size: int  # G
    prompt_ids: torch.Tensor  # [N, P] left-padded
    prompt_mask: torch.Tensor  # [N, P] 1 = real token
    completion_ids: torch.Tensor  # [B, C] right-padded
    completion_mask: torch.Tensor  # [B, C] 1 = generated token, EOS included, padding excluded
    sampling_logprobs: torch.Tensor  # [B, C] log-prob of each sampled token under the sampling distribution
    completions: list[str]  # len B, decoded text without special tokens
    truncated: torch.Tensor  # [B] bool, True when max_new_tokens was hit before EOS (an episode: a budget cut it)
    turns: Turns | None = None  # multi-turn episodes only; completions then hold each episode's last model turn

    @property
    def size(self) -> int:
        return self.completion_ids.shape[0]

    def prompt_of(self, row: int) -> Prompt:
        return self.prompts[row // self.group_size]

    def to(self, device: "torch.device | str") -> "RolloutBatch":
        """The batch's tensors on `device`. An engine in another process sends and receives host tensors only: CUDA
        tensors shared across processes cannot be sent on again (a CUDA run of hf_process failed so)."""
        move = lambda t: t.to(device)  # noqa: E731
        return RolloutBatch(self.prompts, self.group_size, move(self.prompt_ids), move(self.prompt_mask),
                            move(self.completion_ids), move(self.completion_mask), move(self.sampling_logprobs),
                            self.completions, move(self.truncated),
                            None if self.turns is None else self.turns.to(device))

    @property
    def prompt_index(self) -> torch.Tensor:
        """[B] long: row -> its prompt's row in prompt_ids (rows are grouped contiguously)."""
        import torch

        return torch.arange(self.size, device=self.completion_ids.device) // self.group_size


@dataclass
class ScoredBatch:
    """Rewards for a RolloutBatch: one weighted reward per completion plus each verifier's verdicts."""

    rewards: torch.Tensor  # [B] float
    scorable: torch.Tensor  # [B] bool: False where any verifier could not read the reference
    verdicts: dict[str, list[Verdict]]  # verifier name -> len-B verdicts (custom reward funcs get outcome from value)
    scores: dict[str, torch.Tensor]  # verifier name -> [B] score

    def to(self, device: "torch.device | str") -> "ScoredBatch":
        """The scores on `device`. The verifiers' scores are made on the host; the trainer moves them to the
        rollouts' device before they meet the policy's tensors (a CUDA run crashed there)."""
        return ScoredBatch(self.rewards.to(device), self.scorable.to(device), self.verdicts,
                           {name: score.to(device) for name, score in self.scores.items()})


@dataclass
class TrainBatch:
    """Everything the update needs; the trainer is algorithm-blind (docs/design.md principle 3)."""

    prompt_ids: torch.Tensor  # [N, P] left-padded, one row per distinct prompt
    prompt_mask: torch.Tensor  # [N, P]
    prompt_index: torch.Tensor  # [B] long: row -> its prompt's row in prompt_ids
    completion_ids: torch.Tensor  # [B, C]
    completion_mask: torch.Tensor  # [B, C] float: 1 on tokens that get a loss (0 for masked truncated rows)
    advantages: torch.Tensor  # [B] one per completion (outcome supervision) or [B, C] per token (GAE)
    old_logprobs: torch.Tensor | None  # [B, C] or None when mu == 1 (ratio taken against detached current)
    ref_logprobs: torch.Tensor | None  # [B, C] or None when beta == 0
    # [B, C] the sampler's log-probs: the behaviour policy mu of rollout correction; None = no correction
    behaviour_logprobs: torch.Tensor | None = None

    @property
    def size(self) -> int:
        return self.completion_ids.shape[0]

    def rows(self, index: "slice | torch.Tensor") -> "TrainBatch":
        """A micro-batch: completions are selected, prompts stay whole (prompt_index still points into them).

        Completion columns past the longest selected completion are dropped: they are padding, and a batch
        padded to one rambling sample's length would otherwise cost every row that length.
        """
        width = max(int(row_extent(self.completion_mask[index]).max()), 1) if self.size else 0
        pick = lambda t: None if t is None else t[index][:, :width]  # noqa: E731
        advantages = self.advantages[index] if self.advantages.dim() == 1 else pick(self.advantages)
        return TrainBatch(self.prompt_ids, self.prompt_mask, self.prompt_index[index], pick(self.completion_ids),
                          pick(self.completion_mask), advantages, pick(self.old_logprobs), pick(self.ref_logprobs),
                          pick(self.behaviour_logprobs))

    def by_length(self) -> "torch.Tensor":
        """Row order for micro-batches: longest group first, groups kept whole (length_order below)."""
        return length_order(self.completion_mask, self.prompt_index)


# --- helpers on the records, here so that every stage that needs one imports only this module (no
# import circles); torch is imported inside them, as above, for the torch-free verifier workers.

def length_order(completion_mask: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """Row order for micro-batching: groups (rows sharing a prompt) stay together, longest group first.

    Micro-batches of similar length waste the least padding, and keeping each group whole keeps one
    prompt prefill per group (sorting single rows would split groups and prefill their prompt twice).
    """
    import torch

    lengths = row_extent(completion_mask)
    # on the rows' device: a CPU tensor scattered into with CUDA indices crashed the first GPU step
    group_max = torch.zeros(int(rows.max()) + 1, dtype=lengths.dtype, device=rows.device).scatter_reduce(
        0, rows, lengths, reduce="amax", include_self=False)
    key = group_max[rows] * (rows.numel() + 1) - rows  # descending length, then ascending prompt index
    return key.argsort(descending=True, stable=True)


def row_extent(mask: torch.Tensor) -> torch.Tensor:
    """[B, C] mask -> [B] long: one past each row's last nonzero position (0 for an empty row). For a prefix mask
    that is its sum; an episode's loss mask has holes where the environment spoke, and the forward
    must still run over those tokens, so widths are cut at the extent, never at the count."""
    import torch

    positions = torch.arange(1, mask.shape[-1] + 1, device=mask.device)
    return (positions * (mask != 0)).amax(dim=-1) if mask.shape[-1] else mask.new_zeros(mask.shape[:-1]).long()


def _pad_left(t: torch.Tensor, width: int) -> torch.Tensor:
    import torch.nn.functional as F

    return F.pad(t, (width - t.shape[1], 0))


def _pad_right(t: torch.Tensor, width: int) -> torch.Tensor:
    import torch.nn.functional as F

    return F.pad(t, (0, width - t.shape[1]))


def concat_groups(parts: list[tuple[RolloutBatch, ScoredBatch]]) -> tuple[RolloutBatch, ScoredBatch]:
    """Batches from several draws (dynamic sampling) or ranks (distributed/gather.py) -> one. Prompts are
    re-padded on the left, completions on the right; the padding value is irrelevant because masks (not pad ids)
    say which tokens exist (docs/design.md principle 6)."""
    import torch

    rollouts = [r for r, _ in parts]
    P = max(r.prompt_ids.shape[1] for r in rollouts)
    C = max(r.completion_ids.shape[1] for r in rollouts)
    merged = RolloutBatch(
        prompts=[p for r in rollouts for p in r.prompts], group_size=rollouts[0].group_size,
        prompt_ids=torch.cat([_pad_left(r.prompt_ids, P) for r in rollouts]),
        prompt_mask=torch.cat([_pad_left(r.prompt_mask, P) for r in rollouts]),
        completion_ids=torch.cat([_pad_right(r.completion_ids, C) for r in rollouts]),
        completion_mask=torch.cat([_pad_right(r.completion_mask, C) for r in rollouts]),
        sampling_logprobs=torch.cat([_pad_right(r.sampling_logprobs, C) for r in rollouts]),
        completions=[c for r in rollouts for c in r.completions],
        truncated=torch.cat([r.truncated for r in rollouts]),
        turns=concat_turns([r.turns for r in rollouts], C))
    scored = [s for _, s in parts]
    merged_scores = ScoredBatch(
        rewards=torch.cat([s.rewards for s in scored]), scorable=torch.cat([s.scorable for s in scored]),
        verdicts={k: [v for s in scored for v in s.verdicts[k]] for k in scored[0].verdicts},
        scores={k: torch.cat([s.scores[k] for s in scored]) for k in scored[0].scores})
    return merged, merged_scores


def concat_turns(parts: list[Turns | None], width: int) -> Turns | None:
    """The Turns of batches concat_groups joins (None: single-turn batches). Dropping them there turned an episode
    batch into a single-turn one after dynamic sampling, silently: no process credit, no episode logs.
    turn_of_token is padded with -1 (no model turn) to the joined completion width, the per-turn tensors with
    0 / False to the most turns of any part."""
    import torch
    import torch.nn.functional as F

    if all(p is None for p in parts):
        return None
    if any(p is None for p in parts):
        raise ValueError("concat_groups: a batch of episodes cannot be joined with single-turn batches")
    turns = max(p.turn_mask.shape[1] for p in parts)
    return Turns(torch.cat([F.pad(p.turn_of_token, (0, width - p.turn_of_token.shape[1]), value=-1) for p in parts]),
                 torch.cat([_pad_right(p.turn_rewards, turns) for p in parts]),
                 torch.cat([_pad_right(p.turn_mask, turns) for p in parts]),
                 [record for p in parts for record in p.records])
