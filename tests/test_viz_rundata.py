"""`rlvr report` / `rlvr dashboard` without a browser: reading run directories (also while a run writes them),
picking start / middle / end, the report file and its size, the dashboard's HTTP answers, the CLI's errors."""
from __future__ import annotations

import errno
import json
import os
import re
import socket
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from rlvr.cli.main import main
from rlvr.viz import jsonl
from rlvr.viz.dashboard import DashboardServer
from rlvr.viz.jsonl import RunDataError, read_jsonl_tail
from rlvr.viz.report import write_report
from rlvr.viz.rundata import COMPLETIONS_PER_PHASE, load_run, phase_steps, spread
from viz_helpers import make_run, write_lines


@pytest.fixture(scope="module")
def run100(tmp_path_factory) -> Path:
    return make_run(tmp_path_factory.mktemp("viz") / "run100")


def embedded_data(html: str) -> dict:
    block = re.search(r'<script type="application/json" id="rlvr-data">(.*?)</script>', html, re.S)
    return json.loads(block.group(1))


def test_load_keeps_numeric_keys_nulls_and_the_final_eval_row(run100):
    run = load_run(run100)
    assert len(run.rows) == 101  # 100 steps + the end-of-run evaluation row
    final = run.rows[-1]
    assert final.step == 100 and set(final.values) == {"elapsed_s", "eval/pass@1", "eval/pass@4", "eval/greedy"}
    step7 = run.rows[6]
    assert step7.step == 7 and "grad_norm" in step7.values and step7.values["grad_norm"] is None
    assert "note" not in step7.values and "skipped" not in step7.values  # a string and a boolean: not plotted
    assert "reflection_rate" not in run.rows[0].values and run.rows[2].values["reflection_rate"] == 0.03
    assert [e.step for e in run.evaluations] == [100]
    assert run.evaluations[0].values == {"pass@1": 0.45, "pass@4": 0.7, "greedy": 0.5}  # nested keys dropped
    assert run.config_text.startswith("max_steps: 100")


def test_partial_last_line_is_skipped_until_complete(tmp_path):
    run = make_run(tmp_path / "run", steps=5, groups=False)
    with (run / "metrics.jsonl").open("a") as f:
        f.write('{"step": 6, "reward_mean": 0.')  # the run is writing this line right now
    assert [r.step for r in load_run(run).rows] == [1, 2, 3, 4, 5, 5]
    with (run / "metrics.jsonl").open("a") as f:
        f.write('5}\n')
    assert load_run(run).rows[-1].values == {"reward_mean": 0.5}


def test_malformed_middle_line_names_file_and_line(tmp_path):
    run = make_run(tmp_path / "run", steps=5, groups=False)
    lines = (run / "metrics.jsonl").read_text().splitlines(keepends=True)
    lines[3] = '{"step": 4, "reward_mean": }\n'
    (run / "metrics.jsonl").write_text("".join(lines))
    with pytest.raises(RunDataError, match=r"metrics\.jsonl: line 4 is not valid JSON"):
        load_run(run)


def test_row_without_step_is_an_error(tmp_path):
    run = make_run(tmp_path / "run", steps=2, groups=False)
    write_lines(run / "metrics.jsonl", [{"reward_mean": 1.0}])
    with pytest.raises(RunDataError, match=r'line 4 has no integer "step"'):
        load_run(run)


def test_missing_directory_and_missing_metrics(tmp_path):
    with pytest.raises(RunDataError, match=f"{tmp_path / 'nope'}: no such run directory"):
        load_run(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(RunDataError, match=f"{tmp_path / 'empty'}: not a run directory with logs"):
        load_run(tmp_path / "empty")


def test_phase_steps_and_spread():
    assert phase_steps(list(range(1, 101))) == [("start", 1), ("middle", 51), ("end", 100)]  # 100 // 2 = index 50
    assert phase_steps([3, 3, 1]) == [("start", 1), ("end", 3)]  # two steps: no middle
    assert phase_steps([7]) == [("start", 7)]
    assert phase_steps([]) == []
    assert spread([0, 1, 2, 3, 4, 5, 6, 7], 4) == [0, 2, 5, 7]  # indices round(k * 7 / 3) = 0, 2, 5, 7
    assert spread([1, 2], 4) == [1, 2]


def test_completions_from_start_middle_end_best_to_worst(run100):
    completions = load_run(run100).completions
    assert [(c.phase, c.step) for c in completions] == (
        [("start", 1)] * COMPLETIONS_PER_PHASE + [("middle", 51)] * COMPLETIONS_PER_PHASE
        + [("end", 100)] * COMPLETIONS_PER_PHASE)
    start = completions[:COMPLETIONS_PER_PHASE]
    # sample k of a step has reward 1 when k % 3 == 0: k = 0, 3, 6 of 8; sorted best first, spread picks both ends
    assert start[0].reward == 1.0 and start[-1].reward == 0.0
    assert start[0].verdicts[0].verifier == "math" and start[0].verdicts[0].outcome == "correct"


def test_group_view_steps_for_report_and_dashboard(run100):
    phases = load_run(run100, groups="phases").groups
    assert [(g.phase, g.step) for g in phases] == [("start", 1), ("middle", 51), ("end", 100)]
    assert phases[0].completions[0].token_ratios is None  # the synthetic step 1 has no ratios
    member = phases[-1].completions[0]
    assert len(member.tokens) == len(member.token_advantages) == len(member.token_ratios) == 200
    assert (phases[-1].clip_low, phases[-1].clip_high) == (0.2, 0.28)
    latest = load_run(run100, groups="latest", latest=5).groups
    assert [g.step for g in latest] == [96, 97, 98, 99, 100]


def test_the_report_parses_only_the_groups_it_shows(tmp_path, monkeypatch):
    run = make_run(tmp_path / "run", steps=9, tokens=3)
    with (run / "groups.jsonl").open("a") as f:
        f.write('{"step": 10, "completions": [')  # being written: not a step yet
    lines = (run / "groups.jsonl").read_bytes().split(b"\n")
    lines[3] = b'{"step": 4, "broken'  # damage in a line no phase picks: never parsed, so not an error
    (run / "groups.jsonl").write_bytes(b"\n".join(lines))
    parsed = []
    real_loads = jsonl.json.loads
    monkeypatch.setattr(jsonl.json, "loads", lambda raw: parsed.append(raw) or real_loads(raw))
    groups = load_run(run, groups="phases").groups
    assert [(g.phase, g.step) for g in groups] == [("start", 1), ("middle", 5), ("end", 9)]
    assert sum(b'"completions"' in raw for raw in parsed) == 3  # 3 of the 9 group lines were parsed
    # a file whose lines do not open with their step (not written by rlvr) is read whole, damage included
    (run / "groups.jsonl").write_text("".join(json.dumps({"x": 1, **row}) + "\n" for row in
                                              [json.loads(x) for x in lines[:3]]))
    assert [g.step for g in load_run(run, groups="phases").groups] == [1, 2, 3]


def test_tail_read_across_small_blocks(tmp_path, monkeypatch):
    path = tmp_path / "log.jsonl"
    write_lines(path, [{"step": k, "pad": "x" * 50} for k in range(1, 41)])
    with path.open("a") as f:
        f.write('{"step": 41, "pa')  # being written
    monkeypatch.setattr(jsonl, "TAIL_BLOCK", 64)  # several seeks back, each block starting mid-line
    assert [line.record["step"] for line in read_jsonl_tail(path, 3)] == [38, 39, 40]
    assert [line.record["step"] for line in read_jsonl_tail(path, 100)] == list(range(1, 41))


def test_group_with_token_lists_of_the_wrong_length(tmp_path):
    run = make_run(tmp_path / "run", steps=3, tokens=5)
    rows = [json.loads(line) for line in (run / "groups.jsonl").read_text().splitlines()]
    rows[1]["completions"][0]["token_advantages"] = [0.1]
    (run / "groups.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(RunDataError, match=r'groups\.jsonl: line 2: "token_advantages" must be a list as long'):
        load_run(run)


def test_report_of_100_steps_stays_small_and_self_contained(run100, tmp_path):
    path = write_report([run100], tmp_path / "report.html")
    size = path.stat().st_size
    assert size < 5 * 1024 * 1024, f"{size} bytes"
    html = path.read_text()
    # nothing fetched: every src / href is an anchor or a data: URL, no CSS import
    assert not re.search(r"""\b(src|href)=["'](?!#|data:)""", html) and "@import" not in html
    data = embedded_data(html)
    assert [g["step"] for g in data["runs"][0]["groups"]] == [1, 51, 100]
    assert len(data["runs"][0]["curves"]["steps"]) == 101
    assert data["explainer"]["eps_low"] == 0.2 and data["explainer"]["std_eps"] == 1e-4  # AlgorithmConfig defaults


def test_completion_text_cannot_close_the_data_script(tmp_path):
    run = make_run(tmp_path / "run", steps=1, samples=1, groups=False)
    rows = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    rows[0]["completion"] = "</script><script>alert(1)</script>"
    (run / "samples.jsonl").write_text(json.dumps(rows[0]) + "\n")
    html = write_report([run]).read_text()
    assert "alert(1)</script>" not in html
    assert embedded_data(html)["runs"][0]["completions"][0]["text"] == "</script><script>alert(1)</script>"


def test_report_default_path_and_overwrite_rules(tmp_path):
    run = make_run(tmp_path / "run", steps=3)
    first = write_report([run])
    assert first == run / "report.html"
    assert write_report([run]) == first  # our own report: replaced
    notes = tmp_path / "notes.html"
    notes.write_text("my notes")
    with pytest.raises(RunDataError, match="exists and is not a report written by rlvr"):
        write_report([run], notes)
    assert notes.read_text() == "my notes"
    write_report([run], notes, force=True)
    assert "rlvr report" in notes.read_text()


def test_cli_errors_are_one_line_exit_2(tmp_path, capsys, monkeypatch):
    run = make_run(tmp_path / "run", steps=3, groups=False)
    cases = [(["report", str(tmp_path / "missing")], "no such run directory"),
             (["report", str(run), str(run)], "--output FILE"),
             (["report", str(run), "--output", str(tmp_path / "no" / "r.html")], "does not exist")]
    for argv, words in cases:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("rlvr: error: ") and words in err, err
    assert main(["report", str(run)]) == 0
    assert "wrote" in capsys.readouterr().out
    def read_only(*args):
        raise OSError(errno.EROFS, "Read-only file system")
    monkeypatch.setattr(os, "replace", read_only)  # as on a read-only mount (root here ignores mode bits)
    assert main(["report", str(run), "--output", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot write" in err and "Read-only file system" in err
    assert not list(tmp_path.glob(".r.html.*"))  # the partial file is removed
    monkeypatch.undo()
    with pytest.raises(SystemExit) as exit_info:  # argparse's own one-line usage error, exit 2
        main(["dashboard", str(run), "--port", "70000"])
    assert exit_info.value.code == 2 and "'70000' is not a TCP port (0-65535)" in capsys.readouterr().err


def test_dashboard_port_in_use_is_one_error(tmp_path, capsys):
    run = make_run(tmp_path / "run", steps=2, groups=False)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["dashboard", str(run), "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"port {port} on 127.0.0.1 is already in use" in err


def test_dashboard_api_etag_and_damaged_log(tmp_path):
    run = make_run(tmp_path / "run", steps=4, groups=False)
    server = DashboardServer([run], "127.0.0.1", 0)
    server.start_thread()
    try:
        with urllib.request.urlopen(server.url + "api/data") as res:
            etag, data = res.headers["ETag"], json.load(res)
        assert data["live"] is True and data["runs"][0]["curves"]["steps"] == [1, 2, 3, 4, 4]
        request = urllib.request.Request(server.url + "api/data", headers={"If-None-Match": etag})
        with pytest.raises(urllib.error.HTTPError) as unchanged:
            urllib.request.urlopen(request)
        assert unchanged.value.code == 304
        write_lines(run / "metrics.jsonl", [{"step": 5, "reward_mean": 0.9}])
        with urllib.request.urlopen(request) as res:  # same old ETag, new data
            assert json.load(res)["runs"][0]["curves"]["steps"][-1] == 5
        with (run / "metrics.jsonl").open("a") as f:
            f.write("not json\n")
        with pytest.raises(urllib.error.HTTPError) as damaged:
            urllib.request.urlopen(server.url + "api/data")
        assert damaged.value.code == 500 and "line 7 is not valid JSON" in json.load(damaged.value)["error"]
    finally:
        server.shutdown()
        server.server_close()


def test_the_explainer_opens_with_the_runs_own_clip_range_and_beta():
    from rlvr.viz.page import explainer_settings

    # clip_epsilon_high: the key config.yaml holds (`clip_high` is only the config's property, never written)
    own = explainer_settings("algorithm:\n  clip_epsilon: 0.2\n  clip_epsilon_high: 0.28\n  beta: 0.0\n")
    assert own == {"eps_low": 0.2, "eps_high": 0.28, "beta": 0.0, "std_eps": 1e-4,  # std_eps: the default
                   "kl_estimator": "k3", "kl_placement": "loss"}
    defaults = {"eps_low": 0.2, "eps_high": 0.2, "beta": 0.04, "std_eps": 1e-4,  # AlgorithmConfig's
                "kl_estimator": "k3", "kl_placement": "loss"}
    assert explainer_settings("algorithm:\n  kl_estimator: k2\n") == {**defaults, "kl_estimator": "k2"}
    assert explainer_settings("algorithm:\n  kl_placement: reward\n") == {**defaults, "kl_placement": "reward"}
    assert explainer_settings("algorithm:\n  kl_placement: [reward]\n") == defaults
    assert explainer_settings("algorithm:\n  kl_estimator: k9\n") == defaults  # no estimator the page knows
    assert explainer_settings("") == explainer_settings("::: [") == explainer_settings("- a list") == defaults
    assert explainer_settings("algorithm:\n  beta: -1\n  clip_epsilon_high: yes\n") == defaults  # unusable values
    assert explainer_settings("algorithm:\n  beta: .nan\n  std_epsilon: .inf\n") == defaults  # not finite


def test_report_of_a_recipe_directory_holds_its_stages_and_summary(tmp_path):
    """`rlvr report RECIPE_DIR` overlays the stages that logged steps (the sample stage has no
    metrics.jsonl) and shows the recipe's summary tables, reasoning included."""
    recipe = tmp_path / "recipe"
    make_run(recipe / "stages" / "01-cold_start", steps=2, samples=1, groups=False)
    rl = make_run(recipe / "stages" / "02-reasoning_rl", steps=3, samples=1, tokens=4)
    (rl / "config.yaml").write_text("algorithm:\n  clip_epsilon_high: 0.28\n")  # DAPO's range: the SFT stage has none
    (recipe / "stages" / "03-rejection_sampling").mkdir()
    (recipe / "manifest.json").write_text("{}")
    (recipe / "summary.md").write_text("| model | think words |\n| base | 0.0 |\n")
    data = embedded_data(write_report([recipe]).read_text())
    assert [run["name"] for run in data["runs"]] == ["01-cold_start", "02-reasoning_rl"]
    assert data["recipes"] == [{"name": "recipe", "summary": "| model | think words |\n| base | 0.0 |\n"}]
    # the explainer draws from the RL stage, the last that logged a group view (not the SFT stage, listed first)
    group = data["explainer"]["group"]
    assert group["source"] == "run" and group["group"]["step"] == 3
    assert data["explainer"]["eps_high"] == data["explainer"]["settings"]["clip_epsilon_high"] == 0.28
    assert data["live"] is False  # a report never polls
    (rl / "groups.jsonl").unlink()  # no stage logged a group view: the last stage still sets the explainer
    data = embedded_data(write_report([recipe]).read_text())
    assert data["explainer"]["eps_high"] == 0.28 and data["explainer"]["group"]["source"] != "run"
    assert (recipe / "report.html").is_file()
    empty = tmp_path / "fresh"
    (empty / "stages").mkdir(parents=True)
    (empty / "manifest.json").write_text("{}")
    with pytest.raises(RunDataError, match="recipe directory whose stages have not logged a step"):
        write_report([empty])
    assert embedded_data(write_report([make_run(tmp_path / "plain", steps=1, samples=1, groups=False)])
                         .read_text())["recipes"] == []
