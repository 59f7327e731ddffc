"""The report and the dashboard in a real browser (headless Chromium through selenium): no console errors, every
chart holds the run's points, the group view colours tokens, the dashboard redraws on a new metrics line, the
explainer equals the trainer's functions, two runs overlay. Skips without a browser, fails so under CI=true."""
from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from rlvr.algorithms.advantages import grpo_advantages
from rlvr.algorithms.loss import kl_k3
from rlvr.algorithms.objectives import ClipRange, ppo_clip
from rlvr.viz import browser
from rlvr.viz.dashboard import DashboardServer
from rlvr.viz.report import write_report
from viz_helpers import expected_points, group_row, make_run, metrics_row, sample_rows, write_lines

pytestmark = pytest.mark.browser
STEPS = 40
CHARTS = {"reward", "heldout", "kl", "length", "reflection", "tied", "clip", "time", "throughput"}
ALL_POINTS = """return Array.from(document.querySelectorAll('svg.chart circle.pt')).map(c => [
  c.closest('svg').dataset.chart, c.dataset.run, c.dataset.series, Number(c.dataset.step), Number(c.dataset.value)]);"""
TOKEN_COLOURS = """return Array.from(document.querySelectorAll('#group-cards .member')).map(card =>
  Array.from(card.querySelectorAll('.tok')).map(t => getComputedStyle(t).backgroundColor));"""


@pytest.fixture(scope="module")
def driver():
    reason = browser.missing()
    if reason:
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            pytest.fail(f"browser tests cannot run: {reason} (CI=true: they must)", pytrace=False)
        pytest.skip(reason)
    chromium = browser.start_chromium()
    yield chromium
    chromium.quit()


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> list[Path]:
    base = tmp_path_factory.mktemp("viz-browser")
    return [make_run(base / "alpha", steps=STEPS), make_run(base / "beta", steps=25, groups=False)]


@pytest.fixture(scope="module")
def artifacts() -> Path:
    path = Path(os.environ.get("RLVR_TEST_ARTIFACTS") or Path(__file__).resolve().parents[1] / "test-artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


def severe(driver) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


@contextmanager
def dashboard_page(driver, run: Path):
    """A dashboard of `run` on a free port, opened in the driver; stopped afterwards."""
    server = DashboardServer([run], "127.0.0.1", 0)
    server.start_thread()
    try:
        driver.get(server.url)
        yield server
    finally:
        server.shutdown()
        server.server_close()


def reward_points(driver) -> int:
    return len(driver.find_elements("css selector", "svg[data-chart='reward'] circle.pt[data-series='reward_mean']"))


def wait_until(condition, timeout_s: float = 20.0):
    """condition() once it is truthy, or its last value after timeout_s. An element the page redraws while it is
    read (a dashboard's poll) is read again, not an error. Generous: the machines that run the tests are shared."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = condition()
        except (StaleElementReferenceException, NoSuchElementException):
            value = None
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


def open_report(driver, run_dirs: list[Path], output: Path) -> None:
    driver.get(write_report(run_dirs, output).resolve().as_uri())
    assert wait_until(lambda: driver.find_elements("css selector", "circle.pt")), "no chart drawn"


def test_report_charts_hold_every_point(driver, runs, artifacts, tmp_path):
    open_report(driver, runs[:1], tmp_path / "report.html")
    assert severe(driver) == []
    drawn: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for chart, run, series, step, value in driver.execute_script(ALL_POINTS):
        assert run == "0"
        drawn.setdefault((chart, series), []).append((step, value))
    assert {chart for chart, _ in drawn} >= CHARTS
    assert {s for c, s in drawn if c == "clip"} == {"clip_fraction", "clip_fraction_low", "clip_fraction_high"}
    phases = ("rollout", "logprobs", "verify_wait", "advantages", "train", "sync")
    assert {s for c, s in drawn if c == "time"} == {f"time/{p}_s" for p in phases}
    for (chart, series), points in drawn.items():
        expected = expected_points(runs[0], series)
        assert len(points) == len(expected), (chart, series)
        for (step, value), (want_step, want) in zip(points, expected):
            assert step == want_step and value == pytest.approx(want, rel=1e-12), (chart, series, step)
    # grad_norm is null at step 7 (not drawn); eval/pass@1 exists at steps 25 and 40 (periodic, then final)
    assert len(drawn[("grad_norm", "grad_norm")]) == STEPS - 1
    assert [s for s, _ in drawn[("heldout", "eval/pass@1")]] == [25, 40]
    driver.save_screenshot(str(artifacts / "report.png"))


def test_group_view_colours_tokens_by_advantage_and_ratio(driver, runs, tmp_path):
    open_report(driver, runs[:1], tmp_path / "report.html")
    members = driver.find_elements("css selector", "#group-cards .member")
    assert len(members) == 8  # G completions of the last step, side by side
    advantages = [float(m.get_attribute("data-advantage")) for m in members]
    assert advantages[0] > 0 > advantages[1]  # synthetic groups: even members right, odd members wrong
    by_advantage = driver.execute_script(TOKEN_COLOURS)
    transparent = "rgba(0, 0, 0, 0)"
    assert by_advantage[0][0] != by_advantage[1][0] and transparent not in (by_advantage[0][0], by_advantage[1][0])
    driver.find_element("id", "mode-ratio").click()
    by_ratio = driver.execute_script(TOKEN_COLOURS)
    assert by_ratio != by_advantage
    # synthetic ratios: token 0 is 1.5 (> 1 + 0.28), token 19 is 0.6 (< 1 - 0.2). The clip binds where it pushes
    # further out (ppo_clip): member 0 (A > 0) at token 0 only, member 1 (A < 0) at token 19 only
    high, low, far = "rgba(234, 88, 12, 0.6)", "rgba(147, 51, 234, 0.6)", "rgba(100, 116, 139, 0.45)"
    assert (by_ratio[0][0], by_ratio[0][19]) == (high, far)
    assert (by_ratio[1][0], by_ratio[1][19]) == (far, low)
    assert by_ratio[0][1] not in (high, low, far)  # ratio 1.01: inside the range, nearly white
    driver.find_element("css selector", "#group-step option[value='0']").click()  # step 1: no ratios recorded
    notes = driver.find_elements("css selector", "#group-cards .ratio-missing")
    assert len(notes) == 8 and "token_ratios is null" in notes[0].text
    driver.find_element("id", "mode-advantage").click()
    assert driver.find_elements("css selector", "#group-cards .ratio-missing") == []
    assert severe(driver) == []


def set_explainer(driver, rewards: list[float], **fields: float) -> None:
    count = lambda: len(driver.find_elements("css selector", "#ex-rewards input.ex-reward-value"))  # noqa: E731
    while count() < len(rewards):
        driver.find_element("id", "ex-add").click()
    while count() > len(rewards):
        driver.find_element("id", f"ex-remove-{count() - 1}").click()
    values = {f"ex-r-{i}": r for i, r in enumerate(rewards)}
    values.update({f"ex-{key.replace('_', '-')}": value for key, value in fields.items()})
    driver.execute_script("""for (const [id, v] of Object.entries(arguments[0])) {
        const e = document.getElementById(id); e.value = String(v); e.dispatchEvent(new Event('input')); }""", values)


def shown(driver, element_id: str) -> tuple[float, float]:
    node = driver.find_element("id", element_id)
    return float(node.text), float(node.get_attribute("data-value"))


def python_values(rewards, eps_low, eps_high, ratio, beta, pi, pi_ref, std_eps):
    """What the trainer computes: its own grpo_advantages, ppo_clip and kl_k3 (float64 where it takes them)."""
    r = torch.tensor(rewards)
    adv = grpo_advantages(r, len(rewards), eps=std_eps).double()
    g = len(rewards)
    log_ratio = torch.full((g, 1), math.log(ratio), dtype=torch.float64)
    surrogate = ppo_clip(log_ratio, torch.zeros_like(log_ratio), adv, torch.ones_like(log_ratio),
                         ClipRange(low=eps_low, high=eps_high))
    kl = kl_k3(torch.tensor(math.log(pi), dtype=torch.float64), torch.tensor(math.log(pi_ref), dtype=torch.float64))
    return {"mean": r.double().mean().item(), "std": r.double().std().item(), "adv": adv.tolist(),
            "loss": surrogate.loss[:, 0].tolist(), "binds": surrogate.clipped[:, 0].tolist(), "kl": kl.item()}


# (rewards, eps_low, eps_high, ratio, beta, pi, pi_ref, std_eps)
EXPLAINER_CASES = [
    # mean 0.5; Bessel var = 4 * 0.25 / 3 = 1/3, std 0.57735; A = +-0.5 / (0.57735 + 1e-4) = +-0.86588; rho 1.1
    # is inside [0.8, 1.2]: nothing binds, loss = -1.1 A. k3: d = log(0.25 / 0.3) = -0.18232, e^d - d - 1 = 0.015655
    ([1.0, 0.0, 0.0, 1.0], 0.2, 0.2, 1.1, 0.04, 0.3, 0.25, 1e-4),
    # a tied group: std 0, every A exactly 0, so every clipped loss is 0 whatever rho (and pi = pi_ref: k3 = 0)
    ([0.5, 0.5, 0.5, 0.5], 0.2, 0.2, 1.7, 0.1, 0.4, 0.4, 1e-4),
    # clip-higher, rho 1.5 > 1.28: for A > 0 the clipped term 1.28 A is smaller and binds; for A < 0, 1.5 A is the
    # smaller one (no clip). mean 0.25, var = (0.5625 + 3 * 0.0625) / 3 = 0.25, std 0.5, A1 = 0.75 / 0.5001
    ([1.0, 0.0, 0.0, 0.0], 0.2, 0.28, 1.5, 0.04, 0.2, 0.5, 1e-4),
    # rho 0.5 < 0.8: the negative advantage binds at 0.8 A; G = 3 after removing a completion, larger std eps
    ([0.0, 1.0, 0.25], 0.2, 0.2, 0.5, 0.0, 0.9, 0.3, 0.01),
]


@pytest.mark.parametrize("case", EXPLAINER_CASES)
def test_explainer_equals_the_trainer_functions(driver, runs, tmp_path, case):
    rewards, eps_low, eps_high, ratio, beta, pi, pi_ref, std_eps = case
    if driver.find_elements("id", "ex-add") == []:
        open_report(driver, runs[:1], tmp_path / "report.html")
    set_explainer(driver, rewards, eps_low=eps_low, eps_high=eps_high, ratio=ratio, beta=beta, pi=pi,
                  pi_ref=pi_ref, std_eps=std_eps)
    assert driver.find_element("id", "ex-error").text == ""
    want = python_values(*case)
    close = lambda got, value: got == pytest.approx(value, rel=1e-6, abs=1e-9)  # noqa: E731
    for element_id, value in [("ex-mean", want["mean"]), ("ex-std", want["std"]), ("ex-kl", want["kl"]),
                              ("ex-kl-term", beta * want["kl"])]:
        assert all(close(v, value) for v in shown(driver, element_id)), element_id
    assert driver.find_element("id", "ex-tied").text == ("yes" if len(set(rewards)) == 1 else "no")
    for i in range(len(rewards)):
        assert all(close(v, want["adv"][i]) for v in shown(driver, f"ex-adv-{i}")), i
        assert all(close(v, want["loss"][i]) for v in shown(driver, f"ex-loss-{i}")), i
        assert all(close(v, want["loss"][i] + beta * want["kl"]) for v in shown(driver, f"ex-total-{i}")), i
        assert driver.find_element("id", f"ex-binds-{i}").text == ("yes" if want["binds"][i] else "no")
    # the bar chart is the advantages as a picture: one bar per completion, its value the advantage, its colour
    # the sign (a tied group draws every bar at 0)
    bars = driver.find_elements("css selector", "svg[data-plot='build-advantages'] rect.bar")
    assert [float(b.get_attribute("data-value")) for b in bars] == pytest.approx(want["adv"], rel=1e-6, abs=1e-9)
    assert [("pos" in b.get_attribute("class")) for b in bars] == [a >= 0 for a in want["adv"]]
    assert severe(driver) == []


def test_the_build_view_redraws_its_bars_as_a_reward_slider_moves(driver, runs, artifacts, tmp_path):
    open_report(driver, runs[:1], tmp_path / "report.html")
    set_explainer(driver, [1.0, 0.0, 0.0, 1.0], std_eps=1e-4)
    bars = lambda: [float(b.get_attribute("data-value")) for b in driver.find_elements(  # noqa: E731
        "css selector", "svg[data-plot='build-advantages'] rect.bar")]
    before = bars()
    # r3 from 0 to 1 by its slider: rewards [1, 0, 1, 1], mean 0.75, Bessel std 0.5, A = (+0.25, -0.75, +0.25,
    # +0.25) / 0.5001 = 0.49990, -1.49970
    driver.execute_script("""const e = document.getElementById('ex-r-slider-2'); e.value = '1';
        e.dispatchEvent(new Event('input'));""")
    assert before != bars()
    assert bars() == pytest.approx([0.4999, -1.4997, 0.4999, 0.4999], abs=1e-4)
    assert driver.find_element("id", "ex-r-2").get_attribute("value") == "1"  # the number box follows
    browser.element_screenshot(driver, "view-build", artifacts / "explainer-build.png")
    assert severe(driver) == []


def test_explainer_cases_cover_tied_and_clipped():
    assert any(len(set(c[0])) == 1 for c in EXPLAINER_CASES)
    assert any(any(python_values(*c)["binds"]) for c in EXPLAINER_CASES)


def test_dashboard_redraws_on_a_new_metrics_line(driver, runs, artifacts, tmp_path):
    run = make_run(tmp_path / "live", steps=10, final_eval=False)
    with dashboard_page(driver, run):
        assert wait_until(lambda: reward_points(driver) == 10)
        driver.execute_script("window.notReloaded = true")
        # the group line first: any payload that holds the new metrics row then holds the new group too
        write_lines(run / "groups.jsonl", [group_row(11, 4, 20, ratios=True)])
        write_lines(run / "metrics.jsonl", [metrics_row(11)])
        assert wait_until(lambda: reward_points(driver) == 11), "the new step was not drawn within 10 s"
        selected = driver.find_element("css selector", "#group-step option:checked").text
        assert selected.startswith("step 11 ") and len(driver.find_elements("css selector", ".member")) == 4
        assert driver.execute_script("return window.notReloaded") is True  # redrawn in place, no reload
        assert "live" in driver.find_element("id", "status").text
        assert severe(driver) == []
        driver.save_screenshot(str(artifacts / "dashboard.png"))


def test_dashboard_started_before_the_first_step_waits_for_it(driver, tmp_path):
    """`rlvr dashboard` started with the run: the directory holds only the run's claim while models load."""
    run = tmp_path / "starting"
    run.mkdir()
    (run / ".rlvr-run").touch()
    with dashboard_page(driver, run):
        assert reward_points(driver) == 0 and severe(driver) == []
        write_lines(run / "metrics.jsonl", [metrics_row(1), metrics_row(2)])
        assert wait_until(lambda: reward_points(driver) == 2), "the first steps were not drawn within 10 s"
        assert severe(driver) == []


def test_two_runs_overlay(driver, runs, tmp_path):
    open_report(driver, runs, tmp_path / "both.html")
    assert severe(driver) == []
    series = driver.find_elements("css selector", "svg[data-chart='reward'] g.series[data-series='reward_mean']")
    assert [s.get_attribute("data-run") for s in series] == ["0", "1"]
    counts = [len(s.find_elements("css selector", "circle.pt")) for s in series]
    assert counts == [STEPS, 25]
    colours = [s.find_element("css selector", "path").get_attribute("stroke") for s in series]
    assert colours[0] != colours[1]


EPISODE = {"messages": [{"role": "assistant", "content": "<tool_call>...</tool_call>"},
                        {"role": "tool", "content": "12"}, {"role": "assistant", "content": "Answer: 12"}],
           "final_state": "{\"x\": 12}", "stop_reason": "answered", "turn_rewards": [0.0, 0.0], "valid_calls": 1,
           "invalid_calls": 0}
EPISODE_METRICS = {"episode/turns_mean": 1.5, "episode/calls_mean": 1.0, "episode/valid_call_share": 0.5,
                   "episode/env_tokens_mean": 20.0, "episode/stop_answered": 0.75, "episode/stop_max_turns": 0.25}
GREY = "rgb(228, 228, 228)"  # .tok.env in page.css


def test_episodes_grey_the_environment_and_get_their_own_charts(driver, runs, artifacts, tmp_path):
    """An episode's environment tokens are grey in both modes (no advantage, no ratio colour), the model's
    next turn is marked where it starts, a sample shows its whole trajectory, the episode/* metrics are drawn; a run
    without episodes does not list those charts as missing."""
    run = make_run(tmp_path / "episodes", steps=3, final_eval=False)
    group = group_row(3, 2, 6, ratios=True)
    for c in group["completions"]:  # tokens 2 and 3 are the environment's: between model turns 0 and 1
        c.update(sampled=[1, 1, 0, 0, 1, 1], episode=EPISODE)
        c["token_advantages"][2:4], c["token_ratios"][2:4] = [0.0, 0.0], [None, None]
    (run / "groups.jsonl").write_text("")
    write_lines(run / "groups.jsonl", [group])
    (run / "samples.jsonl").write_text("")
    write_lines(run / "samples.jsonl", [{**row, "episode": EPISODE} for row in sample_rows(3, 2)])
    (run / "metrics.jsonl").write_text("")
    write_lines(run / "metrics.jsonl", [{**metrics_row(s), **EPISODE_METRICS} for s in (1, 2, 3)])
    open_report(driver, [run], tmp_path / "episodes.html")
    for mode in ("advantage", "ratio"):
        driver.find_element("id", f"mode-{mode}").click()
        colours = driver.execute_script(TOKEN_COLOURS)
        assert [c[2:4] for c in colours] == [[GREY, GREY]] * 2 and GREY not in colours[0][:2] + colours[0][4:], mode
    assert "environment turn" in driver.find_element("id", "group-legend").text
    starts = driver.find_elements("css selector", "#group-cards .member[data-index='0'] .tok.turn-start")
    assert [(t.get_attribute("data-turn"), t.text) for t in starts] == [("1", group["completions"][0]["tokens"][4])]
    turns = driver.find_elements("css selector", "#completion-list .completion pre.turn")
    assert [t.get_attribute("data-role") for t in turns[:3]] == ["assistant", "tool", "assistant"]
    background = driver.execute_script("return getComputedStyle(arguments[0]).backgroundColor", turns[1])
    assert background == GREY and "1 valid / 0 bad calls" in \
        driver.find_element("css selector", "#completion-list .completion .meta").text
    drawn = lambda chart: {g.get_attribute("data-series") for g in driver.find_elements(  # noqa: E731
        "css selector", f"svg[data-chart='{chart}'] g.series")}
    assert drawn("episodes") == {"episode/valid_call_share", "episode/stop_answered", "episode/stop_max_turns"}
    assert drawn("episode_turns") == {"episode/turns_mean", "episode/calls_mean"}
    assert "episode/env_tokens_mean" in drawn("length")
    assert severe(driver) == []
    driver.save_screenshot(str(artifacts / "episodes.png"))
    open_report(driver, runs[:1], tmp_path / "plain.html")  # no episodes: nothing said about their charts
    assert "episodes" not in driver.find_element("id", "charts-missing").text.lower()
    assert "environment turn" not in driver.find_element("id", "group-legend").text


def test_a_browser_leaves_nothing_in_the_temp_directory(driver):
    """Chromium leaves an org.chromium.Chromium.* directory behind after each quit; start_chromium gives it a scratch
    directory removed at exit. In a process of its own, so that its exit (and the removal) is part of the test."""
    script = ("from rlvr.viz.browser import start_chromium\n"
              "d = start_chromium()\nd.get('about:blank')\nd.quit()\n")
    temp = tempfile.mkdtemp(prefix="t", dir="/tmp")  # short: Chromium puts a Unix socket under it (108-byte paths)
    try:
        done = subprocess.run([sys.executable, "-c", script], env={**os.environ, "TMPDIR": temp},
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        assert sorted(os.listdir(temp)) == []  # neither Chromium's directory nor the scratch one
    finally:
        shutil.rmtree(temp, ignore_errors=True)
