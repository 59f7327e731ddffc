"""Explainer views 1 (group sampling in action), 2 (score your own answer) and 5 (difficulty sweet spot) in a real
browser: each control is driven and every number it changes is compared with the trainer's own Python function
(grpo_advantages, tie_probability, expected_abs_advantage); the dashboard scores a typed answer with the run's
verifiers. Skips without a browser, fails so under CI=true (as tests/test_viz_browser.py)."""
from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

import rlvr.viz.explainer_data as explainer_data
from explainer_fixture import fake_example, use_fake_example  # noqa: F401  (a fixture, named by usefixtures)
from rlvr.algorithms.advantages import grpo_advantages
from rlvr.algorithms.difficulty import expected_abs_advantage, tie_probability
from rlvr.config.run import AlgorithmConfig
from rlvr.rewards.typed_answer import answer_scorer
from rlvr.viz.dashboard import DashboardServer
from rlvr.viz.report import write_report
from test_viz_browser import artifacts, driver, severe, wait_until  # noqa: F401  (the shared browser fixtures)
from viz_helpers import CONFIG, group_row, make_run

pytestmark = pytest.mark.browser
EPS = AlgorithmConfig().std_epsilon  # viz_helpers' config.yaml does not set it: the trainer's default
# The run's logged group: its first two answers tie (both right); the last has a partial reward (say a format
# bonus), the only 0.5, so it has a place of its own in the ranking.
REWARDS = [1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.5]
NO_DASHBOARD = "typing an answer needs the dashboard (`rlvr dashboard RUN_DIR`)"  # rlvr.viz.page.payload's default


def group_line(step: int, rewards: list[float]) -> dict:
    """viz_helpers.group_row with these rewards (and matching verdicts and answers)."""
    row = group_row(step, len(rewards), 6, ratios=True)
    for c, r in zip(row["completions"], rewards):
        c.update(reward=r, text=f"6 * 7 = {42 if r == 1 else 41}. Answer: {42 if r == 1 else 41}")
        c["verdicts"]["math"].update(outcome="correct" if r == 1 else "wrong", score=r)
    return row


def run_with(path: Path, *lines: dict) -> Path:
    run = make_run(path, steps=2, tokens=6)
    (run / "groups.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return run


def open_report(driver, run: Path, output: Path) -> None:  # noqa: F811
    driver.get(write_report([run], output).resolve().as_uri())
    assert wait_until(lambda: driver.find_elements("css selector", "#ex-views .ex-view")), "no explainer drawn"


def slide(driver, element_id: str, value: float) -> None:  # noqa: F811
    driver.execute_script("const e = document.getElementById(arguments[0]); e.value = String(arguments[1]);"
                          "e.dispatchEvent(new Event('input'));", element_id, value)


def choose(driver, element_id: str, value: str) -> None:  # noqa: F811
    """Pick an option as a reader does: the select's value, then its change event (not selenium's Select: this
    module must load, and skip, where selenium is not installed)."""
    driver.execute_script("const e = document.getElementById(arguments[0]); e.value = arguments[1];"
                          "e.dispatchEvent(new Event('change'));", element_id, value)


def number(driver, element_id: str) -> float:  # noqa: F811
    return float(driver.find_element("id", element_id).get_attribute("data-value"))


def bar_values(driver, plot: str) -> list[float]:  # noqa: F811
    bars = driver.find_elements("css selector", f"svg[data-plot='{plot}'] rect.bar")
    return [float(b.get_attribute("data-value")) for b in bars]


def screenshot(driver, view: str, path: Path) -> None:  # noqa: F811
    """The whole view: the window made tall enough to hold it, the sticky page header out of its way."""
    node = driver.find_element("id", f"view-{view}")
    size = driver.get_window_size()
    driver.execute_script("document.querySelector('header').style.position = 'static'")
    driver.set_window_size(size["width"], max(size["height"], node.size["height"] + 200))
    driver.execute_script("arguments[0].scrollIntoView()", node)
    node.screenshot(str(path))
    driver.execute_script("document.querySelector('header').style.position = ''")
    driver.set_window_size(size["width"], size["height"])


def close(values, want) -> bool:
    return list(values) == pytest.approx(list(want), rel=1e-6, abs=1e-9)


def test_sampling_recomputes_the_first_k_advantages(driver, artifacts, tmp_path):  # noqa: F811
    open_report(driver, run_with(tmp_path / "run", group_line(2, REWARDS)), tmp_path / "report.html")
    assert driver.find_element("css selector", "#view-sampling .ex-source").get_attribute("data-source") == "run"
    assert driver.find_element("id", "sampling-k").get_attribute("value") == "8"  # opens with the whole group
    assert driver.find_element("id", "sampling-run-g").text == "this run samples G = 8"
    # k = 3: rewards 1, 1, 0; mean 2/3, Bessel var (1/9 + 1/9 + 4/9) / 2 = 1/3, std 0.57735;
    # A = (1/3) / 0.57745 = 0.57725 twice and (-2/3) / 0.57745 = -1.1545
    for k in (8, 3, 2, 1):
        slide(driver, "sampling-k", k)
        want = grpo_advantages(torch.tensor(REWARDS[:k]), k, EPS).tolist()
        assert close([number(driver, f"sampling-adv-{i}") for i in range(k)], want), k
        assert close(bar_values(driver, "sampling-advantages"), want), k
        assert number(driver, "sampling-mean") == pytest.approx(sum(REWARDS[:k]) / k)
        off = driver.find_elements("css selector", "#sampling-cards .ex-member.off")
        assert [int(c.get_attribute("data-index")) for c in off] == list(range(k, 8))
        if k < 8:
            assert driver.find_element("id", "sampling-adv-7").text == "not in the group"
        why = driver.find_element("id", "sampling-why")
        assert why.get_attribute("data-tied") == ("yes" if k <= 2 else "no"), k  # the first two answers tie
        if k == 3:
            assert want == pytest.approx([0.57725, 0.57725, -1.1545], abs=1e-4)
            assert number(driver, "sampling-std") == pytest.approx(3 ** -0.5)
        if k == 2:
            assert "same reward" in why.text and want == [0.0, 0.0]
        if k == 1:
            assert "no one to compare with" in why.text and "own baseline" in why.text and want == [0.0]
    slide(driver, "sampling-k", 5)
    screenshot(driver, "sampling", artifacts / "explainer-sampling.png")
    assert severe(driver) == []


def picked(driver) -> dict:  # noqa: F811
    return {"reward": number(driver, "score-reward"), "advantage": number(driver, "score-adv"),
            "rank": driver.find_element("id", "score-rank").text,
            "outcomes": [b.get_attribute("data-outcome") for b in driver.find_elements(
                "css selector", "#score-result .badge[data-verifier='math']")],
            "marked": [b.get_attribute("data-index") for b in driver.find_elements(
                "css selector", "svg[data-plot='score-advantages'] rect.bar.mine")]}


def test_score_in_a_report_offers_the_runs_own_answers(driver, artifacts, tmp_path):  # noqa: F811
    open_report(driver, run_with(tmp_path / "run", group_line(2, REWARDS)), tmp_path / "report.html")
    assert driver.find_element("id", "score-why").text == NO_DASHBOARD
    assert driver.find_elements("id", "score-answer") == []  # nothing to type into without the dashboard
    options = driver.find_elements("css selector", "#score-pick option")
    assert len(options) == 9 and options[8].text == "answer 8: reward 0.5 (wrong)"
    advantages = grpo_advantages(torch.tensor(REWARDS), 8, EPS).tolist()
    # answer 8 (0.5): four 1s above it, nobody shares it; answer 3 (0): four 1s and the 0.5 above, two other 0s
    for index, rank in ((7, "5th of 8 by reward"), (2, "6th of 8 by reward, shared with 2 others")):
        choose(driver, "score-pick", str(index))
        got = picked(driver)
        assert got["reward"] == REWARDS[index] and got["rank"] == rank and got["outcomes"] == ["wrong"]
        assert got["advantage"] == pytest.approx(advantages[index], rel=1e-6) and got["marked"] == [str(index)]
        assert close(bar_values(driver, "score-advantages"), advantages)
    assert "Answer: 41" in driver.find_element("id", "score-text").text
    choose(driver, "score-pick", "")
    assert driver.find_element("id", "score-result").get_attribute("data-state") == "empty"
    assert severe(driver) == []


@contextmanager
def scoring_dashboard(driver, run: Path):  # noqa: F811
    """A dashboard of `run` with its own verifiers (rlvr.rewards.typed_answer), opened in the driver."""
    scorer, why = answer_scorer(run)
    assert why is None, why
    server = DashboardServer([run], "127.0.0.1", 0, scorer)
    server.start_thread()
    try:
        driver.get(server.url)
        assert wait_until(lambda: driver.find_elements("id", "score-answer")), "no answer box"
        yield server
    finally:
        server.shutdown()
        server.server_close()


def send(driver, text: str) -> str:  # noqa: F811
    box = driver.find_element("id", "score-answer")
    box.clear()
    box.send_keys(text)
    driver.find_element("id", "score-send").click()
    state = lambda: driver.find_element("id", "score-result").get_attribute("data-state")  # noqa: E731
    assert wait_until(lambda: state() in ("done", "error")), "no answer within 10 s"
    return state()


def test_score_a_typed_answer_in_the_dashboard(driver, artifacts, tmp_path):  # noqa: F811
    run = run_with(tmp_path / "run", group_line(2, REWARDS))
    with scoring_dashboard(driver, run) as server:
        assert driver.find_elements("id", "score-pick") == [] and "6 * 7? (step 2)" in \
            driver.find_element("css selector", "#view-score .question").text
        # the typed answer joins as a 9th member. Right (1): nobody above it, four 1s share its place; wrong (0):
        # four 1s and the 0.5 above it, three 0s share it
        for text, reward, outcome, rank in (("Answer: 42", 1.0, "correct", "1st of 9 by reward, shared with 4 others"),
                                            ("Answer: 41", 0.0, "wrong", "6th of 9 by reward, shared with 3 others")):
            assert send(driver, text) == "done"
            advantages = grpo_advantages(torch.tensor(REWARDS + [reward]), 9, EPS).tolist()
            got = picked(driver)
            assert got["reward"] == reward and got["outcomes"] == [outcome] and got["rank"] == rank, text
            assert got["advantage"] == pytest.approx(advantages[8], rel=1e-6) and got["marked"] == ["8"], text
            assert close(bar_values(driver, "score-advantages"), advantages), text
        screenshot(driver, "score", artifacts / "explainer-score.png")
        assert severe(driver) == []
        # the run moves on: its groups now hold other prompts (a dashboard keeps only its latest steps). The view
        # takes the newest prompt and keeps what was typed; the difficulty view adds the new pass rates and keeps G
        slide(driver, "difficulty-g", 5)
        (run / "groups.jsonl").write_text("".join(json.dumps(group_line(s, [1.0, 0.0, 0.0, 0.0])) + "\n"
                                                  for s in (5, 6)))
        assert wait_until(lambda: "(step 6)" in driver.find_element("css selector", "#view-score .question").text)
        assert driver.find_element("id", "score-answer").get_attribute("value") == "Answer: 41"
        assert "left the dashboard's latest steps" in driver.find_element("id", "view-score").text
        assert wait_until(lambda: len(driver.find_elements("css selector", "#view-difficulty .ex-dot.prompt")) == 2)
        assert driver.find_element("id", "difficulty-g").get_attribute("value") == "5"
        server.scorer = lambda question, reference, completion: 1 / 0  # a verifier that fails: HTTP 500
        assert send(driver, "Answer: 42") == "error"
        error = driver.find_element("id", "score-error").text
        assert error == "the dashboard could not score it: the verifiers failed: division by zero"
        assert driver.find_elements("id", "score-adv") == []  # the earlier answer's numbers are gone
        # Chromium logs the failed request itself; nothing else may be in the console
        assert [m for m in severe(driver) if "api/score" not in m or "500" not in m] == []
    assert send(driver, "Answer: 42") == "error"  # the dashboard has stopped
    assert driver.find_element("id", "score-error").text.startswith("the dashboard does not answer")
    assert all("ERR_CONNECTION_REFUSED" in m for m in severe(driver))  # (and the log is read: the next test's)


def difficulty_numbers(driver) -> tuple[float, float, float, float]:  # noqa: F811
    dot = lambda key: float(driver.find_element(  # noqa: E731
        "css selector", f"#view-difficulty circle[data-key='{key}']").get_attribute("data-y"))
    return number(driver, "difficulty-tie"), number(driver, "difficulty-abs"), dot("p-tie"), dot("p-abs")


def prompt_dots(driver) -> list[tuple[float, float, str]]:  # noqa: F811
    dots = driver.find_elements("css selector", "#view-difficulty circle.ex-dot.prompt")
    return [(float(d.get_attribute("data-x")), float(d.get_attribute("data-y")),
             d.find_element("css selector", "title").get_attribute("textContent")) for d in dots]


@pytest.mark.usefixtures("use_fake_example")
def test_difficulty_curves_equal_the_python_functions(driver, artifacts, tmp_path):  # noqa: F811
    run = make_run(tmp_path / "run", steps=2, tokens=6, groups=False)  # no groups: the example's pass rates
    open_report(driver, run, tmp_path / "report.html")
    assert driver.find_element("css selector", "#view-difficulty .ex-source").get_attribute("data-source") == \
        "example"
    assert driver.find_element("id", "difficulty-run-g").text == "the example: G = 8"
    assert driver.find_element("id", "difficulty-g").get_attribute("value") == "8"
    rates = [0.125, 0.5, 0.875, 1.0]  # explainer_fixture.sweep_row at the default temperature
    for G, share in ((8, 0.25), (2, 0.75)):
        # P(tie) > 1/2? G = 8: 0.875^8 + 0.125^8 = 0.344 at 0.125 and 0.875, 2/256 at 0.5, 1 at 1.0: 1 of 4.
        # G = 2: 0.875^2 + 0.125^2 = 0.78125 at 0.125 and 0.875, exactly 1/2 at 0.5 (not most), 1 at 1.0: 3 of 4
        slide(driver, "difficulty-g", G)
        dots = prompt_dots(driver)
        assert [x for x, _, _ in dots] == rates
        assert [y for _, y, _ in dots] == pytest.approx([expected_abs_advantage(x, G, EPS) for x in rates], rel=1e-6,
                                                        abs=1e-12)
        assert number(driver, "difficulty-share") == share
        assert len(driver.find_elements("css selector", "#view-difficulty .ex-dot.prompt.ties")) == share * 4
    # at p = 0 or 1 every group ties (P = 1, E|A| = 0); G = 1 always ties
    for p, G in ((0.3, 8), (0.9, 3), (0.5, 1), (0.0, 5), (1.0, 16), (0.65, 16), (0.17, 2)):
        slide(driver, "difficulty-g", G)
        slide(driver, "difficulty-p", p)
        tie, mean_abs = tie_probability(p, G), expected_abs_advantage(p, G, EPS)
        assert difficulty_numbers(driver) == pytest.approx((tie, mean_abs, tie, mean_abs), rel=1e-6, abs=1e-12)
    assert tie_probability(0.0, 5) == 1.0 and expected_abs_advantage(0.0, 5, EPS) == 0.0
    slide(driver, "difficulty-g", 8)
    slide(driver, "difficulty-p", 0.5)
    screenshot(driver, "difficulty", artifacts / "explainer-difficulty.png")
    assert severe(driver) == []


def test_difficulty_places_the_runs_own_groups_at_its_group_size(driver, tmp_path):  # noqa: F811
    run = run_with(tmp_path / "run", *(group_line(s, r) for s, r in ((1, [1.0, 0.0, 0.0, 0.0]),
                                                                     (2, [1.0, 1.0, 1.0, 0.0]))))
    (run / "config.yaml").write_text(CONFIG.replace("group_size: 8", "group_size: 4"))
    open_report(driver, run, tmp_path / "report.html")
    assert driver.find_element("id", "difficulty-run-g").text == "this run: G = 4"
    assert driver.find_element("id", "difficulty-g").get_attribute("value") == "4"
    assert prompt_dots(driver) == [  # pass rates 1/4 and 3/4, titled by their prompts
        (0.25, pytest.approx(expected_abs_advantage(0.25, 4, EPS), rel=1e-6), "What is 6 * 7? (step 1) "
         "(pass rate 0.25, step 1)"),
        (0.75, pytest.approx(expected_abs_advantage(0.75, 4, EPS), rel=1e-6), "What is 6 * 7? (step 2) "
         "(pass rate 0.75, step 2)")]
    assert severe(driver) == []


VIEWS = ("sampling", "score", "difficulty")
CONTROLS = ("sampling-k", "score-pick", "difficulty-p")


def test_views_say_where_their_data_comes_from(driver, tmp_path, monkeypatch):  # noqa: F811
    run = make_run(tmp_path / "run", steps=2, tokens=6, groups=False)
    source = lambda view: driver.find_element("css selector", f"#view-{view} .ex-source")  # noqa: E731
    monkeypatch.setattr(explainer_data, "load_example", fake_example)
    open_report(driver, run, tmp_path / "example.html")
    assert [source(v).get_attribute("data-source") for v in VIEWS] == ["example"] * 3
    assert "this run logged no group view" in source("sampling").text
    assert all(driver.find_elements("id", c) for c in CONTROLS)
    monkeypatch.setattr(explainer_data, "load_example", lambda: {})
    open_report(driver, run, tmp_path / "none.html")
    assert [source(v).get_attribute("data-source") for v in VIEWS] == ["none"] * 3
    assert all(source(v).text.startswith("Nothing to show") for v in VIEWS)
    assert not any(driver.find_elements("id", c) for c in CONTROLS)
    assert not any(driver.find_elements("css selector", f"#view-{v} .error") for v in VIEWS)  # said, not broken
    assert severe(driver) == []
