"""The explainer's views 7 (token by token), 8 (policy ratio explorer), 10 (credit assignment) and 13 (one token's
loss) in a real browser: each control is driven and what it shows is checked against the trainer's own functions
(ppo_clip, grpo_advantages, the loss's aggregation) on the numbers the group view recorded."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from explainer_fixture import use_fake_example  # noqa: F401  (a fixture, used by name)
from rlvr.algorithms.advantages import grpo_advantages
from rlvr.algorithms.loss import AGGREGATIONS, aggregate
from rlvr.algorithms.objectives import ClipRange, ppo_clip
from rlvr.viz.report import write_report
from test_viz_browser import artifacts, dashboard_page, driver, severe, wait_until  # noqa: F401  (fixtures, used by name)
from viz_helpers import group_row, make_run, metrics_row, write_lines

pytestmark = pytest.mark.browser
G, TOKENS = 8, 20  # the synthetic run's groups: 8 completions of 20 tokens, even ones right (reward 1)
SHORT = 10  # completion 7 of the run's last group is cut to 10 tokens, so that the aggregations differ
close = lambda got, want: got == pytest.approx(want, rel=1e-6, abs=1e-12)  # noqa: E731


def value(browser, element_id: str):
    """A shown number's exact value (data-value) and its rounded text, both as floats."""
    node = browser.find_element("id", element_id)
    return float(node.get_attribute("data-value")), float(node.text)


def text(browser, element_id: str) -> str:
    return browser.find_element("id", element_id).text


def source(browser, view: str) -> tuple[str, str]:
    note = browser.find_element("css selector", f"#view-{view} .ex-source")
    return note.get_attribute("data-source"), note.text


def trainer_token(ratio: float, adv: float, low: float, high: float) -> tuple[float, bool]:
    """ppo_clip on one token (float64): its loss -min(rho A, clip(rho) A) and whether the clip binds."""
    log_ratio = torch.tensor([[math.log(ratio)]], dtype=torch.float64)
    s = ppo_clip(log_ratio, torch.zeros_like(log_ratio), torch.tensor([adv], dtype=torch.float64),
                 torch.ones_like(log_ratio), ClipRange(low=low, high=high))
    return s.loss.item(), bool(s.clipped.item())


def trainer_share(lengths: list[int], i: int, k: int, per_token: float, mode: str, max_new_tokens: int) -> float:
    """The loss's aggregation of a group whose only nonzero per-token value is token k of completion i."""
    width = max(lengths)
    values, mask = torch.zeros(len(lengths), width, dtype=torch.float64), torch.zeros(len(lengths), width)
    values[i, k] = per_token
    for j, n in enumerate(lengths):
        mask[j, :n] = 1
    return aggregate(values, mask, mode, AGGREGATIONS[mode].denominator(mask, max_new_tokens)).item()


def shown_advantage(rewards: list[float], i: int) -> float:
    """The group view's A: grpo_advantages, rounded as the page's payload rounds per-token numbers."""
    return round(grpo_advantages(torch.tensor(rewards), len(rewards)).double()[i].item(), 4)


def short_run(path: Path, config: str | None = None) -> Path:
    """make_run's 3 steps, completion 7 of the last group cut to SHORT tokens (ratios from step 2 on, no token_kl)."""
    run = make_run(path, steps=3, tokens=TOKENS, group_size=G, final_eval=False)
    rows = [json.loads(line) for line in (run / "groups.jsonl").read_text().splitlines()]
    last = rows[-1]["completions"][7]
    for key in ("tokens", "token_advantages", "token_ratios"):
        last[key] = last[key][:SHORT]
    (run / "groups.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if config is not None:
        (run / "config.yaml").write_text(config)
    return run


def open_page(browser, runs: list[Path], output: Path) -> None:
    browser.get(write_report(runs, output).resolve().as_uri())
    assert wait_until(lambda: browser.find_elements("id", "view-worked")), "the explainer was not drawn"


def pick(browser, completion: int, token: int) -> None:
    browser.find_element("css selector", f"#token-completion option[value='{completion}']").click()
    tok = browser.find_element("id", f"token-tok-{token}")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", tok)
    tok.click()


def snap(browser, view: str, folder: Path) -> None:
    node = browser.find_element("id", "view-" + view)
    # below the sticky page header, which would otherwise cover the view's top in the element screenshot
    browser.execute_script("window.scrollTo(0, arguments[0].getBoundingClientRect().top + window.scrollY - "
                           "document.querySelector('header').offsetHeight - 8)", node)
    node.screenshot(str(folder / f"explainer-{view}.png"))


def test_token_view_and_worked_example_on_a_run(driver, use_fake_example, tmp_path, artifacts):  # noqa: F811
    open_page(driver, [short_run(tmp_path / "run")], tmp_path / "report.html")
    assert source(driver, "token")[0] == "run" and source(driver, "worked")[0] == "run"
    rewards = [1.0 if j % 2 == 0 else 0.0 for j in range(G)]
    lengths = [TOKENS] * (G - 1) + [SHORT]
    # before any click the worked example takes completion 1's first token: ratio 1.5 (group_row), A > 0, so the
    # clipped term 1.28 A is the smaller one and binds (group clip range [0.8, 1.28])
    assert driver.find_element("css selector", "#worked-steps .ex-token-head").get_attribute("data-token") == "0:0"
    a0 = shown_advantage(rewards, 0)
    loss, binds = trainer_token(1.5, a0, 0.2, 0.28)
    assert binds and all(close(v, 1.5) for v in value(driver, "worked-rho"))
    assert all(close(v, 1.28) for v in value(driver, "worked-clip"))
    assert all(close(v, loss) for v in value(driver, "worked-loss")) and "binds" in text(driver, "worked-binds")
    assert "not recorded" in text(driver, "worked-kl")  # make_run's groups carry no token_kl
    assert all(close(v, loss) for v in value(driver, "worked-total"))  # no KL term to add
    cases = [  # (completion, token, ratio): group_row's ratio at k = 19 is 0.6, at k = 4 it is 1 + 0.01 * 4
        (1, 19, 0.6),  # A < 0, rho < 0.8: 0.8 A < 0.6 A, the lower clip binds
        (7, 4, 1.04),  # inside the range, nothing binds; the short completion: sequence_mean weighs 1 / (8 * 10)
        (0, 0, 1.5)]
    for i, k, ratio in cases:
        pick(driver, i, k)
        adv = shown_advantage(rewards, i)
        loss, binds = trainer_token(ratio, adv, 0.2, 0.28)
        assert value(driver, "token-adv")[0] == adv and all(close(v, ratio) for v in value(driver, "token-ratio"))
        assert all(close(v, loss) for v in value(driver, "token-loss")), (i, k)
        assert ("does not bind" not in text(driver, "token-binds")) == binds, (i, k)
        assert "not recorded" in text(driver, "token-kl")
        assert close(value(driver, "token-weight")[0], 1 / (G * lengths[i]))  # sequence_mean, CONFIG's default
        share = trainer_share(lengths, i, k, loss, "sequence_mean", 32)
        assert all(close(v, share) for v in value(driver, "token-contribution")), (i, k)
        # view 13 follows the click
        assert driver.find_element("css selector", "#worked-steps .ex-token-head").get_attribute(
            "data-token") == f"{i}:{k}"
        assert all(close(v, ratio) for v in value(driver, "worked-rho"))
        assert all(close(v, share) for v in value(driver, "worked-contribution"))
    clip = min(max(0.6, 0.8), 1.28)
    pick(driver, 1, 19)
    assert all(close(v, clip) for v in value(driver, "worked-clip"))
    assert all(close(v, clip * shown_advantage(rewards, 1)) for v in value(driver, "worked-clipped-term"))
    assert severe(driver) == []
    snap(driver, "token", artifacts)
    snap(driver, "worked", artifacts)


EXAMPLE_CONFIG = ("rollout:\n  group_size: 8\n  max_new_tokens: 64\nalgorithm:\n  beta: 0.04\n  clip_epsilon: 0.2\n"
                  "  clip_epsilon_high: 0.28\n  aggregation: constant\n")


def test_token_views_on_the_example_add_its_kl(driver, use_fake_example, tmp_path):  # noqa: F811
    run = make_run(tmp_path / "bare", steps=3, groups=False, final_eval=False)
    # the example's group is weighed with the example run's own settings (constant aggregation, beta 0.04), not
    # with those of the run the page is opened on (beta 0.2, sequence_mean)
    use_fake_example["example"]["config"] = EXAMPLE_CONFIG
    (run / "config.yaml").write_text("algorithm:\n  beta: 0.2\n")
    open_page(driver, [run], tmp_path / "report.html")
    for view in ("token", "worked"):
        kind, note = source(driver, view)
        assert kind == "example" and "logged no group view" in note, view
    # the example's last group (explainer_fixture): G = 8, 12 tokens, token_kl = 0.001 * (k % 7) + 0.01 * j, so
    # completion 2's token 3 holds k = 0.023 and ratio 1.03 (inside [0.8, 1.28]); beta 0.04: beta k = 0.00092
    group = use_fake_example["example"]["groups"][-1]
    pick(driver, 2, 3)
    adv = shown_advantage([c["reward"] for c in group["completions"]], 2)
    loss, binds = trainer_token(1.03, adv, group["clip_low"], group["clip_high"])
    kl = group["completions"][2]["token_kl"][3]
    assert kl == 0.023 and not binds
    assert all(close(v, kl) for v in value(driver, "token-kl"))
    assert all(close(v, 0.04 * kl) for v in value(driver, "token-kl-term"))
    # constant aggregation: 1 / (G * max_new_tokens) = 1 / (8 * 64), whatever the completion's length
    assert close(value(driver, "token-weight")[0], 1 / 512)
    share = trainer_share([12] * G, 2, 3, loss + 0.04 * kl, "constant", 64)
    assert all(close(v, share) for v in value(driver, "token-contribution"))
    assert all(close(v, loss + 0.04 * kl) for v in value(driver, "worked-total"))
    assert all(close(v, 0.04 * kl) for v in value(driver, "worked-kl-term"))
    assert all(close(v, share) for v in value(driver, "worked-contribution"))
    assert severe(driver) == []


def test_ratio_explorer_moves_its_dots(driver, use_fake_example, tmp_path, artifacts):  # noqa: F811
    run = make_run(tmp_path / "run", steps=2, groups=False, final_eval=False)
    (run / "config.yaml").write_text(EXAMPLE_CONFIG)
    open_page(driver, [run], tmp_path / "report.html")
    # the run's clip range [0.8, 1.28] is the band: plot() maps x in [0, 2] to 46 + 360 x / 2 (420 wide, margins
    # 46 and 14), so it starts at 46 + 180 * 0.8 = 190 and is 180 * 0.48 = 86.4 wide
    band = driver.find_element("css selector", "#view-ratio rect[data-key='clip-range']")
    assert float(band.get_attribute("x")) == pytest.approx(190, abs=0.01)
    assert float(band.get_attribute("width")) == pytest.approx(86.4, abs=0.01)
    # rho 0.7 / 0.5 = 1.4: A = +1 clipped at 1.28 (binds), A = -1 keeps -1.4. rho 0.3 / 0.5 = 0.6: A = +1 keeps 0.6,
    # A = -1 is held at -0.8 (binds). rho 0.55 / 0.5 = 1.1: inside, nothing binds. rho 0.9 / 0.2 = 4.5: the axis
    # grows to 4.5 and the dots stay on it
    for pi_old, pi_new in [(0.5, 0.7), (0.5, 0.3), (0.5, 0.55), (0.2, 0.9)]:
        driver.execute_script("""for (const [id, v] of Object.entries(arguments[0])) {
            const e = document.getElementById(id); e.value = String(v); e.dispatchEvent(new Event('input')); }""",
                              {"ratio-pi-old": pi_old, "ratio-pi-new": pi_new})
        rho = pi_new / pi_old
        assert all(close(v, rho) for v in value(driver, "ratio-rho"))
        for key, adv in (("pos", 1.0), ("neg", -1.0)):
            loss, binds = trainer_token(rho, adv, 0.2, 0.28)
            dot = driver.find_element("css selector", f"#view-ratio circle.ex-dot[data-key='{key}']")
            assert close(float(dot.get_attribute("data-x")), rho) and close(float(dot.get_attribute("data-y")), -loss)
            assert all(close(v, -loss) for v in value(driver, f"ratio-obj-{key}")), (rho, key)
            assert ("gradient 0" in text(driver, f"ratio-binds-{key}")) == binds, (rho, key)
        if pi_new == 0.55:
            snap(driver, "ratio", artifacts)
    paths = driver.find_elements("css selector", "#view-ratio path.ex-line")
    assert sorted(p.get_attribute("data-key") for p in paths) == ["neg", "pos"]
    assert severe(driver) == []


def test_credit_view_sets_grpo_beside_gae(driver, use_fake_example, tmp_path, artifacts):  # noqa: F811
    open_page(driver, [make_run(tmp_path / "run", steps=2, tokens=6, final_eval=False)], tmp_path / "report.html")
    kind, note = source(driver, "credit")
    assert kind == "example" and "used the group baseline, not a critic" in note  # make_run's config: grpo
    ppo = use_fake_example["ppo"]["group"]["completions"]  # rewards 1, 0, 1, 0; 6 tokens each
    want = grpo_advantages(torch.tensor([c["reward"] for c in ppo]), 4, eps=1e-4).double()  # +-0.5 / 0.57745
    for i in (1, 2):
        driver.find_element("css selector", f"#credit-completion option[value='{i}']").click()
        flat = [float(b.get_attribute("data-value")) for b in driver.find_elements(
            "css selector", "svg[data-plot='credit-grpo'] rect.bar")]
        gae = [float(b.get_attribute("data-value")) for b in driver.find_elements(
            "css selector", "svg[data-plot='credit-gae'] rect.bar")]
        assert len(flat) == 6 and all(close(v, want[i].item()) for v in flat), i
        # the fixture's GAE: (+-1)(0.9 - 0.1 k) + 0.05 i, e.g. completion 1 (wrong): -0.85, -0.75, ..., -0.35
        assert gae == [round((1 if ppo[i]["reward"] else -1) * (0.9 - 0.1 * k) + 0.05 * i, 4) for k in range(6)]
        assert all(close(v, want[i].item()) for v in value(driver, "credit-grpo-value"))
        assert value(driver, "credit-gae-first")[0] == gae[0] and value(driver, "credit-gae-last")[0] == gae[-1]
    assert severe(driver) == []
    snap(driver, "credit", artifacts)


def test_views_say_when_there_is_nothing_to_show(driver, monkeypatch, tmp_path):  # noqa: F811
    import rlvr.viz.explainer_data as explainer_data

    monkeypatch.setattr(explainer_data, "load_example", lambda: {})
    open_page(driver, [make_run(tmp_path / "bare", steps=2, groups=False, final_eval=False)], tmp_path / "a.html")
    for view in ("token", "credit", "worked"):
        kind, note = source(driver, view)
        assert kind == "none" and note.startswith("Nothing to show"), view
        assert driver.find_elements("css selector", f"#view-{view} .ex-note"), view
    assert driver.find_elements("css selector", "#view-ratio circle.ex-dot")  # it needs only the settings
    # a run trained with the critic: the credit view draws the run's own group
    run = short_run(tmp_path / "gae", config="algorithm:\n  advantage: gae\n  aggregation: token_mean\n")
    open_page(driver, [run], tmp_path / "b.html")
    assert source(driver, "credit")[0] == "run" and source(driver, "token")[0] == "run"
    # token_mean weighs every token of the group alike: 1 / (7 * 20 + 10) = 1 / 150 (sequence_mean: 1 / 160)
    pick(driver, 0, 3)
    assert close(value(driver, "token-weight")[0], 1 / 150)
    loss, _ = trainer_token(1.03, shown_advantage([1.0 if j % 2 == 0 else 0.0 for j in range(G)], 0), 0.2, 0.28)
    share = trainer_share([TOKENS] * (G - 1) + [SHORT], 0, 3, loss, "token_mean", 32)
    assert all(close(v, share) for v in value(driver, "token-contribution"))
    assert severe(driver) == []


def test_dashboard_keeps_the_picked_token_on_a_new_group(driver, use_fake_example, tmp_path):  # noqa: F811
    run = short_run(tmp_path / "live")
    with dashboard_page(driver, run):
        assert wait_until(lambda: driver.find_elements("id", "token-tok-0"))
        pick(driver, 1, 5)
        # a new step's group: views 7 and 13 redraw on it, completion 2 and token 6 still picked
        write_lines(run / "groups.jsonl", [group_row(4, G, TOKENS, ratios=True)])
        write_lines(run / "metrics.jsonl", [metrics_row(4)])
        assert wait_until(lambda: "step 4" in source(driver, "token")[1]), "the new group was not drawn within 10 s"
        assert driver.find_element("css selector", "#token-completion option:checked").get_attribute("value") == "1"
        assert "picked" in driver.find_element("id", "token-tok-5").get_attribute("class")
        assert driver.find_element("css selector", "#worked-steps .ex-token-head").get_attribute("data-token") == "1:5"
        assert severe(driver) == []


def test_an_episodes_environment_tokens_add_nothing(driver, use_fake_example, tmp_path):  # noqa: F811
    run = make_run(tmp_path / "episodes", steps=3, final_eval=False)
    group = group_row(3, 2, 6, ratios=True)
    for c in group["completions"]:  # tokens 2 and 3 are the environment's turn inside each episode
        c["sampled"] = [1, 1, 0, 0, 1, 1]
        c["token_advantages"][2:4], c["token_ratios"][2:4] = [0.0, 0.0], [None, None]
    (run / "groups.jsonl").write_text(json.dumps(group) + "\n")
    open_page(driver, [run], tmp_path / "report.html")
    assert [s.get_attribute("class") for s in driver.find_elements("css selector", "#token-strip .tok")] == \
        ["tok", "tok", "tok env", "tok env", "tok", "tok"]
    pick(driver, 0, 2)
    assert "environment token" in text(driver, "token-details") and not driver.find_elements("id", "token-ratio")
    # sequence_mean over the model's own tokens only: 1 / (G × |o_i|) = 1 / (2 × 4), not 1 / (2 × 6)
    pick(driver, 1, 4)
    assert close(value(driver, "token-weight")[0], 1 / 8)
    loss, _ = trainer_token(1.04, shown_advantage([1.0, 0.0], 1), 0.2, 0.28)
    mask_lengths = [4, 4]  # the trainer's mask drops the environment's tokens: the model's 4 stand side by side
    share = trainer_share(mask_lengths, 1, 2, loss, "sequence_mean", 32)
    assert all(close(v, share) for v in value(driver, "token-contribution"))
    assert severe(driver) == []
