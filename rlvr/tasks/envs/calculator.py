"""The calculator environment and its task: multi-step arithmetic word problems and one tool,
`calculate(expression)`, that evaluates + - * / and parentheses over whole numbers.

The evaluator never calls eval: the text must consist of digits, operators, parentheses and spaces, is parsed
with `ast` and only number literals, unary +/- and the four binary operators are walked, in exact fractions.
Sizes are bounded (the expression's length, its node count, every literal and every intermediate value), so
`9**9**9`, a 10 MB string or `__import__('os')` come back as an "error: ..." text, never as an exception or a
hang. The environment has no state: the answer is checked by the "math" verifier on the last model turn
("Answer: <number>"; Prompt.reference is the number) and score_state returns None.

Calls: each worked example writes its whole expression in one call ("3 * 4 + 2" -> 14), then answers. Measured:
with examples that called once per operation, training on levels 1 and 2 taught the
135M model to answer after its first call, right on one-operation problems and wrong on every two-operation one
(held-out level-2 pass@1 0.019 -> 0.025); with the whole expression in one call, one call then the answer is right
at every level, so what level 1 teaches (reading the operation from the words) carries over to level 2 (0.050 ->
0.288 in 15 minutes, episode.credit=process).

Step rewards (read with episode.credit=process; rlvr/tasks/envs/calc_steps.py) pay computing, checked against
the known solution: a call reaches a step of the reference by performing its operation on the same operands (one
call per operation, or the whole expression in one), or by another order of the same work (the question's numbers,
the reference's operators, its value: "5 - 8 + 12" for 5 + 12 - 8). A turn earns share x precision: the steps it
reached first / all steps, x those steps / (its operations + those wasted earlier in the episode). The
former rule (1 for a turn that reached a value of the solution) paid guesses: `calculate("17")`, 8
literals 13 ... 20 in one turn; then precision per turn let guessing across turns tie honest working. Now an
expression without an operation ("17", "(17)", "-17") computes nothing and is a failed call (its turn earns 0, as
with any bad call, and each failed call is one operation wasted); a guess, a repeat or an identity ("17 + 0")
is a valid call (the tool computed an operation, and a reference step may be an identity: "(4 - 3) * 5" works
1 * 5) that reaches nothing and dilutes its turn and every later one. Measured with the former rule:
with outcome credit alone the trained model copied one template's sentence into the expression in about half of
its held-out episodes (valid-call share 0.96 -> 0.35); the step reward's 0 for such turns kept it at 1.00. A "the
call ran" step reward taught it to call anything (entropy 0.03).

Problems: a level is its number of operations: 1 (numbers 2..12), 2 (numbers 2..12) or 3 (numbers 2..9), kept
when every step stays a whole non-negative number. Level 2 is the measured task; level 1 tells
the same stories with one operation, the first rung of a curriculum (task.train_levels=[1,2]): the 135M base gets
~2 % of level-2 episodes right, so GRPO's groups there almost always tie, and level 1 several times more.
A problem's identity is "<template> <numbers>" (e.g. "apples 3 5 2"); the held-out split hashes it
(rlvr.tasks.base.split_by_hash). The two worked examples' templates are in no split.
"""
from __future__ import annotations

import ast
import itertools
import operator
from dataclasses import dataclass, replace
from fractions import Fraction
from functools import lru_cache

from rlvr.agents.protocol import Episode, ModelTurn, Observation, ToolSpec
from rlvr.agents.tool_calls import run_calls, tool_failure
from rlvr.config.run import ConfigError, TaskConfig
from rlvr.config.sections import EpisodeConfig
from rlvr.tasks.base import split_by_hash
from rlvr.tasks.chat import user_turn
from rlvr.tasks.envs.calc_steps import Progress, Step, Work, numbers_in, turn_reward
from rlvr.tasks.envs.common import Example, ExampleTurn, SplitTask, one_shot_messages
from rlvr.types import Prompt, Verdict

MAX_EXPRESSION_CHARS = 200  # a word problem's expression is ~20 characters
MAX_NODES = 100  # ast nodes: bounds the walk whatever the text
MAX_LITERAL = 10**12  # digits a model could mean; more is a runaway
MAX_MAGNITUDE = 10**15  # every intermediate value; products of two big literals stop here
_ALLOWED_CHARS = frozenset("0123456789+-*/() \t\n")
_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_SYMBOLS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}


class CalcError(ValueError):
    """What is wrong with an expression, in words the model reads back."""


def _walk(node: ast.AST, steps: list[Step]) -> Fraction:
    """The node's value; each binary operation it performs is appended to steps, innermost first, left to right."""
    if isinstance(node, ast.Constant):
        if type(node.value) is not int:  # bool is an int subclass; floats cannot pass the character check
            raise CalcError(f"only whole numbers are allowed, got {node.value!r}")
        if abs(node.value) > MAX_LITERAL:
            raise CalcError(f"number too large (at most {MAX_LITERAL})")
        return Fraction(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        value = _walk(node.operand, steps)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        apply = _OPERATORS.get(type(node.op))
        if apply is None:
            raise CalcError("only + - * / and parentheses are supported (no **, //, %)")
        left, right = _walk(node.left, steps), _walk(node.right, steps)
        if isinstance(node.op, ast.Div) and right == 0:
            raise CalcError("division by zero")
        value = apply(left, right)
        if abs(value) > MAX_MAGNITUDE:
            raise CalcError(f"result too large (at most {MAX_MAGNITUDE})")
        steps.append(Step(_SYMBOLS[type(node.op)], left, right, value))
        return value
    if isinstance(node, ast.Call):  # "2(3 + 4)": what the model meant is a product
        raise CalcError("a number or ')' right before '(' needs an operator, e.g. 2 * (3 + 4)")
    raise CalcError(f"{type(node).__name__} is not allowed; use whole numbers, + - * / and parentheses")


def worked(expression: object) -> tuple[Fraction, tuple[Step, ...]]:
    """The expression's exact value and the operations that compute it, one at a time, innermost first, left to
    right ("(5 + 6) * 8": 5 + 6 = 11, then 11 * 8 = 88); CalcError (only) on anything else."""
    if not isinstance(expression, str):
        raise CalcError(f"the expression must be a string, got {type(expression).__name__}")
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CalcError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    text = expression.strip()
    if not text:
        raise CalcError("empty expression")
    bad = sorted(set(text) - _ALLOWED_CHARS)
    if bad:
        raise CalcError(f"unexpected character {bad[0]!r}; use whole numbers, + - * / and parentheses")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # the parser's own limits (nesting) included
        raise CalcError(f"cannot read {text[:40]!r} as an expression") from None
    if sum(1 for _ in ast.walk(tree)) > MAX_NODES:
        raise CalcError(f"expression has more than {MAX_NODES} parts")
    steps: list[Step] = []
    return _walk(tree.body, steps), tuple(steps)


def exact_value(expression: object) -> Fraction:
    """The expression's exact value; CalcError (only) on anything else."""
    return worked(expression)[0]


def format_value(value: Fraction) -> str:
    """Whole numbers as integers; other quotients to 6 decimals, trailing zeros dropped."""
    if value.denominator == 1:
        return str(value.numerator)
    return f"{float(value):.6f}".rstrip("0").rstrip(".")


def evaluate(expression: object) -> str:
    """The `calculate` tool: the value as text, or "error: ..." as a failed call (tool_calls.ToolFailure; never
    raises)."""
    try:
        return format_value(exact_value(expression))
    except CalcError as err:
        return tool_failure(str(err))


def calculation(expression: object) -> tuple[str, Work | None]:
    """The episode's `calculate` tool: (its answer, what it computed; None for a failed call). As `evaluate`,
    except that an expression without an operation ("17", "(17)", "-17") is a failed call: it computes nothing
    (rlvr/tasks/envs/calc_steps.py)."""
    try:
        value, steps = worked(expression)
    except CalcError as err:
        return tool_failure(str(err)), None
    if not steps:
        shown = str(expression).strip()[:40]
        return tool_failure(f"{shown!r} is a number and computes nothing; write the operation, e.g. 12 + 5"), None
    return format_value(value), Work(steps, numbers_in(str(expression)), value)


def solution_steps(expression: str) -> tuple[tuple[str, str], ...]:
    """The expression worked one operation at a time, innermost first, each step on the values before it:
    "(5 + 6) * 8" -> (("5 + 6", "11"), ("11 * 8", "88")): `worked`'s steps as text."""
    return tuple((f"{format_value(s.left)} {s.symbol} {format_value(s.right)}", format_value(s.value))
                 for s in worked(expression)[1])


CALCULATE = ToolSpec(
    name="calculate",
    description="Evaluate an arithmetic expression with whole numbers, + - * / and parentheses, e.g. '3 + 2 * 4'.",
    parameters={"type": "object", "properties": {"expression": {"type": "string", "description": "e.g. '(7 - 2) * 3'"}},
                "required": ["expression"], "additionalProperties": False},
)


@dataclass(frozen=True)
class Template:
    key: str
    text: str  # the question, with {a} {b} {c} ({d}) for the numbers
    expression: str  # the same numbers as an expression: the reference is its value


# A level's number is its operations. Level 1 reuses level 2's stories and wording with one operation each (so
# what it teaches, reading the operation from the words, is what level 2 needs); levels 2 and 3 vary the operation
# order and the role of parentheses.
TEMPLATES: dict[int, tuple[Template, ...]] = {
    1: (
        Template("buy", "Tom has {a} apples and buys {b} more apples. How many apples does he have now?", "{a} + {b}"),
        Template("fill", "A box holds {a} pens. Sara fills {b} boxes. How many pens does she have?", "{a} * {b}"),
        Template("fly", "There are {a} birds on a tree. {b} of them fly away. How many birds are on the tree now?",
                 "{a} - {b}"),
        Template("share", "{a} stickers are shared equally among {b} groups. How many stickers does each group get?",
                 "{a} / {b}"),
        Template("price", "A ticket costs {a} dollars. How much do {b} tickets cost?", "{a} * {b}"),
        Template("bake", "Mom bakes {a} cookies and Dad bakes {b}. How many cookies do they bake?", "{a} + {b}"),
    ),
    2: (
        Template("apples", "Tom has {a} apples and buys {b} bags with {c} apples in each. How many apples does he "
                           "have now?", "{a} + {b} * {c}"),
        Template("pens", "A box holds {a} pens. Sara fills {b} boxes, then gives away {c} pens. How many pens does "
                         "she have left?", "{a} * {b} - {c}"),
        Template("birds", "There are {a} birds on a tree. {b} more birds land on it, then {c} fly away. How many "
                          "birds are on the tree now?", "{a} + {b} - {c}"),
        Template("stickers", "{a} children have {b} stickers each. They share all the stickers equally among {c} "
                             "groups. How many stickers does each group get?", "{a} * {b} / {c}"),
        Template("flowers", "A farmer plants {a} red and {b} yellow flowers in each row. There are {c} rows. How "
                            "many flowers does he plant?", "({a} + {b}) * {c}"),
        Template("tickets", "A ticket costs {a} dollars. With a coupon it costs {b} dollars less. How much do {c} "
                            "tickets with the coupon cost?", "({a} - {b}) * {c}"),
        Template("cookies", "Mom bakes {a} cookies and Dad bakes {b}. They put them into {c} jars, the same number "
                            "in each. How many cookies are in each jar?", "({a} + {b}) / {c}"),
    ),
    3: (
        Template("market", "Tom has {a} apples and buys {b} bags with {c} apples in each. Then he eats {d} apples. "
                           "How many apples does he have now?", "{a} + {b} * {c} - {d}"),
        Template("garden", "A farmer plants {a} red and {b} yellow flowers in each of {c} rows. Then {d} flowers "
                           "die. How many flowers are left?", "({a} + {b}) * {c} - {d}"),
        Template("bakery", "A baker makes {a} trays of {b} muffins and {c} more muffins. She packs them equally "
                           "into {d} boxes. How many muffins go in each box?", "({a} * {b} + {c}) / {d}"),
    ),
}
NUMBERS = {1: range(2, 13), 2: range(2, 13), 3: range(2, 10)}
EXAMPLE = Template("pencils", "Lena has 3 boxes with 4 pencils in each and 2 more pencils. How many pencils does "
                              "she have?", "3 * 4 + 2")
EXAMPLE_LEAD = "I will use the calculator."  # a sentence before the call: see common.one_shot_messages
# the second worked example (two: see common.one_shot_messages); in no template, so in no split
SECOND_EXAMPLE = Template("cups", "A shop has 40 cups and sells 6 packs of 4 cups. How many cups are left?",
                          "40 - 6 * 4")


@dataclass(frozen=True)
class Problem:
    canonical: str  # "apples 3 5 2": the identity hashed for the split and shown in Prompt.id
    question: str
    expression: str
    value: int
    template: str


def _story_value(node: ast.AST, numbers: dict[str, int]) -> Fraction | None:
    """A template's value for these numbers, or None when a step is not a whole number >= 0 (the story never has
    half a cookie or -3 birds). Templates are ours: names and the four operators only."""
    if isinstance(node, ast.Name):
        return Fraction(numbers[node.id])
    assert isinstance(node, ast.BinOp), ast.dump(node)
    left, right = _story_value(node.left, numbers), _story_value(node.right, numbers)
    if left is None or right is None or (isinstance(node.op, ast.Div) and right == 0):
        return None
    value = _OPERATORS[type(node.op)](left, right)
    return value if value.denominator == 1 and value >= 0 else None


def _problems(template: Template, numbers: range) -> list[Problem]:
    names = "abcd"[: template.expression.count("{")]
    tree = ast.parse(template.expression.format(**{n: n for n in names}), mode="eval").body  # parsed once
    found = []
    for values in itertools.product(numbers, repeat=len(names)):
        fill = dict(zip(names, values))
        value = _story_value(tree, fill)
        if value is not None:
            found.append(Problem(f"{template.key} {' '.join(map(str, values))}", template.text.format(**fill),
                                 template.expression.format(**fill), int(value), template.key))
    return found


@lru_cache(maxsize=None)
def splits(level: int) -> tuple[tuple[Problem, ...], tuple[Problem, ...]]:
    """(train, held_out) of a level."""
    if level not in TEMPLATES:
        raise ConfigError(f"task.level: calculator has levels {', '.join(map(str, TEMPLATES))} (the number of "
                          f"operations), got {level}")
    problems = [p for t in TEMPLATES[level] for p in _problems(t, NUMBERS[level])]
    return split_by_hash(problems, lambda p: p.canonical)


class CalculatorEpisode:
    """Each turn's calls are run; a turn without calls is the answer. Remembers which reference steps were
    reached, so that a step is paid once (calling "10 + 12" three times is one step), and the operations wasted,
    which dilute every later turn (calc_steps)."""

    def __init__(self, limit_s: float, reference: Work) -> None:
        self.limit_s = limit_s
        self.reference = reference
        self.progress = Progress()

    def respond(self, turn: ModelTurn) -> Observation:
        performed: list[Work] = []

        def calculate(expression: object) -> str:
            answer, done = calculation(expression)
            if done is not None:
                performed.append(done)
            return answer

        observation = run_calls(turn, {"calculate": calculate}, self.limit_s)
        # a turn with a bad call earns nothing and reaches nothing (the next turn may compute it again)
        reward, self.progress = turn_reward(self.reference, self.progress, performed, observation.invalid_calls)
        return replace(observation, reward=reward)

    def final_state(self) -> str:
        return ""


class CalculatorEnvironment:
    name = "calculator"
    tools = (CALCULATE,)
    scores_state = False  # stateless: the "math" verifier on the final answer scores an episode

    def __init__(self, episode: EpisodeConfig) -> None:
        self.limit_s = episode.tool_time_limit_s

    def start(self, prompt: Prompt) -> Episode:
        expression = prompt.columns.get("expression")
        try:
            value, steps = worked(expression)
        except CalcError as err:
            raise ValueError(f"calculator prompt {prompt.id!r} has no usable 'expression' column ({expression!r}: "
                             f"{type(err).__name__}): the environment plays the calculator task's own prompts"
                             ) from None
        return CalculatorEpisode(self.limit_s, Work(steps, numbers_in(str(expression)), value))

    def score_state(self, final_state: str, prompt: Prompt) -> Verdict | None:
        return None  # no state: the "math" verifier on the answer alone scores the episode


def worked_example(template: Template, instruction: str) -> Example:
    """One call with the whole expression, its result, then the answer (the module's docstring: calls)."""
    value = evaluate(template.expression)
    turn = ExampleTurn((("calculate", {"expression": template.expression}),), (value,))
    return Example(user_turn(template.text, instruction), EXAMPLE_LEAD, (turn,), f"Answer: {value}")


class CalculatorTask(SplitTask):
    """Word problems of one level; the answer verifiers are the task's own (task.verifiers, "math" by default)."""

    def __init__(self, config: TaskConfig) -> None:
        self.answer_verifiers: dict[str, float] | None = None  # None = task.verifiers ("math" reads the answer)
        self.config = config
        self.level = config.level
        self.name = f"calculator-l{self.level}"
        self.train, self.held_out = splits(self.level)

    def prompt(self, problem: Problem, split: str) -> Prompt:
        examples = [worked_example(t, self.config.instruction) for t in (EXAMPLE, SECOND_EXAMPLE)]
        messages = one_shot_messages(examples, user_turn(problem.question, self.config.instruction), self.config)
        return Prompt(id=f"calculator-l{self.level}/{split}/{problem.canonical}", messages=messages,
                      reference=str(problem.value),
                      columns={"level": self.level, "template": problem.template, "expression": problem.expression})

    def environment(self, episode: EpisodeConfig) -> CalculatorEnvironment:
        return CalculatorEnvironment(episode)
