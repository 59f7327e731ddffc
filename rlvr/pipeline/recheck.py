"""A second look at every fall ("no stage lowers any level's pass@1 or greedy accuracy beyond noise").

A recipe's evaluation compares each model with the one before on every set, pass@1 and greedy alike: with 5 sets,
2 measures and 4 model stages that is 40 paired tests, and each flags a fall beyond 2 SE by chance about 2.3% of
the time (one-sided), so about one ▼ per run is expected when nothing changed. A flagged fall is therefore measured
again on problems the first look did not use (eval.recheck_size further held-out problems of that set, both models,
the same samples and greedy setting): it "holds" only when it falls beyond 2 SE there too. The first look's ▼ stays
in its table; the recheck table beside it says what the second look found.

Both evaluations are kept per stage (StageRecord.recheck, by set label), so a resumed recipe skips the rechecks it
has, and a stage whose model-before was itself re-checked on the same set reuses that evaluation.
"""
from __future__ import annotations

from typing import Any, Callable

from rlvr.config.run import RunConfig
from rlvr.evaluation.sets import evaluation_prompts, set_label
from rlvr.pipeline.manifest import StageRecord
from rlvr.pipeline.set_tables import (
    PER_PROBLEM,
    PER_PROBLEM_GREEDY,
    fell,
    markdown,
    paired_change,
    per_set,
    short_label,
)

MEASURES = {"pass@1": PER_PROBLEM, "greedy": PER_PROBLEM_GREEDY}  # measure -> its per-problem list
KEPT = ("problems", "pass@1", "greedy", PER_PROBLEM, PER_PROBLEM_GREEDY)  # what a recheck keeps of a set's results

Evaluate = Callable[[RunConfig, str], dict[str, Any]]  # (config, model) -> EvalResult JSON (the runner's evaluator)


def falls(after: dict[str, Any], before: dict[str, Any], labels: list[str]) -> dict[str, list[str]]:
    """{set label: [measures that fell beyond 2 SE]} of the sets with at least one fall."""
    found = {label: [m for m, key in MEASURES.items() if fell(per_set(after, label), per_set(before, label), key)]
             for label in labels}
    return {label: measures for label, measures in found.items() if measures}


def recheck_config(evaluation: RunConfig, entry: dict[str, Any], model: str) -> RunConfig:
    """The evaluation of one set on the recheck_size held-out problems after the ones every evaluation uses."""
    config = evaluation.model_copy(deep=True)
    config.model.name_or_path, config.output_dir = model, None
    config.eval.offset += config.eval.size
    config.eval.size = config.eval.recheck_size
    config.eval.sets = [entry]
    return config


def recheck_falls(evaluation: RunConfig, record: StageRecord, before: tuple[str, dict[str, Any], dict[str, Any]],
                  evaluate: Evaluate, save: Callable[[], None], say: Callable[[str], None]) -> None:
    """Re-check each set on which `record`'s model fell against `before` = (its model, its evaluation, its own
    rechecks); results go into record.recheck, saved after each set (a stopped recipe keeps what it measured)."""
    size, entries = evaluation.eval.recheck_size, {set_label(e): e for e in evaluation.eval.sets or []}
    if not size or record.eval is None or record.model is None:
        return
    before_model, before_eval, before_rechecks = before
    for label, measures in falls(record.eval, before_eval, list(entries)).items():
        if label in record.recheck:
            continue
        first = {m: paired_change(per_set(record.eval, label), per_set(before_eval, label), MEASURES[m])
                 for m in measures}
        fallen = f"stage {record.name}: {' and '.join(measures)} on {short_label(label)} fell beyond 2 SE"
        after_config = recheck_config(evaluation, entries[label], record.model)
        if not evaluation_prompts(after_config):  # a small held-out split, used up by the first look
            say(f"{fallen}; not re-checked: the set has no held-out problems after the first "
                f"{after_config.eval.offset}")
            record.recheck[label] = {"first": first, "before": {}, "after": {}}
            save()
            continue
        say(f"{fallen}; re-checking both models on {size} further held-out problems")
        earlier = before_rechecks.get(label, {}).get("after")  # the model before, on these very problems
        record.recheck[label] = {
            "first": first,
            "before": earlier or _one_set(evaluate, recheck_config(evaluation, entries[label], before_model), label),
            "after": _one_set(evaluate, after_config, label)}
        save()


def _one_set(evaluate: Evaluate, config: RunConfig, label: str) -> dict[str, Any]:
    result = per_set(evaluate(config, config.model.name_or_path), label)
    return {key: result[key] for key in KEPT if key in result}


def recheck_table(records: list[StageRecord]) -> list[str]:
    """One row per re-checked fall: the first look's change, the second look's, and whether the fall held; [] when
    nothing was re-checked."""
    rows = []
    for record in records:
        for label, found in record.recheck.items():
            for measure, first in found["first"].items():
                key, after, before = MEASURES[measure], found["after"], found["before"]
                verdict = ("holds" if fell(after, before, key) else "not beyond noise") if after.get(key) else (
                    "not re-checked: no further held-out problems")
                rows.append([record.name, short_label(label), measure, first,
                             f"{paired_change(after, before, key)} on {len(after.get(key) or [])} problems", verdict])
    if not rows:
        return []
    return [markdown("falls beyond 2 SE, re-checked on further held-out problems (both models; change ± 2 SE, "
                     "paired over problems)", ["stage", "set", "measure", "first look", "re-check", "verdict"], rows)]
