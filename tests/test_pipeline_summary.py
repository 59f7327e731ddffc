"""The recipe's summary table (rlvr/pipeline/summary.py): one row per model, the paired change of pass@1."""
from __future__ import annotations

from rlvr.cli.eval import eval_table
from rlvr.pipeline.manifest import DONE, Manifest, StageRecord
from rlvr.pipeline.summary import summary_table


def record(name: str, kind: str, evaluation: dict | None = None, result: dict | None = None) -> StageRecord:
    return StageRecord(name=name, kind=kind, directory=f"stages/{name}", config={}, status=DONE,
                       eval=evaluation, result=result or {}, seconds=60.0, eval_seconds=30.0)


def test_change_is_paired_against_the_model_before_skipping_sample_stages():
    base = {"pass@1": 0.25, "maj@4": 0.5, "mean_length": 10.0, "per_problem_pass@1": [0.0, 0.5, 0.5, 0.0]}
    sft = {"pass@1": 0.5, "maj@4": 0.5, "mean_length": 20.0, "per_problem_pass@1": [0.5, 0.5, 1.0, 0.0]}
    rl = {"pass@1": 0.5, "maj@4": 0.75, "mean_length": 21.0, "per_problem_pass@1": [0.5, 1.0, 0.5, 0.0]}
    manifest = Manifest(recipe="r1", base_model="m", base_eval=base, base_eval_seconds=30.0, stages=[
        record("cold", "sft", sft), record("rs", "sample", result={"rows_kept": 3, "prompts_done": 4}),
        record("rl", "grpo", rl)])
    table = summary_table(manifest)
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in table.splitlines() if line.startswith("| ") and "stage" not in line}
    # cold vs base: d = [0.5, 0, 0.5, 0], mean 0.25, sample variance (4 x 0.0625) / 3 = 0.08333, SE sqrt(0.08333
    # / 4) = 0.14434, shown as 2 SE = 0.289
    assert rows["cold"][2] == "+0.250 ± 0.289"
    # rl vs cold (the sample stage in between has no model): d = [0, 0.5, -0.5, 0], mean 0, variance 0.5 / 3,
    # SE sqrt(0.16667 / 4) = 0.20412 -> 0.408
    assert rows["rl"][2] == "+0.000 ± 0.408"
    assert rows["base"][2] == "" and rows["rs"][1] == "kept 3 rows of 4 prompts" and rows["rs"][2] == ""
    assert "time: stages 3.0 min + evaluations 2.0 min = 5.0 min" in table


def test_change_is_blank_without_per_problem_results():
    old = {"pass@1": 0.25, "mean_length": 10.0}  # a manifest written before per-problem results were kept
    manifest = Manifest(recipe="r1", base_model="m", base_eval=old,
                        stages=[record("rl", "grpo", {"pass@1": 0.5, "mean_length": 9.0,
                                                      "per_problem_pass@1": [0.5, 0.5]})])
    row = next(line for line in summary_table(manifest).splitlines() if line.startswith("| rl "))
    assert [c.strip() for c in row.split("|")[1:-1]][3] == ""


def set_eval(per_set: dict[str, dict], think_words: float = 0.0) -> dict:
    return {"pass@1": 0.5, "mean_length": 10.0, "think_words": think_words, "reflection_rate": 0.0,
            "breakdown": {"set": per_set}}


def test_per_set_tables_pair_each_set_and_mark_a_fall_beyond_noise():
    """One column per evaluation set; a set whose pass@1 fell by more than 2 SE is marked."""
    base = set_eval({"level=1": {"pass@1": 0.5, "greedy": 0.5, "steps_right": 0.1,
                                 "per_problem_pass@1": [1.0, 1.0, 1.0, 0.0]},
                     "level=3": {"pass@1": 0.0, "greedy": 0.0, "steps_right": 0.0,
                                 "per_problem_pass@1": [0.0, 0.0, 0.0, 0.0]}})
    sft = set_eval({"level=1": {"pass@1": 0.0, "greedy": 0.25, "steps_right": 0.5,
                                "per_problem_pass@1": [0.0, 0.0, 0.0, 0.0]},
                    "level=3": {"pass@1": 0.25, "greedy": 0.5, "steps_right": 0.75,
                                "per_problem_pass@1": [0.5, 0.0, 0.5, 0.0]}}, think_words=12.5)
    manifest = Manifest(recipe="r1", base_model="m", base_eval=base, stages=[record("cold", "sft", sft)])
    text = summary_table(manifest)
    cold = [line for line in text.splitlines() if line.startswith("| cold ")]
    assert len(cold) == 5  # the overall table, pass@1 per set, greedy per set, reasoning, ended per set
    cells = [[c.strip() for c in line.split("|")[2:-1]] for line in cold[1:]]
    # level=1: d = [-1, -1, -1, 0], mean -0.75, variance (3 x 0.0625 + 0.5625) / 3 = 0.25, SE sqrt(0.25 / 4) =
    # 0.25: -0.75 + 2 x 0.25 < 0 -> ▼. level=3: d = [0.5, 0, 0.5, 0], mean 0.25, SE 0.14434 -> 0.289, no mark
    assert cells[0] == ["0.000 (-0.750 ± 0.500 ▼)", "0.250 (+0.250 ± 0.289)"]
    assert cells[1] == ["0.250", "0.500"]
    assert cells[2] == ["12.5", "0.000", "0.500", "0.750"]
    assert "steps right L3" in text and "| level=1 " not in text  # headers shortened: "level=3" -> "L3"


def test_one_set_adds_no_per_set_table():
    manifest = Manifest(recipe="r1", base_model="m", base_eval=set_eval({"level=1": {"pass@1": 0.5}}), stages=[])
    assert "per evaluation set" not in summary_table(manifest)


def test_greedy_per_set_is_paired_too_and_marked_when_it_falls_beyond_noise():
    """The same is asked of greedy accuracy as of pass@1: greedy verdicts (1/0) kept per problem."""
    base = set_eval({"level=1": {"pass@1": 0.5, "greedy": 1.0, "per_problem_greedy": [1.0, 1.0, 1.0, 1.0]},
                     "level=3": {"pass@1": 0.0, "greedy": 0.25, "per_problem_greedy": [1.0, 0.0, 0.0, 0.0]}})
    rl = set_eval({"level=1": {"pass@1": 0.5, "greedy": 0.25, "per_problem_greedy": [0.0, 0.0, 0.0, 1.0]},
                   "level=3": {"pass@1": 0.0, "greedy": 0.5, "per_problem_greedy": [0.0, 1.0, 1.0, 0.0]}})
    manifest = Manifest(recipe="r1", base_model="m", base_eval=base, stages=[record("rl", "grpo", rl)])
    row = [line for line in summary_table(manifest).splitlines() if line.startswith("| rl ")][2]
    # level=1: d = [-1, -1, -1, 0], mean -0.75, variance (3 x 0.0625 + 0.5625) / 3 = 0.25, SE 0.25 -> "± 0.500",
    # -0.75 + 0.5 < 0 -> ▼. level=3: d = [-1, 1, 1, 0], mean 0.25, variance (1.5625 + 2 x 0.5625 + 0.0625) / 3 =
    # 0.91667, SE sqrt(0.91667 / 4) = 0.47871 -> 0.957, no mark
    assert [c.strip() for c in row.split("|")[2:-1]] == ["0.250 (-0.750 ± 0.500 ▼)", "0.500 (+0.250 ± 0.957)"]


def test_evaluation_keeps_each_problems_greedy_verdict():
    from rlvr.evaluation.evaluate import summarize

    class Samples:  # the fields summarize reads of a ProblemSamples
        def __init__(self, correct, greedy):
            self.correct, self.greedy, self.answers = [bool(c) for c in correct], greedy, ["1"] * len(correct)
            self.scores = correct
            self.lengths, self.truncated = [3] * len(correct), [False] * len(correct)
            self.think_words, self.reflection, self.steps = [], [], []

    summary = summarize([Samples([1.0, 0.0], True), Samples([0.0, 0.0], False), Samples([1.0, 1.0], True)], [1])
    assert summary.per_problem_greedy == [1.0, 0.0, 1.0] and summary.greedy == 2 / 3
    assert summary.as_json()["per_problem_greedy"] == [1.0, 0.0, 1.0]
    assert summarize([Samples([1.0], None)], [1]).per_problem_greedy == []  # no greedy run: nothing to pair


def test_ended_is_one_minus_the_truncated_share_per_stage_and_per_set():
    """The share of completions that end their turn within the token budget, per stage and per set."""
    base = {**set_eval({"level=1": {"pass@1": 0.5, "truncated": 0.0}, "level=1 phrasing=plain":
                        {"pass@1": 0.25, "truncated": 0.25}}), "truncated": 0.125}
    rl = {**set_eval({"level=1": {"pass@1": 0.5, "truncated": 0.5}, "level=1 phrasing=plain":
                      {"pass@1": 0.0, "truncated": 1.0}}), "truncated": 0.75}
    old = {"pass@1": 0.5, "mean_length": 9.0}  # an evaluation written before "truncated" was kept: no number
    manifest = Manifest(recipe="r1", base_model="m", base_eval=base, stages=[
        record("rl", "grpo", rl), record("rs", "sample", result={"rows_kept": 1, "prompts_done": 2}),
        record("old", "sft", old)])
    text = summary_table(manifest)
    header = [c.strip() for c in text.splitlines()[1].split("|")[1:-1]]
    column = header.index("ended")
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in text.splitlines() if line.startswith("| ")]
    main = {row[0]: row[column] for row in rows[1:5]}
    # ended = 1 - truncated: base 1 - 0.125 = 0.875, rl 1 - 0.75 = 0.250; a sample stage and an old record: blank
    assert main == {"base": "0.875", "rl": "0.250", "rs": "", "old": ""}
    ended = text.split("ended: the share")[1].splitlines()
    assert "| model | L1    | L1 plain |" in ended[1]
    # per set: base 1 - 0.0 = 1.000 and 1 - 0.25 = 0.750; rl 1 - 0.5 = 0.500 and 1 - 1.0 = 0.000
    cells = [[c.strip() for c in line.split("|")[1:-1]] for line in ended[3:5]]
    assert cells == [["base", "1.000", "0.750"], ["rl", "0.500", "0.000"]]


def test_rlvr_eval_prints_the_ended_share_overall_and_per_set():
    data = {"task": "arithmetic", "problems": 4, "samples_per_problem": 2, "temperature": 0.6, "pass@1": 0.5,
            "mean_length": 30.0, "truncated": 0.375, "greedy": None,
            "breakdown": {"set": {"L1": {"pass@1": 0.5, "problems": 2, "truncated": 0.25},
                                  "L1 plain": {"pass@1": 0.5, "problems": 2, "truncated": 0.5}},
                          "op": {"*": {"pass@1": 0.5, "problems": 4, "truncated": 0.375}}}}
    text = eval_table(data)
    # 1 - 0.375 = 0.625 overall; per set 1 - 0.25 = 0.750 and 1 - 0.5 = 0.500; no ended line for other breakdowns
    assert "| ended 0.625 |" in text
    assert "ended by set: L1 0.750, L1 plain 0.500" in text and "ended by op" not in text
