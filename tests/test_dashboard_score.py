"""POST /api/score: the explainer's "score your own answer" with the run's own verifiers, and what the dashboard
refuses (rlvr/viz/dashboard.py module doc; rlvr/rewards/typed_answer.py)."""
from __future__ import annotations

import http.client
import json
from contextlib import contextmanager
from pathlib import Path

import pytest

from rlvr.rewards.rewarder import Rewarder
from rlvr.rewards.typed_answer import answer_scorer
from rlvr.viz.dashboard import MAX_ANSWER, MAX_BODY, DashboardServer
from rlvr.viz.page import payload
from rlvr.viz.rundata import load_run
from viz_helpers import make_run

PROMPT = "arith/train/3"  # viz_helpers.group_row(3, ...): "What is 6 * 7? (step 3)", reference 42


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    return make_run(tmp_path_factory.mktemp("score") / "run", steps=3, tokens=6)


@contextmanager
def served(run: Path, scorer, host: str = "127.0.0.1"):
    server = DashboardServer([run], host, 0, scorer)
    server.start_thread()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def post(server, body: bytes | str, headers: dict | None = None) -> tuple[int, dict]:
    host, port = server.server_address[:2]
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    raw = body.encode() if isinstance(body, str) else body
    sent = {"Content-Type": "application/json", "Content-Length": str(len(raw)), **(headers or {})}
    connection.request("POST", "/api/score", raw, sent)
    answer = connection.getresponse()
    status, text = answer.status, answer.read().decode()
    connection.close()
    return status, json.loads(text) if text else {}


def ask(prompt_id: str = PROMPT, completion: str = "6 * 7 = 42. Answer: 42") -> str:
    return json.dumps({"prompt_id": prompt_id, "completion": completion})


def test_an_answer_is_scored_by_the_runs_own_verifiers(run):
    scorer, why = answer_scorer(run)  # config.yaml of viz_helpers: the default task, the math verifier
    assert why is None
    with served(run, scorer) as server:
        status, right = post(server, ask())
        assert status == 200 and right["reward"] == 1.0 and right["verdicts"]["math"]["outcome"] == "correct"
        status, wrong = post(server, ask(completion="Answer: 41"))
        assert status == 200 and wrong["reward"] == 0.0 and wrong["verdicts"]["math"]["outcome"] == "wrong"
        # the reference is the page's (42), never one the request names
        status, sneaky = post(server, json.dumps({"prompt_id": PROMPT, "completion": "Answer: 41", "reference": "41"}))
        assert status == 200 and sneaky["reward"] == 0.0


def test_what_the_dashboard_refuses(run):
    calls = []
    scorer = lambda q, r, c: calls.append(c) or {"reward": 1.0, "verdicts": {}}  # noqa: E731
    with served(run, scorer) as server:
        assert post(server, ask())[0] == 200 and len(calls) == 1  # the premise: a good request is scored
        port = server.server_address[1]
        refused = [
            (post(server, ask(), {"Content-Type": "text/plain"}), 415),  # a cross-site form's type
            (post(server, ask(), {"Origin": "http://evil.example"}), 403),  # another site's page
            (post(server, ask(), {"Host": f"evil.example:{port}"}), 403),  # DNS rebinding
            (post(server, "x" * (MAX_BODY + 1)), 413),
            (post(server, "{not json"), 400),
            (post(server, json.dumps({"prompt_id": PROMPT})), 400),
            (post(server, json.dumps(["a"])), 400),
            (post(server, ask(completion="1" * (MAX_ANSWER + 1))), 413),
            (post(server, ask(prompt_id="arith/train/999")), 404),
        ]
        for (status, answer), expected in refused:
            assert status == expected and answer["error"], (status, answer)
        assert len(calls) == 1  # none of them reached the verifiers
        assert post(server, ask(completion="1" * MAX_ANSWER))[0] == 200 and len(calls) == 2  # the limit itself
        assert post(server, ask(), {"Origin": f"http://127.0.0.1:{port}"})[0] == 200  # the page itself


def test_no_scoring_beyond_loopback_and_the_page_says_why(run):
    with served(run, lambda q, r, c: {"reward": 1.0, "verdicts": {}}, host="0.0.0.0") as server:
        status, answer = post(server, ask())
        assert status == 403 and "beyond this machine" in answer["error"]
        _, data, _ = server.live.current()
        assert '"scoring":{"enabled":false' in data
    report = payload([load_run(run)], live=False)["explainer"]["scoring"]
    assert report == {"enabled": False, "why": "typing an answer needs the dashboard (`rlvr dashboard RUN_DIR`)"}


def test_answer_scorer_forces_the_sandbox_and_refuses_episode_tasks(run, tmp_path, monkeypatch):
    seen = []
    real = Rewarder.from_task.__func__
    monkeypatch.setattr(Rewarder, "from_task", classmethod(lambda cls, task: seen.append(task) or real(cls, task)))
    unsafe = tmp_path / "unsafe"
    unsafe.mkdir()
    (unsafe / "config.yaml").write_text("task:\n  code_unsandboxed: true\n")
    scorer, why = answer_scorer(unsafe)
    assert why is None and seen[0].code_unsandboxed is False
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "config.yaml").write_text("task:\n  name: calculator\n")
    scorer, why = answer_scorer(agent)
    assert scorer is None and "plays multi-turn episodes" in why
    scorer, why = answer_scorer(tmp_path)
    assert scorer is None and "no config.yaml" in why
    (tmp_path / "config.yaml").write_text("task:\n  name: no_such_task\n")
    scorer, why = answer_scorer(tmp_path)
    assert scorer is None and "could not be built" in why


def test_opening_a_run_runs_no_code_its_config_names(tmp_path, monkeypatch):
    run = tmp_path / "sent"
    run.mkdir()
    marker = tmp_path / "ran"
    (run / "evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n"
                                 "def f(prompts, completions, **kw):\n    return [1.0] * len(completions)\n")
    (run / "config.yaml").write_text("reward:\n  functions:\n    sent/evil.py:f: 1.0\n")
    monkeypatch.chdir(tmp_path)  # where the config's path to evil.py resolves
    scorer, why = answer_scorer(run)
    assert why is None
    answer = scorer("What is 6 * 7?", "42", "Answer: 42")
    assert not marker.exists()  # the function was never imported, not even to score
    assert answer["reward"] == 1.0 and list(answer["verdicts"]) == ["math"]
    assert "reward functions are not run here" in answer["note"]


def test_a_dashboard_started_before_the_config_scores_once_it_exists(tmp_path):
    run = tmp_path / "early"
    run.mkdir()  # claimed by `rlvr train`, models still loading: no config.yaml, no metrics.jsonl
    server = DashboardServer([run], "127.0.0.1", 0, scorer_factory=lambda: answer_scorer(run))
    server.start_thread()
    try:
        _, data, _ = server.live.current()
        assert '"scoring":{"enabled":false,"why":"' in data and "no config.yaml" in data
        assert post(server, ask())[0] == 403
        made = make_run(tmp_path / "made", steps=3, tokens=6)  # the run writes its config and first steps
        for name in ("config.yaml", "metrics.jsonl", "groups.jsonl"):
            (run / name).write_bytes((made / name).read_bytes())
        _, data, _ = server.live.current()
        assert '"scoring":{"enabled":true' in data
        status, answer = post(server, ask())
        assert status == 200 and answer["reward"] == 1.0
    finally:
        server.shutdown()
        server.server_close()


def test_odd_requests_get_an_answer_not_a_dropped_connection(run):
    with served(run, lambda q, r, c: {"reward": 1.0, "verdicts": {}}) as server:
        host, port = server.server_address[:2]
        for headers, body, expected in (
                ({"Content-Length": "\u00b2"}, b"{}", 413),  # a digit to str.isdigit, not to int()
                ({"Transfer-Encoding": "chunked"}, b"2\r\n{}\r\n0\r\n\r\n", 413),  # no Content-Length
                ({}, ("[" * 5000 + "]" * 5000).encode(), 400)):  # nested past Python's recursion limit
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            connection.putrequest("POST", "/api/score")
            sent = {"Content-Type": "application/json", "Content-Length": str(len(body)), **headers}
            if "Transfer-Encoding" in headers:
                del sent["Content-Length"]
            for key, value in sent.items():
                connection.putheader(key, value.encode("utf-8").decode("latin-1"))
            connection.endheaders(body)
            answer = connection.getresponse()
            assert answer.status == expected and json.loads(answer.read())["error"], headers
            connection.close()
        assert post(server, ask())[0] == 200  # and the dashboard still answers


def test_the_rlvr_dashboard_command_scores_typed_answers(run):
    """The command as a user starts it (port 0: any free one), answering a typed answer with the run's verifiers."""
    import subprocess
    import sys
    import time

    process = subprocess.Popen([sys.executable, "-m", "rlvr", "dashboard", str(run), "--port", "0"],
                               stdout=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()  # "rlvr dashboard: http://127.0.0.1:PORT/ (Ctrl-C stops it)"
        port = int(line.split("http://127.0.0.1:")[1].split("/")[0])
        deadline = time.monotonic() + 30
        while True:
            try:
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                connection.request("POST", "/api/score", ask().encode(), {"Content-Type": "application/json"})
                answer = connection.getresponse()
                break
            except ConnectionRefusedError:
                assert time.monotonic() < deadline, "the dashboard did not answer"
                time.sleep(0.2)
        assert answer.status == 200 and json.loads(answer.read())["verdicts"]["math"]["outcome"] == "correct"
        connection.close()
    finally:
        process.terminate()
        process.wait(timeout=30)
