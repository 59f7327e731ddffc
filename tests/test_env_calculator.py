"""The calculator environment and task: the safe evaluator, the problems and their split, and an
episode driven by hand-written model turns through the strict parser."""
from __future__ import annotations

import ast
import dataclasses
import time
from fractions import Fraction

import pytest

from rlvr.agents.protocol import Environment, Episode
from rlvr.agents.tool_calls import parse_turn
from rlvr.config.run import ConfigError, TaskConfig
from rlvr.config.sections import EpisodeConfig
from rlvr.tasks import build_task
from rlvr.tasks.base import split_by_hash
from rlvr.tasks.envs import calculator
from rlvr.tasks.envs.calculator import CALCULATE, CalculatorTask, evaluate, splits
from rlvr.types import Outcome
from rlvr.verifiers import build_verifiers


@pytest.mark.parametrize("expression, value", [
    ("3 + 2 * 4", "11"),  # * first: 2*4 = 8, 3+8 = 11
    ("(3 + 2) * 4", "20"),  # parentheses first: 5*4
    ("10 - 4 - 3", "3"),  # left to right: 6-3, not 10-1
    ("12 / 4 / 3", "1"),  # left to right: 3/3, not 12/(4/3) = 9
    ("7 / 2", "3.5"),
    ("1 / 3", "0.333333"),  # 6 decimals
    ("-5 + 2", "-3"),
    (" 8 * (2 - 5) ", "-24"),  # 8 * -3
    ("(1 / 3) * 3", "1"),  # exact fractions: a float would give 1.0 or 0.9999...
])
def test_evaluator_hand_checked_values(expression, value):
    assert evaluate(expression) == value


@pytest.mark.parametrize("expression, reason", [
    ("__import__('os').system('echo hi')", "unexpected character"),
    ("(1).real", "unexpected character '.'"),
    ("9**9**9", "only + - * /"),
    ("2 // 3", "only + - * /"),
    ("1 / 0", "division by zero"),
    ("1 / (2 - 2)", "division by zero"),
    ("1" * 10**6, "longer than 200"),
    ("9999999999999 + 1", "number too large"),  # 13 digits > 10**12
    ("999999999999 * 999999999999", "result too large"),  # each literal allowed, the product is 10**24
    ("1+" * 60 + "1", "more than 100 parts"),  # 181 characters, 60 BinOps + 60 operators + 61 numbers
    ("(" * 199 + "1", "cannot read"),
    ("3 +", "cannot read"),
    ("2 (3 + 4)", "needs an operator, e.g. 2 * (3 + 4)"),  # parses as a call
    ("   ", "empty expression"),
    (5, "must be a string"),
    ("()", "Tuple is not allowed; use whole numbers"),  # the only node besides numbers, + - * / the characters allow
    ("2 * ()", "Tuple is not allowed"),
])
def test_attacks_and_bad_input_are_error_text(expression, reason):
    started = time.perf_counter()
    result = evaluate(expression)
    assert result.startswith("error: ") and reason in result, result
    assert time.perf_counter() - started < 1.0  # 9**9**9 would not finish if it were computed


@pytest.mark.parametrize("expression, value", [
    ("1000000000000", "1000000000000"),  # a literal of exactly MAX_LITERAL = 10**12: "at most", so allowed
    ("-1000000000000", "-1000000000000"),
    ("1000000 * 1000000000", "1000000000000000"),  # 10**6 * 10**9 = 10**15 = MAX_MAGNITUDE: allowed
    ("0 - 1000000 * 1000000000", "-1000000000000000"),
    ("-1" + "+1" * 32, "31"),  # 33 numbers, 32 BinOps + 32 operators, "-" (2 nodes), the Expression: 100 = MAX_NODES
])
def test_the_bounds_are_inclusive(expression, value):
    """The errors say "at most N": N itself is allowed, N + 1 is not (the next test)."""
    assert evaluate(expression) == value


@pytest.mark.parametrize("expression, reason", [
    ("1000000000001", "number too large (at most 1000000000000)"),  # 10**12 + 1
    ("-1000000000001", "number too large"),
    ("1000000 * 1000000000 + 1", "result too large (at most 1000000000000000)"),  # 10**15 + 1
    ("0 - 1000000 * 1000000000 - 1", "result too large"),  # -(10**15 + 1): the magnitude counts
    ("1" + "+1" * 33, "more than 100 parts"),  # 34 numbers + 33 BinOps + 33 operators + the Expression: 101 nodes
])
def test_one_past_each_bound_is_error_text(expression, reason):
    result = evaluate(expression)
    assert result.startswith("error: ") and reason in result, result


def test_an_unreadable_expression_is_quoted_by_its_start_only():
    """The tool's answer is prompt text of every later turn: a bad expression (up to 200 characters) is quoted by
    its first 40 characters, not whole."""
    text = "1 + (2 * * 3) " + "- 4 + 5 " * 20  # 174 characters, a syntax error at the 10th
    assert evaluate(text) == f"error: cannot read {text[:40]!r} as an expression"


def test_whole_numbers_are_written_as_exact_integers():
    # 2**53 + 1 = 9007199254740993 has no float: going through float would print ...992
    assert calculator.format_value(Fraction(2**53 + 1)) == "9007199254740993"
    assert calculator.format_value(Fraction(-7)) == "-7" and calculator.format_value(Fraction(7, 2)) == "3.5"


def test_a_story_with_a_zero_or_negative_step_on_either_side_is_dropped():
    """_story_value keeps a problem only when every step is a whole number >= 0, whichever side of an operator the
    step is on, and never divides by zero (the templates' divisors are plain numbers today: a template such as
    a / (b - c) must not crash the split or tell of -1 groups)."""
    tree = ast.parse("a / (b - c)", mode="eval").body
    assert calculator._story_value(tree, {"a": 6, "b": 4, "c": 3}) == 6  # 4 - 3 = 1; 6 / 1 = 6
    assert calculator._story_value(tree, {"a": 6, "b": 5, "c": 3}) == 3  # 6 / 2
    assert calculator._story_value(tree, {"a": 6, "b": 3, "c": 3}) is None  # 3 - 3 = 0: no division by zero
    assert calculator._story_value(tree, {"a": 6, "b": 3, "c": 4}) is None  # 3 - 4 = -1 on the right: dropped
    assert calculator._story_value(tree, {"a": 7, "b": 5, "c": 3}) is None  # 7 / 2 is not whole


def test_the_shared_templates_and_problems_cannot_be_changed():
    """TEMPLATES is a module constant and splits() a cache: every task of the process holds the same objects, so
    an assignment to one would change the problems (and the split) of every other task. They are frozen."""
    task = CalculatorTask(TaskConfig(name="calculator", level=2))
    problem = task.held_out[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        problem.value = 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        calculator.TEMPLATES[2][0].expression = "{a}"
    assert task.eval_prompts(1)[0].reference == str(problem.value)


def test_the_tool_schema_is_strict():
    schema = CALCULATE.parameters
    assert schema["required"] == ["expression"] and schema["additionalProperties"] is False
    assert schema["properties"]["expression"]["type"] == "string"
    bad = ['{"name": "calculate", "arguments": {"expression": 3}}',
           '{"name": "calculate", "arguments": {"expression": "1", "x": 1}}',
           '{"name": "calculate", "arguments": {}}']
    task = CalculatorTask(TaskConfig(name="calculator"))
    env = task.environment(EpisodeConfig())
    for payload in bad:
        turn = parse_turn(0, f"<tool_call>{payload}</tool_call>", env.tools)
        assert not turn.calls and len(turn.errors) == 1 and "invalid arguments" in turn.errors[0]
        # the episode counts it as a failed call and never runs the tool
        observation = env.start(task.eval_prompts(1)[0]).respond(turn)
        assert (observation.valid_calls, observation.invalid_calls) == (0, 1)


def test_problems_match_their_expression_and_the_tool():
    train, held = splits(2)
    by_name = {p.canonical: p for p in train + held}
    apples = by_name["apples 3 5 2"]  # Tom has 3 apples and buys 5 bags with 2 in each: 3 + 5*2 = 13
    assert apples.value == 13 and apples.expression == "3 + 5 * 2" and "Tom has 3 apples" in apples.question
    assert by_name["stickers 4 6 3"].value == 8  # 4 children x 6 stickers = 24, shared among 3 groups
    assert "stickers 4 6 5" not in by_name  # 24 / 5 is not whole: dropped
    assert "tickets 3 5 2" not in by_name  # a ticket of 3 - 5 = -2 dollars: dropped
    assert all(evaluate(p.expression) == str(p.value) for p in train + held)


def test_split_is_hashed_disjoint_and_stable():
    # level 1: 4 templates x 11 x 11 numbers, "fly" a - b >= 0 (66 pairs), "share" a / b whole (23 pairs):
    # 484 + 66 + 23 = 573; a fifth is 114 < MIN_HELD_OUT = 200, so 200 are held out
    for level, problems, held_out in ((1, 573, 200), (2, 6658, 6658 // 5), (3, 9131, 9131 // 5)):
        train, held = splits(level)
        assert (len(train) + len(held), len(held)) == (problems, held_out)
        operations = level
        assert not {p.canonical for p in train} & {p.canonical for p in held}
        assert {sum(p.expression.count(op) for op in "+-*/") for p in train + held} == {operations}
        # the order of enumeration does not matter, only the hash of the canonical text
        again = split_by_hash(list(reversed(train + held)), lambda p: p.canonical)
        assert again == (train, held)
    # sha256("birds 10 12 5") starts 00112462, the smallest of level 2: first in the evaluation order
    assert splits(2)[1][0].canonical == "birds 10 12 5"
    templates = {p.template for p in splits(2)[0] + splits(2)[1]}
    assert calculator.EXAMPLE.key not in templates and len(templates) == 7


def test_train_stream_never_shows_held_out_and_eval_ignores_seeds():
    task = CalculatorTask(TaskConfig(name="calculator", level=2))
    eval_ids = [p.id for p in task.eval_prompts(10**5)]
    assert len(eval_ids) == len(splits(2)[1]) and all("/eval/" in i for i in eval_ids)
    held = {i.split("/eval/")[1] for i in eval_ids}
    for seed in (0, 1):
        stream = task.train_prompts(seed)
        drawn = [next(stream) for _ in range(300)]
        assert not {p.id.split("/train/")[1] for p in drawn} & held
    first, second = task.train_prompts(7), task.train_prompts(7)
    assert [next(first).id for _ in range(20)] == [next(second).id for _ in range(20)]
    assert [p.id for p in CalculatorTask(TaskConfig(name="calculator", level=2)).eval_prompts(50)] == eval_ids[:50]


def test_prompt_carries_worked_exchanges_with_the_whole_expression_in_one_call():
    prompt = build_task(TaskConfig(name="calculator", level=2)).eval_prompts(1)[0]
    roles = [m["role"] for m in prompt.messages]
    # two worked examples, each: question, one call answered by the tool, the answer; then the question
    assert roles == ["user", "assistant", "tool", "assistant"] * 2 + ["user"]
    calls = [parse_turn(0, m["content"], (CALCULATE,)) for m in prompt.messages if m["content"].startswith("I will")]
    assert all(len(c.calls) == 1 and not c.errors for c in calls)  # every shown call is itself valid
    # a sentence before the call: without it the 135M model starts its turn like the tool turn (common.py)
    assert prompt.messages[1]["content"].startswith("I will use the calculator.\n<tool_call>")
    # one call per problem, whatever its operations (per-operation examples taught "answer after one call"
    # to a model that then could not do two-operation problems): 3 * 4 + 2 = 14, 40 - 6 * 4 = 16
    assert [c.calls[0].arguments["expression"] for c in calls] == ["3 * 4 + 2", "40 - 6 * 4"]
    assert [m["content"] for m in prompt.messages if m["role"] == "tool"] == ["14", "16"]
    assert prompt.messages[3]["content"] == "Answer: 14" and prompt.messages[7]["content"] == "Answer: 16"
    assert prompt.reference == str(int(prompt.reference)) and prompt.id.startswith("calculator-l2/eval/")
    one_shot_off = CalculatorTask(TaskConfig(name="calculator", one_shot=False)).eval_prompts(1)[0]
    assert [m["role"] for m in one_shot_off.messages] == ["user"]


@pytest.mark.parametrize("expression, steps, operations", [
    ("(5 + 6) * 8", (("5 + 6", "11"), ("11 * 8", "88")), (("+", (5, 6)), ("*", (8, 11)))),  # parentheses first
    ("10 + 12 - 5", (("10 + 12", "22"), ("22 - 5", "17")), (("+", (10, 12)), ("-", (22, 5)))),  # left to right
    ("3 + 4 * 5", (("4 * 5", "20"), ("3 + 20", "23")), (("*", (4, 5)), ("+", (3, 20)))),  # * before +
    ("3 * 12 / 3", (("3 * 12", "36"), ("36 / 3", "12")), (("*", (3, 12)), ("/", (36, 3)))),
    ("9 - 1", (("9 - 1", "8"),), (("-", (9, 1)),)),  # one operation: one step
    ("(2 * 3 + 4) / 5", (("2 * 3", "6"), ("6 + 4", "10"), ("10 / 5", "2")),
     (("*", (2, 3)), ("+", (4, 6)), ("/", (10, 5)))),
])
def test_solution_steps_and_the_operations_the_step_reward_pays(expression, steps, operations):
    """A step is its operation: operands sorted for + and * ("11 * 8" is the step "8 * 11"), in order for - and /
    ("22 - 5" is not "5 - 22"). Catches: sorting no operands (the "11 * 8" row), or those of - and / too ("22 - 5")."""
    assert calculator.solution_steps(expression) == steps
    assert tuple(step.operation for step in calculator.worked(expression)[1]) == operations


def test_levels_and_registration():
    task = build_task(TaskConfig(name="calculator", level=3))
    assert isinstance(task, CalculatorTask) and task.name == "calculator-l3" and task.answer_verifiers is None
    with pytest.raises(ConfigError, match=r"calculator has levels 1, 2, 3 \(the number of operations\), got 4"):
        build_task(TaskConfig(name="calculator", level=4))


def test_level_one_tells_level_two_stories_with_one_operation():
    train, held = splits(1)
    by_name = {p.canonical: p for p in train + held}
    # "Tom has 3 apples and buys 5 more apples": 3 + 5 = 8; "12 stickers ... among 4 groups": 12 / 4 = 3
    assert by_name["buy 3 5"].value == 8 and "Tom has 3 apples" in by_name["buy 3 5"].question
    assert by_name["share 12 4"].value == 3 and "share 12 5" not in by_name  # 12 / 5 is not whole
    assert by_name["fly 7 7"].value == 0 and "fly 3 7" not in by_name  # 3 - 7 birds: dropped
    assert all(len(calculator.solution_steps(p.expression)) == 1 for p in train + held)


def test_episode_driven_by_parsed_turns():
    task = CalculatorTask(TaskConfig(name="calculator", level=2))
    prompt = next(p for p in task.eval_prompts(10**5) if p.columns["expression"] == "10 + 12 - 5")
    env = task.environment(EpisodeConfig(tool_time_limit_s=1.0))
    assert isinstance(env, Environment) and env.score_state("", prompt) is None
    episode = env.start(prompt)
    assert isinstance(episode, Episode) and episode.final_state() == ""

    def respond(index, text):
        return episode.respond(parse_turn(index, text, env.tools))

    def call(expression):
        return f'<tool_call>{{"name": "calculate", "arguments": {{"expression": "{expression}"}}}}</tool_call>'

    # the reference works "10 + 12 - 5" as 10 + 12 = 22, then 22 - 5 = 17: those two operations are its steps, each
    # paid once, half the episode's step reward each (share 1/2) when the episode computed nothing else (precision
    # 1); each operation that reaches no step, and each failed call, is wasted and dilutes every later turn
    first = respond(0, "I will use the calculator.\n" + call("10 + 5"))
    assert first.text == "15" and (first.valid_calls, first.invalid_calls) == (1, 0)
    assert not first.done and first.reward == 0.0  # it ran, but 10 + 5 is no step of the solution
    malformed = respond(1, '<tool_call>{"name": "calculate", "arguments": {"expression": "1"}</tool_call>')
    assert (malformed.valid_calls, malformed.invalid_calls, malformed.done, malformed.reward) == (0, 1, False, 0.0)
    assert "malformed tool call" in malformed.text
    unknown = respond(2, '<tool_call>{"name": "python", "arguments": {"code": "1"}}</tool_call>' + call("10 + 12"))
    assert (unknown.valid_calls, unknown.invalid_calls) == (1, 1) and "unknown tool 'python'" in unknown.text
    assert unknown.text.startswith("22") and unknown.reward == 0.0  # one bad call spoils the turn's step reward
    step = respond(3, call("10 + 12"))
    # the spoiled turn did not use the step up: 1 of 2 steps; 1 operation + 3 wasted (10 + 5, the malformed call,
    # the unknown tool): 1/2 x 1/4
    assert step.reward == 0.125
    again = respond(4, call("12 + 10"))
    assert again.text == "22" and again.reward == 0.0  # a step is paid once (and a turn of a repeat wastes it: 4)
    zero = respond(5, '<tool_call>{"name": "calculate", "arguments": {"expression": "1 / 0"}}</tool_call>')
    # a call the tool cannot carry out is a failed call (the seeds: a call is judged by whether it succeeds)
    assert zero.text == "error: division by zero" and (zero.valid_calls, zero.invalid_calls) == (0, 1)
    prose = respond(5, call("There are 10 birds"))  # what a trained policy did in half its episodes
    assert prose.text.startswith("error: unexpected character 'T'") and (prose.valid_calls, prose.invalid_calls) == (
        0, 1)
    both = respond(6, call("22 - 5") + call("3 + 3"))
    # the last step (share 1/2); 22 - 5 and the guess 3 + 3 beside it, + 6 wasted (4, then 1 / 0 and the prose):
    # 1/2 x 1/8
    assert both.text == "17\n6" and both.reward == 1 / 16
    final = respond(7, "Answer: 17")
    assert final.done and final.text is None and final.reward == 0.0
    for bad in ({}, {"expression": 5}, {"expression": "2 ** 3"}, {"expression": "2 +"}, {"expression": "a + 1"}):
        with pytest.raises(ValueError, match="has no usable 'expression' column"):  # one message, whatever the form
            env.start(type(prompt)(id="x", messages=prompt.messages, reference="17", columns=bad))
    math = build_verifiers(TaskConfig(name="calculator"))["math"]
    assert math.verify("Answer: 17", prompt.reference).outcome is Outcome.CORRECT
    assert math.verify("Answer: 27", prompt.reference).outcome is Outcome.WRONG
