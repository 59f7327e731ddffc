"""The code agent's state: an episode is graded on whether its answer is code that run_tests
passed in it, as the task asks ("check your code with run_tests, then answer"), and a tested right answer is paid
more than an untested one, hard-coded visible answers less than either."""
from __future__ import annotations

import json
import time
from dataclasses import replace

import pytest

from rlvr.agents.protocol import Deadline, ModelTurn
from rlvr.agents.scoring import EpisodeRewarder, state_verdict
from rlvr.agents.tool_calls import parse_turn
from rlvr.config.run import TaskConfig
from rlvr.config.sections import EpisodeConfig
from rlvr.evaluation.evaluate import gated_names
from rlvr.tasks import build_task
from rlvr.tasks.envs.code import TESTS_FIRST, code_digest
from rlvr.tasks.envs.common import call_text
from rlvr.types import Outcome
from rlvr.verifiers.code.sandbox import SandboxConfig
from rlvr.verifiers.code.verifier import CodeVerifier

RIGHT = "def f(x):\n    return x + {n}"


@pytest.fixture(scope="module")
def setup():
    task = build_task(TaskConfig(name="code_agent"))
    env = task.environment(EpisodeConfig(tool_time_limit_s=10.0))
    prompt = next(p for p in task.eval_prompts(200) if p.columns["template"] == "add")
    return task, env, prompt, RIGHT.format(n=prompt.id.split()[-1])


def play(env, prompt, *turns: str):
    """An episode of these model turns (a call turn, then an answer turn), as the driver plays it."""
    episode = env.start(prompt)
    for index, text in enumerate(turns):
        episode.respond(parse_turn(index, text, env.tools))
    return episode


def called(name: str, code: str) -> str:
    return call_text(name, {"code": code})


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


def verdict(env, prompt, *turns: str):
    return env.score_state(play(env, prompt, *turns).final_state(), prompt)


def test_the_digest_is_the_codes_syntax_not_its_layout():
    code = "def f(x):\n    return x + 1"
    # one line or two, other indentation, spaces, a comment, blank lines: the same program
    for layout in ("def f(x): return x+1", "def f(x):\n  return (x + 1)  # add one\n\n", "\n" + code + "  \n"):
        assert code_digest(layout) == code_digest(code), layout
    assert code_digest(code) != code_digest(code.replace("+ 1", "+ 2"))
    assert code_digest(code) != code_digest(code.replace("x + 1", "1 + x"))  # another tree, though equal in value
    # code that does not parse is compared as text, blind to line-end spaces only
    broken = "def f(x) return x + 1"
    assert code_digest(broken) == code_digest(broken + "   ") != code_digest(broken.replace("1", "2"))
    assert code_digest("(" * 300 + ")" * 300) != code_digest("(" * 299 + ")" * 299)  # past the parser's nesting


def test_an_answer_is_tested_only_when_run_tests_passed_that_same_code(setup):
    _, env, prompt, right = setup
    assert verdict(env, prompt, called("run_tests", right), fenced(right + "  ")).outcome is Outcome.CORRECT
    # tested one program, answered another
    other = right.replace("x +", "1 + x +") + " - 1"
    different = verdict(env, prompt, called("run_tests", right), fenced(other))
    assert different.outcome is Outcome.WRONG and different.score == 0.0 and "did not pass" in different.detail
    # a program that failed a visible test was not passed by run_tests, though it ran them
    wrong = "def f(x):\n    return x"
    assert verdict(env, prompt, called("run_tests", wrong), fenced(wrong)).outcome is Outcome.WRONG
    # tested, then no answer: the last turn was a call (max_turns ended it) or was cut
    no_answer = verdict(env, prompt, called("run_tests", right))
    assert no_answer.outcome is Outcome.WRONG and no_answer.detail == "no answer with code"


def test_an_answer_before_any_run_tests_is_not_taken_and_the_episode_goes_on(setup):
    task, env, prompt, right = setup
    episode = env.start(prompt)
    refused = episode.respond(parse_turn(0, fenced(right), env.tools))
    assert refused.text == TESTS_FIRST and not refused.done and refused.valid_calls == refused.invalid_calls == 0
    assert json.loads(episode.final_state())["answer"] is None
    # run_python is no test: still refused
    episode.respond(parse_turn(1, called("run_python", right), env.tools))
    assert episode.respond(parse_turn(2, fenced(right), env.tools)).text == TESTS_FIRST
    # once run_tests has run (here on failing code), an answer is taken: done, nothing to show
    episode.respond(parse_turn(3, called("run_tests", "def f(x):\n    return x"), env.tools))
    taken = episode.respond(parse_turn(4, fenced(right), env.tools))
    assert taken.done and taken.text is None
    assert json.loads(episode.final_state())["answer"] == code_digest(right)
    assert env.score_state(episode.final_state(), prompt).outcome is Outcome.WRONG  # right, but never passed
    # with the check logged only (state_weight 0), or without visible tests, an answer is taken at once
    logged = task.environment(EpisodeConfig(tool_time_limit_s=10.0, state_weight=0.0))
    assert logged.start(prompt).respond(parse_turn(0, fenced(right), env.tools)).done
    bare = prompt.__class__(**{**prompt.__dict__, "columns": {**prompt.columns, "visible_tests": []}})
    assert env.start(bare).respond(parse_turn(0, fenced(right), env.tools)).done


def test_half_passed_is_not_passed(setup):
    _, env, prompt, right = setup
    first, second = prompt.columns["visible_tests"]  # 'assert f(1) == N + 1', 'assert f(10) == N + 10'
    one = "def f(x):\n    return %s" % first.split("== ")[1]  # a constant: passes the first test only
    episode = play(env, prompt, called("run_tests", one))
    assert json.loads(episode.final_state())["tests_passed"] == []
    assert verdict(env, prompt, called("run_tests", one), fenced(one)).outcome is Outcome.WRONG


def test_a_problem_without_visible_tests_needs_no_test(setup):
    _, env, prompt, right = setup
    bare = prompt.__class__(**{**prompt.__dict__, "columns": {**prompt.columns, "visible_tests": []}})
    got = verdict(env, bare, fenced(right))
    assert got.outcome is Outcome.CORRECT and got.score == 1.0


def test_a_state_it_did_not_write_is_an_error_not_a_pass(setup):
    _, env, prompt, _ = setup
    forged = ('{"tests_passed": [0], "answer": false}', '{"tests_passed": [["x"]], "answer": ["x"]}',
              '{"tests_passed": [1], "answer": null}', '{"tests_passed": ["x"], "answer": 5}')
    for state in ("", "[]", '{"answer": "x"}', "not json", *forged):  # False in [0] would be True
        got = state_verdict(env, state, prompt)
        assert got.outcome is Outcome.ERROR and got.score == 0.0, state
    long = '{"tests_passed": [2], "answer": null, "pad": "' + "y" * 100 + '"}'  # quoted to its first 80 characters
    assert repr(long[:80]) in state_verdict(env, long, prompt).detail
    assert repr(long[:81]) not in state_verdict(env, long, prompt).detail
    # a re-scored row that lost its visible tests is not "a problem without visible tests"
    lost = prompt.__class__(**{**prompt.__dict__, "columns": {"template": "add"}})
    got = state_verdict(env, '{"tests_passed": [], "answer": null}', lost)
    assert got.outcome is Outcome.ERROR and "the row has no visible_tests column" in got.detail


@pytest.mark.sandbox
def test_a_run_reported_as_stopped_is_not_recorded_when_it_ends_later(setup):
    # the turn's deadline (0.5 s) stops the call while the program sleeps 1.5 s (the sandbox's own limit is 10 s):
    # the model is told it stopped, so the run neither opens the gate nor counts as passed when its thread ends
    _, env, prompt, right = setup
    slow = "import time\n" + right.replace("    return", "    time.sleep(1.5)\n    return")
    episode = env.start(prompt)
    call = parse_turn(0, called("run_tests", slow), env.tools)
    stopped = episode.respond(replace(call, deadline=Deadline(time.monotonic() + 0.5, "turn time used up")))
    assert stopped.invalid_calls == 1 and "turn time used up" in stopped.text
    time.sleep(4.0)  # the abandoned thread's run ends (sandbox start, 1.5 s of sleep, the asserts)
    assert json.loads(episode.final_state())["tests_passed"] == []
    assert episode.respond(parse_turn(1, fenced(slow), env.tools)).text == TESTS_FIRST


def test_the_state_gates_success_and_orders_the_rewards(setup):
    # reward = code score on the hidden tests + 0.5 x tested (the preset's state_weight):
    #   tested right 1 + 0.5 = 1.5 > untested right 1 + 0 = 1.0 > hard-coded visible answers, tested: 0 + 0.5
    #   (the hidden tests hit inputs the dict has not: KeyError on each) > nothing tested, nothing right 0
    task, env, prompt, right = setup
    rewarder = EpisodeRewarder(None, env, 0.5)
    assert gated_names(rewarder) == ["environment"]  # weight > 0: success needs the tested state
    cases = {}
    visible = prompt.columns["visible_tests"]
    cheat = "def f(x):\n    return {%s}[x]" % ", ".join(
        f"{t.split('(')[1].split(')')[0]}: {t.split('== ')[1]}" for t in visible)
    turns = {"tested right": (called("run_tests", right), fenced(right)), "untested right": (fenced(right),),
             "tested cheat": (called("run_tests", cheat), fenced(cheat)), "nothing": (fenced("def f(x): pass"),)}
    verifier = CodeVerifier(sandbox=SandboxConfig(time_limit_s=5.0))
    for name, texts in turns.items():
        state = env.score_state(play(env, prompt, *texts).final_state(), prompt)
        code = verifier.verify(texts[-1], prompt.reference)
        cases[name] = code.score + 0.5 * state.score
    assert cases == {"tested right": 1.5, "untested right": 1.0, "tested cheat": 0.5, "nothing": 0.0}


def test_only_the_answer_turn_is_recorded_as_the_answer(setup):
    _, env, prompt, right = setup
    episode = env.start(prompt)
    call_turn = parse_turn(0, called("run_tests", right), env.tools)
    assert call_turn.calls
    episode.respond(call_turn)
    assert json.loads(episode.final_state())["answer"] is None  # a call turn is no answer
    episode.respond(ModelTurn(1, fenced(right), (), ()))
    assert json.loads(episode.final_state())["answer"] == code_digest(right)


@pytest.mark.sandbox
def test_a_run_past_its_own_limit_is_not_recorded_while_a_later_call_of_the_turn_runs(setup):
    # A call's own limit (here 1 s, standing in for a loaded machine's slow sandbox start) ends the wait: the model
    # is told it ran past it. Its thread (two asserts of 0.8 s each) ends while the turn's next call still runs
    # (2.5 s): the turn is still open, yet the run is not recorded, since it took longer than its own limit
    task, _, prompt, right = setup
    env = task.environment(EpisodeConfig(tool_time_limit_s=10.0))
    env.thread_limit_s = 1.0
    slow = "import time\n" + right.replace("    return", "    time.sleep(0.8)\n    return")
    episode = env.start(prompt)
    turn = called("run_tests", slow) + called("run_python", "import time; time.sleep(2.5)")
    observation = episode.respond(parse_turn(0, turn, env.tools))
    assert observation.text.startswith("error: the tool ran past its time limit of 1 s")
    assert json.loads(episode.final_state())["tests_passed"] == []
    assert episode.respond(parse_turn(1, fenced(slow), env.tools)).text == TESTS_FIRST


def test_a_state_without_its_answer_or_with_null_visible_tests_is_an_error(setup):
    _, env, prompt, _ = setup
    assert state_verdict(env, '{"tests_passed": ["a"]}', prompt).outcome is Outcome.ERROR  # no "answer" key
    for visible in (None, "", 0, {}):  # a column written as something other than a list of tests
        odd = prompt.__class__(**{**prompt.__dict__, "columns": {**prompt.columns, "visible_tests": visible}})
        assert state_verdict(env, '{"tests_passed": [], "answer": null}', odd).outcome is Outcome.ERROR, visible
