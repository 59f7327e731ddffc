"""What the explainer's views are fed (rlvr/viz/explainer_data.py): the run's own data where it has it, else the
recorded example, each part saying which; and the shipped recording itself (complete, still what rlvr's
verifiers say, small enough that a 100-step report stays under 5 MB)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import rlvr.viz.explainer_data as explainer_data
from explainer_fixture import agent_group, ppo_group, use_fake_example  # noqa: F401  (a fixture)
from rlvr.viz.explainer_data import explainer_data as build
from rlvr.viz.explainer_data import load_example, passes, run_settings
from rlvr.viz.report import write_report
from rlvr.viz.rundata import RunData, load_run
from viz_helpers import group_row, make_run, write_lines

SHIPPED = Path(explainer_data.__file__).parent / "example" / "explainer.json"


def parts(run_dir: Path | None, scoring: str | None = "no") -> dict:
    return build([load_run(run_dir)] if run_dir else [], scoring)


def test_a_run_with_groups_feeds_its_own_views(tmp_path, use_fake_example):  # noqa: F811
    run = make_run(tmp_path / "run", steps=6, tokens=5)
    data = parts(run)
    assert data["group"]["source"] == "run" and data["group"]["group"]["step"] == 6  # the report's last phase
    # viz_helpers groups: half the completions right -> every logged group passes at 0.5, one point per step
    assert data["difficulty"]["source"] == "run" and [p["pass_rate"] for p in data["difficulty"]["points"]] == [0.5] * 6
    assert data["kl"]["run"]["kl"] == [0.0005 * s for s in range(1, 7)]
    # what the run cannot have: the temperature sweep, the grid, the hacks; nor a critic or an agent here
    for name in ("temperature", "grid", "hacks", "credit", "process"):
        assert data[name]["source"] == "example", name
    assert data["credit"]["why"] == "used the group baseline, not a critic"
    assert data["scoring"] == {"enabled": False, "why": "no"}
    assert parts(run, scoring=None)["scoring"] == {"enabled": True, "why": ""}


def test_a_run_without_groups_falls_back_to_the_example_and_says_why(tmp_path, use_fake_example):  # noqa: F811
    data = parts(make_run(tmp_path / "plain", steps=3, groups=False))
    assert data["group"]["source"] == "example" and data["group"]["why"] == "logged no group view (groups.jsonl)"
    assert data["group"]["group"]["step"] == 2  # the fake example's last group
    assert "rlvr train max_steps=8" in data["group"]["made"] and "abc1234" in data["group"]["made"]
    # the example's pass rates at the default temperature (1.0) stand in for the run's
    assert data["difficulty"]["source"] == "example"
    assert [p["pass_rate"] for p in data["difficulty"]["points"]] == [0.125, 0.5, 0.875, 1.0]


def test_tied_groups_teach_nothing_so_the_example_is_shown(tmp_path, use_fake_example):  # noqa: F811
    run = make_run(tmp_path / "tied", steps=2, groups=False)
    row = group_row(2, 4, 3, ratios=True)
    for c in row["completions"]:
        c["reward"] = 1.0
    write_lines(run / "groups.jsonl", [row])
    data = parts(run)
    assert data["group"]["source"] == "example" and "no group whose rewards differ" in data["group"]["why"]


def test_the_recorded_betas_are_the_default_clip_and_group_size(use_fake_example):  # noqa: F811
    kl = parts(None)["kl"]
    assert [r["beta"] for r in kl["recorded"]] == [0.0, 0.04, 0.2]
    # fake grid: kl = (0.2 - beta) * step / 10
    assert kl["recorded"][0]["kl"][:2] == [0.02, 0.04] and kl["recorded"][2]["kl"][0] == 0.0


def test_a_run_at_beta_0_logs_zeros_that_are_not_drawn_as_its_kl(tmp_path, use_fake_example):  # noqa: F811
    run = make_run(tmp_path / "free", steps=3, groups=False)  # viz_helpers logs kl = 0.0005 * step
    assert parts(run)["kl"]["run"]["kl"] == [0.0005, 0.001, 0.0015]  # the premise: at beta 0.04 they are drawn
    (run / "config.yaml").write_text("algorithm:\n  beta: 0.0\n")
    kl = parts(run)["kl"]
    assert kl["run"] == {"steps": [], "kl": []} and kl["source"] == "example" and "not measured" in kl["why"]
    assert "rlvr train ... (grid)" in kl["made"] and len(kl["recorded"]) == 3


def test_a_gae_run_and_an_agent_run_feed_their_own_credit_views(tmp_path, use_fake_example):  # noqa: F811
    gae = make_run(tmp_path / "gae", steps=1, groups=False)
    (gae / "config.yaml").write_text("algorithm:\n  advantage: gae\n")
    write_lines(gae / "groups.jsonl", [ppo_group()])
    assert parts(gae)["credit"]["source"] == "run"
    agent = make_run(tmp_path / "agent", steps=1, groups=False)
    write_lines(agent / "groups.jsonl", [agent_group()])
    process = parts(agent)["process"]
    assert process["source"] == "run"
    assert [c["episode"]["turn_rewards"] for c in process["group"]["completions"]] == [[1.0, 0.0], [0.0, 0.0], [1.0]]


def test_without_an_example_the_parts_are_empty_not_broken(tmp_path, monkeypatch):
    monkeypatch.setattr(explainer_data, "load_example", lambda: {})
    data = parts(make_run(tmp_path / "plain", steps=2, groups=False))
    for name in ("group", "temperature", "hacks", "difficulty", "credit", "process", "grid"):
        assert data[name] is None, name
    assert data["kl"]["source"] == "run" and data["kl"]["recorded"] == []


def test_passes_and_settings():
    correct = {"outcome": "correct", "score": 1.0}
    assert passes({"verdicts": {"math": correct, "format": correct}})
    assert not passes({"verdicts": {"math": correct, "format": {"outcome": "wrong"}}, "reward": 0.5})
    assert passes({"reward": 0.5}) and not passes({"reward": 0.0}) and not passes({})
    assert not passes({"verdicts": {}, "reward": 0.0})  # no verdicts: the reward decides
    settings = run_settings("rollout:\n  temperature: 0.7\nalgorithm:\n  clip_epsilon: 0.1\n")
    assert (settings["temperature"], settings["clip_epsilon"], settings["clip_epsilon_high"]) == (0.7, 0.1, 0.1)
    assert settings["beta"] == 0.04 and settings["group_size"] == 8  # the trainer's defaults
    assert run_settings(": not yaml [")["temperature"] == 1.0
    assert run_settings("rollout:\n  group_size: 4\n")["group_size"] == 4
    assert run_settings("rollout:\n  group_size: 4.5\n")["group_size"] == 8  # no whole number: the default
    assert run_settings("rollout:\n  temperature: [1, 2]\n")["temperature"] == 1.0  # a list is no temperature
    # episode.process_reward: a scorer's name or path is said on the page; anything else is no scorer
    assert run_settings("episode:\n  process_reward: m:f\n")["process_reward"] == "m:f"
    for other in ("[m:f]", "5", "''", "null"):
        assert run_settings(f"episode:\n  process_reward: {other}\n")["process_reward"] is None, other
    assert run_settings("episode:\n  process_weight: 0.25\n")["process_weight"] == 0.25


# ---- the shipped recording (bench/explainer_record.py) --------------------------------------------------------

@pytest.fixture(scope="module")
def shipped() -> dict:
    assert SHIPPED.is_file(), "rlvr/viz/example/explainer.json is missing: python bench/explainer_record.py"
    load_example.cache_clear()
    return load_example()


def test_the_shipped_example_holds_every_part(shipped):
    assert SHIPPED.stat().st_size < 400_000
    for name in ("example", "temperature", "grid", "ppo", "agent", "hacks"):
        assert shipped[name]["date"] and shipped[name]["commit"] and shipped[name]["command"], name
    axes = shipped["grid"]["axes"]
    cells = {(c["clip_epsilon"], c["beta"], c["group_size"]) for c in shipped["grid"]["cells"]}
    assert len(cells) == len(axes["clip_epsilon"]) * len(axes["beta"]) * len(axes["group_size"])
    assert shipped["grid"]["seconds"] <= 30 * 60  # the budget for the grid's recording
    assert [r["temperature"] for r in shipped["temperature"]["rows"]] == [0.2, 0.4, 0.6, 0.8, 1.0, 1.2]
    assert any(c["episode"] and c["episode"]["turn_rewards"] for c in shipped["agent"]["group"]["completions"])
    assert any(len(set(c["token_advantages"])) > 1 for c in shipped["ppo"]["group"]["completions"])  # per token
    assert any(c.get("token_kl") for g in shipped["example"]["groups"] for c in g["completions"])


def test_the_shipped_hacks_are_still_what_the_verifier_says(shipped):
    from rlvr.verifiers.math.verifier import MathVerifier

    verifier = MathVerifier("strict", timeout_s=10)
    cases = shipped["hacks"]["cases"]
    assert {c["source"] for c in cases} == {"real", "attack tests"}
    assert {"last-number spam", "hedge", "format only"} <= {c["kind"] for c in cases}
    for case in cases:
        verdict = verifier.verify(case["completion"], case["reference"])
        assert (verdict.outcome.value, verdict.score) == (case["rlvr"]["outcome"], case["rlvr"]["reward"]), case
        assert max(case["naive"].values()) > case["rlvr"]["reward"], case  # each one games the naive check


def test_a_100_step_report_stays_under_5_mb(tmp_path, shipped):
    run = make_run(tmp_path / "long", steps=100)  # 200-token groups of 8 every step, as viz_helpers writes
    report = write_report([run], tmp_path / "report.html")
    size = report.stat().st_size
    assert 100_000 < size < 5_000_000, size
    assert json.dumps(shipped["grid"]["axes"], separators=(",", ":")) in report.read_text(encoding="utf-8")


def test_the_difficulty_view_reads_every_group_of_a_step_not_only_the_shown_one(tmp_path, use_fake_example):  # noqa: F811
    run = make_run(tmp_path / "rates", steps=2, groups=False)
    rows = [group_row(s, 4, 3, ratios=True) for s in (1, 2)]
    # step 1 logged its batch's pass rates: 2 prompts that tied (0 and 1) next to the shown one (0.5)
    rows[0]["pass_rates"] = [["a", 0.0], ["b", 1.0], ["arith/train/1", 0.5]]
    write_lines(run / "groups.jsonl", rows)
    part = parts(run)["difficulty"]
    # step 2, from before pass rates were logged, gives its shown group only (half right), and says so
    assert [(p["step"], p["pass_rate"]) for p in part["points"]] == [(1, 0.0), (1, 1.0), (1, 0.5), (2, 0.5)]
    assert "tied prompts are missing" in part["made"]
    rows[1]["pass_rates"] = [["arith/train/2", 0.5]]
    (run / "groups.jsonl").write_text("")
    write_lines(run / "groups.jsonl", rows)
    assert "missing" not in parts(run)["difficulty"]["made"]


def test_a_damaged_groups_file_is_said_not_hidden(tmp_path, use_fake_example):  # noqa: F811
    run = make_run(tmp_path / "damaged", steps=3, groups=False)
    good = [json.dumps(group_row(s, 2, 3, ratios=True)) for s in (2, 3)]
    (run / "groups.jsonl").write_text('{"step": 1, "completions": [\n' + "\n".join(good) + "\n")
    # the page itself may read past it (a long file, whose damaged line lies before the lines it shows)
    shown = RunData(name="damaged", path=run, config_text="", rows=[])
    part = explainer_data.difficulty_part(shown, run_settings(""))
    assert part["source"] == "example" and "could not be read" in part["why"] and "line 1" in part["why"]


def test_a_ppo_run_samples_one_completion_a_prompt_and_still_feeds_its_credit_view(tmp_path, use_fake_example):  # noqa: F811
    run = make_run(tmp_path / "ppo", steps=1, groups=False)
    (run / "config.yaml").write_text("rollout:\n  group_size: 1\nalgorithm:\n  advantage: gae\n")
    row = ppo_group()
    row["completions"] = row["completions"][:1]  # configs/ppo.yaml: G = 1
    write_lines(run / "groups.jsonl", [row])
    credit = parts(run)["credit"]
    assert credit["source"] == "run" and len(credit["group"]["completions"]) == 1


def test_typed_answers_need_a_group_of_the_run_itself(tmp_path, use_fake_example):  # noqa: F811
    plain = make_run(tmp_path / "plain", steps=2, groups=False)  # the group shown is the example's
    scoring = parts(plain, scoring=None)["scoring"]
    assert scoring["enabled"] is False and "the recorded example's" in scoring["why"]
    assert parts(make_run(tmp_path / "own", steps=2, tokens=4), scoring=None)["scoring"]["enabled"] is True


def test_small_kl_values_keep_their_significant_digits(tmp_path, use_fake_example):  # noqa: F811
    run = make_run(tmp_path / "kl", steps=1, groups=False)
    row = group_row(1, 2, 3, ratios=True)
    for c in row["completions"]:
        c["token_kl"] = [0.0000312345, 0.123456, 2.5e-9]
    write_lines(run / "groups.jsonl", [row])
    shown = parts(run)["group"]["group"]["completions"][0]["token_kl"]
    assert shown == [3.123e-05, 0.1235, 2.5e-09]  # 4 significant digits; 4 decimals would read 0.0, 0.1235, 0.0
