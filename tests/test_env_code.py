"""The code environment: its problems and split, its prompt, its two sandbox tools, and attacks
through the tool path (the sandbox's own suite is tests/test_sandbox.py and tests/test_code_attacks.py; here we
only show that the tools reach the sandbox and report what it did)."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import socket
import time
from typing import get_args

import pytest

from rlvr.agents.protocol import ModelTurn, ToolCall
from rlvr.agents.scoring import EpisodeRewarder
from rlvr.agents.tool_calls import parse_turn
from rlvr.config.rules import TaskName
from rlvr.config.run import TaskConfig
from rlvr.config.sections import EpisodeConfig
from rlvr.tasks import build_task
from rlvr.tasks.base import MIN_HELD_OUT
from rlvr.tasks.envs import code as code_env
from rlvr.tasks.envs.code import EXAMPLE_CODE, START_AND_CLEANUP_S, STDOUT_CHARS, example_tool_text
from rlvr.tasks.envs.code_tasks import (
    EXAMPLE_CANONICAL,
    SECOND_EXAMPLE_CANONICAL,
    TEMPLATES,
    make_problem,
    second_example,
    splits,
)
from rlvr.tasks.envs.common import call_text
from rlvr.types import Outcome
from rlvr.verifiers.code import sandbox
from rlvr.verifiers.code.evaluate import MISSING, CallResult
from rlvr.verifiers.code.reference import parse_reference
from rlvr.verifiers.code.sandbox import Probe, SandboxConfig, SandboxResult
from rlvr.verifiers.code.verifier import MAX_CODE_BYTES, CodeVerifier

LIMIT_S = 1.0  # the episode's tool limit in these tests: the slow attacks cost about this each


def task(**overrides):
    return build_task(TaskConfig(name="code_agent", **overrides))


def episode(prompt=None, **task_overrides):
    t = task(**task_overrides)
    env = t.environment(EpisodeConfig(tool_time_limit_s=LIMIT_S))
    return env, env.start(prompt or t.eval_prompts(1)[0])


def call(env, ep, name: str, code: str):
    return ep.respond(parse_turn(0, call_text(name, {"code": code}), env.tools))


def body(observation) -> str:
    return observation.text.removeprefix("<tool_response>\n").removesuffix("\n</tool_response>")


# ---------------------------------------------------------------- problems, split, prompt (no sandbox)
def test_problems_split_by_hash_without_the_example():
    train, held = splits()
    names = [p.canonical for p in train + held]
    assert len(names) == len(set(names)) >= 250
    assert len(held) == max(MIN_HELD_OUT, len(names) // 5) and len(train) > 250
    assert EXAMPLE_CANONICAL not in names and SECOND_EXAMPLE_CANONICAL not in names  # the examples are in no split
    assert second_example().canonical == SECOND_EXAMPLE_CANONICAL
    rank = [hashlib.sha256(p.canonical.encode()).hexdigest() for p in held + train]
    assert rank[:len(held)] == sorted(rank[:len(held)]) and max(rank[:len(held)]) < min(rank[len(held):])
    t = task()
    assert [p.id for p in t.eval_prompts(3)] == [f"code_agent/eval/{p.canonical}" for p in held[:3]]
    stream = t.train_prompts(seed=1)
    assert [next(stream).id for _ in range(5)] == [p.id for p, _ in zip(task().train_prompts(seed=1), range(5))]


def test_tests_are_right_and_hidden_ones_stay_apart():
    add5 = make_problem(TEMPLATES[0], 5)  # x + 5 on the inputs 1, 10 | 0, 7, 25, 100
    assert add5.visible == ("assert f(1) == 6", "assert f(10) == 15")
    assert add5.hidden == ("assert f(0) == 5", "assert f(7) == 12", "assert f(25) == 30", "assert f(100) == 105")
    divisible = make_problem(next(t for t in TEMPLATES if t.key == "divisible"), 4)  # inputs 5, 4 | 8, 0, 3, 13
    assert divisible.visible == ("assert f(5) == False", "assert f(4) == True")
    for problem in splits()[0] + splits()[1]:
        assert not set(problem.visible) & set(problem.hidden), problem.canonical
        tests = parse_reference(problem.reference())  # the code verifier's form; every assert judged in the parent
        assert tests.entry == "f" and [a.source for a in tests.asserts] == list(problem.hidden)


def test_the_problem_set_by_hand():
    """The problems are the templates times their constants: 14 templates over k = 2..49 (48 each) = 672, "count"
    over k = 0..11 = 12, three string templates over k = 1..12 = 36; 720 less the example "add 3" = 719. A fifth is
    143 < MIN_HELD_OUT = 200, so 200 are held out and 519 train (rlvr.tasks.base.split_by_hash's rule)."""
    train, held = splits()
    assert (len(train), len(held)) == (519, 200)
    by_key = {t.key: t for t in TEMPLATES}
    # "sum 5": sum(xs) + 5 on [1, 2, 3] -> 11, [] -> 5 | [5] -> 10, [10, 0, 7] -> 22, [5, 6, 2] -> 18, [4]*4 -> 21
    total = make_problem(by_key["sum"], 5)
    assert total.visible == ("assert f([1, 2, 3]) == 11", "assert f([]) == 5")
    assert total.hidden == ("assert f([5]) == 10", "assert f([10, 0, 7]) == 22", "assert f([5, 6, 2]) == 18",
                            "assert f([4, 4, 4, 4]) == 21")
    # "divisible 4" on k + 1, k | 2k, 0, k - 1, 3k + 1 = 5, 4 | 8, 0, 3, 13: both answers among the hidden ones too
    divisible = make_problem(by_key["divisible"], 4)
    assert divisible.hidden == ("assert f(8) == True", "assert f(0) == True", "assert f(3) == False",
                                "assert f(13) == False")
    # "repeat 3" on the strings: '' * 3 = '', 'x' * 3 = 'xxx'
    repeat = make_problem(by_key["repeat"], 3)
    assert repeat.visible == ("assert f('ab') == 'ababab'", "assert f('hello') == 'hellohellohello'")
    assert repeat.hidden[:2] == ("assert f('') == ''", "assert f('x') == 'xxx'")
    assert {p.canonical.split()[1] for p in train + held if p.template == "repeat"} == {str(k) for k in range(1, 13)}
    assert {p.canonical.split()[1] for p in train + held if p.template == "count"} == {str(k) for k in range(12)}


# What each question asks for, written from its words ("x minus {k}", "how many items ... are greater than {k}"),
# apart from the templates' own reference functions that computed the expected values.
ASKED = {
    "add": lambda x, k: x + k, "sub": lambda x, k: x - k, "mul": lambda x, k: x * k,
    "mod": lambda x, k: x % k, "div": lambda x, k: x // k, "square": lambda x, k: x * x + k,
    "max": lambda x, k: x if x > k else k, "min": lambda x, k: x if x < k else k, "dist": lambda x, k: abs(x - k),
    "divisible": lambda x, k: x % k == 0, "greater": lambda x, k: x > k, "sum": lambda xs, k: sum(xs) + k,
    "count": lambda xs, k: len([x for x in xs if x > k]), "scale": lambda xs, k: [k * x for x in xs],
    "shift": lambda xs, k: [k + x for x in xs], "repeat": lambda s, k: "".join([s] * k),
    "prefix": lambda s, k: s[:k], "bang": lambda s, k: s + "".join(["!"] * k),
}


def test_every_test_agrees_with_its_question():
    """A model that does what the question says passes every visible and hidden test of every problem: the tests
    come from the templates' reference functions, and a slip there (x + k for "x minus k") would train and score
    against the wrong function. The asserts are ours (literals), run here with the question's f."""
    assert set(ASKED) == {t.key for t in TEMPLATES}
    checked = 0
    for template in TEMPLATES:
        for k in template.constants:
            problem = make_problem(template, k)
            assert problem.question.endswith(template.text.format(k=k) + ".")
            for test in problem.visible + problem.hidden:
                exec(test, {"f": lambda value, k=k, key=template.key: ASKED[key](value, k)})  # noqa: S102
                checked += 1
    assert checked == 720 * 6  # 720 problems (with the example's "add 3"), 2 visible + 4 hidden tests each


def test_the_shared_problems_and_templates_cannot_be_changed():
    """TEMPLATES is a module constant and splits() a cache: every task of the process holds the same objects, so
    they are frozen; an assignment that would change another task's problems raises."""
    problem = make_problem(TEMPLATES[0], 7)
    assert problem in task().train + task().held_out  # equal to the cached split's "add 7"
    with pytest.raises(dataclasses.FrozenInstanceError):
        problem.hidden = ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        TEMPLATES[0].key = "sub"


def test_registered_with_the_code_verifier_and_a_tested_state():
    assert "code_agent" in get_args(TaskName)
    t = task()
    assert t.answer_verifiers == {"code": 1.0}
    env = t.environment(EpisodeConfig())
    assert [tool.name for tool in env.tools] == ["run_python", "run_tests"]
    # the state (was the answer tested?) is a weighted component: tests/test_env_code_tested.py
    assert env.scores_state is True and "environment" in EpisodeRewarder(None, env, 1.0).components
    fresh = env.start(t.eval_prompts(1)[0]).final_state()
    assert json.loads(fresh) == {"tests_passed": [], "answer": None}


def test_program_limit_is_the_tighter_of_task_and_episode():
    env = task(code_time_limit_s=5.0).environment(EpisodeConfig(tool_time_limit_s=1.5))
    assert env.sandbox.time_limit_s == 1.5
    env = task(code_time_limit_s=0.5, code_memory_mb=128).environment(EpisodeConfig(tool_time_limit_s=2.0))
    assert env.sandbox.time_limit_s == 0.5 and env.sandbox.memory_mb == 128
    assert env.thread_limit_s == 0.5 + START_AND_CLEANUP_S  # the sandbox's kill comes before the thread's


def test_without_a_sandbox_the_tools_say_so(monkeypatch):
    monkeypatch.setattr(sandbox, "_probe", Probe(False, "bwrap missing (simulated)"))
    env, ep = episode()
    for name in ("run_python", "run_tests"):
        observation = call(env, ep, name, "print(1)")
        assert (observation.valid_calls, observation.invalid_calls, observation.done) == (0, 1, False)
        assert body(observation).startswith("error: ") and "no code sandbox" in observation.text
        assert "simulated" in observation.text


class FailedSession:
    """What code/session.Session reports when bwrap cannot start (its _failed): the asserts' calls get no result."""

    problem = "sandbox failed (exit 1, signal None): bwrap: setting up uid map: Permission denied"

    def __init__(self, code, entry, config):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def call(self, request):
        return CallResult(False, MISSING)


def test_a_sandbox_that_fails_to_start_is_an_invalid_call(monkeypatch):
    from rlvr.verifiers.code import verifier

    broken = SandboxResult(1, None, False, False, b"", b"bwrap: setting up uid map: Permission denied", b"",
                           frozenset(), 0.01, True)
    monkeypatch.setattr(sandbox, "_probe", Probe(True, "works (simulated)"))
    monkeypatch.setattr(sandbox, "run_sandboxed", lambda *args, **kwargs: broken)
    monkeypatch.setattr(verifier, "Session", FailedSession)  # run_tests: one live session
    env, ep = episode()
    for name in ("run_python", "run_tests"):
        observation = call(env, ep, name, "def f(x): return x")
        assert (observation.valid_calls, observation.invalid_calls) == (0, 1)
        assert "sandbox failed" in observation.text and "uid map" in observation.text


def test_bad_calls_are_counted_never_raised():
    env, ep = episode()
    for code in ("", "  \n", "x" * (MAX_CODE_BYTES + 1)):  # the last is past parse_turn's JSON limit: built here
        observation = ep.respond(ModelTurn(0, "", (ToolCall("run_python", {"code": code}),), ()))
        assert observation.invalid_calls == 1 and body(observation).startswith("error: ValueError")
    turn = parse_turn(0, '<tool_call>{"name": "run_python", "arguments": {"code": 3}}</tool_call>', env.tools)
    assert ep.respond(turn).invalid_calls == 1  # schema: code must be a string
    # the answer, refused until run_tests has run (tests/test_env_code_tested.py)
    assert ep.respond(parse_turn(1, "```python\ndef f(x): return x\n```", env.tools)).text == code_env.TESTS_FIRST


def result(stdout: bytes = b"", stderr: bytes = b"", exit_code: int = 0, started: bool = True) -> SandboxResult:
    return SandboxResult(exit_code, None, False, started, stdout, stderr, b"", frozenset(), 0.01, True)


def test_output_is_shown_whole_up_to_300_characters_then_cut():
    """format_run shows the first 300 characters of stdout and the last 300 of stderr (a traceback's end names
    the error), and marks a cut with "...": exactly 300 is whole, 301 is cut."""
    out, err = "".join(chr(97 + i % 26) for i in range(301)), "".join(chr(65 + i % 26) for i in range(301))
    whole = code_env.format_run(result(out[:300].encode(), err[:300].encode()), 1.0)
    assert whole == f"exit code 0\nstdout:\n{out[:300]}\nstderr:\n{err[:300]}"
    cut = code_env.format_run(result(out.encode(), err.encode(), exit_code=1), 1.0)
    assert cut == f"exit code 1\nstdout:\n{out[:300]}...\nstderr:\n...{err[1:]}"  # stderr's last 300: from [1]


def test_code_up_to_the_verifiers_limit_is_run():
    """_source refuses code the verifier would not run (MAX_CODE_BYTES); code of exactly that size runs."""
    fits = "#" * MAX_CODE_BYTES
    assert code_env._source(fits) == fits
    with pytest.raises(ValueError, match=f"code longer than {MAX_CODE_BYTES} bytes"):
        code_env._source(fits + "#")


def test_a_call_with_unknown_arguments_is_refused():
    """The tools' schema is strict (additionalProperties false): an argument beside `code` makes the call invalid,
    and the tool does not run."""
    env, ep = episode()
    for name in ("run_python", "run_tests"):
        payload = {"name": name, "arguments": {"code": "print(1)", "timeout": 100}}
        turn = parse_turn(0, f"<tool_call>{json.dumps(payload)}</tool_call>", env.tools)
        assert not turn.calls and "invalid arguments" in turn.errors[0]
        observation = ep.respond(turn)
        assert (observation.valid_calls, observation.invalid_calls) == (0, 1)


def test_a_problem_without_visible_tests_says_so(monkeypatch):
    """A prompt whose row has no visible tests (an edited record; the built-in problems all have two) gets a
    plain answer from run_tests, not an empty test report."""
    monkeypatch.setattr(sandbox, "_probe", Probe(True, "works (simulated)"))
    env, _ = episode()
    prompt = task().eval_prompts(1)[0]
    ep = env.start(type(prompt)(prompt.id, prompt.messages, prompt.reference, {**prompt.columns, "visible_tests": []}))
    observation = call(env, ep, "run_tests", "def f(x): return x")
    assert body(observation) == "this problem has no visible tests" and observation.valid_calls == 1


def test_a_sandbox_failure_is_reported_by_the_end_of_its_message(monkeypatch):
    """bwrap's complaint can be long and not UTF-8: the error quotes its last 200 characters (bad bytes replaced)
    and the call is invalid, never a crash of the tool."""
    complaint = b"\xff\xfe bwrap: " + b"".join(bytes([97 + i % 26]) for i in range(400)) + b" uid map denied"
    monkeypatch.setattr(sandbox, "_probe", Probe(True, "works (simulated)"))
    monkeypatch.setattr(sandbox, "run_sandboxed", lambda *args, **kwargs: result(stderr=complaint, started=False))
    env, ep = episode()
    observation = call(env, ep, "run_python", "print(1)")
    tail = complaint.decode(errors="replace").strip()[-200:]
    assert body(observation) == f"error: SandboxUnavailable: the sandbox failed: {tail}"
    assert (observation.valid_calls, observation.invalid_calls) == (0, 1)


def test_code_unsandboxed_reaches_the_tools(monkeypatch):
    """task.code_unsandboxed=true is the explicit opt-out: without a sandbox the tools then run the code instead
    of refusing (the refusal is test_without_a_sandbox_the_tools_say_so)."""
    monkeypatch.setattr(sandbox, "_probe", Probe(False, "bwrap missing (simulated)"))
    ran = []
    monkeypatch.setattr(sandbox, "run_sandboxed", lambda code, stdin, config: ran.append(config) or result(b"1\n"))
    env, ep = episode(code_unsandboxed=True)
    observation = call(env, ep, "run_python", "print(1)")
    assert body(observation) == "exit code 0\nstdout:\n1\n" and ran[0].allow_unsandboxed


def test_the_tool_thread_outwaits_the_sandboxs_kill_but_not_a_hung_sandbox(monkeypatch):
    """The tool thread's limit is the program's limit plus START_AND_CLEANUP_S = 1.5 s (bwrap's start, the kill's
    0.5 s drain grace, slack), so a run that the sandbox ends 1 s after the program's limit still answers with the
    sandbox's own report; a sandbox hung past that is cut by the thread. Program limit 0.01 s: thread limit 1.51 s."""
    monkeypatch.setattr(sandbox, "_probe", Probe(True, "works (simulated)"))
    delays = iter([1.0, 2.0])

    def slow(code, stdin, config):
        time.sleep(next(delays))
        return SandboxResult(None, 9, True, True, b"", b"", b"", frozenset(), 1.0, True)

    monkeypatch.setattr(sandbox, "run_sandboxed", slow)
    env, ep = episode(code_time_limit_s=0.01)
    assert env.thread_limit_s == pytest.approx(1.51)
    assert body(call(env, ep, "run_python", "while True: pass")) == "timed out after 0.01 s (killed)"
    hung = call(env, ep, "run_python", "while True: pass")
    assert body(hung) == "error: the tool ran past its time limit of 1.51 s" and hung.invalid_calls == 1


# ---------------------------------------------------------------- through the sandbox
@pytest.mark.sandbox
def test_run_python_reports_status_output_and_the_traceback_end():
    env, ep = episode()
    assert body(call(env, ep, "run_python", "print(6 * 7)")) == "exit code 0\nstdout:\n42\n"
    failed = body(call(env, ep, "run_python", "import sys\nprint('hi')\nsys.stderr.write('x' * 900)\n1 / 0"))
    assert failed.startswith("exit code 1\nstdout:\nhi\n") and failed.endswith("ZeroDivisionError: division by zero")
    assert len(failed) < 700  # stderr cut to its end
    long = body(call(env, ep, "run_python", "print(''.join(str(i % 10) for i in range(5000)))"))
    assert long == "exit code 0\nstdout:\n" + ("0123456789" * 30)[:STDOUT_CHARS] + "..."


@pytest.mark.sandbox
def test_run_tests_runs_visible_tests_and_the_verifier_decides_on_hidden_ones():
    t = task()
    shot = next(p for p in t.eval_prompts(len(splits()[1])) if p.columns["template"] == "add")
    env, ep = episode(shot)
    right = "def f(x):\n    return x + " + shot.id.split()[-1]
    passed = "2/2 visible tests passed\n" + "\n".join(f"PASS {test}" for test in shot.columns["visible_tests"])
    assert body(call(env, ep, "run_tests", right)) == passed
    assert body(call(env, ep, "run_tests", f"```python\n{right}\n```")) == passed  # a fenced block is read
    tools = code_env.CodeTools(list(code_env.example().visible), env.sandbox)
    assert tools.run_tests(EXAMPLE_CODE) == example_tool_text()  # the examples show what the tool really says
    second = code_env.CodeTools(list(second_example().visible), env.sandbox)
    assert second.run_tests(code_env.SECOND_FIRST_TRY) == code_env.SECOND_TOOL_TEXT
    assert second.run_tests(code_env.SECOND_CODE).startswith("2/2 visible tests passed")
    cheat = "def f(x):\n    return {%s}[x]" % ", ".join(  # hard-codes the visible answers only
        f"{t.split('(')[1].split(')')[0]}: {t.split('== ')[1]}" for t in shot.columns["visible_tests"])
    cheated = body(call(env, ep, "run_tests", cheat))
    assert cheated.startswith("2/2 visible tests passed")
    assert not any(hidden in cheated for hidden in json.loads(shot.reference)["asserts"])
    verifier = CodeVerifier(sandbox=SandboxConfig(time_limit_s=5.0))
    assert verifier.verify(f"```python\n{cheat}\n```", shot.reference).outcome is not Outcome.CORRECT
    assert verifier.verify(f"```python\n{right}\n```", shot.reference).outcome is Outcome.CORRECT
    wrong = body(call(env, ep, "run_tests", "def f(x): return x"))
    assert wrong.startswith("0/2 visible tests passed\nFAIL ") and ": got " in wrong


def _descendants() -> set[int]:
    """Processes below this one (bwrap and whatever the sandbox left would be here)."""
    parents = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                parents[int(pid)] = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    found, frontier = set(), {os.getpid()}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


@pytest.mark.sandbox
def test_attack_files_secrets_and_network_through_the_tool(monkeypatch, tmp_path):
    monkeypatch.setenv("RLVR_CODE_ENV_SECRET", "4242")
    canaries = [f"/tmp/rlvr-code-env-canary-{os.getpid()}", str(tmp_path / "canary"), os.path.abspath("canary")]
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.2)
    snippet = f"""
import os, socket
def attempt(what, fn):
    try:
        print(what, 'OK', repr(fn())[:40])
    except Exception as err:
        print(what, 'DENIED', type(err).__name__)
attempt('shadow', lambda: open('/etc/shadow').read())
attempt('root', lambda: os.listdir('/root'))
for path in {canaries!r}:
    attempt('write', lambda: open(path, 'w').write('x'))
attempt('secret', lambda: os.environ['RLVR_CODE_ENV_SECRET'])
attempt('connect', lambda: socket.create_connection(('127.0.0.1', {listener.getsockname()[1]}), timeout=0.5))
"""
    env, ep = episode()
    observation = call(env, ep, "run_python", snippet)
    out = body(observation)
    assert observation.valid_calls == 1 and out.startswith("exit code 0")
    lines = out.split("stdout:\n", 1)[1].splitlines()
    assert len(lines) == 7 and all(" DENIED " in line for line in lines if not line.startswith("write")), out
    assert lines[2] == "write OK 1"  # /tmp inside is the sandbox's own tmpfs: written there, gone with it
    assert not any(os.path.exists(path) for path in canaries)
    with pytest.raises(socket.timeout):
        listener.accept()
    listener.close()


@pytest.mark.sandbox
def test_attack_loop_and_forks_are_killed_and_leave_nothing():
    before = _descendants()
    env, ep = episode()
    start = time.monotonic()
    looped = call(env, ep, "run_tests", "def f(x):\n    while True:\n        pass")
    assert body(looped) == "0/2 visible tests passed\ntimeout" and looped.valid_calls == 1
    assert time.monotonic() - start < LIMIT_S + START_AND_CLEANUP_S
    slept = body(call(env, ep, "run_python", "import time\ntime.sleep(100)"))
    assert slept == f"timed out after {LIMIT_S:g} s (killed)"
    forks = """
import os, time
made = 0
for _ in range(50):
    try:
        if os.fork() == 0:
            time.sleep(100)
            os._exit(0)
        made += 1
    except OSError as err:
        print('refused', type(err).__name__)
        break
print('forked', made)
"""
    forked = body(call(env, ep, "run_python", forks))
    assert forked.startswith("exit code 0\nstdout:\n") and "forked" in forked
    if sandbox.probe().cgroups:  # root: the pids cgroup caps the program's processes
        assert "refused BlockingIOError" in forked
        assert int(forked.rsplit("forked ", 1)[1]) <= SandboxConfig().max_processes  # not 50
    time.sleep(0.2)
    assert _descendants() <= before  # the sleepers died with the sandbox's pid namespace
    cgroups = [os.path.join(base, name) for base in sandbox._host.cgroup_bases.values() for name in os.listdir(base)
               if name.startswith(f"rlvr-sbx-{os.getpid()}-")]
    assert cgroups == []


@pytest.mark.sandbox
def test_each_stream_keeps_64_kib_of_output():
    """A tool call's program output is kept up to OUTPUT_CAP = 64 KiB per stream (the sandbox's default is 1 MiB;
    a tool call's result is read in the trainer's process, for every turn of every episode), far more than the
    300 characters shown: of 100 KB written to stderr the kept part ends at byte 65,536, and its last 300
    characters are what the model reads."""
    env, ep = episode()
    written = "0123456789" * 10_000
    shown = body(call(env, ep, "run_python", f"import sys\nsys.stderr.write({written[:10]!r} * 10_000)"))
    assert shown == "exit code 0\nstderr:\n..." + written[65_536 - 300:65_536]  # ends ...012345, not ...789
