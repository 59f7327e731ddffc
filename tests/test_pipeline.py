"""The recipe pipeline: stages resolved and checked before any runs, outputs wired into
the next stage, a manifest that lets a re-run skip finished stages and continue the interrupted one.

These tests replace the stage commands with recording fakes (the commands have their own tests); the
SIGTERM tests in test_pipeline_signals.py run the real ones on a tiny model."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rlvr.config.run import ConfigError
from rlvr.pipeline import runner
from rlvr.pipeline.manifest import DONE, INTERRUPTED, PENDING, load_manifest
from rlvr.pipeline.runner import StageOutput, run_recipe
from rlvr.pipeline.spec import BUILTIN, load_recipe

EVAL = {"pass@1": 0.5, "maj@4": 0.6, "mean_length": 12.0}


def write_recipe(tmp_path: Path, model: Path, stages: list[dict], **extra) -> str:
    data = {"base": {"model": {"name_or_path": str(model)}, "rollout": {"max_new_tokens": 8}},
            "evaluation": {"eval": {"size": 3, "samples": 2, "ks": [1, 2]}}, "stages": stages, **extra}
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


R1_LIKE = [{"name": "cold", "kind": "sft", "config": {"sft": {"data": "cold_start"}}},
           {"name": "rl", "kind": "grpo", "config": {"max_steps": 2}},
           {"name": "rs", "kind": "sample", "config": {"sample": {"samples": 2}}},
           {"name": "sft2", "kind": "sft"},
           {"name": "rl2", "kind": "grpo", "focus": "rs", "config": {"max_steps": 2}}]


class Fakes:
    """Stage commands that record their config and write the output the real ones would."""

    def __init__(self, monkeypatch, stop_at: str | None = None):
        self.calls: list[tuple[str, dict]] = []
        self.stop_at = stop_at
        self.misses = '{"id": "arithmetic-l1/train/7 * 8", "correct": 1, "samples": 2}\n'
        for kind in ("sft", "grpo", "sample"):
            monkeypatch.setitem(runner.STAGE_RUNNERS, kind, self._runner(kind))

    def _runner(self, kind):
        def run(config, directory: Path) -> StageOutput:
            self.calls.append((directory.name, config.model_dump(mode="json")))
            directory.mkdir(parents=True, exist_ok=True)
            if directory.name.endswith(self.stop_at or "\0"):
                self.stop_at = None  # stops once, like one SIGTERM
                return StageOutput(False)
            if kind == "sample":
                data = directory / "sft_data.jsonl"
                data.write_text("{}\n")
                (directory / "misses.jsonl").write_text(self.misses)
                return StageOutput(True, data=data, result={"rows_kept": 5, "prompts_done": 7})
            (directory / "final").mkdir(exist_ok=True)
            return StageOutput(True, model=directory / "final")
        return run

    def evaluator(self, config, model):
        self.calls.append(("eval", {"model": model}))
        return dict(EVAL)


def test_builtin_recipes_resolve_with_their_stages():
    for name in BUILTIN:
        recipe = load_recipe(name)
        assert recipe.stages and recipe.evaluation.task.verifiers == {"math": 1.0}
    r1 = load_recipe("r1")
    # R1 sec. 2.3 in order, with the non-reasoning data first and both RL stages cut (neither added
    # accuracy beyond noise at this scale, on two seeds; docs/results.md)
    assert [s.kind for s in r1.stages] == ["sample", "sft", "sample", "sft"]
    plain, cold, rs, sft2 = r1.stages
    assert plain.model_from == "base" and plain.config.task.phrasing == "plain"  # the base model's own answers
    assert cold.mix_from == sft2.mix_from == "plain_answers"
    # 5 %: at 25 % a third of level-3 plain answers were the base model's essays (docs/results.md)
    assert cold.config.sft.mix_ratio == sft2.config.sft.mix_ratio == 0.05
    # 768 rows: every set ended >= 0.95 after both SFT stages on two seeds; 576 left level-3 plain at 0.933
    assert cold.config.sft.cold_start_size == 768
    assert sft2.data_from == "rejection_sampling" and rs.model_from == sft2.model_from == "cold_start"
    # the data asks for reasoning (levels 1-3 in symbols and words, and plain questions), the
    # evaluation covers every level and a phrasing never trained on, rejection sampling gates on stated steps
    assert cold.config.task.train_levels == [1, 2, 3] and cold.config.task.phrasing == rs.config.task.phrasing == "all"
    assert {(s["level"], s["phrasing"]) for s in r1.evaluation.eval.sets} >= {(3, "symbols"), (3, "words_new")}
    # and the problems asked as a user would, outside the training template
    assert {(s["level"], s["phrasing"]) for s in r1.evaluation.eval.sets} >= {(1, "plain"), (3, "plain")}
    assert rs.config.task.verifiers["steps"] > 0 and rs.config.sample.select == "shortest"
    assert sft2.config.task.phrasing == "all"
    assert r1.evaluation.eval.recheck_size >= 100  # a fall beyond 2 SE is looked at again (recheck.py)


def test_overrides_reach_base_one_stage_and_evaluation():
    recipe = load_recipe("r1", ["seed=7", "stages.sft_on_samples.sft.epochs=3", "evaluation.eval.size=5"])
    assert [s.config.seed for s in recipe.stages] == [7, 7, 7, 7]  # seed=7 reaches every stage
    assert recipe.stages[3].config.sft.epochs == 3 and recipe.stages[1].config.sft.epochs != 3
    assert recipe.evaluation.eval.size == 5


def test_seed_offset_gives_a_stage_a_stream_of_its_own(tmp_path, tiny_model_dir):
    stages = [{"name": "rl", "kind": "grpo"}, {"name": "rl2", "kind": "grpo", "seed_offset": 1}]
    recipe = load_recipe(write_recipe(tmp_path, tiny_model_dir, stages), ["seed=7"])
    # a second RL stage draws fresh prompts rather than replaying the first one's stream (seed + 1)
    assert [s.config.seed for s in recipe.stages] == [7, 8]


@pytest.mark.parametrize("stages, message", [
    ([{"name": "a", "kind": "sft", "config": {"sft": {"data": "x.jsonl", "epocs": 2}}}],
     "stage 'a': invalid config: unknown key 'sft.epocs'"),
    ([{"name": "a", "kind": "dpo"}], "stage 'a': kind 'dpo' is unknown"),
    ([{"name": "a", "kind": "grpo", "seed_offset": -1}], "stage 'a': seed_offset must be a whole number >= 0"),
    ([{"name": "a", "kind": "sft"}], "stage 'a': an sft stage needs sft.data"),
    ([{"name": "a", "kind": "grpo", "model": "later"}], "stage 'a': model 'later' is not 'base'"),
    ([{"name": "a", "kind": "grpo"}, {"name": "a", "kind": "grpo"}], "stage 'a': the name is used twice"),
    ([{"name": "a", "kind": "grpo", "data": "a"}], "stage 'a': data 'a' must name an earlier sample stage"),
    ([{"name": "s", "kind": "sample"}, {"name": "a", "kind": "sft", "focus": "s", "config": {"sft": {"data": "x"}}}],
     "stage 'a': focus 's' must name an earlier sample stage .* only grpo stages take it"),
    ([{"name": "a", "kind": "grpo", "focus": "later"}], "stage 'a': focus 'later' must name an earlier sample"),
    # mix names an earlier sample stage, only on sft stages, and needs a share to draw
    ([{"name": "s", "kind": "sample"}, {"name": "a", "kind": "grpo", "mix": "s"}],
     "stage 'a': mix 's' must name an earlier sample stage .* only sft stages take it"),
    ([{"name": "a", "kind": "sft", "mix": "later", "config": {"sft": {"data": "x", "mix_ratio": 0.2}}}],
     "stage 'a': mix 'later' must name an earlier sample stage .none"),
    ([{"name": "s", "kind": "sample"}, {"name": "a", "kind": "sft", "mix": "s", "config": {"sft": {"data": "x"}}}],
     "stage 'a': mix 's' needs sft.mix_ratio > 0"),
    ([{"name": "s", "kind": "sample"}, {"name": "a", "kind": "sft", "mix": "s",
                                        "config": {"sft": {"data": "x", "mix_ratio": 0.2, "mix_data": "m.jsonl"}}}],
     "stage 'a': mix 's' and sft.mix_data 'm.jsonl' both name the rows to mix in"),
    ([{"name": "a", "kind": "grpo", "config": {"rollout": {"group_size": 0}}}], "stage 'a': invalid config"),
])
def test_bad_stage_configs_name_the_stage_and_key(tmp_path, tiny_model_dir, stages, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        load_recipe(write_recipe(tmp_path, tiny_model_dir, stages))


def test_unknown_override_stage_and_recipe_name_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="no stage named 'nope'"):
        load_recipe("r1", ["stages.nope.max_steps=2"])
    with pytest.raises(ConfigError, match="not a built-in recipe"):
        load_recipe(str(tmp_path / "missing.yaml"))


def test_missing_dataset_fails_before_any_stage_runs(tmp_path, tiny_model_dir, monkeypatch):
    stages = [{"name": "rl", "kind": "grpo"},
              {"name": "late_sft", "kind": "sft", "config": {"sft": {"data": str(tmp_path / "nope.jsonl")}}}]
    fakes = Fakes(monkeypatch)
    with pytest.raises(ConfigError, match=r"stage 'late_sft': sft.data: .*nope.jsonl' does not exist"):
        run_recipe(load_recipe(write_recipe(tmp_path, tiny_model_dir, stages)), tmp_path / "run",
                   evaluator=fakes.evaluator, say=lambda _: None)
    assert fakes.calls == []  # not even the base evaluation


@pytest.mark.parametrize("sft_section, message", [
    ({"data": "cold_start", "mix_data": "MISSING", "mix_ratio": 0.25}, r"sft.mix_data: .*nope.jsonl' does not exist"),
    ({"data": "cold_start", "mix_ratio": 0.25}, "sft.mix_ratio=0.25 needs sft.mix_data"),
    ({"data": "cold_start", "mix_data": "cold_start"}, "sft.mix_data=.cold_start. is set but sft.mix_ratio is 0"),
])
def test_bad_mix_settings_fail_before_any_stage_runs(tmp_path, tiny_model_dir, monkeypatch, sft_section, message):
    # not after the base evaluation and the earlier stages
    sft_section = {k: str(tmp_path / "nope.jsonl") if v == "MISSING" else v for k, v in sft_section.items()}
    stages = [{"name": "s", "kind": "sample"}, {"name": "late_sft", "kind": "sft", "config": {"sft": sft_section}}]
    fakes = Fakes(monkeypatch)
    with pytest.raises(ConfigError, match=f"stage 'late_sft': {message}"):
        run_recipe(load_recipe(write_recipe(tmp_path, tiny_model_dir, stages)), tmp_path / "run",
                   evaluator=fakes.evaluator, say=lambda _: None)
    assert fakes.calls == []


def test_a_cold_start_in_a_phrasing_it_cannot_write_fails_before_any_stage_runs(tmp_path, tiny_model_dir,
                                                                                 monkeypatch):
    fakes = Fakes(monkeypatch)
    with pytest.raises(ConfigError, match="stage 'cold': sft.data=cold_start with task.phrasing=words_new"):
        run_recipe(load_recipe(write_recipe(tmp_path, tiny_model_dir, R1_LIKE), ["task.phrasing=words_new"]),
                   tmp_path / "run", evaluator=fakes.evaluator, say=lambda _: None)
    assert fakes.calls == []


def test_an_sft_stage_on_sampled_rows_may_use_any_phrasing(tmp_path, tiny_model_dir, monkeypatch):
    # the cold-start check applies only where a stage writes a cold start, not to sft on a sample stage's rows
    fakes = Fakes(monkeypatch)
    run_recipe(load_recipe(write_recipe(tmp_path, tiny_model_dir, R1_LIKE), ["stages.sft2.task.phrasing=words_new"]),
               tmp_path / "run", evaluator=fakes.evaluator, say=lambda _: None)
    assert dict(fakes.calls)["04-sft2"]["task"]["phrasing"] == "words_new"


def test_outputs_feed_the_next_stage_and_every_model_is_evaluated(tmp_path, tiny_model_dir, monkeypatch):
    fakes, run_dir, lines = Fakes(monkeypatch), tmp_path / "run", []
    manifest = run_recipe(load_recipe(write_recipe(tmp_path, tiny_model_dir, R1_LIKE)), run_dir,
                          evaluator=fakes.evaluator, say=lines.append)
    configs = {name: config for name, config in fakes.calls if name != "eval"}
    stages = run_dir / "stages"
    assert configs["01-cold"]["model"]["name_or_path"] == str(tiny_model_dir)
    assert configs["02-rl"]["model"]["name_or_path"] == str(stages / "01-cold" / "final")
    assert configs["03-rs"]["model"]["name_or_path"] == str(stages / "02-rl" / "final")
    assert configs["04-sft2"]["sft"]["data"] == str(stages / "03-rs" / "sft_data.jsonl")
    assert configs["04-sft2"]["model"]["name_or_path"] == str(stages / "02-rl" / "final")
    assert configs["05-rl2"]["model"]["name_or_path"] == str(stages / "04-sft2" / "final")
    # the last RL stage trains on what the sampled model missed; the others on the whole split
    assert configs["05-rl2"]["task"]["focus"] == str(stages / "03-rs" / "misses.jsonl")
    assert configs["02-rl"]["task"]["focus"] is None
    assert all(c["eval"]["at_end"] is False for c in configs.values())  # the pipeline evaluates, once
    evaluated = [c["model"] for name, c in fakes.calls if name == "eval"]
    assert evaluated == [str(tiny_model_dir)] + [str(stages / s / "final") for s in ("01-cold", "02-rl",
                                                                                      "04-sft2", "05-rl2")]
    assert [s.status for s in manifest.stages] == [DONE] * 5 and manifest.finished
    saved = json.loads((run_dir / "manifest.json").read_text())
    assert saved["base_eval"] == EVAL and saved["stages"][3]["config"]["sft"]["data"].endswith("sft_data.jsonl")
    table = (run_dir / "summary.md").read_text()
    assert "| base " in table and "maj@2" not in table and "maj@4" in table and "kept 5 rows of 7 prompts" in table
    assert table.strip() in "\n".join(lines)


def test_a_mix_stage_feeds_its_dataset_into_the_sft_stages_that_name_it(tmp_path, tiny_model_dir, monkeypatch):
    stages = [{"name": "plain", "kind": "sample", "config": {"task": {"phrasing": "plain"}}},
              {"name": "cold", "kind": "sft", "mix": "plain",
               "config": {"sft": {"data": "cold_start", "mix_ratio": 0.2}}},
              {"name": "rs", "kind": "sample"},
              {"name": "sft2", "kind": "sft", "mix": "plain", "config": {"sft": {"mix_ratio": 0.3}}},
              {"name": "sft3", "kind": "sft"}]
    fakes, run_dir = Fakes(monkeypatch), tmp_path / "run"
    run_recipe(load_recipe(write_recipe(tmp_path, tiny_model_dir, stages)), run_dir, evaluator=fakes.evaluator,
               say=lambda _: None)
    configs = {name: config for name, config in fakes.calls if name != "eval"}
    plain = str(run_dir / "stages" / "01-plain" / "sft_data.jsonl")
    assert configs["01-plain"]["model"]["name_or_path"] == str(tiny_model_dir)  # the base model's own answers
    assert configs["02-cold"]["sft"]["data"] == "cold_start" and configs["02-cold"]["sft"]["mix_data"] == plain
    assert configs["04-sft2"]["sft"]["data"] == str(run_dir / "stages" / "03-rs" / "sft_data.jsonl")  # its own
    assert configs["04-sft2"]["sft"]["mix_data"] == plain and configs["04-sft2"]["sft"]["mix_ratio"] == 0.3
    assert configs["05-sft3"]["sft"]["mix_data"] is None  # no mix key: nothing mixed in


def test_rerun_after_interruption_skips_finished_stages(tmp_path, tiny_model_dir, monkeypatch):
    recipe_path, run_dir = write_recipe(tmp_path, tiny_model_dir, R1_LIKE), tmp_path / "run"
    fakes = Fakes(monkeypatch, stop_at="rs")
    first = run_recipe(load_recipe(recipe_path), run_dir, evaluator=fakes.evaluator, say=lambda _: None)
    assert [s.status for s in first.stages] == [DONE, DONE, INTERRUPTED, PENDING, PENDING]
    assert not first.finished
    # the table so far is written after every evaluation (rlvr report RUN shows a stopped recipe's stages)
    table = (run_dir / "summary.md").read_text()
    rows = {line.split("|")[1].strip(): line.split("|")[3].strip() for line in table.splitlines()
            if line.startswith("| ")}
    assert rows["rl"] == "0.500" and rows["sft2"] == ""  # evaluated so far: base, cold, rl
    fakes.calls.clear()
    second = run_recipe(load_recipe(recipe_path), run_dir, evaluator=fakes.evaluator, say=lambda _: None)
    ran = [name for name, _ in fakes.calls]
    assert ran == ["03-rs", "04-sft2", "eval", "05-rl2", "eval"]  # no base eval, no stage 1-2 again
    assert dict(fakes.calls)["03-rs"]["checkpoint"]["resume"] == "auto"  # continues its own progress
    assert second.finished and second.stage("rs").attempts == 2
    fakes.calls.clear()
    run_recipe(load_recipe(recipe_path), run_dir, evaluator=fakes.evaluator, say=lambda _: None)
    assert fakes.calls == []  # a finished pipeline re-run only prints its table


def test_interrupted_model_stage_resumes_from_its_checkpoint_or_restarts_aside(tmp_path, tiny_model_dir,
                                                                             monkeypatch):
    recipe_path, run_dir = write_recipe(tmp_path, tiny_model_dir, R1_LIKE[:2]), tmp_path / "run"
    fakes = Fakes(monkeypatch, stop_at="rl")
    run_recipe(load_recipe(recipe_path), run_dir, evaluator=fakes.evaluator, say=lambda _: None)
    (run_dir / "stages" / "02-rl" / "metrics.jsonl").write_text('{"step": 1}\n')  # no complete checkpoint
    fakes.calls.clear()
    run_recipe(load_recipe(recipe_path), run_dir, evaluator=fakes.evaluator, say=lambda _: None)
    aside = [p.name for p in (run_dir / "stages").iterdir() if ".incomplete-" in p.name]
    assert len(aside) == 1 and (run_dir / "stages" / aside[0] / "metrics.jsonl").is_file()  # kept, not deleted
    assert dict(fakes.calls)["02-rl"]["checkpoint"]["resume"] == "auto"


def test_interrupted_model_stage_with_a_checkpoint_continues_in_its_own_directory(tmp_path, tiny_model_dir,
                                                                                  monkeypatch):
    # The other branch of the test above: a complete checkpoint, so the stage resumes from it where it is (a
    # stage restarted from scratch would lose every step before the checkpoint)
    from rlvr.checkpoint.store import write_checkpoint

    recipe_path, run_dir = write_recipe(tmp_path, tiny_model_dir, R1_LIKE[:2]), tmp_path / "run"
    fakes = Fakes(monkeypatch, stop_at="rl")
    run_recipe(load_recipe(recipe_path), run_dir, evaluator=fakes.evaluator, say=lambda _: None)
    stage = run_dir / "stages" / "02-rl"
    write_checkpoint(stage / "checkpoints", 1, lambda d: (d / "trainer_state.pt").write_text("step 1"))
    fakes.calls.clear()
    run_recipe(load_recipe(recipe_path), run_dir, evaluator=fakes.evaluator, say=lambda _: None)
    assert sorted(p.name for p in (run_dir / "stages").iterdir()) == ["01-cold", "02-rl"]  # nothing moved aside
    assert (stage / "checkpoints" / "step-000001" / "COMPLETE").is_file()  # the checkpoint the stage resumes from
    assert dict(fakes.calls)["02-rl"]["checkpoint"]["resume"] == "auto"


def test_changed_config_of_a_started_stage_is_refused(tmp_path, tiny_model_dir, monkeypatch):
    recipe_path, run_dir = write_recipe(tmp_path, tiny_model_dir, R1_LIKE), tmp_path / "run"
    fakes = Fakes(monkeypatch, stop_at="rs")
    run_recipe(load_recipe(recipe_path), run_dir, evaluator=fakes.evaluator, say=lambda _: None)
    with pytest.raises(ConfigError, match="stage 'cold' ran with another config .*optimizer.lr"):
        run_recipe(load_recipe(recipe_path, ["stages.cold.optimizer.lr=0.5"]), run_dir, evaluator=fakes.evaluator,
                   say=lambda _: None)
    # a stage that has not started yet may change: it simply runs with the new settings
    run_recipe(load_recipe(recipe_path, ["stages.rl2.max_steps=5"]), run_dir, evaluator=fakes.evaluator,
               say=lambda _: None)
    assert load_manifest(run_dir).stage("rl2").config["max_steps"] == 5


def test_directory_with_other_files_is_refused(tmp_path, tiny_model_dir, monkeypatch):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "notes.txt").write_text("mine")
    fakes = Fakes(monkeypatch)
    with pytest.raises(ConfigError, match="holds files but no manifest.json"):
        run_recipe(load_recipe(write_recipe(tmp_path, tiny_model_dir, R1_LIKE)), run_dir,
                   evaluator=fakes.evaluator, say=lambda _: None)
    assert (run_dir / "notes.txt").read_text() == "mine"


def test_a_focus_stage_after_a_model_that_missed_nothing_trains_on_the_whole_split(tmp_path, tiny_model_dir,
                                                                                   monkeypatch):
    """An empty misses.jsonl (every sampled prompt solved) must not stop the recipe at its last stage."""
    fakes, lines = Fakes(monkeypatch), []
    fakes.misses = ""
    run_recipe(load_recipe(write_recipe(tmp_path, tiny_model_dir, R1_LIKE)), tmp_path / "run",
               evaluator=fakes.evaluator, say=lines.append)
    assert dict(fakes.calls)["05-rl2"]["task"]["focus"] is None
    assert any("lists no missed prompt" in line for line in lines)
