"""The explainer computes every number with JavaScript ports of the trainer's functions (rlvr/viz/static/
explainer.js): each port against its Python original on random inputs, in a real browser. A port that drifts
from the trainer (a population std for Bessel's, a clip on the wrong side, a reward-to-go summed forwards) fails
here, whatever the views show."""
from __future__ import annotations

import math
import random

import pytest
import torch

from rlvr.algorithms.advantages import grpo_advantages
from rlvr.algorithms.difficulty import expected_abs_advantage, tie_probability
from rlvr.algorithms.loss import KL_ESTIMATORS
from rlvr.algorithms.objectives import ClipRange, ppo_clip
from rlvr.algorithms.turns import process_advantages
from rlvr.viz.report import write_report
from test_viz_browser import driver  # noqa: F401  (the module's browser, skipped or failed as there)
from viz_helpers import make_run

pytestmark = pytest.mark.browser
CASES = 60


@pytest.fixture(scope="module")
def page(driver, tmp_path_factory):  # noqa: F811
    run = make_run(tmp_path_factory.mktemp("ports") / "run", steps=2, tokens=4)
    driver.get(write_report([run], run / "report.html").resolve().as_uri())
    return driver


def js(page, expression: str, *args):
    return page.execute_script(f"const V = window.rlvrViz; return {expression};", *args)


def rewards_case(rng: random.Random) -> list[float]:
    g = rng.randint(1, 9)
    kind = rng.choice(["binary", "real", "tied"])
    if kind == "binary":
        return [float(rng.random() < 0.5) for _ in range(g)]
    if kind == "tied":
        return [round(rng.uniform(-2, 2), 3)] * g
    return [round(rng.uniform(-3, 3), 4) for _ in range(g)]


def test_grpo_advantages_port(page):
    rng = random.Random(0)
    tied_seen = spread_seen = 0
    for _ in range(CASES):
        rewards, eps = rewards_case(rng), rng.choice([1e-4, 1e-2, 0.5])
        want = grpo_advantages(torch.tensor(rewards, dtype=torch.float64), len(rewards), eps).tolist()
        got = js(page, "V.grpoAdvantages(arguments[0], arguments[1]).advantages", rewards, eps)
        assert got == pytest.approx(want, rel=1e-6, abs=1e-9), (rewards, eps)
        tied = len(set(rewards)) == 1
        tied_seen, spread_seen = tied_seen + tied, spread_seen + (not tied)
    assert tied_seen and spread_seen  # both branches compared


def test_ppo_clip_port(page):
    rng = random.Random(1)
    binds = 0
    for _ in range(CASES):
        ratio, adv = rng.uniform(0.2, 2.5), rng.uniform(-3, 3)
        low, high = rng.choice([0.1, 0.2, 0.3]), rng.choice([0.2, 0.28, 0.4])
        log_ratio = torch.tensor([[math.log(ratio)]], dtype=torch.float64)
        s = ppo_clip(log_ratio, torch.zeros_like(log_ratio), torch.tensor([adv], dtype=torch.float64),
                     torch.ones_like(log_ratio), ClipRange(low=low, high=high))
        got = js(page, "V.ppoClip(arguments[0], arguments[1], arguments[2], arguments[3])", ratio, adv, low, high)
        assert got["loss"] == pytest.approx(float(s.loss[0, 0]), rel=1e-9, abs=1e-12), (ratio, adv, low, high)
        assert got["binds"] == bool(s.clipped[0, 0]), (ratio, adv, low, high)
        binds += got["binds"]
    assert 0 < binds < CASES


@pytest.mark.parametrize("estimator", sorted(KL_ESTIMATORS))
def test_kl_estimator_ports(page, estimator):
    rng = random.Random(2)
    for _ in range(CASES // 3):
        logprob, ref = math.log(rng.uniform(0.01, 1)), math.log(rng.uniform(0.01, 1))
        want = float(KL_ESTIMATORS[estimator](torch.tensor(logprob, dtype=torch.float64),
                                              torch.tensor(ref, dtype=torch.float64)))
        got = js(page, f"V.KL.{estimator}(arguments[0], arguments[1])", logprob, ref)
        assert got == pytest.approx(want, rel=1e-9, abs=1e-12), (estimator, logprob, ref)


def test_difficulty_ports(page):
    rng = random.Random(3)
    for _ in range(CASES // 2):
        p, g, eps = rng.random(), rng.randint(1, 16), rng.choice([1e-4, 0.1])
        assert js(page, "V.tieProbability(arguments[0], arguments[1])", p, g) == pytest.approx(
            tie_probability(p, g), rel=1e-9)
        assert js(page, "V.expectedAbsAdvantage(arguments[0], arguments[1], arguments[2])", p, g, eps) == \
            pytest.approx(expected_abs_advantage(p, g, eps), rel=1e-5, abs=1e-9), (p, g, eps)


def test_process_advantages_port(page):
    rng = random.Random(4)
    for _ in range(CASES // 2):
        g, turns = rng.randint(1, 4), rng.randint(1, 4)
        lengths = [rng.randint(1, turns) for _ in range(g)]  # episodes end after different numbers of turns
        rows = [[rng.choice([0.0, 0.5, 1.0]) for _ in range(n)] for n in lengths]
        eps = rng.choice([1e-4, 0.1])
        padded = torch.tensor([row + [0.0] * (turns - len(row)) for row in rows], dtype=torch.float64)
        mask = torch.tensor([[t < n for t in range(turns)] for n in lengths])
        want = process_advantages(padded, mask, g, eps)
        got = js(page, "V.processAdvantages(arguments[0], arguments[1])", rows, eps)
        for i, n in enumerate(lengths):
            # the trainer sums in float32 (turns.py): its sums that are 0 come out as 1e-7 noise
            assert got[i] == pytest.approx(want[i, :n].tolist(), rel=1e-5, abs=1e-6), (rows, eps)


VIEWS = ["sampling", "score", "temperature", "hacks", "difficulty", "build", "token", "ratio", "kl", "credit",
         "process", "grid", "worked"]


def test_the_page_holds_the_thirteen_views_in_order(page):
    sections = page.find_elements("css selector", "#ex-views > section.ex-view")
    assert [s.get_attribute("id") for s in sections] == [f"view-{v}" for v in VIEWS]
    titles = [s.find_element("css selector", "h3").text for s in sections]
    assert [t.split(".")[0] for t in titles] == [str(n) for n in range(1, 14)]
    errors = [e.text for e in page.find_elements("css selector", "#ex-views .error") if e.text]
    assert errors == []  # every view drew without an exception (and the build view's inputs are valid)
