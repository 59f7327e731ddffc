"""Strict tool calls (rlvr/agents/tool_calls.py): which blocks of a
turn are calls, how many errors a turn counts (docs/agents.md: "each one counted error"), and how a call is run."""
from __future__ import annotations

import json
import time

from rlvr.agents.protocol import ToolSpec
from rlvr.agents.tool_calls import MAX_CALLS_PER_TURN, last_call_end, parse_turn, run_calls

ECHO = ToolSpec("echo", "repeat a text", {"type": "object", "properties": {"text": {"type": "string"}},
                                          "required": ["text"], "additionalProperties": False})


def call(text: str = "x", arguments=None) -> str:
    arguments = {"text": text} if arguments is None else arguments
    return "<tool_call>" + json.dumps({"name": "echo", "arguments": arguments}) + "</tool_call>"


def counts(text: str) -> tuple[list[str], list[str]]:
    """(the texts of the calls read, the errors) of one turn."""
    turn = parse_turn(0, text, (ECHO,))
    return [c.arguments["text"] for c in turn.calls], list(turn.errors)


def test_calls_inside_reasoning_are_not_read_and_calls_after_it_are():
    """The docstring: reasoning inside <think>...</think> is ignored. A call the model only considers while thinking
    must not run (nor count): the turn below is a final answer, not a call."""
    assert counts("<think>maybe " + call("a") + "</think>Answer: 3") == ([], [])
    assert counts("<think>no " + call("a") + " yes</think>" + call("b")) == (["b"], [])
    assert counts(call("a") + "<think>and " + call("b")) == (["a"], [])  # an unclosed <think> hides what follows
    answer = parse_turn(0, "<think>" + call("a") + "</think>Answer: 3", (ECHO,))
    assert run_calls(answer, {"echo": lambda text: text}, 1.0).done  # the final answer


def test_openai_style_arguments_as_a_json_string_are_read_as_the_object_they_encode():
    """The docstring: "arguments" may be a JSON-encoded object string, as OpenAI's API returns it."""
    assert counts(call(arguments=json.dumps({"text": "hi"}))) == (["hi"], [])
    calls, errors = counts(call(arguments="{not json"))
    assert calls == [] and len(errors) == 1 and errors[0].startswith("malformed tool call: arguments not JSON")
    calls, errors = counts(call(arguments=json.dumps({"text": 5})))  # decoded, then checked by the schema
    assert calls == [] and len(errors) == 1 and errors[0].startswith("invalid arguments for echo")


def test_an_unclosed_call_is_an_error_told_back_not_a_final_answer():
    """A turn whose call does not close (a model cut mid-call, or one that forgot the tag) asked for a tool: it is
    one counted error and the episode goes on, never a final answer that ends it."""
    calls, errors = counts('Let me compute. <tool_call>{"name": "echo", "arguments": {"text": "x"}}')
    assert calls == [] and errors == ["malformed tool call: <tool_call> without </tool_call>"]
    observation = run_calls(parse_turn(0, '<tool_call>{"name": "echo"', (ECHO,)), {"echo": lambda text: text}, 1.0)
    assert not observation.done and observation.invalid_calls == 1 and "without </tool_call>" in observation.text
    calls, errors = counts("The tag </tool_call> closes a call.")  # a close without an open: one error too
    assert calls == [] and errors == ["malformed tool call: </tool_call> without <tool_call>"]


def test_each_call_is_one_error_at_most_and_each_unclosed_block_one():
    """What "each one counted error" means (module docstring): every <tool_call> opened is one call, and
    a call that is not run is exactly one error. Before: two unclosed blocks counted 1 error, and a call whose JSON
    text holds "</tool_call>" counted 2."""
    assert len(counts("<tool_call>{a <tool_call>{b")[1]) == 2
    assert counts("<tool_call>{bad " + call("good")) == (["good"], ["malformed tool call: <tool_call> without "
                                                                     "</tool_call>"])
    # the tag inside a JSON string is text (the JSON value is read first): one call, run with that text
    assert counts(call("a </tool_call> b")) == (["a </tool_call> b"], [])
    assert counts(call("<tool_call>")) == (["<tool_call>"], [])
    # JSON that does not parse ends at the first close: one error, and the second close closes nothing
    calls, errors = counts('<tool_call>{"name": "echo", oops</tool_call></tool_call>')
    assert calls == [] and len(errors) == 2 and errors[1].endswith("</tool_call> without <tool_call>")
    stray = "malformed tool call: </tool_call> without <tool_call>"
    assert counts(call("a") + " then </tool_call>") == (["a"], [stray])
    assert counts("</tool_call> first, then " + call("a")) == (["a"], [stray])  # before a call, at the start too
    assert counts(call("a") + "</tool_call>" + call("b") + "</tool_call>") == (["a", "b"], [stray, stray])


def test_an_unclosed_block_anywhere_is_read_once_and_reading_ends():
    """An unclosed block after text (or after a closed call) is one error, and the reader moves past it: a slip
    in the `not closed` test (-1, what str.find returns) would restart the search before the block and read it
    forever. Bounded by a thread so such a slip fails here instead of hanging the suite."""
    import threading

    texts = ["Let me compute this first. <tool_call>{\"name\": \"echo\"", call("a") + " and <tool_call>{b",
             "x" * 40 + "<tool_call>{a <tool_call>{b"]
    results: list = []
    reader = threading.Thread(target=lambda: results.extend(counts(t) for t in texts), daemon=True)
    reader.start()
    reader.join(30.0)
    unclosed = "malformed tool call: <tool_call> without </tool_call>"
    assert results == [([], [unclosed]), (["a"], [unclosed]), ([], [unclosed, unclosed])]


def test_calls_past_the_limit_are_not_run_and_each_is_one_error():
    """MAX_CALLS_PER_TURN (8) calls run; each one past it is an error (20 calls: 8 run, 12 errors; before, the 12
    were 1 error)."""
    texts = [str(i) for i in range(20)]
    calls, errors = counts("".join(call(t) for t in texts[:MAX_CALLS_PER_TURN]))
    assert calls == texts[:8] and errors == []  # exactly the limit: all run
    calls, errors = counts("".join(call(t) for t in texts[:MAX_CALLS_PER_TURN + 1]))
    assert calls == texts[:8] and errors == ["call 9 not run: more than 8 tool calls in one turn"]
    calls, errors = counts("".join(call(t) for t in texts))
    assert calls == texts[:8] and len(errors) == 12 and errors[-1].startswith("call 20 not run")
    observation = run_calls(parse_turn(0, "".join(call(t) for t in texts), (ECHO,)), {"echo": lambda text: text}, 1.0)
    assert (observation.valid_calls, observation.invalid_calls) == (8, 12)


def test_a_tool_past_its_time_limit_is_reported_as_timed_out_and_counted_invalid():
    """docs/agents.md: a tool past episode.tool_time_limit_s is reported timed out. The tool below needs 0.3 s and the
    limit is 0.1 s: the observation says so at the limit, without waiting for the tool."""
    def slow(text: str) -> str:
        time.sleep(0.3)
        return text

    started = time.perf_counter()
    observation = run_calls(parse_turn(0, call("x"), (ECHO,)), {"echo": slow}, 0.1)
    assert observation.text == "error: the tool ran past its time limit of 0.1 s"
    assert (observation.valid_calls, observation.invalid_calls) == (0, 1)
    assert time.perf_counter() - started < 0.3  # it did not wait for the tool
    fast = run_calls(parse_turn(0, call("x"), (ECHO,)), {"echo": slow}, 2.0)  # within its limit: its answer
    assert (fast.text, fast.valid_calls) == ("x", 1)


def test_last_call_end_is_where_the_calls_parse_turn_reads_end():
    """What a turn cut by its budget keeps (episodes.after_last_call): the text up to the last call parse_turn
    reads. A </tool_call> inside reasoning, or in prose, closes no call (such a cut turn was kept as
    finished instead of truncated)."""
    text = "Let me. " + call("a") + " and " + call("b") + " the result will be 17"
    assert last_call_end(text) == len(text) - len(" the result will be 17")
    assert parse_turn(0, text[:last_call_end(text)], (ECHO,)).calls == parse_turn(0, text, (ECHO,)).calls
    assert last_call_end("<think>maybe " + call("a") + " and on and on") is None
    assert last_call_end("I never write </tool_call> tags, I just talk") is None
    assert last_call_end('<tool_call>{"name": "echo", "arg') is None
    thought = "<think>" + call("a") + "</think>"  # after the reasoning: counted from the start of the whole text
    assert last_call_end(thought + call("b") + " more") == len(thought + call("b"))
    assert last_call_end(call("a") + "<think>" + call("b")) == len(call("a"))
    assert last_call_end("</think>" + call("b") + " more") == len("</think>" + call("b"))


def test_a_long_tool_answer_is_cut_at_max_result_chars():
    """A tool's answer becomes prompt tokens of every later turn: it is cut at MAX_RESULT_CHARS (1000)."""
    observation = run_calls(parse_turn(0, call("x"), (ECHO,)), {"echo": lambda text: "0123456789" * 500}, 1.0)
    assert observation.text == "0123456789" * 100 and observation.valid_calls == 1
    data = run_calls(parse_turn(0, call("x"), (ECHO,)), {"echo": lambda text: {"rows": list(range(999))}}, 1.0)
    assert len(data.text) == 1000 and data.text.startswith('{"rows": [0, 1, 2')  # JSON answers are cut alike


def test_a_tool_s_data_is_shown_as_json_with_sorted_keys():
    """A tool may answer with data: the model reads it as JSON, keys sorted, so the same data gives the same
    observation (and the same token ids) whatever order the tool built it in."""
    answers = [{"size": 3, "name": "a.txt"}, {"name": "a.txt", "size": 3}]
    texts = [run_calls(parse_turn(0, call("x"), (ECHO,)), {"echo": lambda text, a=a: a}, 1.0).text for a in answers]
    assert list(answers[0]) != list(answers[1])  # the premise: built in two orders
    assert texts == ['{"name": "a.txt", "size": 3}'] * 2


def test_each_error_tells_the_model_what_was_wrong():
    """The errors are told back to the model: each names what it got and what is expected (the keys it wrote,
    the tools there are)."""
    assert counts("<tool_call>[1, 2]</tool_call>")[1] == [
        'malformed tool call: expected {"name": ..., "arguments": {...}}, got list']
    assert counts('<tool_call>{"name": "echo", "arguments": {}, "id": 1}</tool_call>')[1] == [
        "malformed tool call: expected {\"name\": ..., \"arguments\": {...}}, got ['arguments', 'id', 'name']"]
    assert counts('<tool_call>{"name": "nope", "arguments": {}}</tool_call>')[1] == ["unknown tool 'nope'; tools: echo"]
    assert parse_turn(0, '<tool_call>{"name": "nope", "arguments": {}}</tool_call>', ()).errors == (
        "unknown tool 'nope'; tools: none",)
    assert counts('<tool_call>{"name": "echo", "arguments": [1]}</tool_call>')[1] == [
        "malformed tool call: arguments of echo must be an object, got list"]
    assert counts(call(arguments={}))[1] == ["invalid arguments for echo: 'text' is a required property"]
