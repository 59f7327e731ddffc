"""A second look at every fall (rlvr/pipeline/recheck.py): a stage whose pass@1 on a set falls beyond 2 SE
is measured again, with the model before it, on held-out problems the first evaluation did not use, and the summary
says whether the fall holds. The stage commands and the evaluator are fakes (test_pipeline.py's), so the numbers
below are chosen by hand; the real evaluation's offset is tested on the arithmetic task itself."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rlvr.config.run import ConfigError, load_config
from rlvr.evaluation.sets import evaluation_prompts, set_label
from rlvr.pipeline.manifest import StageRecord, load_manifest
from rlvr.pipeline.recheck import recheck_falls
from rlvr.pipeline.runner import run_recipe
from rlvr.pipeline.spec import load_recipe
from test_pipeline import Fakes, write_recipe

L1, L2 = "level=1", "level=2"
# per-problem pass rates (4 problems a look): (model, look, set) -> list
FIRST, SECOND = "first", "recheck"
RATES = {
    ("base", FIRST, L1): [1, 1, 1, 1], ("base", FIRST, L2): [0, 0, 0, 0],
    ("cold", FIRST, L1): [0, 0, 0, 0], ("cold", FIRST, L2): [1, 1, 1, 1],  # L1: -1 +- 0, a fall
    ("rl", FIRST, L1): [0, 0, 0, 0], ("rl", FIRST, L2): [.5, .5, .5, .5],  # L2: -0.5 +- 0 against cold, a fall
    ("rl2", FIRST, L1): [0, 0, 0, 0], ("rl2", FIRST, L2): [0, 0, 0, 0],  # L2: -0.5 +- 0 against rl, a fall
    # second look: cold - base on L1: d = [0, 0, 0, -0.5], mean -0.125, sample variance (3 x 0.125^2 + 0.375^2) / 3
    # = 0.0625, SE 0.25 / 2 = 0.125: -0.125 + 2 x 0.125 > 0, noise
    ("base", SECOND, L1): [1, 1, 1, 1], ("cold", SECOND, L1): [1, 1, 1, .5],
    ("cold", SECOND, L2): [1, 1, 1, 1], ("rl", SECOND, L2): [1, 1, 1, 1],  # rl - cold: 0 +- 0, noise
    ("rl2", SECOND, L2): [0, 0, 0, 0],  # rl2 - rl: -1 +- 0, the fall holds
}


class Evaluator:
    def __init__(self, first_offset: int = 0):
        self.first_offset = first_offset  # the recipe's own eval.offset: a look past it is a recheck
        self.rechecks: list[tuple[str, int, int, list[str]]] = []  # (model, offset, size, sets) of each second look

    def __call__(self, config, model: str) -> dict:
        name = Path(model).parent.name.split("-", 1)[-1] if Path(model).name == "final" else "base"
        look = SECOND if config.eval.offset > self.first_offset else FIRST
        labels = [set_label(entry) for entry in config.eval.sets]
        if look == SECOND:
            self.rechecks.append((name, config.eval.offset, config.eval.size, labels))
        per_set = {label: {"pass@1": sum(RATES[(name, look, label)]) / 4,
                           "per_problem_pass@1": [float(x) for x in RATES[(name, look, label)]]}
                   for label in labels}
        return {"pass@1": 0.5, "mean_length": 9.0, "breakdown": {"set": per_set}}


def recipe(tmp_path: Path, model: Path, recheck_size: int, offset: int = 0) -> str:
    stages = [{"name": "cold", "kind": "sft", "config": {"sft": {"data": "cold_start"}}},
              {"name": "rl", "kind": "grpo"}, {"name": "rl2", "kind": "grpo"}]
    path = Path(write_recipe(tmp_path, model, stages))
    data = yaml.safe_load(path.read_text())
    data["evaluation"]["eval"].update(offset=offset, recheck_size=recheck_size, sets=[{"level": 1}, {"level": 2}])
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_each_fall_is_rechecked_on_further_problems_and_the_summary_says_if_it_holds(tmp_path, tiny_model_dir,
                                                                                      monkeypatch):
    Fakes(monkeypatch)
    evaluate, lines = Evaluator(), []
    run_dir = tmp_path / "run"
    manifest = run_recipe(load_recipe(recipe(tmp_path, tiny_model_dir, 4)), run_dir, evaluator=evaluate,
                          say=lines.append)
    # the problems after the first look's 3 (write_recipe's eval.size), one set each; rl, re-checked on L2 as the
    # stage after cold, is reused as rl2's model-before instead of being evaluated again
    assert evaluate.rechecks == [("base", 3, 4, [L1]), ("cold", 3, 4, [L1]), ("cold", 3, 4, [L2]),
                                 ("rl", 3, 4, [L2]), ("rl2", 3, 4, [L2])]
    verdicts = {(row[0], row[1]): row[-1] for row in _rows(manifest_summary(run_dir), "falls beyond")}
    assert verdicts == {("cold", "L1"): "not beyond noise", ("rl", "L2"): "not beyond noise",
                        ("rl2", "L2"): "holds"}
    assert any("pass@1 on L1 fell beyond 2 SE; re-checking both models on 4 further" in line for line in lines)
    assert manifest.stage("rl2").recheck[L2]["first"] == {"pass@1": "-0.500 ± 0.000 ▼"}
    assert all(manifest.stage(s).recheck_seconds >= 0 for s in ("cold", "rl", "rl2"))
    run_recipe(load_recipe(recipe(tmp_path, tiny_model_dir, 4)), run_dir, evaluator=evaluate, say=lambda _: None)
    assert len(evaluate.rechecks) == 5  # a re-run keeps the rechecks it has


class GreedyEvaluator(Evaluator):
    """Greedy accuracy too, per problem: here the same rates as pass@1 (0/1 or 0.5 are fine for the paired test)."""

    def __call__(self, config, model: str) -> dict:
        result = super().__call__(config, model)
        for values in result["breakdown"]["set"].values():
            values["greedy"], values["per_problem_greedy"] = values["pass@1"], list(values["per_problem_pass@1"])
        return result


def test_a_greedy_fall_is_rechecked_on_the_kept_per_problem_greedy_verdicts(tmp_path, tiny_model_dir, monkeypatch):
    """A fall in greedy accuracy gets its second look as pass@1 does: the recheck keeps each problem's greedy
    verdict, and the summary's verdict is read from them (a recheck that kept none said "not re-checked"
    for every greedy fall, and no test had greedy numbers)."""
    Fakes(monkeypatch)
    run_dir = tmp_path / "run"
    manifest = run_recipe(load_recipe(recipe(tmp_path, tiny_model_dir, 4)), run_dir, evaluator=GreedyEvaluator(),
                          say=lambda _: None)
    rows = _rows(manifest_summary(run_dir), "falls beyond")
    verdicts = {(row[0], row[1], row[2]): row[-1] for row in rows}
    assert verdicts == {(stage, level, measure): verdict for measure in ("pass@1", "greedy") for stage, level, verdict
                        in (("cold", "L1", "not beyond noise"), ("rl", "L2", "not beyond noise"),
                            ("rl2", "L2", "holds"))}
    kept = manifest.stage("rl2").recheck[L2]
    assert kept["after"]["per_problem_greedy"] == [0.0] * 4 and kept["before"]["per_problem_greedy"] == [1.0] * 4


def test_without_recheck_size_a_fall_is_only_marked(tmp_path, tiny_model_dir, monkeypatch):
    Fakes(monkeypatch)
    evaluate = Evaluator()
    run_recipe(load_recipe(recipe(tmp_path, tiny_model_dir, 0)), tmp_path / "run", evaluator=evaluate,
               say=lambda _: None)
    summary = manifest_summary(tmp_path / "run")
    assert evaluate.rechecks == [] and "▼" in summary and "re-checked" not in summary
    assert load_manifest(tmp_path / "run").stage("cold").recheck == {}


def test_a_set_with_no_further_held_out_problems_is_said_not_rechecked(tmp_path, tiny_model_dir, monkeypatch):
    # level 1 holds 200 held-out problems (rlvr/tasks/arithmetic.py): the first look takes 198-200, none are left;
    # level 2 holds 3034
    Fakes(monkeypatch)
    evaluate, lines = Evaluator(first_offset=197), []
    run_recipe(load_recipe(recipe(tmp_path, tiny_model_dir, 4, offset=197)), tmp_path / "run", evaluator=evaluate,
               say=lines.append)
    assert ("cold", 200, 4, [L1]) not in evaluate.rechecks and ("rl", 200, 4, [L2]) in evaluate.rechecks
    verdicts = {(row[0], row[1]): row[-1] for row in _rows(manifest_summary(tmp_path / "run"), "falls beyond")}
    assert verdicts[("cold", "L1")] == "not re-checked: no further held-out problems"
    assert verdicts[("rl2", "L2")] == "holds"
    assert any("L1 fell beyond 2 SE; not re-checked: the set has no held-out problems after the first 200" in line
               for line in lines)


@pytest.mark.parametrize("sets", [None, [{"level": 2}, {"level": 3}]])
def test_eval_offset_takes_the_held_out_problems_after_the_first(sets):
    config = load_config(None, ["task.level=2", "eval.size=6"])
    config.eval.sets = sets
    six = [p.id for p in evaluation_prompts(config)]  # per set when sets are given, set after set
    config.eval.offset, config.eval.size = 2, 4
    later = [p.id for p in evaluation_prompts(config)]
    expected = six[2:6] if sets is None else six[2:6] + six[8:12]
    assert later == expected and len(set(six)) == len(six)


def manifest_summary(run_dir: Path) -> str:
    return (run_dir / "summary.md").read_text(encoding="utf-8")


def _rows(text: str, title: str) -> list[list[str]]:
    block = text.split(title, 1)[1].split("\n\n", 1)[0]
    return [[c.strip() for c in line.split("|")[1:-1]] for line in block.splitlines()[2:] if line.startswith("| ")]


def test_recheck_size_without_sets_is_refused():
    # the re-check compares per evaluation set: without sets it would silently re-check nothing
    with pytest.raises(ConfigError, match=r"eval.recheck_size=100 re-checks a fall on one evaluation set and needs "
                                          r"eval.sets"):
        load_config(None, ["eval.recheck_size=100"])
    assert load_config(None, ["eval.recheck_size=100", "eval.sets=[{level: 2}]"]).eval.recheck_size == 100


def test_the_model_before_s_own_recheck_is_reused_as_its_evaluation_not_its_predecessor_s(tmp_path, tiny_model_dir,
                                                                                           monkeypatch):
    """rl2's fall on L2 is re-checked against rl, which was itself re-checked on L2 (against cold): rl's evaluation
    on those problems is that recheck's "after", reused instead of evaluating rl again. Here rl's second look
    differs from cold's, so reusing cold's by mistake shows (with cold's and rl's equal,
    no test could tell). rl2 - rl on the second look: d = [-1, -1, -1, -0.5], mean -0.875, deviations
    (-0.125 x 3, 0.375), sample variance 0.1875 / 3 = 0.0625, SE 0.25 / 2 = 0.125: -0.875 + 2 x 0.125 < 0, holds."""
    Fakes(monkeypatch)
    monkeypatch.setitem(RATES, ("rl", SECOND, L2), [1, 1, 1, .5])
    evaluate = Evaluator()
    manifest = run_recipe(load_recipe(recipe(tmp_path, tiny_model_dir, 4)), tmp_path / "run", evaluator=evaluate,
                          say=lambda _: None)
    rl, rl2 = manifest.stage("rl").recheck[L2], manifest.stage("rl2").recheck[L2]
    assert rl["after"]["per_problem_pass@1"] == [1, 1, 1, .5] != rl["before"]["per_problem_pass@1"]
    assert rl2["before"] == rl["after"]
    assert [r for r in evaluate.rechecks if r[0] == "rl"] == [("rl", 3, 4, [L2])]  # evaluated once, as rl's "after"
    rows = {(row[0], row[1]): row for row in _rows(manifest_summary(tmp_path / "run"), "falls beyond")}
    assert rows[("rl2", "L2")][4].startswith("-0.875 ± 0.250") and rows[("rl2", "L2")][-1] == "holds"


def _evaluation(recheck_size: int, offset: int = 0):
    config = load_config(None, [])
    config.eval.sets, config.eval.size, config.eval.offset = [{"level": 1}, {"level": 2}], 3, offset
    config.eval.recheck_size = recheck_size
    return config


def _looked(rates: dict[str, list[float]]) -> dict:
    """An evaluation as the runner keeps it: per set, pass@1 and its per-problem rates."""
    return {"breakdown": {"set": {label: {"pass@1": sum(r) / len(r), "per_problem_pass@1": r}
                                  for label, r in rates.items()}}}


# both sets fell from all right to all wrong: -1 +- 0, beyond 2 SE on each
BEFORE = _looked({L1: [1.0, 1.0, 1.0], L2: [1.0, 1.0, 1.0]})
AFTER = _looked({L1: [0.0, 0.0, 0.0], L2: [0.0, 0.0, 0.0]})


def _stage(**fields):
    return StageRecord(name="rl", kind="grpo", directory="stages/01-rl", config={},
                       **{"model": "rl/final", "eval": AFTER, **fields})


def test_recheck_falls_needs_a_size_an_evaluation_and_a_model_and_goes_through_every_set():
    """Nothing is looked at again without eval.recheck_size, or for a stage with no evaluation or no model (a
    sample stage); otherwise every fallen set is re-checked and saved as it is done, also after one a resumed
    recipe already has."""
    calls, saves = [], []
    evaluate = lambda config, model: calls.append((model, set_label(config.eval.sets[0]))) or AFTER  # noqa: E731
    for evaluation, record in ((_evaluation(0), _stage()), (_evaluation(4), _stage(eval=None)),
                               (_evaluation(4), _stage(model=None))):
        recheck_falls(evaluation, record, ("cold/final", BEFORE, {}), evaluate, lambda: saves.append(1), print)
        assert record.recheck == {} and calls == [] and saves == []

    record = _stage(recheck={L1: {"first": {}, "before": {}, "after": {}}})  # L1 done before a resume
    recheck_falls(_evaluation(4), record, ("cold/final", BEFORE, {}), evaluate, lambda: saves.append(1), print)
    assert calls == [("cold/final", L2), ("rl/final", L2)] and len(saves) == 1 and set(record.recheck) == {L1, L2}


def test_sets_with_no_further_problems_are_each_recorded_as_not_rechecked_and_saved():
    said, saves, record = [], [], _stage()
    recheck_falls(_evaluation(4, offset=10**6), record, ("cold/final", BEFORE, {}),
                  lambda config, model: pytest.fail("nothing is left to evaluate"), lambda: saves.append(1),
                  said.append)
    assert record.recheck == {label: {"first": {"pass@1": "-1.000 ± 0.000 ▼"}, "before": {}, "after": {}}
                              for label in (L1, L2)}
    assert len(saves) == 2 and all("not re-checked: the set has no held-out problems" in line for line in said)
