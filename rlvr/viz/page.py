"""The page shared by `rlvr report` and `rlvr dashboard`: the JSON payload it draws and the HTML around it.

One template, its scripts and one style sheet (rlvr/viz/static/) are inlined into a single HTML document, with the
payload in a <script type="application/json"> block: a report opens offline from file://, and a dashboard serves
the same document and then polls /api/data for new payloads.
"""
from __future__ import annotations

import json
import re
import time
from dataclasses import asdict
from importlib import resources
from typing import Any, get_args

from rlvr.config.run import AlgorithmConfig, KLName
from rlvr.viz.explainer_data import explainer_data, group_json, run_settings
from rlvr.viz.rundata import RunData

FORMAT = 1  # payload layout version, read by page.js
GENERATOR = '<meta name="generator" content="rlvr report">'  # marks a file `rlvr report` may replace
# Inlined in this order: explainer.js defines the explainer's core, each view file adds its views to it, page.js
# starts it all.
SCRIPTS = ("explainer.js", "explainer_build.js", "explainer_group.js", "explainer_token.js", "explainer_runs.js",
           "explainer_credit.js", "page.js")
STYLES = ("page.css", "explainer.css", "explainer_group.css", "explainer_token.css", "explainer_runs.css")
# The explainer's first inputs. The algorithm's numbers are the trainer's defaults; the rewards, ratio and token
# probabilities are only an example to start from (a group of 4 with two right answers, a ratio past the clip).
EXAMPLE = {"rewards": [1.0, 0.0, 0.0, 1.0], "ratio": 1.25, "pi": 0.30, "pi_ref": 0.25}


def payload(runs: list[RunData], live: bool, recipes: list[tuple[str, str]] = (),
            scoring: str | None = "typing an answer needs the dashboard (`rlvr dashboard RUN_DIR`)",
            explained: RunData | None = None) -> dict[str, Any]:
    """Everything the page draws, as JSON-ready data; run names are made unique for the legends. recipes: (name,
    summary text) of the recipe directories given (the per-stage tables, reasoning included). scoring: None when
    the page can send typed answers to the run's verifiers (a dashboard), else why it cannot. explained: the run
    the explainer draws from (default: the first)."""
    names = _unique([run.name for run in runs])
    return {
        "format": FORMAT, "live": live, "generated": time.strftime("%Y-%m-%d %H:%M:%S"),
        "explainer": {**EXAMPLE, **explainer_settings((explained or runs[0]).config_text if runs else ""),
                      **explainer_data(runs, scoring, explained)},
        "runs": [_run(run, name) for run, name in zip(runs, names)],
        "recipes": [{"name": name, "summary": summary} for name, summary in recipes]}


def explainer_settings(config_text: str) -> dict[str, float | str]:
    """eps_low/eps_high/beta/std_eps, the KL estimator and where the KL is charged, for the build view: the run's own
    (a clip-higher run's range, a k1 run's estimator), the trainer's defaults where the config does not say (or
    cannot be read)."""
    s = run_settings(config_text)
    estimator = s["kl_estimator"] if s["kl_estimator"] in get_args(KLName) else AlgorithmConfig().kl_estimator
    return {"eps_low": float(s["clip_epsilon"]), "eps_high": float(s["clip_epsilon_high"]), "beta": float(s["beta"]),
            "std_eps": float(s["std_epsilon"]), "kl_estimator": estimator,
            "kl_placement": "reward" if s["kl_placement"] == "reward" else "loss"}


def _run(run: RunData, name: str) -> dict[str, Any]:
    keys = sorted({key for row in run.rows for key in row.values})
    return {
        "name": name, "path": str(run.path), "config": run.config_text,
        # Columns by key, aligned with `steps`: null where a row lacks the key or holds a non-finite value.
        "curves": {"steps": [row.step for row in run.rows],
                   "series": {key: [row.values.get(key) for row in run.rows] for key in keys}},
        "evaluations": [{"step": e.step, **e.values} for e in run.evaluations],
        "completions": [asdict(c) for c in run.completions],
        "groups": [group_json(g) for g in run.groups]}


def _unique(names: list[str]) -> list[str]:
    out: list[str] = []
    for name in names:
        candidate, k = name, 2
        while candidate in out:
            candidate, k = f"{name} ({k})", k + 1
        out.append(candidate)
    return out


def _asset(name: str) -> str:
    return (resources.files("rlvr.viz") / "static" / name).read_text(encoding="utf-8")


def data_json(data: dict[str, Any]) -> str:
    """JSON that can sit inside a <script> element: '<' only occurs inside strings, where \\u003c is the same."""
    return json.dumps(data, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")


def render_page(data: str, title: str) -> str:
    """The whole self-contained HTML document, around a payload already made into text by data_json()."""
    parts = {"TITLE": _escape(title), "CSS": "\n".join(map(_asset, STYLES)), "JS": "\n".join(map(_asset, SCRIPTS)),
             "DATA": data, "GENERATOR": GENERATOR}
    if "</script" in parts["JS"].lower():
        raise AssertionError(f"{' and '.join(SCRIPTS)} must not contain a closing script tag: they are inlined")
    # One pass, so that text inside the inserted parts is never taken for a placeholder.
    return re.sub(r"@@(TITLE|CSS|JS|DATA|GENERATOR)@@", lambda m: parts[m.group(1)], _asset("page.html"))


def page_title(runs: list[RunData]) -> str:
    return "rlvr: " + " vs ".join(_unique([run.name for run in runs]))


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
