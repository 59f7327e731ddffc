"""What the explainer's views draw (rlvr/viz/static/explainer*.js): each part from the run the page is opened on
where the run holds it, else from the example recorded on the embedded model (rlvr/viz/example/explainer.json,
made by bench/explainer_record.py), and each part says which ("source") and, for the example, why.

Parts (the views that draw them):
  settings     the run's algorithm settings (every view marks the run's own values)
  group        one logged group: its prompt, G completions, verdicts and per-token numbers (1, 2, 7, 13)
  temperature  a temperature sweep of the embedded model (3)
  hacks        completions that game a weak check, with the naive and rlvr verdicts (4)
  difficulty   measured pass rates of the run's logged groups (5)
  kl           the run's KL curve and recorded runs at three betas (9)
  credit       a PPO group's per-token GAE advantages (10)
  process      an agent group's episodes with turn rewards (11)
  grid         short recorded runs over clip epsilon x beta x G (12)
"""
from __future__ import annotations

import functools
import json
import math
from dataclasses import asdict
from importlib import resources
from typing import Any

import yaml

from rlvr.config.run import AlgorithmConfig, EpisodeConfig, RolloutConfig
from rlvr.viz.jsonl import RunDataError, read_jsonl_tail
from rlvr.viz.rundata import Group, RunData, parse_group

TOKEN_DIGITS = 4  # per-token numbers only pick a colour or a worked example's digits; a report stays small
DIFFICULTY_LINES = 200  # groups.jsonl lines the difficulty view reads (the last ones): a long run's rebuild stays cheap
EXAMPLE_NAME = "explainer.json"


@functools.lru_cache(maxsize=1)
def load_example() -> dict[str, Any]:
    """The shipped example ({} when the package holds none: each view then says it has nothing to show)."""
    path = resources.files("rlvr.viz") / "example" / EXAMPLE_NAME
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}


def group_json(group: Group) -> dict[str, Any]:
    """A Group as the page reads it, per-token numbers rounded."""
    out = asdict(group)
    for completion in out["completions"]:
        for key in ("token_advantages", "token_ratios"):
            if completion[key] is not None:
                completion[key] = [round(v, TOKEN_DIGITS) for v in completion[key]]
        if completion["token_kl"] is not None:  # small values: significant digits, not decimals (0.00003 is no 0)
            completion["token_kl"] = [float(f"{v:.{TOKEN_DIGITS}g}") for v in completion["token_kl"]]
    return out


def _setting(value: Any, default: Any) -> Any:
    """A saved setting of the default's kind: a finite, non-negative number for a number (every numeric setting
    read here is one), a string for a string; anything else (a list, NaN, a bool, -1) reads as the default."""
    if isinstance(default, str) or default is None:
        return value if isinstance(value, str) else default
    number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
    return value if number else default


def run_settings(config_text: str) -> dict[str, Any]:
    """The run's settings the views mark, the trainer's defaults where config.yaml does not say."""
    try:
        saved = yaml.safe_load(config_text) or {}
    except yaml.YAMLError:
        saved = {}
    saved = saved if isinstance(saved, dict) else {}
    section = lambda name: saved.get(name) if isinstance(saved.get(name), dict) else {}  # noqa: E731
    out = {}
    for name, defaults, keys in (
            ("algorithm", AlgorithmConfig(), ("advantage", "objective", "beta", "clip_epsilon", "clip_epsilon_high",
                                              "std_epsilon", "kl_estimator", "kl_placement", "aggregation",
                                              "updates_per_batch", "entropy_coef")),
            ("rollout", RolloutConfig(), ("temperature", "group_size", "max_new_tokens")),
            ("episode", EpisodeConfig(), ("credit", "process_weight"))):
        for key in keys:
            default = getattr(defaults, key)
            out[key] = _setting(section(name).get(key, default), default if default is not None else 0.0)
    scorer = section("episode").get("process_reward")  # a name or a path, or None: the view only says one is set
    out["process_reward"] = scorer if isinstance(scorer, str) and scorer else None
    if not out["clip_epsilon_high"]:  # unset (None): the lower side's, as the trainer reads it
        out["clip_epsilon_high"] = out["clip_epsilon"]
    if not isinstance(out["group_size"], int) or out["group_size"] < 1:
        out["group_size"] = RolloutConfig().group_size
    return out


def _made(part: dict[str, Any]) -> str:
    return f"`{part.get('command', '?')}`, {part.get('date', 'date not recorded')}, commit {part.get('commit', '?')}"


def _example(name: str, why: str, **data: Any) -> dict[str, Any] | None:
    part = load_example().get(name)
    if part is None:
        return None
    return {"source": "example", "why": why, "made": _made(part), **data}


def _example_group(name: str, record: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if record is None else group_json(parse_group(record, f"the example's {name} group"))


def _teaching(group: Group) -> bool:
    rewards = {c.reward for c in group.completions}
    return len(group.completions) > 1 and len(rewards) > 1 and all(c.tokens for c in group.completions)


def group_part(run: RunData | None) -> dict[str, Any] | None:
    """The run's latest logged group whose rewards differ, else the example run's."""
    picks = [g for g in (run.groups if run else []) if _teaching(g)]
    if picks:
        return {"source": "run", "made": f"step {picks[-1].step}", "group": group_json(picks[-1])}
    example = load_example().get("example") or {}
    rows = [parse_group(r, "the example run's group") for r in example.get("groups", [])]
    rows = [g for g in rows if _teaching(g)]
    why = "logged no group whose rewards differ" if run and run.groups else "logged no group view (groups.jsonl)"
    settings = run_settings(example.get("config", ""))  # its beta and aggregation weigh its tokens, not the run's
    return _example("example", why, group=group_json(rows[-1]), settings=settings) if rows else None


def passes(completion: dict[str, Any]) -> bool:
    """Right: every verifier said correct (a completion without verdicts: a positive reward)."""
    verdicts = completion.get("verdicts")
    if isinstance(verdicts, dict) and verdicts:
        return all(isinstance(v, dict) and v.get("outcome") == "correct" for v in verdicts.values())
    reward = completion.get("reward")
    return isinstance(reward, (int, float)) and reward > 0


def _rates(record: dict[str, Any]) -> list[tuple[str, float]]:
    """(prompt, pass rate) of one groups.jsonl line: every group of its step ("pass_rates", written since the
    trainer logs them), else its one shown group, which was picked among the untied ones (a biased sample)."""
    rates = record.get("pass_rates")
    if isinstance(rates, list):
        return [(str(r[0]), float(r[1])) for r in rates if isinstance(r, list) and len(r) == 2
                and isinstance(r[1], (int, float)) and not isinstance(r[1], bool) and 0 <= r[1] <= 1]
    completions = record.get("completions")
    if isinstance(completions, list) and completions and all(isinstance(c, dict) for c in completions):
        return [(str(record.get("question", "")), sum(map(passes, completions)) / len(completions))]
    return []


def difficulty_part(run: RunData | None, settings: dict[str, Any]) -> dict[str, Any] | None:
    """Pass rates of the prompts of the run's last DIFFICULTY_LINES logged steps, else of the example's temperature
    sweep at the default temperature (and why)."""
    path = run.path / "groups.jsonl" if run else None
    points, shown_only, why = [], False, "logged no group view"
    if path is not None and path.is_file():
        try:
            for line in read_jsonl_tail(path, DIFFICULTY_LINES):
                shown_only = shown_only or "pass_rates" not in line.record
                points += [{"step": line.record.get("step"), "prompt": prompt, "pass_rate": rate}
                           for prompt, rate in _rates(line.record)]
        except RunDataError as err:
            points, why = [], f"has a groups.jsonl that could not be read ({err})"
    if points:
        made = f"{len(points)} prompts of its last {min(DIFFICULTY_LINES, len({p['step'] for p in points}))} " \
               "logged steps" + (" (only the group each step showed, picked among untied ones: tied prompts are "
                                 "missing)" if shown_only else "")
        return {"source": "run", "made": made, "group_size": settings["group_size"], "points": points}
    sweep = load_example().get("temperature") or {}
    rows = [r for r in sweep.get("rows", []) if r.get("temperature") == RolloutConfig().temperature]
    if not rows:
        return None
    return _example("temperature", why, group_size=sweep.get("group_size"),
                    points=[{"step": None, "prompt": f"prompt {i + 1}", "pass_rate": p}
                            for i, p in enumerate(rows[0]["pass_rates"])])


def kl_part(run: RunData | None, settings: dict[str, Any]) -> dict[str, Any] | None:
    """The run's KL curve beside the recorded grid runs at each beta (the default clip epsilon and G). A run at
    beta = 0 loads no reference: the zeros it logs as KL are no measurement, and are not drawn."""
    measured = run if settings["beta"] else None
    grid = load_example().get("grid") or {}
    default = AlgorithmConfig().clip_epsilon, RolloutConfig().group_size
    recorded = [{"beta": c["beta"], "steps": c["curves"]["steps"], "kl": c["curves"]["kl"]}
                for c in grid.get("cells", []) if (c["clip_epsilon"], c["group_size"]) == default]
    rows = [row for row in measured.rows if row.values.get("kl") is not None] if measured else []
    steps = [row.step for row in rows]
    own = {"steps": steps, "kl": [row.values["kl"] for row in rows]}
    if not recorded and not steps:
        return None
    made = (f"its KL per step; the runs at other betas: {_made(grid)}" if steps else _made(grid)) if grid \
        else "its KL per step"
    why = "" if steps else "trains at beta = 0, which loads no reference model: its KL is not measured" \
        if not settings["beta"] else "logged no KL"
    return {"source": "run" if steps else "example", "why": why, "made": made, "run": own,
            "recorded": sorted(recorded, key=lambda r: r["beta"]), "updates_per_batch": grid.get("updates_per_batch"),
            "measure_only_beta": grid.get("measure_only_beta")}


def credit_part(run: RunData | None, settings: dict[str, Any]) -> dict[str, Any] | None:
    """A group trained with GAE: the run's own when it used the critic, else the recorded PPO run's."""
    if run and settings["advantage"] == "gae":  # PPO samples one completion a prompt: any logged group will do
        picks = [g for g in run.groups if g.completions and all(c.tokens for c in g.completions)]
        if picks:
            return {"source": "run", "made": f"step {picks[-1].step}", "group": group_json(picks[-1]),
                    "std_epsilon": settings["std_epsilon"]}
    ppo = load_example().get("ppo") or {}
    why = "used the group baseline, not a critic" if run else "is missing"
    return _example("ppo", why, group=_example_group("PPO", ppo.get("group")), std_epsilon=ppo.get("std_epsilon"))


def _has_turn_rewards(group: Group) -> bool:
    return any(c.episode and c.episode.turn_rewards for c in group.completions)


def process_part(run: RunData | None, settings: dict[str, Any]) -> dict[str, Any] | None:
    """An agent group with turn rewards: the run's own, else the recorded calculator agent's."""
    picks = [g for g in (run.groups if run else []) if _has_turn_rewards(g)]
    if picks:
        return {"source": "run", "made": f"step {picks[-1].step}", "group": group_json(picks[-1]),
                "std_epsilon": settings["std_epsilon"], "credit": settings["credit"],
                "process_weight": settings["process_weight"], "process_reward": settings["process_reward"]}
    agent = load_example().get("agent") or {}
    return _example("agent", "has no multi-turn episodes with turn rewards", std_epsilon=agent.get("std_epsilon"),
                    credit="process", group=_example_group("agent", agent.get("group")))  # process_weight: 1


def _keys(part: dict[str, Any] | None, *keys: str) -> dict[str, Any]:
    return {k: v for k, v in (part or {}).items() if k in keys}


def _grid_defaults() -> dict[str, Any]:
    """The trainer's own clip epsilon, beta and G: the grid's comparison run."""
    a = AlgorithmConfig()
    return {"clip_epsilon": a.clip_epsilon, "beta": a.beta, "group_size": RolloutConfig().group_size}


def explainer_data(runs: list[RunData], scoring: str | None, explained: RunData | None = None) -> dict[str, Any]:
    """payload["explainer"] minus the numbers the build view opens with (page.py adds those), from `explained`
    (default: the first run). scoring: None when the page can score typed answers (a dashboard with the run's
    verifiers), else why it cannot."""
    run = explained or (runs[0] if runs else None)
    settings = run_settings(run.config_text if run else "")
    example = load_example()
    group = group_part(run)
    if scoring is None and (group is None or group["source"] != "run"):
        scoring = "this run has logged no group to answer yet: typed answers are scored against the run's own " \
                  "prompts, and the group shown is the recorded example's"
    try:
        difficulty = difficulty_part(run, settings)
    except RunDataError:  # a damaged groups.jsonl is named by the group view; here it only loses its points
        difficulty = None
    return {
        "settings": settings, "group": group,
        "temperature": _example("temperature", "", **_keys(example.get("temperature"), "rows", "prompts", "group_size",
                                                           "max_new_tokens")),
        "hacks": _example("hacks", "", cases=(example.get("hacks") or {}).get("cases", [])),
        "difficulty": difficulty, "kl": kl_part(run, settings), "credit": credit_part(run, settings),
        "process": process_part(run, settings),
        "grid": _example("grid", "", defaults=_grid_defaults(), **_keys(example.get("grid"), "axes", "steps",
                                                                         "updates_per_batch", "cells",
                                                                         "measure_only_beta")),
        "scoring": {"enabled": scoring is None, "why": scoring or ""}}

