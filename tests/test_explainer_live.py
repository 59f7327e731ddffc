"""The explainer in a dashboard started with the run: before config.yaml exists it draws the trainer's defaults
and the example; once the run writes its config and first steps, the views that draw settings or the run's data
follow, and typed answers become scorable. And the build view opens at a clip-higher run's own range."""
from __future__ import annotations

import pytest

from rlvr.rewards.typed_answer import answer_scorer
from rlvr.viz.dashboard import DashboardServer
from rlvr.viz.report import write_report
from test_viz_browser import driver, severe, wait_until  # noqa: F401  (the module's browser)
from viz_helpers import make_run

pytestmark = pytest.mark.browser
CLIP_HIGHER = "rollout:\n  group_size: 8\nalgorithm:\n  beta: 0.04\n  clip_epsilon: 0.2\n  clip_epsilon_high: 0.28\n"


def band_width(driver) -> float:  # noqa: F811
    return float(driver.find_element("css selector", "#view-ratio rect[data-key='clip-range']").get_attribute("width"))


def test_the_build_view_opens_at_a_clip_higher_runs_range(driver, tmp_path):  # noqa: F811
    run = make_run(tmp_path / "run", steps=2, tokens=4)
    (run / "config.yaml").write_text(CLIP_HIGHER.replace("0.04", "0.1") + "  std_epsilon: 0.001\n")
    driver.get(write_report([run], run / "report.html").resolve().as_uri())
    opened = {key: driver.find_element("id", f"ex-{key}").get_attribute("value")
              for key in ("eps-low", "eps-high", "beta", "std-eps")}
    assert opened == {"eps-low": "0.2", "eps-high": "0.28", "beta": "0.1", "std-eps": "0.001"}
    assert driver.find_element("id", "ex-kl-est").get_attribute("value") == "k3"  # the trainer's default
    assert severe(driver) == []


def kl_shown(driver) -> tuple[str, float, float]:  # noqa: F811
    names = {n.text for n in driver.find_elements("css selector", "#view-build .ex-kl-name")}
    assert len(names) == 1, names  # every label names the one estimator computed
    return names.pop(), float(driver.find_element("id", "ex-kl").text), float(
        driver.find_element("id", "ex-total-0").text)


def test_the_build_view_computes_the_runs_own_kl_estimator(driver, tmp_path):  # noqa: F811
    """pi = 0.3, pi_ref = 0.25 (the view's opening token): d = log(0.25 / 0.3) = -0.1823216; k1 = log pi - log pi_ref
    = 0.1823216, k2 = d^2 / 2 = 0.0166206, k3 = e^d - d - 1 = 0.8333333 + 0.1823216 - 1 = 0.0156549. Completion 1
    of the opening group [1, 0, 0, 1] at rho 1.25: A = 0.5 / (0.57735 + 1e-4) = 0.865876, clip 1.2 binds, loss =
    -1.2 A = -1.039051; total = loss + beta k, beta 0.1."""
    run = make_run(tmp_path / "run", steps=2, tokens=4)
    (run / "config.yaml").write_text("algorithm:\n  beta: 0.1\n  kl_estimator: k1\n  kl_placement: loss\n")
    driver.get(write_report([run], run / "report.html").resolve().as_uri())
    assert driver.find_element("id", "ex-kl-est").get_attribute("value") == "k1"  # the run's own
    name, kl, total = kl_shown(driver)
    assert name == "k1" and kl == pytest.approx(0.1823216, abs=1e-6) and total == pytest.approx(
        -1.039051 + 0.1 * 0.1823216, abs=1e-5)
    for estimator, want in (("k2", 0.0166206), ("k3", 0.0156549)):
        driver.execute_script("""const e = document.getElementById('ex-kl-est'); e.value = arguments[0];
            e.dispatchEvent(new Event('change'));""", estimator)
        name, kl, total = kl_shown(driver)
        assert name == estimator and kl == pytest.approx(want, abs=1e-6), estimator
        assert total == pytest.approx(-1.039051 + 0.1 * want, abs=1e-5), estimator
    assert driver.find_elements("id", "ex-kl-placement") == []  # the KL in the loss: nothing to say
    (run / "config.yaml").write_text("algorithm:\n  kl_placement: reward\n")
    driver.get(write_report([run], run / "report.html").resolve().as_uri())
    assert "charges the KL in the reward" in driver.find_element("id", "ex-kl-placement").text
    assert severe(driver) == []


def test_a_dashboard_started_with_the_run_follows_its_config(driver, tmp_path):  # noqa: F811
    run = tmp_path / "early"
    run.mkdir()  # claimed by `rlvr train`; the models still load: no config.yaml, no metrics.jsonl yet
    server = DashboardServer([run], "127.0.0.1", 0, scorer_factory=lambda: answer_scorer(run))
    server.start_thread()
    try:
        driver.get(server.url)
        assert wait_until(lambda: driver.find_elements("css selector", "#view-ratio rect[data-key='clip-range']"))
        before = band_width(driver)  # the default range [0.8, 1.2]
        assert driver.find_element("id", "ex-eps-high").get_attribute("value") == "0.2"
        assert driver.find_elements("css selector", "#view-score textarea") == []  # nothing to score against yet
        made = make_run(tmp_path / "made", steps=3, tokens=4)
        (made / "config.yaml").write_text(CLIP_HIGHER)
        for name in ("config.yaml", "metrics.jsonl", "groups.jsonl"):
            (run / name).write_bytes((made / name).read_bytes())
        # the page polls every 2 s: the ratio view's band widens to [0.8, 1.28], the build view opens at 0.28
        assert wait_until(lambda: band_width(driver) > before, timeout_s=15)
        assert band_width(driver) == pytest.approx(before * 0.48 / 0.4)
        assert driver.find_element("id", "ex-eps-high").get_attribute("value") == "0.28"
        assert driver.find_element("id", "ex-kl-est").get_attribute("value") == "k3"
        (run / "config.yaml").write_text(CLIP_HIGHER + "  kl_estimator: k1\n")  # only the estimator changes
        assert wait_until(lambda: driver.find_element("id", "ex-kl-est").get_attribute("value") == "k1",
                          timeout_s=15)
        assert {n.text for n in driver.find_elements("css selector", "#view-build .ex-kl-name")} == {"k1"}
        # and typed answers are scored now that the run has a config and a group of its own
        assert wait_until(lambda: driver.find_elements("css selector", "#view-score textarea"), timeout_s=15)
        assert severe(driver) == []
    finally:
        server.shutdown()
        server.server_close()


def test_the_token_views_say_when_the_run_trains_another_objective(driver, tmp_path):  # noqa: F811
    run = make_run(tmp_path / "gspo", steps=2, tokens=4)
    for objective, said in (("gspo", True), ("ppo_clip", False)):
        (run / "config.yaml").write_text(f"algorithm:\n  objective: {objective}\n")
        driver.get(write_report([run], run / "report.html").resolve().as_uri())
        for view in ("token", "worked"):
            text = driver.find_element("id", f"view-{view}").text
            assert ("trains with the gspo objective" in text) == said, (objective, view)
    assert severe(driver) == []


def test_views_compute_with_the_runs_own_std_epsilon_and_open_the_grid_at_its_setting(driver, tmp_path):  # noqa: F811
    import torch

    from rlvr.algorithms.advantages import grpo_advantages

    run = make_run(tmp_path / "own", steps=2, tokens=4)  # viz_helpers: rewards 1, 0, 1, 0, ... (G = 8)
    (run / "config.yaml").write_text("rollout:\n  group_size: 4\nalgorithm:\n  std_epsilon: 0.5\n"
                                     "  clip_epsilon: 0.3\n  beta: 0.2\n")
    driver.get(write_report([run], run / "report.html").resolve().as_uri())
    bars = [float(b.get_attribute("data-value")) for b in driver.find_elements(
        "css selector", "svg[data-plot='sampling-advantages'] rect.bar")]
    # std eps 0.5, not the default 1e-4: A = +-0.5 / (0.5345 + 0.5) = +-0.4833 (Bessel std of 4 ones, 4 zeros)
    want = grpo_advantages(torch.tensor([1.0, 0.0] * 4), 8, 0.5).tolist()
    assert bars == pytest.approx(want, abs=1e-6) and abs(bars[0]) < 0.49
    # the grid opens at the run's own epsilon 0.3, beta 0.2 and G 4 (the shipped grid holds all three)
    shown = {key: driver.find_element("id", f"grid-{key}-value").text for key in ("clip_epsilon", "beta", "group_size")}
    assert shown == {"clip_epsilon": "0.3", "beta": "0.2", "group_size": "4"}
    assert severe(driver) == []


def test_the_build_view_keeps_one_completion(driver, tmp_path):  # noqa: F811
    run = make_run(tmp_path / "run", steps=1, tokens=4)
    driver.get(write_report([run], run / "report.html").resolve().as_uri())
    while len(driver.find_elements("css selector", "#ex-rewards input.ex-reward-value")) > 1:
        driver.find_element("id", "ex-remove-0").click()
    # one completion left: nothing to compare it with (A = 0), and it cannot be removed
    assert driver.find_element("id", "ex-remove-0").get_attribute("disabled") == "true"
    assert driver.find_element("id", "ex-tied").text == "yes" and driver.find_element("id", "ex-adv-0").text == "0"
