"""Edges of the explainer's JavaScript that its view tests do not reach: view 2's ordinals past 10th, view 5's
success rate p kept across a dashboard's redraw, view 7's keyboard picking, the token_mean weight of an agent
episode (environment tokens not counted), and plot()'s y clamping. Skips without a browser, fails so under CI=true
(as tests/test_viz_browser.py)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from rlvr.algorithms.difficulty import expected_abs_advantage, tie_probability
from rlvr.algorithms.loss import AGGREGATIONS, aggregate
from rlvr.config.run import AlgorithmConfig
from test_explainer_group import choose, number, open_report, slide
from test_explainer_token import pick, shown_advantage, trainer_token, value
from test_viz_browser import dashboard_page, driver, severe, wait_until  # noqa: F401  (the shared browser fixtures)
from viz_helpers import CONFIG, group_row, make_run, metrics_row, write_lines

pytestmark = pytest.mark.browser
EPS = AlgorithmConfig().std_epsilon  # viz_helpers' config.yaml does not set it: the trainer's default


def run_with_group(path: Path, group: dict, config: str = CONFIG) -> Path:
    """A run whose only logged group is `group` (so views 1, 2, 7 and 13 draw it)."""
    run = make_run(path, steps=3, tokens=6, groups=False, final_eval=False)
    (run / "groups.jsonl").write_text(json.dumps(group) + "\n")
    (run / "config.yaml").write_text(config)
    return run


# ---- view 2: "Nth of G by reward" past 10th --------------------------------------------------------------------

def test_score_ranks_with_english_ordinals_past_tenth(driver, tmp_path):  # noqa: F811
    # 113 answers with distinct rewards, falling: answer i (0-based) has i answers above it, so it is ranked i + 1.
    # Teens take "th" whatever their last digit (11th, 12th, 13th, and 111th to 113th: n % 100 is a teen), the
    # others follow their last digit (21st, 22nd, 23rd, 101st, 102nd).
    size = 113
    group = group_row(3, size, 2, ratios=True)
    for i, c in enumerate(group["completions"]):
        c["reward"] = (size - i) / size
    open_report(driver, run_with_group(tmp_path / "run", group), tmp_path / "report.html")
    assert len(driver.find_elements("css selector", "#score-pick option")) == size + 1  # and the empty choice
    want = {1: "1st", 2: "2nd", 3: "3rd", 4: "4th", 10: "10th", 11: "11th", 12: "12th", 13: "13th", 14: "14th",
            21: "21st", 22: "22nd", 23: "23rd", 101: "101st", 102: "102nd", 111: "111th", 112: "112th",
            113: "113th"}
    got = {}
    for place in want:
        choose(driver, "score-pick", str(place - 1))
        got[place] = driver.find_element("id", "score-rank").text
    assert got == {place: f"{word} of {size} by reward" for place, word in want.items()}
    assert severe(driver) == []


# ---- view 5: p survives a dashboard's redraw -------------------------------------------------------------------

def test_difficulty_keeps_the_success_rate_when_a_new_step_redraws_it(driver, tmp_path):  # noqa: F811
    run = make_run(tmp_path / "live", steps=2, tokens=6, final_eval=False)  # 2 logged groups: 2 pass rates
    dots = lambda: len(driver.find_elements("css selector", "#view-difficulty circle.ex-dot.prompt"))  # noqa: E731
    with dashboard_page(driver, run):
        assert wait_until(lambda: dots() == 2), "the difficulty view was not drawn"
        # p = 0, the slider's lower end (and a falsy number): the view opens at 0.5 and must not fall back to it
        slide(driver, "difficulty-p", 0)
        write_lines(run / "groups.jsonl", [group_row(3, 8, 6, ratios=True)])
        write_lines(run / "metrics.jsonl", [metrics_row(3)])
        # a third pass rate: the view is drawn anew (its key, source and point count, changed)
        assert wait_until(lambda: dots() == 3), "the new step's pass rate was not drawn within 20 s"
        assert driver.find_element("id", "difficulty-p").get_attribute("value") == "0"
        assert driver.find_element("id", "difficulty-p-value").text == "0"
        # and every number follows the kept p: at p = 0 every group of G = 8 is wrong alike, P(tie) = 1, E|A| = 0
        assert number(driver, "difficulty-tie") == tie_probability(0.0, 8) == 1.0
        assert number(driver, "difficulty-abs") == expected_abs_advantage(0.0, 8, EPS) == 0.0
        here = driver.find_element("css selector", "#view-difficulty circle[data-key='p-tie']")
        assert float(here.get_attribute("data-x")) == 0.0
        assert severe(driver) == []


# ---- view 7: Enter and Space pick a token ----------------------------------------------------------------------

def press(driver, token: int, key: str) -> None:  # noqa: F811
    """Focus a token of the strip (as Tab would) and press `key` on it."""
    from selenium.webdriver.common.action_chains import ActionChains

    driver.execute_script("document.getElementById(arguments[0]).focus()", f"token-tok-{token}")
    assert driver.switch_to.active_element.get_attribute("id") == f"token-tok-{token}"
    ActionChains(driver).send_keys(key).perform()


def head(driver, view: str) -> str:  # noqa: F811
    return driver.find_element("css selector", f"#{view} .ex-token-head").get_attribute("textContent")


def test_token_view_picks_a_token_with_enter_or_space(driver, tmp_path):  # noqa: F811
    from selenium.webdriver.common.keys import Keys

    run = make_run(tmp_path / "run", steps=2, tokens=6, final_eval=False)  # group_row: tokens "w0 ", "w1 ", ...
    open_report(driver, run, tmp_path / "report.html")
    picked = lambda: [int(s.get_attribute("data-index")) for s in driver.find_elements(  # noqa: E731
        "css selector", "#token-strip .tok.picked")]
    press(driver, 3, "a")  # not a picking key: nothing picked yet
    assert picked() == [] and not driver.find_elements("css selector", "#token-details .ex-token-head")
    press(driver, 3, Keys.ENTER)
    assert picked() == [3] and head(driver, "token-details") == 'token 4 of completion 1: "w3 "'
    assert driver.find_element("css selector", "#worked-steps .ex-token-head").get_attribute("data-token") == "0:3"
    # group_row's ratio at token 3: 1 + 0.01 * 3, as the click on it shows
    assert value(driver, "token-ratio")[0] == pytest.approx(1.03)
    scrolled = driver.execute_script("return window.scrollY")
    press(driver, 1, Keys.SPACE)
    assert picked() == [1] and head(driver, "token-details") == 'token 2 of completion 1: "w1 "'
    assert driver.find_element("css selector", "#worked-steps .ex-token-head").get_attribute("data-token") == "0:1"
    # Space picks, it does not also scroll the page as it would by default
    assert driver.execute_script("return window.scrollY") == scrolled
    assert severe(driver) == []


# ---- views 7 and 13: token_mean counts the model's tokens only -------------------------------------------------

def test_token_mean_weight_counts_only_the_models_tokens(driver, tmp_path):  # noqa: F811
    # Three episodes of 6, 6 and 4 tokens; the environment's turns (sampled 0) sit inside the first two.
    sampled = [[1, 1, 0, 0, 1, 1], [1, 0, 0, 0, 1, 1], [1, 1, 1, 1]]
    group = group_row(3, 3, 6, ratios=True)  # rewards 1, 0, 1; ratio 1 + 0.01 k at token k (k < 17)
    for c, mask in zip(group["completions"], sampled):
        n = len(mask)
        c.update(tokens=c["tokens"][:n], token_advantages=c["token_advantages"][:n], sampled=mask,
                 token_ratios=[r if s else None for r, s in zip(c["token_ratios"][:n], mask)])
        c["token_advantages"] = [a if s else 0.0 for a, s in zip(c["token_advantages"], mask)]
    run = run_with_group(tmp_path / "run", group, CONFIG + "  aggregation: token_mean\n")
    open_report(driver, run, tmp_path / "report.html")
    # token_mean (DAPO): every trained token of the group weighs 1 / (trained tokens) = 1 / (4 + 3 + 4) = 1 / 11
    # = 0.0909..., not 1 / (6 + 6 + 4) = 1 / 16: the environment's 5 tokens are no part of the loss
    pick(driver, 1, 4)
    assert value(driver, "token-weight")[0] == pytest.approx(1 / 11, rel=1e-12)
    assert "1 / 11" in driver.find_element("id", "token-details").text
    # completion 1 (reward 0 of 1, 0, 1): A = -(2/3) / (sqrt(1/3) + 1e-4) = -1.1545; rho 1.04 inside [0.8, 1.28],
    # loss = -1.04 A = 1.2007, share = 1.2007 / 11 = 0.10915
    adv = shown_advantage([1.0, 0.0, 1.0], 1)
    loss, binds = trainer_token(1.04, adv, 0.2, 0.28)
    assert not binds and adv == pytest.approx(-1.1545, abs=1e-4) and loss / 11 == pytest.approx(0.10915, abs=1e-5)
    # the trainer: aggregate over the episodes' loss mask (the sampled flags, padded), its own token_mean denominator
    mask = torch.tensor([m + [0] * (6 - len(m)) for m in sampled], dtype=torch.float64)
    values = torch.zeros_like(mask)
    values[1, 4] = loss
    share = aggregate(values, mask, "token_mean", AGGREGATIONS["token_mean"].denominator(mask, 32)).item()
    assert share == pytest.approx(loss / 11, rel=1e-12)
    assert all(v == pytest.approx(share, rel=1e-6) for v in value(driver, "token-contribution"))
    # view 13 works the same token through with the same weight
    assert value(driver, "worked-weight")[0] == pytest.approx(1 / 11, rel=1e-12)
    assert all(v == pytest.approx(share, rel=1e-6) for v in value(driver, "worked-contribution"))
    assert severe(driver) == []


# ---- plot(): values outside the y range sit on its edge --------------------------------------------------------

PLOT = """const svg = window.rlvrViz.plot({id: 'edge', x: {min: 0, max: 1}, y: arguments[0],
  lines: [{key: 'line', points: arguments[1]}], dots: arguments[2]});
return {d: svg.querySelector('path.ex-line').getAttribute('d'), height: svg.viewBox.baseVal.height,
        dots: Array.from(svg.querySelectorAll('circle.ex-dot')).map(
          (c) => [c.dataset.key, Number(c.getAttribute('cy')), Number(c.dataset.y)])};"""


def test_plot_draws_values_beyond_its_y_range_at_the_edge(driver, tmp_path):  # noqa: F811
    open_report(driver, make_run(tmp_path / "run", steps=2, tokens=4, final_eval=False), tmp_path / "report.html")
    # plot()'s default frame: 420 x 240, margins left 46, right 14, top 20, bottom 34. x in [0, 1] -> 46 + 360 x;
    # y in [-1, 1] -> 206 - 186 (y + 1) / 2: the top edge (y = 1) at 20, the bottom (y = -1) at 206, -0.5 at 159.5
    # and 0.5 at 66.5. 3 and -4 lie beyond: they are drawn at 20 and 206 (unclamped: -166 and 485, off the SVG)
    dots = [{"key": "above", "x": 0.5, "y": 3}, {"key": "below", "x": 0.5, "y": -4}, {"key": "in", "x": 0.5, "y": 0.5}]
    got = driver.execute_script(PLOT, {"min": -1, "max": 1}, [[0, -4], [0.5, -0.5], [1, 3]], dots)
    assert got["d"] == "M46.0,206.0L226.0,159.5L406.0,20.0"
    # drawn at the edge, but each dot still carries its own value for a reader's tooltip (and the tests)
    assert got["dots"] == [["above", 20.0, 3.0], ["below", 206.0, -4.0], ["in", 66.5, 0.5]]
    assert all(0 <= cy <= got["height"] for _, cy, _ in got["dots"])
    # a log axis from 0.001 to 1: log10(y) in [-3, 0] -> 206 - 186 (log10 y + 3) / 3, 0.01 at 206 - 62 = 144.
    # 10 is above it (drawn at 20); 0 has no logarithm and sits on the bottom edge, 206
    log = {"min": 0.001, "max": 1, "log": True}
    dots = [{"key": "above", "x": 1, "y": 10}, {"key": "zero", "x": 0, "y": 0}]
    got = driver.execute_script(PLOT, log, [[0, 0], [0.5, 0.01], [1, 10]], dots)
    assert got["d"] == "M46.0,206.0L226.0,144.0L406.0,20.0"
    assert got["dots"] == [["above", 20.0, 10.0], ["zero", 206.0, 0.0]]
    assert severe(driver) == []
