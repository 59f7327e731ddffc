"""One run directory as typed records for `rlvr report` and `rlvr dashboard`.

Read-only: the run may be writing its logs meanwhile (see jsonl.py). Files read, all but metrics.jsonl optional:
  config.yaml     shown as text
  metrics.jsonl   one row per step (numeric keys are plotted; a last row may hold only the final eval/* keys)
  eval.jsonl      one row per evaluation (used when metrics.jsonl has no eval/* keys, as older runs)
  samples.jsonl   a few completions per step, with verdicts: a few are shown from the start, middle and end
  groups.jsonl    one prompt's whole group per step, token by token: the group view
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rlvr.config.run import AlgorithmConfig
from rlvr.viz.jsonl import JsonLine, RunDataError, read_jsonl, read_jsonl_steps, read_jsonl_tail

COMPLETIONS_PER_PHASE = 4  # samples shown for each of the start, middle and end steps
LATEST_GROUPS = 12  # steps of the group view a dashboard keeps (a report keeps the start, middle and end steps)
GroupPick = Literal["phases", "latest"]


@dataclass(frozen=True)
class MetricRow:
    step: int
    values: dict[str, float | None]  # numeric keys only; None where the run wrote null (a non-finite value)


@dataclass(frozen=True)
class Evaluation:
    step: int
    values: dict[str, float]  # the flat numbers of an eval.jsonl row: pass@1, pass@4, greedy, ...


@dataclass(frozen=True)
class Verdict:
    verifier: str
    outcome: str
    score: float | None
    detail: str


@dataclass(frozen=True)
class Message:
    role: str  # "assistant": the model's turn; any other role is the environment's (tool results, a game's reply)
    content: str


@dataclass(frozen=True)
class Episode:
    """How one multi-turn episode went: the "episode" of its samples.jsonl / groups.jsonl entry."""

    messages: list[Message]  # the turns after the prompt
    model_turns: int
    stop_reason: str
    valid_calls: int
    invalid_calls: int
    final_state: str
    turn_rewards: list[float] | None = None  # one step reward per model turn (process credit); None: not recorded


@dataclass(frozen=True)
class Completion:
    phase: str  # start | middle | end
    step: int
    prompt_id: str
    question: str
    reference: str
    text: str  # an episode's: its last model turn
    reward: float | None
    verdicts: list[Verdict]
    episode: Episode | None = None  # multi-turn episodes only


@dataclass(frozen=True)
class GroupCompletion:
    text: str
    reward: float | None
    advantage: float | None
    truncated: bool
    verdicts: list[Verdict]
    tokens: list[str]
    token_advantages: list[float]
    token_ratios: list[float] | None  # pi_new / pi_old per token after the step's update; None: not recorded
    sampled: list[bool] | None = None  # multi-turn episodes: False on the environment's tokens (drawn grey)
    episode: Episode | None = None  # multi-turn episodes only
    token_kl: list[float] | None = None  # the loss's per-token KL estimate to the reference; None: not recorded


@dataclass(frozen=True)
class Group:
    step: int
    phase: str  # start | middle | end in a report, "" in a dashboard (its latest steps)
    prompt_id: str
    question: str
    reference: str
    clip_low: float
    clip_high: float
    completions: list[GroupCompletion]


@dataclass
class RunData:
    name: str
    path: Path
    config_text: str
    rows: list[MetricRow]
    evaluations: list[Evaluation] = field(default_factory=list)
    completions: list[Completion] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)


def load_run(path: Path, groups: GroupPick = "phases", latest: int = LATEST_GROUPS,
             before_first_step: bool = False) -> RunData:
    """Read one run directory. groups="phases": the group view of the start, middle and end steps (a report,
    which must stay small); "latest": the last `latest` steps (a dashboard). before_first_step: a directory
    without metrics.jsonl yet is a run still loading its models (a dashboard started with the run), not an error."""
    path = Path(path)
    if not path.is_dir():
        raise RunDataError(f"{path}: no such run directory")
    metrics, config = path / "metrics.jsonl", path / "config.yaml"
    config_text = config.read_text(encoding="utf-8", errors="replace") if config.is_file() else ""
    if not metrics.is_file() and before_first_step:
        return RunData(name=path.resolve().name, path=path, config_text=config_text, rows=[])
    if not metrics.is_file():
        raise RunDataError(f"{path}: not a run directory with logs (no metrics.jsonl; a run writes it after "
                           "its first step)")
    return RunData(
        name=path.resolve().name, path=path, config_text=config_text,
        rows=sorted((_metric_row(metrics, line) for line in read_jsonl(metrics)), key=lambda r: r.step),
        evaluations=_evaluations(path / "eval.jsonl"),
        completions=_completions(path / "samples.jsonl"),
        groups=_groups(path / "groups.jsonl", groups, latest))


def phase_steps(steps: list[int]) -> list[tuple[str, int]]:
    """[("start", first), ("middle", steps[n // 2]), ("end", last)] over the distinct steps; with fewer than three
    steps, each step once (start and end win over middle)."""
    distinct = sorted(set(steps))
    if not distinct:
        return []
    first, middle, last = distinct[0], distinct[len(distinct) // 2], distinct[-1]
    picks = [("start", first)] + ([("middle", middle)] if middle not in (first, last) else [])
    return picks + ([("end", last)] if last != first else [])


def spread(items: list, count: int) -> list:
    """`count` items evenly spaced over `items`, first and last included (the best and worst of a sorted list)."""
    if len(items) <= count:
        return list(items)
    if count == 1:
        return [items[0]]
    return [items[round(i * (len(items) - 1) / (count - 1))] for i in range(count)]


def _number(value: Any) -> float | None:
    """A JSON number as a float; None for null, booleans, strings or non-finite values."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _step(path: Path, line: JsonLine) -> int:
    step = line.record.get("step")
    if isinstance(step, bool) or not isinstance(step, int):
        raise RunDataError(f"{path}: {line.where} has no integer \"step\"")
    return step


def _metric_row(path: Path, line: JsonLine) -> MetricRow:
    values = {key: _number(value) for key, value in line.record.items()
              if key != "step" and (value is None or _number(value) is not None)}
    return MetricRow(_step(path, line), values)


def _evaluations(path: Path) -> list[Evaluation]:
    if not path.is_file():
        return []
    out = []
    for line in read_jsonl(path):
        values = {k: _number(v) for k, v in line.record.items() if k != "step" and _number(v) is not None}
        out.append(Evaluation(_step(path, line), values))
    return sorted(out, key=lambda e: e.step)


def _text(record: dict[str, Any], key: str) -> str:
    value = record.get(key)
    return "" if value is None else str(value)


def _verdicts(path: Path, line: JsonLine, raw: Any) -> list[Verdict]:
    if raw is None:
        return []
    if not isinstance(raw, dict):
        raise RunDataError(f"{path}: {line.where}: \"verdicts\" is not an object of verifier -> verdict")
    out = []
    for verifier, verdict in raw.items():
        verdict = verdict if isinstance(verdict, dict) else {}
        out.append(Verdict(str(verifier), _text(verdict, "outcome"), _number(verdict.get("score")),
                           _text(verdict, "detail")))
    return out


def _completions(path: Path) -> list[Completion]:
    """COMPLETIONS_PER_PHASE samples of the start, middle and end steps, spread from the best reward to the worst."""
    if not path.is_file():
        return []
    lines = read_jsonl(path)
    by_step: dict[int, list[JsonLine]] = {}
    for line in lines:
        by_step.setdefault(_step(path, line), []).append(line)
    out = []
    for phase, step in phase_steps(list(by_step)):
        ranked = sorted(by_step[step], key=lambda ln: -(_number(ln.record.get("reward")) or 0.0))
        for line in spread(ranked, COMPLETIONS_PER_PHASE):
            r = line.record
            out.append(Completion(phase, step, _text(r, "prompt_id"), _text(r, "question"), _text(r, "reference"),
                                  _text(r, "completion"), _number(r.get("reward")),
                                  _verdicts(path, line, r.get("verdicts")), _episode(path, line, r.get("episode"))))
    return out


def _groups(path: Path, pick: GroupPick, latest: int) -> list[Group]:
    if not path.is_file():
        return []
    if pick == "latest":
        return [_group(path, line, "") for line in read_jsonl_tail(path, latest)]
    phases: dict[int, str] = {}

    def choose(steps: list[int]) -> list[int]:
        phases.update((step, phase) for phase, step in phase_steps(steps))
        return list(phases)
    picked = read_jsonl_steps(path, choose)
    if picked is not None:
        return [_group(path, line, phases[_step(path, line)]) for line in picked]
    by_step = {_step(path, line): line for line in read_jsonl(path)}  # one line per step; a repeat keeps the last
    return [_group(path, by_step[step], phase) for phase, step in phase_steps(list(by_step))]


def parse_group(record: dict[str, Any], where: str, phase: str = "") -> Group:
    """One groups.jsonl object read as the group view reads it (the explainer's example groups); `where` names
    it in errors."""
    return _group(Path("rlvr/viz/example/explainer.json"), JsonLine(where, record), phase)


def _group(path: Path, line: JsonLine, phase: str) -> Group:
    r = line.record
    default = AlgorithmConfig()  # a line without its clip range: the trainer's default range
    completions = r.get("completions")
    if not isinstance(completions, list) or not all(isinstance(c, dict) for c in completions):
        raise RunDataError(f"{path}: {line.where}: \"completions\" is not a list of objects")
    clip_low = _or(_number(r.get("clip_low")), default.clip_epsilon)
    clip_high = _or(_number(r.get("clip_high")), default.clip_high)
    return Group(_step(path, line), phase, _text(r, "prompt_id"), _text(r, "question"), _text(r, "reference"),
                 clip_low, clip_high, [_group_completion(path, line, c) for c in completions])


def _or(value: float | None, fallback: float) -> float:
    return fallback if value is None else value


def _group_completion(path: Path, line: JsonLine, c: dict[str, Any]) -> GroupCompletion:
    tokens = c.get("tokens") or []
    if not isinstance(tokens, list):
        raise RunDataError(f"{path}: {line.where}: \"tokens\" is not a list of strings")
    advantage = _number(c.get("advantage"))
    token_advantages = _per_token(path, line, "token_advantages", c.get("token_advantages"), len(tokens), 0.0)
    ratios, kl = c.get("token_ratios"), c.get("token_kl")
    return GroupCompletion(
        _text(c, "text"), _number(c.get("reward")), advantage, bool(c.get("truncated", False)),
        _verdicts(path, line, c.get("verdicts")), [str(t) for t in tokens],
        token_advantages if token_advantages is not None else [advantage or 0.0] * len(tokens),
        None if ratios is None else _per_token(path, line, "token_ratios", ratios, len(tokens), 1.0),
        _sampled(path, line, c.get("sampled"), len(tokens)), _episode(path, line, c.get("episode")),
        None if kl is None else _per_token(path, line, "token_kl", kl, len(tokens), 0.0))


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _episode(path: Path, line: JsonLine, raw: Any) -> Episode | None:
    """An "episode" entry (None: a single-turn line). Missing values read as empty; messages that are not a list
    of objects are an error that names the line, as other malformed lists are."""
    if raw is None:
        return None
    messages = raw.get("messages") if isinstance(raw, dict) else None
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise RunDataError(f"{path}: {line.where}: \"episode\" is not an object with a list of \"messages\" objects")
    turns = [Message(_text(m, "role"), _text(m, "content")) for m in messages]
    rewards = raw.get("turn_rewards")
    rewards = [_number(v) or 0.0 for v in rewards] if isinstance(rewards, list) else None
    return Episode(turns, sum(m.role == "assistant" for m in turns), _text(raw, "stop_reason"),
                   _count(raw.get("valid_calls")), _count(raw.get("invalid_calls")), _text(raw, "final_state"),
                   rewards)


def _sampled(path: Path, line: JsonLine, values: Any, length: int) -> list[bool] | None:
    if values is None:
        return None
    if not isinstance(values, list) or len(values) != length:
        raise RunDataError(f"{path}: {line.where}: \"sampled\" must be a list as long as \"tokens\" ({length})")
    return [bool(v) for v in values]


def _per_token(path: Path, line: JsonLine, key: str, values: Any, length: int,
               neutral: float) -> list[float] | None:
    """A per-token list, checked against the token count; a null (non-finite) entry becomes `neutral`, the value
    drawn uncoloured (advantage 0, ratio 1)."""
    if values is None:
        return None
    if not isinstance(values, list) or len(values) != length:
        raise RunDataError(f"{path}: {line.where}: \"{key}\" must be a list as long as \"tokens\" ({length})")
    return [neutral if _number(v) is None else float(v) for v in values]
