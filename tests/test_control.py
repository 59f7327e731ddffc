"""Control runs: reward.control=random | format_only, and `rlvr control`, which trains the real
run and both controls and prints held-out pass@1 against the base model, paired over problems."""
from __future__ import annotations

import json

import pytest
import torch

from rlvr.cli.control import control_recipe, control_table
from rlvr.cli.main import main
from rlvr.config.run import ConfigError, load_config
from rlvr.evaluation.voting import paired_difference
from rlvr.pipeline.manifest import Manifest, StageRecord, load_manifest
from rlvr.rewards.control import ANSWER_VERIFIERS, FORMAT_VERIFIERS, format_only, shuffled, training_weights
from rlvr.rewards.functions import UserFunction
from rlvr.rewards.rewarder import Rewarder, weigh
from rlvr.types import Outcome, Prompt, ScoredBatch, Verdict
from rlvr.verifiers import VERIFIERS
from rlvr.verifiers.format import AnswerLineVerifier
from rlvr.verifiers.math.verifier import MathVerifier


def test_every_verifier_is_either_a_format_or_an_answer_check():
    assert set(FORMAT_VERIFIERS) | set(ANSWER_VERIFIERS) == set(VERIFIERS)
    assert not set(FORMAT_VERIFIERS) & set(ANSWER_VERIFIERS)


def batch(rewards: list[float], scorable: list[bool]) -> ScoredBatch:
    verdicts = {"math": [Verdict(Outcome.CORRECT if r else Outcome.WRONG, r, scorable=ok)
                         for r, ok in zip(rewards, scorable)]}
    return weigh(verdicts, {"math": 1.0})


def test_random_shuffles_scores_and_rewards_together_over_scorable_rows():
    real = batch([0.1, 0.2, 0.3, 0.4, 0.9], [True, True, True, True, False])  # row 4: unscorable, reward 0
    orders = set()
    for seed in range(20):
        torch.manual_seed(seed)
        control = shuffled(real)
        values = control.rewards.tolist()
        assert sorted(values[:4]) == pytest.approx([0.1, 0.2, 0.3, 0.4])  # a permutation: the mean kept exactly
        assert values[4] == 0.0 and control.scores["math"][4] == pytest.approx(0.9)  # stays in place
        assert control.scores["math"][:4].tolist() == pytest.approx(values[:4])  # components move with the reward
        assert control.verdicts is real.verdicts  # samples.jsonl keeps the real verdicts
        orders.add(tuple(values[:4]))
    assert len(orders) > 1  # it does shuffle (20 seeds, 24 orders)


PROMPTS = [Prompt("a", ({"role": "user", "content": "3 + 4?"},), "7")] * 2 + \
          [Prompt("b", ({"role": "user", "content": "5 + 5?"},), "10")]


def test_format_only_pays_a_readable_answer_and_drops_functions():
    bonus = UserFunction("m:bonus", lambda completions, **_: [1.0] * len(completions))
    rewarder = Rewarder({"math": (MathVerifier(), 1.0), "answer_format": (AnswerLineVerifier(), 0.5),
                         "m:bonus": (bonus, 0.7)})
    weights = training_weights(rewarder.components, "format_only")
    assert weights == {"math": 1.0, "answer_format": 0.5, "m:bonus": 0.0}
    assert training_weights(rewarder.components, "random")["m:bonus"] == 0.7
    scored = rewarder.score(PROMPTS, ["Answer: 7", "Answer: 8", "ten, I think"])
    # real: math C, W, U = [1, 0, 0]; answer_format [1, 1, 0]; bonus 1 each: [1 + .5 + .7, .5 + .7, .7]
    assert scored.rewards.tolist() == pytest.approx([2.2, 1.2, 0.7])
    control = format_only(scored, weights)
    # math pays an answer read, right or wrong: [1, 1, 0]; + 0.5 x answer_format [1, 1, 0]; bonus weighs 0
    assert control.rewards.tolist() == pytest.approx([1.5, 1.5, 0.0])
    assert [v.outcome for v in control.verdicts["math"]] == [Outcome.CORRECT, Outcome.WRONG, Outcome.UNPARSEABLE]
    assert control.verdicts["math"][1].detail.startswith("format_only control pays 1 | ")


def evaluation(rates: list[float]) -> dict:
    return {"pass@1": sum(rates) / len(rates), "per_problem_pass@1": rates, "problems": len(rates),
            "samples_per_problem": 2}


def test_the_table_pairs_each_run_with_the_base_by_hand():
    stages = [StageRecord(name, "grpo", f"d/{name}", {}, eval=evaluation(rates)) for name, rates in
              (("real", [1, 1, 1, .5]), ("random", [0, 1, .5, .5]), ("format_only", [.5, 1, .5, .5]))]
    table = control_table(Manifest("control", "base", stages, base_eval=evaluation([0, 1, .5, .5])))
    # real - base = [1, 0, .5, 0]: mean .375, sample variance .6875 / 3, SE = sqrt(.229167 / 4) = .239
    # random - base = 0 everywhere: +0.000, SE 0; format_only - base = [.5, 0, 0, 0]: mean .125, SE sqrt(.0625/4)
    # real - format_only = [.5, 0, .5, 0]: mean .25, SE sqrt((4 x .0625 / 3) / 4) = .144
    lines = table.splitlines()
    assert lines[0].startswith("control runs: held-out pass@1 (4 problems, 2 samples each)")
    assert [cell.strip() for cell in lines[3].split("|")[1:-1]] == ["base", "0.500", "", ""]
    assert [cell.strip() for cell in lines[4].split("|")[1:-1]] == ["real", "0.875", "+0.375", "0.239"]
    assert [cell.strip() for cell in lines[5].split("|")[1:-1]] == ["random", "0.500", "+0.000", "0.000"]
    assert [cell.strip() for cell in lines[6].split("|")[1:-1]] == ["format_only", "0.625", "+0.125", "0.125"]
    assert lines[7:] == ["real vs random: +0.375 (paired SE 0.239)", "real vs format_only: +0.250 (paired SE 0.144)"]


@pytest.mark.parametrize("rates", [[1, 1, 1], [1]])
def test_the_table_leaves_a_pair_blank_without_the_same_two_or_more_problems(rates):
    # without its guard, paired() reaches paired_difference, which raises ValueError on these
    base = [0, 1, .5, .5] if len(rates) > 1 else [0]  # 3 problems against 4; or one problem on both sides
    stages = [StageRecord(name, "grpo", f"d/{name}", {}, eval=evaluation(rates))
              for name in ("real", "random", "format_only")]
    lines = control_table(Manifest("control", "base", stages, base_eval=evaluation(base))).splitlines()
    for line in lines[4:7]:  # kills dropping either length test
        assert [cell.strip() for cell in line.split("|")[1:-1]][2:] == ["", ""]
    assert len(lines) == (9 if len(rates) > 1 else 7)  # real vs a control: paired on 3 problems, not on 1


def test_every_control_stage_starts_from_the_base_model():
    recipe = control_recipe(load_config(None, []))
    # the random and format_only runs are controls of the real one only when all three start from the same model
    assert [(s.name, s.kind, s.model_from) for s in recipe.stages] == [
        ("real", "grpo", "base"), ("random", "grpo", "base"), ("format_only", "grpo", "base")]


def test_a_refused_control_config_leaves_no_directory_behind(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "new" / "control"
    assert main(["control", f"model.name_or_path={tiny_model_dir}", "checkpoint.save_final=none",
                 "--output-dir", str(out)]) == 2
    assert "checkpoint.save_final=none would keep no final model" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()  # neither the directory nor its .rlvr-run lock


def test_control_refuses_a_config_that_sets_the_control_itself(capsys):
    assert main(["control", "reward.control=random"]) == 2
    assert "leave reward.control unset" in capsys.readouterr().err


def test_rlvr_control_end_to_end_on_a_tiny_model(tiny_model_dir, tmp_path, capsys):
    out, functions = tmp_path / "new" / "control", tmp_path / "rf.py"  # a parent that does not exist yet
    functions.write_text("def always(completions, **kwargs):\n    return [1.0] * len(completions)\n")
    code = main(["control", f"model.name_or_path={tiny_model_dir}", "max_steps=1", "seed=3", "rollout.group_size=2",
                 "rollout.prompts_per_step=2", "rollout.max_new_tokens=8", "optimizer.micro_batch_size=4",
                 "reward.workers=0", "eval.size=4", "eval.samples=2", "eval.greedy=false", "logging.progress=off",
                 f'reward.functions={{"{functions}:always": 1.0}}', "--output-dir", str(out)])
    printed = capsys.readouterr().out
    assert code == 0
    manifest = load_manifest(out)
    runs = {s.name: s for s in manifest.stages}
    assert list(runs) == ["real", "random", "format_only"]
    for name, control in (("real", "none"), ("random", "random"), ("format_only", "format_only")):
        saved = runs[name].config
        assert saved["reward"]["control"] == control and saved["seed"] == 3  # same seed, own directory
        assert runs[name].directory == str(out / "stages" / f"{['real', 'random', 'format_only'].index(name) + 1:02d}"
                                                             f"-{name}")
        assert (out / "stages" / runs[name].directory.rsplit("/", 1)[1] / "final" / "config.json").is_file()
        assert len(runs[name].eval["per_problem_pass@1"]) == 4  # the same held-out problems as the base
    first = {name: json.loads((out / "stages" / f"{i + 1:02d}-{name}" / "metrics.jsonl").read_text().splitlines()[0])
             for i, name in enumerate(runs)}
    # a random model's completions never hold a readable answer (math 0); the function pays 1 to every completion,
    # as a shuffle keeps it, while format_only weighs it 0: the update of each run saw its own reward
    assert [first[name]["reward_mean"] for name in runs] == [1.0, 1.0, 0.0]
    assert first["format_only"]["outcomes/math/unparseable"] == 4  # the real verdicts are what is logged
    assert printed.count("control runs: held-out pass@1") == 1  # one table...
    assert "held-out evaluation after each stage" not in printed  # ...not the recipe's stage-by-stage one too
    assert "stage format_only (grpo) starting" in printed  # the recipe's progress lines still reach the console
    base = manifest.base_eval["per_problem_pass@1"]
    for name in ("real", "random", "format_only"):
        mean, standard_error = paired_difference(runs[name].eval["per_problem_pass@1"], base)
        row = next(line for line in printed.splitlines() if line.startswith(f"| {name} "))
        assert f"{mean:+.3f}" in row and f"{standard_error:.3f}" in row
    assert (out / "summary.md").read_text().startswith("control runs: held-out pass@1")


EPISODES = ["task.name=filesystem", "task.one_shot=false", "episode.list_tools=false", "episode.max_turns=2",
            "episode.tokens_per_turn=6", "episode.tokens_per_episode=40"]


def test_a_control_with_process_credit_is_refused_before_any_run(tiny_model_dir, tmp_path, capsys):
    # per-turn credit pays the turns that did the work: neither control hides that, so such a "control" would learn
    # from the real signal; refused when the three configs are built, before the real run trains for minutes
    out = tmp_path / "control"
    assert main(["control", f"model.name_or_path={tiny_model_dir}", *EPISODES, "episode.credit=process",
                 "--output-dir", str(out)]) == 2
    assert "use episode.credit=outcome for the run and its controls" in capsys.readouterr().err
    assert not out.exists()
    with pytest.raises(ConfigError, match="reward.control=random hides which answer"):
        load_config(None, [*EPISODES, "episode.credit=process", "reward.control=random"])


def test_rlvr_control_runs_a_multi_turn_task(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "control"
    code = main(["control", f"model.name_or_path={tiny_model_dir}", *EPISODES, "max_steps=1", "seed=3",
                 "rollout.group_size=2", "rollout.prompts_per_step=2", "optimizer.micro_batch_size=4",
                 "reward.workers=0", "eval.size=2", "eval.samples=2", "eval.greedy=false", "logging.progress=off",
                 "--output-dir", str(out)])
    assert code == 0, capsys.readouterr().err
    first = {name: json.loads((out / "stages" / f"{i + 1:02d}-{name}" / "metrics.jsonl").read_text().splitlines()[0])
             for i, name in enumerate(("real", "random", "format_only"))}
    # a random tiny model never reaches the goal: the environment judges every final state WRONG, so the real reward
    # and its shuffle pay 0, while format_only pays the state it could judge (state_weight 1 x 1 per episode)
    assert first["real"]["reward_mean"] == first["random"]["reward_mean"] == 0.0
    assert first["format_only"]["reward_mean"] == 1.0
    assert "control runs: held-out pass@1" in capsys.readouterr().out


def test_the_state_component_is_the_episode_scorings():
    from rlvr.agents.scoring import STATE as SCORED
    from rlvr.rewards.control import STATE

    assert STATE == SCORED  # format_only re-scores the environment's verdict by this name


def test_the_controlled_service_passes_stats_and_close_to_the_service():
    from rlvr.rewards.control import ControlledService

    class Inner:
        closed = 0

        def stats(self):
            return {"timeouts": 2}

        def close(self):
            self.closed += 1

    inner = Inner()
    service = ControlledService(inner, "random", {"math": 1.0})
    assert service.stats() == {"timeouts": 2}
    service.close()  # the workers behind it are stopped: a control run leaves no verifier process behind
    assert inner.closed == 1
    with pytest.raises(ValueError, match="unknown reward.control 'none'"):
        ControlledService(inner, "none", {})


def test_rlvr_control_help_names_its_arguments(capsys):
    with pytest.raises(SystemExit):
        main(["control", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "continue even if a started run's config changed" in text and "runs/control-CONFIG" in text
