"""Format and behaviour verifiers: think_format (with prefilled templates), tag_count, language, tool_call."""
from __future__ import annotations

import json
import time

import pytest

from rlvr.config.run import TaskConfig
from rlvr.types import Outcome
from rlvr.verifiers import VERIFIERS, build_verifiers
from rlvr.verifiers.format import (
    FormatVerifier,
    LanguageVerifier,
    TagCountVerifier,
    ThinkFormatVerifier,
    expected_script,
    script_of,
)
from rlvr.verifiers.tools import MAX_JSON_CHARS, ToolCallVerifier

MB = 1_000_000


# ---------------------------------------------------------------- think_format and prefilled templates
@pytest.mark.parametrize("completion", [
    "<think>2 + 2 is 4</think>4", "  <think>\nreason\n</think>\n\nThe answer is 4.",
    "<think>a</think><answer>4</answer>",
])
def test_think_format_accepts_think_then_answer(completion):
    verdict = ThinkFormatVerifier().verify(completion, "")
    assert verdict.outcome is Outcome.CORRECT and verdict.score == 1.0


@pytest.mark.parametrize("completion, detail", [
    ("4", "expected one <think> and one </think>, found <think> x0, </think> x0"),
    ("</think>a<think>4", "</think> before <think>"),
    ("<think>a</think>   ", "no answer after </think>"),
    ("<think>\n</think>4", "empty <think> block"),
    ("Sure. <think>a</think>4", "text before <think>: 'Sure.'"),
])
def test_think_format_says_why(completion, detail):
    verdict = ThinkFormatVerifier().verify(completion, "")
    assert verdict.outcome is Outcome.WRONG and verdict.detail == detail


def test_prefilled_think_accepts_a_completion_that_starts_inside_the_block():
    # trl#6966: Qwen3-style templates end the prompt with "<think>\n"; the completion holds only "</think>"
    completion = "Let me add: 2 + 2 = 4.\n</think>\n<answer>4</answer>"
    assert FormatVerifier().verify(completion, "").score == 0.0  # the plain check fails every such sample
    assert FormatVerifier(think_prefilled=True).verify(completion, "").outcome is Outcome.CORRECT
    assert ThinkFormatVerifier(think_prefilled=True).verify(completion, "").outcome is Outcome.CORRECT
    assert ThinkFormatVerifier(think_prefilled=True).verify("</think>4", "").detail == "empty <think> block"


# ---------------------------------------------------------------- tag_count
@pytest.mark.parametrize("completion, prefilled, score", [
    ("<think>a</think><answer>4</answer>", False, 1.0),  # all four once
    ("<think>a</think>4", False, 0.5),  # <answer>, </answer> missing
    ("<think><think>a</think><answer>4</answer>", False, 0.75),  # <think> twice
    ("<think>a</think></think><answer>4</answer></answer>", False, 0.5),
    ("4", False, 0.0),
    ("a</think><answer>4</answer>", True, 1.0),  # prefilled: <think> belongs to the prompt (count 0)
    ("<think>a</think><answer>4</answer>", True, 0.75),  # prefilled but opened again
    ("4", True, 0.25),  # prefilled: the missing <think> is the right count
])
def test_tag_count_partial_credit(completion, prefilled, score):
    verdict = TagCountVerifier(think_prefilled=prefilled).verify(completion, "")
    assert verdict.score == score
    assert verdict.outcome is (Outcome.CORRECT if score == 1.0 else Outcome.WRONG)


# ---------------------------------------------------------------- language
@pytest.mark.parametrize("char, script", [
    ("a", "latin"), ("é", "latin"), ("Ж", "cyrillic"), ("λ", "greek"), ("中", "cjk"), ("の", "cjk"),
    ("カ", "cjk"), ("한", "cjk"), ("ب", "arabic"), ("א", "hebrew"), ("क", "devanagari"), ("ｆ", "latin"),
    ("1", None), (" ", None), ("+", None),
])
def test_script_of(char, script):
    assert script_of(char) == script


@pytest.mark.parametrize("completion, reference, share", [
    ("Привет, world", "cyrillic", 6 / 11),  # 6 Cyrillic letters, 5 Latin
    ("Hello мир", "latin", 5 / 8),  # 5 Latin, 3 Cyrillic
    ("Ответ: $x = 2$, \\frac{1}{2}", "russian", 1.0),  # math and LaTeX commands are not prose
    ("答案是 4", "chinese", 1.0),
    ("The answer is 四", "Сколько будет 2+2?", 0.0),  # reference text: its script is Cyrillic
    # Das ist eins / das ist zwei / und das ist drei: 3+3+4 + 3+3+4 + 3+3+3+4 = 33 Latin; Ответ: 5 Cyrillic
    ("Das ist eins, das ist zwei, und das ist drei. Ответ", "german", 33 / 38),
])
def test_language_share(completion, reference, share):
    verdict = LanguageVerifier().verify(completion, reference)
    assert verdict.score == pytest.approx(share)
    assert verdict.outcome is (Outcome.CORRECT if share >= 0.95 else Outcome.WRONG)


def test_language_threshold_script_option_and_bad_references():
    almost = "a" * 95 + "ж" * 5  # exactly 95% Latin: correct at the 0.95 threshold
    assert LanguageVerifier().verify(almost, "latin").outcome is Outcome.CORRECT
    assert LanguageVerifier().verify("a" * 94 + "ж" * 6, "latin").outcome is Outcome.WRONG
    assert LanguageVerifier(script="cyrillic").verify("жжж", "42").outcome is Outcome.CORRECT  # task setting
    unscorable = LanguageVerifier().verify("hello", "42")  # a math reference names no script
    assert unscorable.outcome is Outcome.ERROR and not unscorable.scorable
    assert LanguageVerifier().verify("4 + 4 = 8", "latin").outcome is Outcome.UNPARSEABLE
    assert expected_script("English") == "latin" and expected_script("Greek") == "greek"
    with pytest.raises(ValueError):
        LanguageVerifier(script="42")


def test_language_is_fast_on_a_megabyte():
    start = time.monotonic()
    assert LanguageVerifier().verify("ab жж 中" * (MB // 8), "latin").score == pytest.approx(2 / 5)
    assert time.monotonic() - start < 5.0  # linear-time scan: a backtracking regex would take minutes


# ---------------------------------------------------------------- tool_call
WEATHER = {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
    "required": ["city"], "additionalProperties": False}}
FUNCTION = json.dumps({"type": "function", "function": WEATHER})
EXPECTED = json.dumps({"function": WEATHER, "expected": {"city": "Paris", "days": 2}})
SCHEMA = json.dumps({"schema": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}})
CALL = '{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}'


@pytest.mark.parametrize("completion, reference", [
    (CALL, FUNCTION), (CALL, EXPECTED),
    (f"<tool_call>\n{CALL}\n</tool_call>", FUNCTION),  # Qwen / Hermes tags
    (f"I'll check the weather.\n```json\n{CALL}\n```", FUNCTION),  # fenced, with prose around it
    (f"<think>which city? {{\"x\": 1}}</think>\n{CALL}", FUNCTION),  # JSON in reasoning is ignored
    ('{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}', FUNCTION),  # OpenAI string arguments
    ('{"name": "get_weather", "arguments": {"city": "Paris", "days": 2.0}}', EXPECTED),  # one number type
    ('{"a": 1}', SCHEMA), ('{"a": 1, "b": [1, 2]}', SCHEMA),  # extra keys allowed: no additionalProperties
])
def test_tool_call_valid(completion, reference):
    verdict = ToolCallVerifier().verify(completion, reference)
    assert verdict.outcome is Outcome.CORRECT and verdict.score == 1.0, verdict


@pytest.mark.parametrize("completion, reference, outcome, detail", [
    ('{"name": "get_weather", "arguments": {"city": "Paris", "units": "C"}}', FUNCTION, Outcome.WRONG,
     "arguments: Additional properties are not allowed ('units' was unexpected)"),
    ('{"name": "get_weather", "arguments": {"city": 3}}', FUNCTION, Outcome.WRONG,
     "arguments.city: 3 is not of type 'string'"),
    ('{"name": "get_weather", "arguments": {"city": "Paris", "days": 0}}', FUNCTION, Outcome.WRONG,
     "arguments.days: 0 is less than the minimum of 1"),
    ('{"name": "get_weather", "arguments": {"city": "Paris", "days": true}}', FUNCTION, Outcome.WRONG,
     "arguments.days: True is not of type 'integer'"),
    ('{"name": "get_weather", "arguments": {}}', FUNCTION, Outcome.WRONG,
     "arguments: 'city' is a required property"),
    ('{"name": "get_time", "arguments": {}}', FUNCTION, Outcome.WRONG, "called 'get_time', expected 'get_weather'"),
    ('{"name": "get_weather", "arguments": {"city": "Paris"}, "id": 1}', FUNCTION, Outcome.WRONG,
     "call keys: extra ['id'], missing []"),
    ('[{"name": "get_weather", "arguments": {"city": "Paris"}}]', FUNCTION, Outcome.WRONG, "not a list"),
    ('{"name": "get_weather", "arguments": {"city": "Rome", "days": 2}}', EXPECTED, Outcome.WRONG,
     "valid, but not the expected value"),
    ('{"a": "1"}', SCHEMA, Outcome.WRONG, "document.a: '1' is not of type 'integer'"),
    ('get_weather(city="Paris")', FUNCTION, Outcome.UNPARSEABLE, "not JSON"),
    ('{"name": "get_weather", "arguments": {"city": "Paris"}', FUNCTION, Outcome.UNPARSEABLE, "not JSON"),
    ('<tool_call>{"a": 1}</tool_call><tool_call>{"a": 2}</tool_call>', SCHEMA, Outcome.UNPARSEABLE,
     "expected one <tool_call>"),
    ('<tool_call>{"a": 1}', SCHEMA, Outcome.UNPARSEABLE, "expected one <tool_call>"),
    ('```\n{"a": 1}\n```\n```\n{"a": 2}\n```', SCHEMA, Outcome.UNPARSEABLE, "several code fences"),
    ('<think>{"a": 1}</think>', SCHEMA, Outcome.UNPARSEABLE, "not JSON"),
    ('{"name": "get_weather", "arguments": "{city: Paris}"}', FUNCTION, Outcome.WRONG, "arguments string: not JSON"),
])
def test_tool_call_invalid(completion, reference, outcome, detail):
    verdict = ToolCallVerifier().verify(completion, reference)
    assert verdict.outcome is outcome and verdict.score == 0.0, verdict
    assert detail in verdict.detail, verdict.detail


@pytest.mark.parametrize("reference, detail", [
    ("not json", "reference is not JSON"), ('{"tool": {}}', 'exactly one of "schema" or "function"'),
    ('{"schema": {"type": "nonsense"}}', "invalid schema in reference"),
    ('{"function": {"parameters": {}}}', 'needs a string "name"'),
    ('{"schema": {"$ref": "https://example.com/never-fetched.json"}}', "cannot be resolved"),
    ('{"schema": {"minimum": "three"}}', "invalid schema in reference"),
])
def test_tool_call_bad_reference_is_unscorable(reference, detail):
    verdict = ToolCallVerifier().verify('{"a": 1}', reference)
    assert verdict.outcome is Outcome.ERROR and verdict.score == 0.0 and not verdict.scorable
    assert detail in verdict.detail, verdict.detail


@pytest.mark.parametrize("completion", [
    '{"a": "' + "x" * MB + '"}', "[" * 50_000 + "]" * 50_000, "[" * (MAX_JSON_CHARS // 2 - 1),
    '{"a": ' * 100 + "1" + "}" * 100, "<tool_call>" * (MB // 11), "```" * (MB // 3), "{" * MB,
])
def test_tool_call_sizes_end_quickly(completion):
    start = time.monotonic()
    verdict = ToolCallVerifier().verify(completion, SCHEMA)
    assert time.monotonic() - start < 5.0  # linear-time scan: a backtracking regex would take minutes
    assert verdict.outcome is Outcome.UNPARSEABLE and verdict.score == 0.0, verdict


# ---------------------------------------------------------------- registry
def test_new_verifiers_are_registered_and_build():
    names = {"think_format": ThinkFormatVerifier, "tag_count": TagCountVerifier, "language": LanguageVerifier,
             "tool_call": ToolCallVerifier, "format": FormatVerifier}
    assert set(names) <= set(VERIFIERS)
    built = build_verifiers(TaskConfig(verifiers={name: 1.0 for name in names}))
    assert all(isinstance(built[name], cls) and built[name].name == name for name, cls in names.items())
