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
        # and typed answers are scored now that the run has a config and a group of its own
        assert wait_until(lambda: driver.find_elements("css selector", "#view-score textarea"), timeout_s=15)
        assert severe(driver) == []
    finally:
        server.shutdown()
        server.server_close()
