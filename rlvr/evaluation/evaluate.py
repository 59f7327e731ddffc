"""Evaluation with the training verifiers.

pass@1 as in the R1 paper (mean correctness of n samples per problem at temperature 0.6, top-p 0.95), and for
every k in eval.ks (k <= n; larger ones are skipped) the exact, unbiased estimators of evaluation/voting.py from
the same n samples: pass@k (Chen et al. 2021), maj@k (majority vote over extracted, normalised answers) and best-of-k
(the sample with the highest total training reward). Also the mean completion length in tokens (EOS included),
the share of truncated completions, greedy accuracy (when eval.greedy), verdict counts, the reasoning measures of
evaluation/reasoning.py (think words, reflection, stated arithmetic steps and how many hold), and the same numbers
per value of the prompts' "set" (eval.sets, evaluation/sets.py), "level", "source", "type", "subject" and "op"
columns, with each value's per-problem pass rates, so two models can be compared problem by problem per level.
(arithmetic's own "set" column, level and phrasing such as "L3 words_new", is replaced by the eval set's label when
eval.sets is given.)

A sample is correct when every verifier with weight > 0 says CORRECT (format as well as answer), except the
learned reward model ("reward_model") and the reward functions (reward.functions): their score is a preference or a
shaping term, not a check, so it counts in best-of-k's score and never in correctness.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Iterator, Sequence

import torch

from rlvr.config.run import EvalConfig, RunConfig
from rlvr.evaluation.reasoning import (
    NOT_MEASURED,
    ReasoningSummary,
    StepCheck,
    default_phrases,
    sample_reasoning,
    summarize_reasoning,
)
from rlvr.evaluation.voting import best_of_n, extracted_answer, maj_at_k, pass_at_k
from rlvr.metrics.progress import SILENT, Progress, ProgressFactory, Reporter
from rlvr.rewards.rewarder import Rewarder, build_rewarder
from rlvr.rollout.base import RolloutEngine, SamplingParams
from rlvr.seeding import seed_everything
from rlvr.types import Outcome, Prompt, RolloutBatch, ScoredBatch

__all__ = ["EvalResult", "ProblemSamples", "Summary", "collect", "correct_mask", "evaluate", "evaluate_model",
           "pass_at_k", "summarize"]

# = rewards/reward_model.py's NAME: scored, never required for correctness
UNGATED = ("reward_model",)
BREAKDOWN_KEYS = ("set", "level", "source", "type", "subject", "op")  # Prompt.columns keys reported per value


def correct_mask(scored: ScoredBatch, names: list[str] | None = None) -> torch.Tensor:
    """[B] bool: every verifier in `names` (default: all) said CORRECT (format and answer alike)."""
    gated = [scored.verdicts[name] for name in (names if names is not None else scored.verdicts)]
    rows = [all(v.outcome == Outcome.CORRECT for v in verdicts) for verdicts in zip(*gated)]
    return torch.tensor(rows, dtype=torch.bool)  # host: read back with .tolist()


def gated_names(rewarder: Rewarder) -> list[str]:
    """The components a correct sample must pass: weight > 0 (weight 0 is logged only), reward model and reward
    functions excluded (rlvr/rewards/functions.py: a function's value is not a check)."""
    return [name for name, (component, weight) in rewarder.components.items()
            if weight > 0 and name not in UNGATED and getattr(component, "gates_correctness", True)]


def answer_mode_of(rewarder: Rewarder) -> str | None:
    """The math verifier's answer mode, used to extract votes; None (no maj@k) for tasks without one (code)."""
    component = rewarder.components.get("math", (None, 0.0))[0]
    return getattr(component, "mode", None)


@dataclass(frozen=True)
class ProblemSamples:
    """The n samples of one problem, reduced to what the estimators read."""

    prompt: Prompt
    correct: tuple[bool, ...]  # n: every gated verifier said CORRECT
    answers: tuple[str | None, ...]  # n: normalised final answers (None abstains from votes)
    scores: tuple[float, ...]  # n: total training reward (reward model included)
    lengths: tuple[int, ...]  # n: completion tokens, EOS included
    truncated: tuple[bool, ...]  # n: max_new_tokens reached before EOS
    # the reasoning measures (evaluation/reasoning.py), n each; () in a record built without the texts
    think_words: tuple[int, ...] = ()  # words of the think section, 0 without one
    reflection: tuple[bool, ...] = ()  # a reflection phrase appears
    steps: tuple[StepCheck, ...] = ()  # arithmetic steps stated and wrong
    greedy: bool | None = None  # the greedy completion was correct; None when none was sampled


def problem_samples(batch: RolloutBatch, scored: ScoredBatch, gated: list[str], answer_mode: str | None,
                    phrases: Sequence[str] | None = None) -> list[ProblemSamples]:
    """Split a scored RolloutBatch (G rows per prompt, contiguous) into one record per prompt; reflection is read
    with `phrases` (default RunConfig's reflection_phrases)."""
    correct = correct_mask(scored, gated).tolist()  # [B]
    lengths = batch.completion_mask.sum(dim=1).tolist()  # [B]
    rewards, truncated, g = scored.rewards.tolist(), batch.truncated.tolist(), batch.group_size
    answers = [extracted_answer(text, answer_mode, bool(cut)) if answer_mode else None
               for text, cut in zip(batch.completions, truncated, strict=True)]
    phrases = default_phrases() if phrases is None else phrases
    measured = [sample_reasoning(text, phrases) for text in batch.completions]
    words, reflection, steps = zip(*measured) if measured else ((), (), ())
    rows = lambda values, i: tuple(values[i * g:(i + 1) * g])  # noqa: E731
    return [ProblemSamples(prompt, rows(correct, i), rows(answers, i), rows(rewards, i),
                           tuple(int(x) for x in rows(lengths, i)), rows(truncated, i), rows(words, i),
                           rows(reflection, i), rows(steps, i))
            for i, prompt in enumerate(batch.prompts)]


def _scored_chunks(engine: RolloutEngine, rewarder: Rewarder, prompts: list[Prompt], n: int,
                   sampling: SamplingParams, batch_size: int) -> Iterator[tuple[RolloutBatch, ScoredBatch]]:
    for start in range(0, len(prompts), batch_size):
        batch = engine.generate(prompts[start:start + batch_size], n, sampling)
        yield batch, rewarder.score_rollout(batch)


@dataclass
class EpisodeTally:
    """Multi-turn episodes: how the sampled episodes used their tools and turns."""

    episodes: int = 0
    turns: int = 0
    valid_calls: int = 0
    invalid_calls: int = 0
    stops: Counter[str] = field(default_factory=Counter)

    def add(self, batch: RolloutBatch) -> None:
        if batch.turns is None:
            return
        for record in batch.turns.records:
            self.episodes += 1
            self.turns += sum(m["role"] == "assistant" for m in record.messages)
            self.valid_calls += record.valid_calls
            self.invalid_calls += record.invalid_calls
            self.stops[record.stop_reason] += 1

    def as_json(self) -> dict[str, float]:
        """{} for single-turn tasks; else the share of tool calls that were valid, calls and turns per episode, and
        the share of episodes per stop reason."""
        if not self.episodes:
            return {}
        calls = self.valid_calls + self.invalid_calls
        return {"valid_call_share": self.valid_calls / calls if calls else 0.0,
                "calls_per_episode": calls / self.episodes, "valid_calls_per_episode": self.valid_calls / self.episodes,
                "turns_per_episode": self.turns / self.episodes,
                **{f"stop_{reason}": count / self.episodes for reason, count in sorted(self.stops.items())}}


def collect(engine: RolloutEngine, rewarder: Rewarder, prompts: list[Prompt], n: int, sampling: SamplingParams,
            batch_size: int, answer_mode: str | None, outcomes: Counter[str] | None = None,
            progress: Progress | None = None, episodes: EpisodeTally | None = None,
            phrases: Sequence[str] | None = None) -> list[ProblemSamples]:
    """n samples per prompt, scored and reduced; verdict counts are added to `outcomes` when given, each chunk's
    samples to `progress`, and episodes' tool use to `episodes`; reflection is read with `phrases`."""
    gated, found = gated_names(rewarder), []
    for batch, scored in _scored_chunks(engine, rewarder, prompts, n, sampling, batch_size):
        found += problem_samples(batch, scored, gated, answer_mode, phrases)
        if episodes is not None:
            episodes.add(batch)
        if progress is not None:
            progress.update(len(batch.prompts) * n)
        if outcomes is not None:
            for name, verdicts in scored.verdicts.items():
                outcomes.update(f"{name}/{v.outcome.value}" for v in verdicts)
    return found


@dataclass(frozen=True)
class Summary:
    """Estimators averaged over a set of problems (all of them, or one breakdown value)."""

    problems: int
    pass_at: dict[int, float]  # k -> pass@k
    maj_at: dict[int, float]  # k -> maj@k (empty without an answer extractor)
    best_of: dict[int, float]  # k -> best-of-k
    mean_length: float  # tokens per completion
    truncated: float  # share of completions that hit max_new_tokens
    greedy: float | None = None  # accuracy of the problems' greedy completions; None when any has none
    per_problem: list[float] = field(default_factory=list)  # each problem's pass rate, in prompt order
    reasoning: ReasoningSummary = NOT_MEASURED  # think words, reflection and step shares over all samples
    per_problem_greedy: list[float] = field(default_factory=list)  # each problem's greedy verdict (1/0); [] without

    def as_json(self) -> dict[str, Any]:
        return {"problems": self.problems, **{f"pass@{k}": v for k, v in self.pass_at.items()},
                **{f"maj@{k}": v for k, v in self.maj_at.items()},
                **{f"best_of_{k}": v for k, v in self.best_of.items()},
                "mean_length": self.mean_length, "truncated": self.truncated, "greedy": self.greedy,
                **self.reasoning._asdict(), "per_problem_pass@1": self.per_problem,
                "per_problem_greedy": self.per_problem_greedy}  # paired greedy changes


def summarize(samples: Sequence[ProblemSamples], ks: Sequence[int], vote: bool = True) -> Summary:
    """Mean over problems of each exact estimator, for every k (k must be <= each problem's n)."""
    if not samples:
        raise ValueError("a summary needs at least one problem")
    mean = lambda values: sum(values) / len(values)  # noqa: E731
    ks = sorted(set(ks))
    lengths = [x for s in samples for x in s.lengths]
    flat = lambda name: [x for s in samples for x in getattr(s, name)]  # noqa: E731
    greedy = [s.greedy for s in samples]
    return Summary(
        problems=len(samples),
        pass_at={k: mean([pass_at_k(len(s.correct), sum(s.correct), k) for s in samples]) for k in ks},
        maj_at={k: mean([maj_at_k(s.answers, s.correct, k) for s in samples]) for k in ks} if vote else {},
        best_of={k: mean([best_of_n(s.scores, s.correct, k) for s in samples]) for k in ks},
        mean_length=mean(lengths), truncated=mean([float(x) for s in samples for x in s.truncated]),
        greedy=None if None in greedy else mean([float(x) for x in greedy]),
        per_problem=[sum(s.correct) / len(s.correct) for s in samples],
        reasoning=summarize_reasoning(flat("think_words"), flat("reflection"), flat("steps")),
        per_problem_greedy=[] if None in greedy else [float(x) for x in greedy])


def breakdown(samples: Sequence[ProblemSamples], ks: Sequence[int],
              vote: bool = True) -> dict[str, dict[str, Summary]]:
    """key -> value -> Summary for each BREAKDOWN_KEYS column present (problems without it are left out)."""
    found: dict[str, dict[str, list[ProblemSamples]]] = {}
    for s in samples:
        for key in BREAKDOWN_KEYS:
            if s.prompt.columns.get(key) is not None:
                found.setdefault(key, {}).setdefault(str(s.prompt.columns[key]), []).append(s)
    return {key: {value: summarize(group, ks, vote) for value, group in sorted(groups.items())}
            for key, groups in found.items()}


@dataclass
class EvalResult:
    problems: int
    samples_per_problem: int
    temperature: float
    pass_at_1: float  # mean correctness of n samples per problem
    greedy: float | None  # accuracy of the greedy completion; None when eval.greedy is off
    pass_at_k: dict[int, float] = field(default_factory=dict)
    maj_at_k: dict[int, float] = field(default_factory=dict)
    best_of_k: dict[int, float] = field(default_factory=dict)
    mean_length: float = 0.0  # tokens per sampled completion, EOS included
    truncated: float = 0.0  # share of sampled completions that hit max_new_tokens
    outcomes: dict[str, int] = field(default_factory=dict)  # sampled completions, per verifier/outcome
    breakdown: dict[str, dict[str, Summary]] = field(default_factory=dict)
    per_problem: list[float] = field(default_factory=list)  # [P] each problem's pass rate, in prompt order
    episodes: dict[str, float] = field(default_factory=dict)  # multi-turn tasks: EpisodeTally.as_json()
    reasoning: ReasoningSummary = NOT_MEASURED  # evaluation/reasoning.py's measures over all sampled completions
    per_problem_greedy: list[float] = field(default_factory=list)  # [P] each problem's greedy verdict; [] without

    def as_json(self) -> dict[str, Any]:
        """Flat keys ("pass@1", "pass@4", "maj@4", "best_of_4", "mean_length", "greedy", ...) plus the nested
        "outcomes" and "breakdown" ({key: {value: {"problems", "pass@1", "maj@4", ...}}})."""
        return {"problems": self.problems, "samples_per_problem": self.samples_per_problem,
                "temperature": self.temperature, "pass@1": self.pass_at_1,
                **{f"pass@{k}": v for k, v in self.pass_at_k.items() if k != 1},
                **{f"maj@{k}": v for k, v in self.maj_at_k.items()},
                **{f"best_of_{k}": v for k, v in self.best_of_k.items()},
                "mean_length": self.mean_length, "truncated": self.truncated, "greedy": self.greedy,
                **self.reasoning._asdict(), "outcomes": self.outcomes,
                "breakdown": {key: {value: s.as_json() for value, s in values.items()}
                              for key, values in self.breakdown.items()},
                **{f"episode/{k}": v for k, v in self.episodes.items()},
                "per_problem_pass@1": self.per_problem,  # for paired comparisons between models
                "per_problem_greedy": self.per_problem_greedy}

    def metrics(self, prefix: str = "eval/") -> dict[str, float]:
        """The flat numbers only, prefixed ("eval/pass@1", ...): a plot-ready row for metrics.jsonl."""
        return {prefix + key: value for key, value in self.as_json().items()
                if isinstance(value, (int, float)) and not isinstance(value, bool) and key != "temperature"}

    def summary(self) -> str:
        """One log line: pass@1, the largest k's estimators, greedy, length."""
        k = max(self.pass_at_k, default=1)
        parts = [f"pass@1 {self.pass_at_1:.3f} (n={self.samples_per_problem}, T={self.temperature:g})"]
        if k > 1:
            parts.append(f"pass@{k} {self.pass_at_k[k]:.3f}")
        parts += [f"maj@{k} {self.maj_at_k[k]:.3f}"] if k in self.maj_at_k else []
        parts += [f"best_of_{k} {self.best_of_k[k]:.3f}"] if k in self.best_of_k else []
        parts += [f"greedy {self.greedy:.3f}"] if self.greedy is not None else []
        if self.reasoning.think_words is not None:
            parts.append(f"think {self.reasoning.think_words:.1f} words")
        if self.reasoning.steps_right is not None:
            parts.append(f"steps right {self.reasoning.steps_right:.3f}")
        if self.episodes:
            parts.append(f"valid calls {self.episodes['valid_call_share']:.3f} "
                         f"({self.episodes['calls_per_episode']:.2f}/episode)")
        return " | ".join(parts + [f"len {self.mean_length:.1f}", f"{self.problems} problems"])


def evaluate(engine: RolloutEngine, rewarder: Rewarder, prompts: list[Prompt], config: EvalConfig,
             max_new_tokens: int, ks: Sequence[int] | None = None, answer_mode: str | None = None,
             progress: ProgressFactory = SILENT, reflection_phrases: Sequence[str] | None = None) -> EvalResult:
    """Sample config.samples completions per prompt (and one greedy when config.greedy) and estimate.

    ks: default config.ks; k > n is skipped. answer_mode: how votes are extracted; default the rewarder's math
    verifier's mode (no maj@k when it has none). progress: shows the samples generated (the greedy ones included)
    as they are scored; default nothing. reflection_phrases: default RunConfig's.
    """
    if not prompts:
        raise ValueError("evaluation needs at least one held-out problem")
    n = config.samples
    answer_mode = answer_mode if answer_mode is not None else answer_mode_of(rewarder)
    usable = sorted({1, *(k for k in (config.ks if ks is None else ks) if 1 <= k <= n)})
    outcomes: Counter[str] = Counter()
    tally = EpisodeTally()
    sampling = SamplingParams(config.temperature, config.top_p, max_new_tokens)
    with progress("evaluating", len(prompts) * (n + int(config.greedy)), "samples") as bar:
        sampled = collect(engine, rewarder, prompts, n, sampling, config.batch_size, answer_mode, outcomes, bar,
                          tally, reflection_phrases)
        if config.greedy:  # each problem's greedy verdict joins its record, so every breakdown value has its own
            picked = collect(engine, rewarder, prompts, 1, SamplingParams(0.0, 1.0, max_new_tokens),
                             config.batch_size, None, progress=bar, phrases=reflection_phrases)
            sampled = [replace(s, greedy=p.correct[0]) for s, p in zip(sampled, picked)]
    whole = summarize(sampled, usable, vote=answer_mode is not None)
    return EvalResult(
        problems=len(prompts), samples_per_problem=n, temperature=config.temperature, pass_at_1=whole.pass_at[1],
        greedy=whole.greedy, pass_at_k=whole.pass_at, maj_at_k=whole.maj_at, best_of_k=whole.best_of,
        mean_length=whole.mean_length, truncated=whole.truncated, outcomes=dict(sorted(outcomes.items())),
        breakdown=breakdown(sampled, usable, vote=answer_mode is not None), per_problem=whole.per_problem,
        episodes=tally.as_json(), reasoning=whole.reasoning, per_problem_greedy=whole.per_problem_greedy)


def evaluate_model(config: RunConfig, model_path: str) -> EvalResult:
    """Evaluate a model (directory, hub id or 'embedded') on config.task's held-out split, or on each of
    config.eval.sets (config.eval.size problems each; evaluation/sets.py), with config.eval's sampling and ks and
    config.rollout.max_new_tokens. Seeded with config.seed.
    Progress goes to stderr as logging.progress says (`rlvr eval` prints its JSON on stdout)."""
    from rlvr.agents.wiring import episode_engine, episode_parts, episode_rewarder
    from rlvr.evaluation.sets import evaluation_prompts
    from rlvr.model.load import load_model, load_tokenizer
    from rlvr.rollout.hf import HFRolloutEngine
    from rlvr.tasks import build_task
    from rlvr.verifiers import math_answer_mode

    config = config.model_copy(deep=True)
    config.model = config.model.at(model_path)  # a random-init run's checkpoint is its trained weights
    # the training reward (verifiers + reward model when reward.model_path is set); a bad task fails before any
    # model loads
    task = build_task(config.task)
    episodes = episode_parts(task, config)  # multi-turn tasks: episodes scored with their state
    rewarder = build_rewarder(config) if episodes is None else episode_rewarder(episodes)
    prompts = evaluation_prompts(config, task)  # eval.sets: every set's task is built, and checked, here
    tokenizer = load_tokenizer(config.model)
    model = load_model(config.model, trainable=False)
    seed_everything(config.seed, python=False)  # torch only, as always (rlvr/seeding.py)
    mode = math_answer_mode(config.task) if "math" in rewarder.components else None
    engine = HFRolloutEngine.configured(model, tokenizer, config.rollout)
    engine = engine if episodes is None else episode_engine(engine, tokenizer, episodes)
    return evaluate(engine, rewarder, prompts, config.eval, config.rollout.max_new_tokens, answer_mode=mode,
                    progress=Reporter.from_config(config.logging), reflection_phrases=config.reflection_phrases)
