"""Inference-time scaling from Python: n samples per prompt, then one answer chosen by
majority vote over extracted answers, by the best score (best-of-N), or none (plain samples), optionally with
a thinking budget. The choices use the same rules as the evaluation's estimators (rlvr.evaluation.voting)."""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Literal, Sequence

from rlvr.config.run import EvalConfig, RolloutConfig
from rlvr.evaluation.budget import BudgetedEngine
from rlvr.evaluation.voting import Vote, best_index, extracted_answer, ranked_votes
from rlvr.rollout.base import SamplingParams
from rlvr.rollout.hf import HFRolloutEngine
from rlvr.types import Prompt, RolloutBatch, ScoredBatch

Mode = Literal["sample", "majority", "best_of"]
MODES: tuple[str, ...] = ("sample", "majority", "best_of")
# (prompts, completions) -> one score per completion; a Rewarder (whose call returns a ScoredBatch) or a reward pool
# (rlvr.rewards.pool.VerifierPool, scored through its submit) works too
Scorer = Callable[[list[Prompt], list[str]], Any]
_EVAL, _ROLLOUT = EvalConfig(), RolloutConfig()  # defaults come from rlvr.config.run only


@dataclass(frozen=True)
class Sample:
    text: str  # decoded completion
    answer: str | None  # normalised final answer (None: no answer; abstains from the vote)
    tokens: int  # completion tokens, EOS included
    truncated: bool  # ran out of tokens before EOS
    forced: bool  # the thinking budget closed </think> for it
    score: float | None  # the scorer's score (None when no scorer was given)


@dataclass(frozen=True)
class Generation:
    """n samples of one prompt and the one chosen."""

    prompt: Prompt
    mode: str
    samples: tuple[Sample, ...]
    chosen: int  # index into samples
    votes: tuple[Vote, ...]  # distinct answers in tie-break rank (winner first)

    @property
    def text(self) -> str:
        return self.samples[self.chosen].text

    @property
    def answer(self) -> str | None:
        return self.samples[self.chosen].answer

    def as_json(self) -> dict[str, Any]:
        return {"prompt_id": self.prompt.id, "mode": self.mode, "chosen": self.chosen, "answer": self.answer,
                "completion": self.text, "votes": [{"answer": v.answer, "count": v.count} for v in self.votes],
                "samples": [vars(s) for s in self.samples]}


def as_prompt(prompt: Prompt | str, index: int) -> Prompt:
    """A bare string is one user turn with no reference (callers wanting the task's format build a Prompt with
    rlvr.tasks.chat.build_messages)."""
    if isinstance(prompt, Prompt):
        return prompt
    return Prompt(id=f"prompt/{index}", messages=({"role": "user", "content": prompt},), reference="")


def _takes_truncated(scorer: Scorer) -> bool:
    try:
        return "truncated" in inspect.signature(scorer).parameters
    except (TypeError, ValueError):  # builtins and some C callables have no signature
        return False


def scores_of(scorer: Scorer, prompts: list[Prompt], completions: list[str],
              truncated: Sequence[bool] | None = None) -> list[float]:
    """A scorer that takes `truncated` (Rewarder.score, the reward pool) gets the cut flags, so a completion cut at
    max_new_tokens scores as in training; a plain (prompts, completions) callable is called as before."""
    if truncated is not None and callable(getattr(scorer, "submit", None)):  # a reward pool (VerifierPool)
        result = scorer.submit(prompts, completions, truncated=list(truncated)).result()  # type: ignore[attr-defined]
    elif truncated is not None and _takes_truncated(scorer):
        result = scorer(prompts, completions, truncated=list(truncated))
    else:
        result = scorer(prompts, completions)
    values = result.rewards.tolist() if isinstance(result, ScoredBatch) else [float(x) for x in result]
    if len(values) != len(completions):
        raise ValueError(f"scorer returned {len(values)} scores for {len(completions)} completions")
    return values


def choose(mode: str, answers: Sequence[str | None], scores: Sequence[float] | None) -> int:
    """The chosen sample: majority = first sample of the winning answer (sample 0 when every sample abstains),
    best_of = highest score (earliest on ties), sample = sample 0."""
    if mode == "majority":
        votes = ranked_votes(answers)
        return votes[0].first if votes else 0
    if mode == "best_of":
        if scores is None:
            raise ValueError("mode 'best_of' needs a scorer")
        return best_index(scores)
    return 0


def _generations(batch: RolloutBatch, mode: str, answer_mode: str, scores: list[float] | None) -> list[Generation]:
    g, forced = batch.group_size, getattr(batch, "forced", None)
    lengths, truncated = batch.completion_mask.sum(dim=1).tolist(), batch.truncated.tolist()
    cut = [bool(x) for x in truncated]  # a cut completion votes only with an explicit answer
    samples = [Sample(text, extracted_answer(text, answer_mode, cut[i]), int(lengths[i]), cut[i],
                      bool(forced[i]) if forced is not None else False, None if scores is None else scores[i])
               for i, text in enumerate(batch.completions)]
    out = []
    for p, prompt in enumerate(batch.prompts):
        group = samples[p * g:(p + 1) * g]
        answers = [s.answer for s in group]
        chosen = choose(mode, answers, None if scores is None else [s.score for s in group])
        out.append(Generation(prompt, mode, tuple(group), chosen, tuple(ranked_votes(answers))))
    return out


def generate(model, tokenizer, prompts: Sequence[Prompt | str], n: int, mode: Mode = "sample", *,
             think_budget: int | None = None, scorer: Scorer | None = None, answer_mode: str = "strict",
             sampling: SamplingParams | None = None, answer_budget: int = _EVAL.answer_budget,
             batch_size: int = _EVAL.batch_size) -> list[Generation]:
    """n samples per prompt and the chosen one (see `choose`), in prompt order.

    think_budget: cap on the think section in tokens (rlvr.evaluation.budget), None = no cap; answer_budget:
    tokens for the answer after a forced </think>. scorer: needed for best_of (e.g. a Rewarder, whose total
    reward includes the reward model when configured); with any mode its scores are recorded. answer_mode: how
    answers are extracted for the vote (the math verifier's strict | last_number | latex). sampling: default
    the evaluation's temperature 0.6 and top-p 0.95 with rollout.max_new_tokens.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if mode == "best_of" and scorer is None:
        raise ValueError("mode 'best_of' needs a scorer (e.g. rlvr.rewards.rewarder.Rewarder.from_task(config.task))")
    sampling = sampling or SamplingParams(_EVAL.temperature, _EVAL.top_p, _ROLLOUT.max_new_tokens)
    engine = BudgetedEngine(HFRolloutEngine(model, tokenizer), think_budget, answer_budget)
    items = [as_prompt(p, i) for i, p in enumerate(prompts)]
    out: list[Generation] = []
    for start in range(0, len(items), batch_size):
        batch = engine.generate(items[start:start + batch_size], n, sampling)
        rows = [batch.prompt_of(i) for i in range(batch.size)]
        cut = [bool(x) for x in batch.truncated.tolist()]
        scores = scores_of(scorer, rows, batch.completions, cut) if scorer is not None else None
        out += _generations(batch, mode, answer_mode, scores)
    return out
