"""The code environment and its task: write a small Python function, try it in the bubblewrap
sandbox through two tools, then answer with the code.

Tools:
  * run_python(code): runs a snippet in the sandbox (rlvr/verifiers/code/sandbox.py) and returns its exit status
    and the start of its stdout / the end of its stderr (a traceback's last line is what helps).
  * run_tests(code): runs the row's VISIBLE tests against the code, through the code verifier's own assert
    rounds (judged in this process, the candidate's calls in the sandbox), and says which passed. The hidden
    tests are only in Prompt.reference: the "code" verifier scores the final answer (the last model turn's
    ```python block) against them, so passing the visible tests by hard-coding them earns nothing.

The sandbox is the only place model code runs (the security claim of multi-turn episodes): both tools go through
`run_sandboxed`. A program's wall-clock limit is the tighter of task.code_time_limit_s and
episode.tool_time_limit_s; the tool thread's own limit (rlvr/agents/tool_calls.py) is that plus the sandbox's
start and clean-up, so the sandbox's kill, not the thread's, ends a looping program and its tree. Without a
sandbox (and without task.code_unsandboxed) a call answers "error: ... sandbox ..." and is counted invalid: the
handler raises, run_calls turns that into the error observation, and nothing reaches the driver.

The state: the task says "check your code with run_tests, then answer", and the episode is graded on
that too. The episode records digests of the sources run_tests passed whole and of the answer's source; the
state verdict is CORRECT when the answer is code the episode tested and passed (whitespace at line ends and around
the block aside), WRONG otherwise. With episode.state_weight > 0 it is a gated component (as a format check is:
a correct episode passes the hidden tests AND shipped tested code), and it pays state_weight in the reward, so a
tested right answer earns more than an untested one. Without that term GRPO taught SmolLM2-135M to skip the tools
in one update (calls per episode 0.44 -> 0; the hidden tests alone cannot tell testing from luck). Passing the
visible tests with hard-coded answers still fails the hidden ones, so it earns the state weight alone, less than
an honest answer. episode.state_weight=0 makes the check logged only: success is then the hidden tests alone.
With the check weighted, an answer before the episode's first run_tests call is not taken: the model is told to
run the tests first and the episode goes on (the answer turn still counts against max_turns). Without that, GRPO
still dropped every call after one update at state_weight 0.5 and 1.0 (lr 2e-5 and 1e-5): SmolLM2's first calls
are often malformed (36 % at step 1), so at first calling paid less than answering at once.

The prompt's two worked examples: SmolLM2-135M-Instruct made no call in 1,600 evaluated episodes with
one example (a passing run_tests call, then the answer), nor in 40 sampled first turns with that example and a
sentence before its call. With a second example whose first try fails a visible test (run_tests shows the FAILs,
the answer is the fixed code), 15 of 40 first turns were valid run_tests calls (T 0.6, 20 held-out problems).
"""
from __future__ import annotations

import ast
import hashlib
import json
import threading
import time

from rlvr.agents.protocol import Episode, ModelTurn, Observation, ToolSpec
from rlvr.agents.tool_calls import run_calls
from rlvr.config.run import TaskConfig
from rlvr.config.sections import EpisodeConfig
from rlvr.tasks.envs.code_tasks import ENTRY, Problem, example, second_example, splits
from rlvr.tasks.envs.common import Example, ExampleTurn, SplitTask, one_shot_messages
from rlvr.types import Outcome, Prompt, Verdict
from rlvr.verifiers.code import sandbox
from rlvr.verifiers.code.reference import parse_reference
from rlvr.verifiers.code.sandbox import SandboxConfig, SandboxUnavailable
from rlvr.verifiers.code.verifier import MAX_CODE_BYTES, CodeVerifier, extract_code

STDOUT_CHARS = 300  # the start of stdout; tool text becomes prompt tokens of every later turn
STDERR_CHARS = 300  # the end of stderr: a traceback's last lines name the error
OUTPUT_CAP = 1 << 16  # bytes kept per stream by the sandbox; far more than is shown
START_AND_CLEANUP_S = 1.5  # bwrap start (~0.03 s), the kill's drain grace (0.5 s) and a loaded machine's slack
TESTS_FIRST = "error: run your code with run_tests first; this answer was not taken"
INSTRUCTION = "Check your code with run_tests, then answer with the code in a ```python block."
_CODE_ARG = {"type": "object", "properties": {"code": {"type": "string", "description": "Python source"}},
             "required": ["code"], "additionalProperties": False}
RUN_PYTHON = ToolSpec("run_python", "Run Python code and see its output.", _CODE_ARG)
RUN_TESTS = ToolSpec("run_tests", f"Run the visible tests on code that defines {ENTRY}.", _CODE_ARG)


def program_limit_s(config: TaskConfig, episode: EpisodeConfig) -> float:
    """One sandboxed run's wall-clock limit: the tighter of the code task's and the episode's tool limit."""
    return min(config.code_time_limit_s, episode.tool_time_limit_s)


def _source(code: str) -> str:
    """The code to run: a ```python block's body when the model fenced it, as the verifier reads answers. Raises
    ValueError (an invalid call) when there is nothing to run or too much."""
    source = extract_code(code)
    if source is None:
        raise ValueError("no code to run")
    if len(source.encode("utf-8", "replace")) > MAX_CODE_BYTES:
        raise ValueError(f"code longer than {MAX_CODE_BYTES} bytes; not run")
    return source


def format_run(result: sandbox.SandboxResult, limit_s: float) -> str:
    """A sandboxed run as the model reads it: status, then the start of stdout and the end of stderr."""
    if result.timed_out:
        status = f"timed out after {limit_s:g} s (killed)"
    elif result.signal is not None:
        status = f"killed by signal {result.signal} (a memory, CPU or process limit)"
    else:
        status = f"exit code {result.exit_code}"
    out = result.stdout.decode("utf-8", "replace")
    err = result.stderr.decode("utf-8", "replace").strip()
    parts = [status]
    if out:
        parts.append("stdout:\n" + out[:STDOUT_CHARS] + ("..." if len(out) > STDOUT_CHARS else ""))
    if err:
        parts.append("stderr:\n" + ("..." if len(err) > STDERR_CHARS else "") + err[-STDERR_CHARS:])
    return "\n".join(parts)


def code_digest(source: str) -> str:
    """A short digest of a program's syntax tree: the same code tested and answered has one digest however it is
    laid out (SmolLM2 re-types `def f(x): return x * 22` on two lines, or drops a comment). Code that does not
    parse (or nests past the parser's limits) is digested as text, blind to whitespace at line ends only."""
    try:
        form = "ast:" + ast.dump(ast.parse(source))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        form = "text:" + "\n".join(line.rstrip() for line in source.strip("\n").splitlines()).strip()
    return hashlib.sha256(form.encode("utf-8", "replace")).hexdigest()[:16]


class CodeTools:
    """The two tools of one episode, bound to the row's visible tests and the sandbox's limits. `passed`: digests
    of the sources run_tests passed whole (every visible test, no load error)."""

    def __init__(self, visible: list[str], config: SandboxConfig, call_limit_s: float = float("inf")):
        self.config = config
        self.call_limit_s = call_limit_s  # run_calls' limit for one call: past it the model is told the call stopped
        self.visible = parse_reference(json.dumps({"asserts": visible, "entry": ENTRY})) if visible else None
        self.passed: set[str] = set()
        self.ran_tests = False  # a run_tests call ran the visible tests (passing or not)
        # A run_tests thread past its turn's deadline may still finish after the model was told it stopped: only a
        # call of the turn still open (CodeEpisode.respond) is recorded, so the reward never depends on timing.
        self.lock = threading.Lock()
        self.open_turn: object | None = None

    def _check_sandbox(self) -> None:
        state = sandbox.probe()
        if not state.ok and not self.config.allow_unsandboxed:
            raise SandboxUnavailable(f"no code sandbox on this machine ({state.reason}); code is not run")

    def run_python(self, code: str) -> str:
        source = _source(code)
        self._check_sandbox()
        result = sandbox.run_sandboxed(source, b"", self.config)
        if not result.started:  # bwrap itself failed: the machine's fault, not the code's, yet no result either
            raise SandboxUnavailable(f"the sandbox failed: {result.stderr.decode(errors='replace').strip()[-200:]}")
        return format_run(result, self.config.time_limit_s)

    def run_tests(self, code: str) -> str:
        turn, started = self.open_turn, time.monotonic()
        source = _source(code)
        self._check_sandbox()
        if self.visible is None:
            return "this problem has no visible tests"
        problems: list[str] = []
        # The verifier's own session: the same judging as the final answer's, on the visible tests only.
        results = CodeVerifier._run_asserts(source, self.visible, self.config, problems)
        if problems and problems[0].startswith("sandbox failed"):
            raise SandboxUnavailable(problems[0])
        passed = bool(results) and all(ok for ok, _ in results) and not problems
        digest = code_digest(source) if passed else ""
        with self.lock:
            # answered within its turn and its own limit (a later call of the turn may still be running)
            if turn is not None and self.open_turn is turn and time.monotonic() - started < self.call_limit_s - 0.05:
                self.ran_tests = True
                self.passed.update([digest] if passed else [])
        lines = [f"{sum(ok for ok, _ in results)}/{len(results)} visible tests passed", *problems[:1]]
        for test, (ok, why) in zip(self.visible.asserts, results):
            if ok or not problems:  # after a load error or a timeout, every FAIL would only repeat it
                lines.append(f"PASS {test.source}" if ok else f"FAIL {why}")
        return "\n".join(lines)


class CodeEpisode:
    """Each turn's calls run in the sandbox; a turn without calls is the answer, whose code is recorded."""

    def __init__(self, tools: CodeTools, limit_s: float, tests_first: bool):
        self.tools = tools
        self.handlers = {"run_python": tools.run_python, "run_tests": tools.run_tests}
        self.limit_s = limit_s
        self.tests_first = tests_first and tools.visible is not None
        self.answer: str | None = None  # the digest of the answer's code; None: no answer (yet), or no code in it

    def respond(self, turn: ModelTurn) -> Observation:
        with self.tools.lock:
            self.tools.open_turn = opened = object()
        observation = run_calls(turn, self.handlers, self.limit_s)
        with self.tools.lock:
            if self.tools.open_turn is opened:
                self.tools.open_turn = None  # a call still running is reported as stopped: its result is dropped
        if not (observation.done and observation.text is None):
            return observation
        # the answer turn (the verifier reads the same text)
        if self.tests_first and not self.tools.ran_tests:
            return Observation(TESTS_FIRST)  # not taken: the episode goes on (module docstring)
        source = extract_code(turn.text)
        self.answer = code_digest(source) if source is not None else None
        return observation

    def final_state(self) -> str:
        """JSON: the digests run_tests passed (sorted) and the answer's; `rlvr verify` re-scores it."""
        with self.tools.lock:
            passed = sorted(self.tools.passed)
        return json.dumps({"tests_passed": passed, "answer": self.answer})


class CodeEnvironment:
    name = "code"
    tools = (RUN_PYTHON, RUN_TESTS)
    scores_state = True  # the answer was tested (module docstring); the "code" verifier scores its hidden tests

    def __init__(self, config: TaskConfig, episode: EpisodeConfig):
        self.sandbox = SandboxConfig(time_limit_s=program_limit_s(config, episode), memory_mb=config.code_memory_mb,
                                     max_output_bytes=OUTPUT_CAP, allow_unsandboxed=config.code_unsandboxed)
        self.thread_limit_s = self.sandbox.time_limit_s + START_AND_CLEANUP_S
        self.tests_first = episode.state_weight > 0  # graded on testing: an answer before any run_tests is refused

    def start(self, prompt: Prompt) -> Episode:
        visible = prompt.columns.get("visible_tests") or []
        tools = CodeTools(list(visible), self.sandbox, self.thread_limit_s)
        return CodeEpisode(tools, self.thread_limit_s, self.tests_first)

    def score_state(self, final_state: str, prompt: Prompt) -> Verdict | None:
        """CORRECT when the answer is code that run_tests passed in the episode (module docstring). A state this
        environment did not write raises ValueError (an ERROR verdict: scoring.state_verdict)."""
        state = json.loads(final_state)
        passed = state.get("tests_passed") if isinstance(state, dict) else None
        if (not isinstance(passed, list) or not all(isinstance(d, str) for d in passed) or "answer" not in state
                or not isinstance(state["answer"], (str, type(None)))):
            raise ValueError(f"not a code episode's state: {final_state[:80]!r}")
        if not isinstance(prompt.columns.get("visible_tests"), list):  # a re-scored row without its tests (or null)
            raise ValueError("the row has no visible_tests column")
        if not prompt.columns["visible_tests"]:  # nothing run_tests could run: CodeTools.run_tests
            return Verdict(Outcome.CORRECT, 1.0, "the problem has no visible tests to run")
        if state.get("answer") is None:
            return Verdict(Outcome.WRONG, 0.0, "no answer with code")
        if state["answer"] in state["tests_passed"]:
            return Verdict(Outcome.CORRECT, 1.0, "the answer is code that passed run_tests")
        return Verdict(Outcome.WRONG, 0.0, "the answer's code did not pass run_tests in this episode")


EXAMPLE_CODE = "def f(x): return x + 3"  # one line: no JSON-escaped newlines for a tiny model to copy
EXAMPLE_LEAD = "I will test my code."  # a sentence before the call: see common.one_shot_messages
# The second example ("sum 1"): the first try misses the "+ 1", run_tests shows the FAILs, the answer is fixed. It
# shows why a call helps, and a list problem's shape.
SECOND_FIRST_TRY = "def f(xs): return sum(xs)"
SECOND_CODE = "def f(xs): return sum(xs) + 1"
SECOND_TOOL_TEXT = "0/2 visible tests passed\nFAIL assert f([1, 2, 3]) == 7: got 6\nFAIL assert f([]) == 1: got 0"


def example_tool_text() -> str:
    """What run_tests answers to EXAMPLE_CODE on the example's visible tests (a sandbox test checks it)."""
    tests = example().visible
    return "\n".join([f"{len(tests)}/{len(tests)} visible tests passed", *(f"PASS {t}" for t in tests)])


def worked_examples(instruction: str) -> tuple[Example, Example]:
    """The two worked exchanges, each a run_tests call, its result and the fenced answer (what the tools answer:
    a sandbox test checks both results)."""
    fenced = lambda code: f"```python\n{code}\n```"  # noqa: E731
    first, second = example(), second_example()
    return (Example(_question(first, instruction), EXAMPLE_LEAD,
                    (ExampleTurn((("run_tests", {"code": EXAMPLE_CODE}),), (example_tool_text(),)),),
                    fenced(EXAMPLE_CODE)),
            Example(_question(second, instruction), EXAMPLE_LEAD,
                    (ExampleTurn((("run_tests", {"code": SECOND_FIRST_TRY}),), (SECOND_TOOL_TEXT,)),),
                    fenced(SECOND_CODE)))


def _question(problem: Problem, instruction: str) -> str:
    return " ".join([problem.question, "Tests:", "; ".join(problem.visible) + ".", instruction]).strip()


class CodeAgentTask(SplitTask):
    """Small Python function problems (code_tasks.py) with the sandbox tools; answers scored by "code". The train
    and held-out streams are common.SplitTask's, as the calculator's and the filesystem's."""

    answer_verifiers = {"code": 1.0}  # the hidden tests in Prompt.reference, whatever task.verifiers says

    def __init__(self, config: TaskConfig):
        self.config = config
        self.name = "code_agent"
        self.train, self.held_out = splits()
        # The default instruction asks for "Answer: <number>" (the math tasks'); a code task asks for code.
        default = TaskConfig.model_fields["instruction"].default
        self.instruction = INSTRUCTION if config.instruction == default else config.instruction

    def question(self, problem: Problem) -> str:
        return _question(problem, self.instruction)

    def messages(self, problem: Problem) -> tuple[dict[str, str], ...]:
        """System turn (if set), the two worked exchanges (if task.one_shot), then the question: a tiny model copies
        the examples' shape (common.one_shot_messages)."""
        return one_shot_messages(worked_examples(self.instruction), self.question(problem), self.config)

    def prompt(self, problem: Problem, split: str) -> Prompt:
        return Prompt(id=f"code_agent/{split}/{problem.canonical}", messages=self.messages(problem),
                      reference=problem.reference(),
                      columns={"template": problem.template, "visible_tests": list(problem.visible)})

    def environment(self, episode: EpisodeConfig) -> CodeEnvironment:
        return CodeEnvironment(self.config, episode)
