"""Per-set tables of a recipe's summary: when the evaluation covers several sets (eval.sets: levels,
phrasings), one row per model and one column per set for pass@1 (with its paired change against the model before),
greedy accuracy, the reasoning the completions show (think length, reflection, intermediate results right), and
the share of completions that end their turn within the token budget.

A change is "lowered beyond noise" (marked ▼) when pass@1, or greedy accuracy, fell by more than twice its paired
standard error: the issue's bar for a stage that costs what an earlier one bought. (Greedy verdicts are 1/0 per
problem; evaluations written before they were kept per problem show greedy without a change.)"""
from __future__ import annotations

from typing import Any, Sequence

from rlvr.evaluation.voting import paired_difference
from rlvr.pipeline.manifest import Manifest

PER_PROBLEM = "per_problem_pass@1"
PER_PROBLEM_GREEDY = "per_problem_greedy"
MODEL_KINDS = ("sft", "grpo")


def evaluated_models(manifest: Manifest) -> list[tuple[str, dict[str, Any]]]:
    """(name, evaluation) of the base model and every evaluated model stage, in order."""
    models = [("base", manifest.base_eval or {})]
    return models + [(s.name, s.eval) for s in manifest.stages if s.kind in MODEL_KINDS and s.eval]


def set_labels(evaluations: Sequence[dict[str, Any]]) -> list[str]:
    """The evaluation sets, in the order the first evaluation that has them lists them."""
    for evaluation in evaluations:
        sets = (evaluation.get("breakdown") or {}).get("set") or {}
        if sets:
            return list(sets)
    return []


def _difference(after: dict[str, Any], before: dict[str, Any], key: str) -> tuple[float, float] | None:
    a, b = after.get(key), before.get(key)
    if not a or not b or len(a) != len(b) or len(a) < 2:
        return None
    return paired_difference(a, b)


def _beyond_noise_below(found: tuple[float, float] | None) -> bool:
    return found is not None and found[0] + 2 * found[1] < 0


def fell(after: dict[str, Any], before: dict[str, Any], key: str = PER_PROBLEM) -> bool:
    """The paired change fell by more than 2 SE (False without per-problem data)."""
    return _beyond_noise_below(_difference(after, before, key))


def paired_change(after: dict[str, Any], before: dict[str, Any], key: str = PER_PROBLEM) -> str:
    """"+0.178 ± 0.061" (paired over problems, 2 SE), with ▼ when the fall exceeds 2 SE; "" without data. `key`:
    the per-problem list compared (pass rates, or PER_PROBLEM_GREEDY's 1/0 verdicts)."""
    found = _difference(after, before, key)
    if found is None:
        return ""
    mean, standard_error = found
    mark = " ▼" if _beyond_noise_below(found) else ""  # the difference computed once
    return f"{mean:+.3f} ± {2 * standard_error:.3f}{mark}"


def ended_share(evaluation: dict[str, Any]) -> float | None:
    """The share of sampled completions that end their turn with the end-of-turn token within the token budget
    (rollout.max_new_tokens): 1 - the evaluation's "truncated" share (a model that does not stop is no
    usable model, whatever its answer line says); None for an evaluation that has none."""
    truncated = evaluation.get("truncated")
    return None if truncated is None else 1.0 - truncated


def format_number(value: Any, spec: str = ".3f") -> str:
    """A table cell: "" for a missing value."""
    return "" if value is None else format(value, spec)


_num = format_number


def markdown(title: str, header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    return "\n".join([title, line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


def short_label(label: str) -> str:
    """"level=3 phrasing=words_new" -> "L3 words_new": the column headers of the tables stay readable."""
    return label.replace("level=", "L").replace("phrasing=", "")


def per_set(evaluation: dict[str, Any], label: str) -> dict[str, Any]:
    return ((evaluation.get("breakdown") or {}).get("set") or {}).get(label) or {}


def _with_change(evaluation: dict[str, Any], previous: dict[str, Any] | None, label: str, value: str,
                 per_problem: str) -> str:
    """"0.667 (+0.533 ± 0.159)": one set's `value` and its paired change against the model before."""
    now = per_set(evaluation, label)
    change = paired_change(now, per_set(previous, label), per_problem) if previous is not None else ""
    return _num(now.get(value)) + (f" ({change})" if change else "")


def set_tables(manifest: Manifest) -> list[str]:
    """The per-set tables (pass@1 with change, greedy, reasoning); [] when the evaluation has fewer than 2 sets."""
    models = evaluated_models(manifest)
    labels = set_labels([evaluation for _, evaluation in models])
    if len(labels) < 2:
        return []
    heads = [short_label(label) for label in labels]
    accuracy, greedy, reasoning, ended = [], [], [], []
    previous: dict[str, Any] | None = None
    for name, evaluation in models:
        accuracy.append([name, *(_with_change(evaluation, previous, label, "pass@1", PER_PROBLEM) for label in labels)])
        greedy.append([name, *(_with_change(evaluation, previous, label, "greedy", PER_PROBLEM_GREEDY)
                               for label in labels)])
        ended.append([name, *(_num(ended_share(per_set(evaluation, label))) for label in labels)])
        reasoning.append([name, _num(evaluation.get("think_words"), ".1f"), _num(evaluation.get("reflection_rate")),
                          *(_num(per_set(evaluation, label).get("steps_right")) for label in labels)])
        previous = evaluation
    return [markdown("pass@1 per evaluation set (change against the model before, paired over problems, ± 2 SE; "
                     "▼ = fell beyond 2 SE)", ["model", *heads], accuracy),
            markdown("greedy accuracy per evaluation set (change as above)", ["model", *heads], greedy),
            markdown("reasoning: mean think words, reflection rate (all sets), and the share of samples whose "
                     "stated intermediate results are all right, per set",
                     ["model", "think words", "reflection", *(f"steps right {head}" for head in heads)],
                     reasoning),
            markdown("ended: the share of sampled completions that end their turn (end-of-turn token within "
                     "rollout.max_new_tokens; 1 - truncated), per set", ["model", *heads], ended)]
