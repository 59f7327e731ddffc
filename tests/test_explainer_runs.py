"""Explainer views 3 (temperature), 4 (reward hacking), 9 (KL and beta), 11 (outcome vs process credit) and 12
(tune it yourself) in a real browser, on the made-up example of explainer_fixture.py so that every number drawn is
known: each view's control is driven and what it changes is read back from data-value / data-x / data-y. Skips
without a browser, fails so under CI=true (the `driver` fixture of test_viz_browser.py)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import explainer_fixture
import rlvr.viz.explainer_data as explainer_data
import test_viz_browser
from explainer_fixture import agent_group
from rlvr.algorithms.advantages import grpo_advantages
from rlvr.algorithms.turns import process_advantages
from rlvr.viz.report import write_report
from test_viz_browser import dashboard_page, severe, wait_until
from viz_helpers import make_run, metrics_row, write_lines

pytestmark = pytest.mark.browser
# The shared fixtures: headless Chromium (skips without one, fails so under CI=true), test-artifacts/, and the
# made-up example in place of the shipped one.
driver, artifacts = test_viz_browser.driver, test_viz_browser.artifacts
use_fake_example = explainer_fixture.use_fake_example
# The views' data as the page holds it: read back by the tests, to compare with the fake example
VIEW_PART = "return JSON.parse(document.getElementById('rlvr-data').textContent).explainer[arguments[0]]"
CONFIG = "max_steps: 12\nrollout:\n  group_size: 8\n  temperature: 0.8\nalgorithm:\n  beta: 0.04\n  clip_epsilon: 0.2\n"
DOTS = """return Array.from(document.querySelectorAll(arguments[0])).map(
  c => [c.dataset.key, Number(c.dataset.x), Number(c.dataset.y)]);"""


def open_page(driver, run: Path, output: Path) -> None:
    driver.get(write_report([run], output).resolve().as_uri())


def set_value(driver, element_id: str, value, event: str = "input") -> None:
    driver.execute_script("const e = document.getElementById(arguments[0]); e.value = String(arguments[1]); "
                          "e.dispatchEvent(new Event(arguments[2]));", element_id, value, event)


def value(driver, element_id: str) -> float:
    return float(driver.find_element("id", element_id).get_attribute("data-value"))


def dots(driver, selector: str) -> list[tuple[str, float, float]]:
    return [tuple(d) for d in driver.execute_script(DOTS, selector)]


def note(driver, view: str):
    return driver.find_element("css selector", f"#view-{view} .ex-source")


def screenshot(driver, artifacts: Path, view: str) -> None:
    node = driver.find_element("id", f"view-{view}")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", node)  # clear of the sticky header
    node.screenshot(str(artifacts / f"explainer-{view}.png"))


def without_kl(run: Path) -> Path:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    (run / "metrics.jsonl").write_text("")
    write_lines(run / "metrics.jsonl", [{k: v for k, v in row.items() if k != "kl"} for row in rows])
    return run


@pytest.fixture
def page(driver, use_fake_example, tmp_path):
    """A 12-step run (KL 0.0005 * step, no episodes) sampled at T = 0.8, opened on the fake example."""
    run = make_run(tmp_path / "run", steps=12)
    (run / "config.yaml").write_text(CONFIG)
    open_page(driver, run, tmp_path / "report.html")
    return driver


def test_temperature_slider_moves_the_marker_and_the_numbers(page, artifacts):
    rows = page.execute_script(VIEW_PART, "temperature")["rows"]  # sweep_row(t) at T = 0.2 ... 1.2
    # the slider opens at the measured T nearest the run's own (0.8: row 3): 1 + 3 * 0.8 = 3.4 distinct answers,
    # 0.9 - 0.48 = 0.42 tied, 0.2 + 0.32 = 0.52 mean |A|
    assert page.find_element("id", "temperature-slider-value").text == "0.8"
    assert [value(page, f"temperature-{k}") for k in ("t", "distinct_answers", "tied_share", "mean_abs_advantage")] \
        == [0.8, rows[3]["distinct_answers"], 0.42, 0.52]
    set_value(page, "temperature-slider", 1)  # T = 0.4: 1 + 1.2 = 2.2 answers, 0.66 tied, 0.36 mean |A|
    assert page.find_element("id", "temperature-slider-value").text == "0.4"
    assert [value(page, f"temperature-{k}") for k in ("t", "tied_share", "mean_abs_advantage", "reward_mean")] \
        == [0.4, 0.66, 0.36, 0.78]
    for metric in ("distinct_answers", "tied_share", "mean_abs_advantage"):
        plot = f"#view-temperature svg[data-plot='temperature-{metric}']"
        assert dots(page, plot + " circle.selected") == [("selected", 0.4, rows[1][metric])]
        assert [d[1:] for d in dots(page, plot + " circle:not(.selected)")] == \
            [(r["temperature"], r[metric]) for r in rows]
        # the run's T (0.8, from its config) is the dashed line, at the x of the T = 0.8 dot, labelled "this run"
        x = page.find_element("css selector", f"{plot} circle[data-key='{metric}-3']").get_attribute("cx")
        line = page.find_element("css selector", f"{plot} path[data-key='this-run']").get_attribute("d")
        assert line.startswith(f"M{float(x):.1f},")
        assert page.find_element("css selector", f"{plot} text.run-label").text == "this run"
    assert "T = 0.8" in page.find_element("id", "temperature-run").text
    assert severe(page) == []
    screenshot(page, artifacts, "temperature")


def test_hacks_switching_the_naive_check_changes_its_pay(page, artifacts):
    # fake cases: 0 "format only" (naive format 1, last number 0), 1 "hedge" (1, 1); rlvr pays neither
    naive = lambda: [value(page, f"hacks-naive-{i}") for i in (0, 1)]  # noqa: E731
    counts = lambda: [value(page, f"hacks-{k}") for k in ("naive-paid", "shown", "rlvr-paid")]  # noqa: E731
    assert naive() == [1.0, 1.0] and counts() == [2, 2, 0]
    page.find_element("id", "hacks-check-last_number").click()
    assert naive() == [0.0, 1.0] and counts() == [1, 2, 0]
    assert "pays 1 of 2 completions; rlvr pays 0" in page.find_element("id", "hacks-summary").text
    assert [value(page, f"hacks-rlvr-{i}") for i in (0, 1)] == [0.0, 0.0]
    assert "hedged: several answers" in page.find_element("id", "hacks-case-1").text
    set_value(page, "hacks-kind", "hedge", "change")
    assert [c.get_attribute("id") for c in page.find_elements("css selector", "#view-hacks .ex-hack")] == \
        ["hacks-case-1"]
    assert counts() == [1, 1, 0]
    page.find_element("id", "hacks-check-format").click()
    set_value(page, "hacks-kind", "format only", "change")
    assert counts() == [1, 1, 0] and value(page, "hacks-naive-0") == 1.0
    assert severe(page) == []
    screenshot(page, artifacts, "hacks")


def test_kl_curves_of_the_run_and_the_recorded_betas(page, artifacts):
    curve = lambda key: [d[1:] for d in dots(page, f"#view-kl circle[data-key='{key}']")]  # noqa: E731
    # the run: metrics_row's kl = 0.0005 * step, steps 1..12; grid_cells at eps 0.2, G 8: kl = (0.2 - beta) s / 10
    assert curve("run") == [(s, pytest.approx(0.0005 * s)) for s in range(1, 13)]
    assert curve("beta-0") == [(s, pytest.approx(0.02 * s)) for s in range(1, 7)]
    assert curve("beta-0.04") == [(s, pytest.approx(0.016 * s)) for s in range(1, 7)]
    assert curve("beta-0.2") == [(s, 0.0) for s in range(1, 7)]
    assert page.find_element("id", "kl-run-label").text == "this run, beta = 0.04"
    page.find_element("id", "kl-beta-0").click()  # beta = 0 off, the others stay
    assert curve("beta-0") == [] and len(curve("beta-0.04")) == 6 and len(curve("run")) == 12
    screenshot(page, artifacts, "kl")
    page.find_element("id", "kl-beta-0").click()
    assert len(curve("beta-0")) == 6
    assert note(page, "kl").get_attribute("data-source") == "run"
    # a log axis by default (the KL spans decades); the switch moves the dots, not their values. The run's KL is
    # 0.0005 * step: on a linear axis each step rises by the same height, on a log axis step 1 -> 2 (x2) rises
    # log10(2) / log10(12/11) = 8 times as much as step 11 -> 12
    height = lambda: [float(c.get_attribute("cy")) for c in page.find_elements(  # noqa: E731
        "css selector", "#view-kl circle[data-key='run']")]
    assert "log scale" in page.find_element("css selector", "#view-kl svg").text
    logged = height()
    page.find_element("id", "kl-log").click()
    linear = height()
    assert "log scale" not in page.find_element("css selector", "#view-kl svg").text
    assert curve("run") == [(s, pytest.approx(0.0005 * s)) for s in range(1, 13)]
    # linear: equal steps of KL are equal steps on the page; log: step 1 -> 2 (x2) spans more than 11 -> 12
    assert linear[0] - linear[1] == pytest.approx(linear[10] - linear[11], abs=0.15)
    assert logged[0] - logged[1] > 5 * (logged[10] - logged[11])
    page.find_element("id", "kl-log").click()
    assert severe(page) == []


def expected_credit(group: dict, weight: float = 1.0) -> tuple[list[float], list[list[float]]]:
    """The trainer's credit of an agent group, by its own functions (an episode without a reward is masked out, as
    the trainer masks unscorable rows). By hand, for agent_group(): rewards 1, 0, 0: mean 1/3, std sqrt(1/3) =
    0.57735, outcome A = 1.1545, -0.57725, -0.57725. Step rewards [1, 0], [0, 0], [1]: mean 0.4, std sqrt(0.3) =
    0.54772, normalized 1 -> 1.0953, 0 -> -0.7302; to the end of each episode: [0.3651, -0.7302], [-1.4604,
    -0.7302], [1.0953]. Episode 3 is wrong (A < 0) but its one turn earned a step reward: its process credit
    -0.57725 + 1.0953 = 0.518 turns positive. `weight`: episode.process_weight, scaling the process term."""
    rewards = [c["reward"] for c in group["completions"]]
    valid = torch.tensor([r is not None for r in rewards])
    outcome = grpo_advantages(torch.tensor([r or 0.0 for r in rewards]), 3, eps=1e-4, valid=valid).tolist()
    steps = [c["episode"]["turn_rewards"] for c in group["completions"]]
    padded = torch.tensor([s + [0.0] * (2 - len(s)) for s in steps])
    mask = torch.tensor([[True] * len(s) + [False] * (2 - len(s)) for s in steps])
    process = (process_advantages(padded, mask, 3, eps=1e-4) * valid[:, None]).tolist()
    return outcome, [[outcome[i] + weight * process[i][t] for t in range(len(s))] for i, s in enumerate(steps)]


def model_turns(driver) -> list[tuple[str, float]]:
    return [(b.get_attribute("class").split()[-1], float(b.get_attribute("data-value")))
            for b in driver.find_elements("css selector", "#process-turns .ex-turn.model")]


def same_credit(got: list[tuple[str, float]], want: list[float]) -> bool:
    signs = ["pos" if w > 0 else "neg" if w < 0 else "zero" for w in want]
    return [c for c, _ in got] == signs and [v for _, v in got] == pytest.approx(want, rel=1e-5, abs=1e-12)


def test_process_credit_against_the_trainer(page, artifacts):
    outcome, process = expected_credit(agent_group())
    assert outcome[2] < 0 < process[2][0]
    blocks = lambda: model_turns(page)  # noqa: E731
    close = same_credit
    assert "has no multi-turn episodes" in note(page, "process").text
    assert page.find_element("id", "process-mode-process").is_selected()  # the example trained with process credit
    assert close(blocks(), process[0])
    roles = [b.get_attribute("data-role") for b in page.find_elements("css selector", "#process-turns .ex-turn")]
    assert roles == ["assistant", "user", "assistant"]
    assert len(page.find_elements("css selector", "#process-turns .ex-turn.env")) == 1
    screenshot(page, artifacts, "process")
    page.find_element("id", "process-mode-outcome").click()
    assert close(blocks(), [outcome[0]] * 2)
    set_value(page, "process-episode", 2, "change")
    assert close(blocks(), [outcome[2]]) and value(page, "process-outcome") == pytest.approx(outcome[2])
    page.find_element("id", "process-mode-process").click()
    assert close(blocks(), process[2])
    set_value(page, "process-episode", 1, "change")
    assert close(blocks(), process[1])
    assert severe(page) == []


def test_grid_sliders_pick_the_recorded_run(page, artifacts):
    curve = lambda plot, key: [d[1:] for d in dots(  # noqa: E731
        page, f"#view-grid svg[data-plot='grid-{plot}'] circle[data-key='{key}']")]
    # the run (eps 0.2, beta 0.04, G 8) is a grid point: every slider opens there, marked "this run"
    marks = [page.find_element("css selector", f"#grid-{k}-marks .run").text for k in ("clip_epsilon", "beta",
                                                                                        "group_size")]
    assert marks == ["0.2 (this run)", "0.04 (this run)", "8 (this run)"]
    # grid_cells: reward = 0.3 + 0.05 s + eps / 10 - beta + G / 100 = 0.36 + 0.05 s here; no grey twin of itself
    assert curve("reward_mean", "cell") == [(s, pytest.approx(0.36 + 0.05 * s)) for s in range(1, 7)]
    assert curve("reward_mean", "default") == [] and value(page, "grid-final-reward") == pytest.approx(0.66)
    set_value(page, "grid-beta", 0)  # beta 0: reward 0.4 + 0.05 s, KL 0.02 s; the default run in grey
    assert page.find_element("id", "grid-beta-value").text == "0"
    assert curve("reward_mean", "cell") == [(s, pytest.approx(0.4 + 0.05 * s)) for s in range(1, 7)]
    assert curve("kl", "cell") == [(s, pytest.approx(0.02 * s)) for s in range(1, 7)]
    assert curve("reward_mean", "default") == [(s, pytest.approx(0.36 + 0.05 * s)) for s in range(1, 7)]
    assert value(page, "grid-final-kl") == pytest.approx(0.12)
    set_value(page, "grid-clip_epsilon", 0)  # eps 0.1: clip fraction 0.1 - 0.1 / 5 = 0.08
    set_value(page, "grid-group_size", 0)  # G 4: reward 0.3 + 0.05 s + 0.01 + 0.04
    assert curve("clip_fraction", "cell") == [(s, pytest.approx(0.08)) for s in range(1, 7)]
    assert curve("reward_mean", "cell") == [(s, pytest.approx(0.35 + 0.05 * s)) for s in range(1, 7)]
    assert "6 steps, 2 updates per batch" in page.find_element("id", "view-grid").text
    screenshot(page, artifacts, "grid")
    page.find_element("id", "grid-compare").click()
    assert curve("reward_mean", "default") == []
    assert severe(page) == []


def test_a_run_with_episodes_draws_its_own_and_masks_the_unscorable(driver, use_fake_example, tmp_path):
    """Process credit from the run itself: its own agent group and its credit setting. Episode 2 has no reward
    (unscorable): 0 in both schemes, and the outcome statistics pool episodes 1 and 3 only (A = +-0.5 / (sqrt(0.5)
    + 1e-4) = +-0.70700), while the step statistics still pool every episode's steps, as the trainer does."""
    group = agent_group()
    group["completions"][1]["reward"] = None
    run = make_run(tmp_path / "agent", steps=3, groups=False)
    write_lines(run / "groups.jsonl", [group])
    open_page(driver, run, tmp_path / "agent.html")
    assert note(driver, "process").get_attribute("data-source") == "run"
    # the run's config says nothing of credit: the trainer's default, outcome, is its own and opens the view
    assert driver.find_element("id", "process-mode-outcome").is_selected()
    assert "(this run)" in driver.find_element("css selector", "label[for='process-mode-outcome']").text
    outcome, process = expected_credit(group)
    assert outcome[0] == pytest.approx(0.70700, rel=1e-4) and outcome[1] == 0
    assert same_credit(model_turns(driver), [outcome[0]] * 2)
    set_value(driver, "process-episode", 1, "change")
    assert same_credit(model_turns(driver), [0.0, 0.0])
    driver.find_element("id", "process-mode-process").click()
    assert same_credit(model_turns(driver), [0.0, 0.0])
    set_value(driver, "process-episode", 2, "change")
    assert same_credit(model_turns(driver), process[2])
    assert severe(driver) == []


def test_the_process_term_is_weighed_by_the_runs_process_weight(driver, use_fake_example, tmp_path):
    """episode.process_weight 0.5: episode 3's process credit = -0.57725 + 0.5 * 1.0953 = -0.02960 (at weight 1 it
    was 0.518: the weight decides the sign here); its outcome credit stays -0.57725."""
    run = make_run(tmp_path / "agent", steps=3, groups=False)
    (run / "config.yaml").write_text("episode:\n  credit: process\n  process_weight: 0.5\n")
    write_lines(run / "groups.jsonl", [agent_group()])
    open_page(driver, run, tmp_path / "agent.html")
    outcome, process = expected_credit(agent_group(), weight=0.5)
    assert process[2] == [pytest.approx(-0.02960, abs=1e-4)]
    assert driver.find_element("id", "process-mode-process").is_selected()  # the run's own credit
    assert "process_weight = 0.5" in driver.find_element("id", "view-process").text
    set_value(driver, "process-episode", 2, "change")
    assert same_credit(model_turns(driver), process[2])
    driver.find_element("id", "process-mode-outcome").click()
    assert same_credit(model_turns(driver), [outcome[2]])
    assert "step scorer" not in driver.find_element("id", "view-process").text
    # an outcome-credit run has no process term to weigh; a run with a step scorer is told the log leaves it out
    (run / "config.yaml").write_text("episode:\n  credit: outcome\n  process_weight: 0.5\n  process_reward: m:f\n")
    open_page(driver, run, tmp_path / "outcome.html")
    text = driver.find_element("id", "view-process").text
    assert "process_weight" not in text and "adds the step scorer's scores" in text
    assert severe(driver) == []


def test_a_dashboard_redraws_the_kl_view_and_keeps_the_hidden_betas(driver, use_fake_example, tmp_path):
    run = make_run(tmp_path / "live", steps=5, final_eval=False)
    run_dots = lambda: len(dots(driver, "#view-kl circle[data-key='run']"))  # noqa: E731
    with dashboard_page(driver, run):
        assert wait_until(lambda: run_dots() == 5)
        driver.find_element("id", "kl-beta-0").click()
        write_lines(run / "metrics.jsonl", [metrics_row(6)])
        assert wait_until(lambda: run_dots() == 6), "the new KL point was not drawn within 10 s"
        assert dots(driver, "#view-kl circle[data-key='run']")[-1][1:] == (6, pytest.approx(0.003))
        assert not driver.find_element("id", "kl-beta-0").is_selected()
        assert dots(driver, "#view-kl circle[data-key='beta-0']") == [] and len(dots(driver, "#view-kl circle")) == 18
        assert severe(driver) == []


def test_views_say_when_they_fall_back_to_the_example(driver, use_fake_example, tmp_path):
    run = without_kl(make_run(tmp_path / "nokl", steps=4))
    open_page(driver, run, tmp_path / "nokl.html")
    for view in ("temperature", "hacks", "kl", "process", "grid"):
        assert note(driver, view).get_attribute("data-source") == "example", view
        assert "commit abc1234" in note(driver, view).text, view
    assert "hold no KL values" in driver.find_element("id", "view-kl").text
    assert dots(driver, "#view-kl circle[data-key='run']") == [] and len(dots(driver, "#view-kl circle")) == 18
    assert severe(driver) == []


def test_views_without_any_data_say_so(driver, monkeypatch, tmp_path):
    """No shipped example and a run without KL or episodes: each view says it has nothing, none breaks."""
    monkeypatch.setattr(explainer_data, "load_example", lambda: {})
    run = without_kl(make_run(tmp_path / "bare", steps=4))
    open_page(driver, run, tmp_path / "bare.html")
    for view in ("temperature", "hacks", "kl", "process", "grid"):
        assert note(driver, view).text.startswith("Nothing to show"), view
        assert driver.find_elements("css selector", f"#view-{view} .error, #view-{view} svg") == [], view
    assert severe(driver) == []
    # the run's own KL, with no recorded betas beside it
    open_page(driver, make_run(tmp_path / "kl", steps=4), tmp_path / "kl.html")
    assert len(dots(driver, "#view-kl circle[data-key='run']")) == 4 and dots(driver, "#view-kl circle.kl-rec") == []
    assert "No recorded runs at other betas" in driver.find_element("id", "view-kl").text
    assert severe(driver) == []
