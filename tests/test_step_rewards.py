"""Step rewards pay only for work: the calculator once paid `calculate("17")`, a
literal that computes nothing, and a turn of 8 guessed literals 13 ... 20 the full step reward with 8 "valid"
calls; under episode.credit=process guessing was the cheapest policy. Each gaming strategy is played here against
honest working on the same problem, through Environment.start(prompt).respond(turn), and earns strictly less, per
turn and over the episode (guessing one candidate per turn once tied honest working); an episode's
step rewards add up to at most 1. Numbers are derived by hand in the comments: a calculator turn earns share x
precision (steps first reached / all steps x steps first reached / (operations counted + operations wasted by
earlier turns: each that reached no step, and each failed call)), a filesystem turn progress x precision (paths
fixed / paths wrong at the start x changes that fixed one / changes)."""
from __future__ import annotations

import functools
import random
from fractions import Fraction

import pytest

from rlvr.agents.protocol import ModelTurn, ToolCall
from rlvr.config.run import TaskConfig
from rlvr.config.sections import EpisodeConfig
from rlvr.tasks.envs import calculator, filesystem


@functools.lru_cache(maxsize=None)
def calculator_prompt(level: int, canonical: str):
    task = calculator.CalculatorTask(TaskConfig(name="calculator", level=level))
    train, held = calculator.splits(level)
    return task.prompt(next(p for p in train + held if p.canonical == canonical), "eval")


def calculator_episode(level: int, canonical: str):
    return calculator.CalculatorEnvironment(EpisodeConfig()).start(calculator_prompt(level, canonical))


def calc(*expressions: str, errors: tuple[str, ...] = ()) -> ModelTurn:
    return ModelTurn(0, "", tuple(ToolCall("calculate", {"expression": e}) for e in expressions), errors)


def rewards(episode, *turns: ModelTurn) -> list[float]:
    return [episode.respond(turn).reward for turn in turns]


BIRDS = (2, "birds 10 12 5")  # "10 birds, 12 more land, then 5 fly away": 10 + 12 - 5; steps 10 + 12 = 22, 22 - 5 = 17


def test_honest_working_earns_1_per_episode_however_it_is_split():
    """One call per step over two turns (1/2 + 1/2), both in one turn (2/2 x 2/2), or the whole expression in one
    call as the worked examples do (2/2 x 2/2): 1 each. Catches: paying a turn 1 whenever it reaches a step (the
    former rule: two turns earned 2), and a share of one step per call rather than per operation (one call: 1/2)."""
    assert rewards(calculator_episode(*BIRDS), calc("10 + 12"), calc("22 - 5")) == [0.5, 0.5]
    assert rewards(calculator_episode(*BIRDS), calc("10 + 12", "22 - 5")) == [1.0]
    assert rewards(calculator_episode(*BIRDS), calc("10 + 12 - 5")) == [1.0]
    assert rewards(calculator_episode(*BIRDS), calc("12 + 10")) == [0.5]  # + in either order is the step
    assert rewards(calculator_episode(*BIRDS), calc("10 - 5 + 12")) == [1.0]  # another order of the same work


@pytest.mark.parametrize("literal", ["17", "(17)", "+17", "-17", " 22 ", "--5"])
def test_a_bare_number_computes_nothing_and_is_a_failed_call(literal):
    """A literal (the answer, a step's value, a question's number copied) is answered as a failed call: the turn
    earns 0, beside an honest call too, and each failed call is one operation wasted. Catches: returning the value
    as the tool's answer (the bare `calculate("17")`), or leaving the operation count unchecked."""
    episode = calculator_episode(*BIRDS)
    alone = episode.respond(calc(literal))
    assert alone.text.startswith("error: ") and "computes nothing; write the operation" in alone.text
    assert (alone.valid_calls, alone.invalid_calls, alone.reward) == (0, 1, 0.0)
    beside = episode.respond(calc("10 + 12", literal))  # a bad call spoils the turn: 0, not 1/2
    assert (beside.valid_calls, beside.invalid_calls, beside.reward) == (1, 1, 0.0)
    # the spoiled turn reached nothing: the step is still due; its 10 + 12 would have reached it (no waste), the two
    # literals are 2 operations wasted: 1/2 x 1/(1 + 2)
    assert episode.respond(calc("10 + 12")).reward == pytest.approx(1 / 6)


def test_eight_guessed_literals_earn_nothing_and_count_as_failed():
    """A guessing turn: 8 literals 13 ... 20 (17 the answer) earned the full step reward with 8 "valid"
    calls; now 0 with 8 failed ones. Honest working on the first step earns 1/2."""
    observation = calculator_episode(*BIRDS).respond(calc(*map(str, range(13, 21))))
    assert (observation.valid_calls, observation.invalid_calls, observation.reward) == (0, 8, 0.0)


@pytest.mark.parametrize("guesses, reward", [
    # 8 operations on the question's numbers, one of them the step 10 + 12: 1/2 x 1/8
    (("10 + 5", "10 - 5", "12 + 5", "12 - 5", "10 * 12", "12 - 10", "10 + 12", "5 * 12"), 1 / 16),
    (("10 + 12",) * 8, 1 / 16),  # one call repeated 8 times: the step once, 8 operations: 1/2 x 1/8
    (("10 + 12", "10 + 12"), 1 / 4),  # repeated once: 1/2 x 1/2
    (("10 + 12 + 0",), 1 / 4),  # an identity beside the step: 2 operations, 1 step: 1/2 x 1/2
    (("22 * 1", "12 + 0", "17 - 0", "10 / 1"), 0.0),  # identities on a step's value or a copied number: no step
    (("13 + 4", "20 - 3", "10 + 7"), 0.0),  # the answer 17 from guessed numbers: 22 - 5 is the step, 13 + 4 is not
    (("4 + 13",), 0.0),
])
def test_each_guess_earns_strictly_less_than_the_honest_first_step(guesses, reward):
    """Honest working's first turn, "10 + 12", earns 1/2 (the first test). Catches: precision counted per call
    (8 calls of one operation each: still 1/16, but "10 + 12 + 0" would earn 1/2), steps matched by value
    ("13 + 4" reaches 17), and a repeat within the turn left uncounted (8 repeats would earn 1/2)."""
    observation = calculator_episode(*BIRDS).respond(calc(*guesses))
    assert observation.invalid_calls == 0 and observation.valid_calls == len(guesses)  # operations are valid calls
    assert observation.reward == pytest.approx(reward) and observation.reward < 0.5


def test_the_whole_expression_padded_with_operations_earns_less_than_the_whole_expression():
    """One call holding the solution inside an enumeration of operations reaches both steps, but its precision is
    the share of its operations that are steps. Catches: precision counted per call (a call that reached a new
    step is 1 of 1), which paid this call 1 like the honest "10 + 12 - 5"."""
    # 10 + 12 = 22 (step), 22 - 5 = 17 (step), 10 * 12 = 120, 17 + 120, 12 - 5 = 7, 137 + 7: 2 of 6 operations
    padded = calculator_episode(*BIRDS).respond(calc("(10 + 12 - 5) + (10 * 12) + (12 - 5)"))
    assert padded.text == "144" and padded.reward == pytest.approx(2 / 6)
    # 10 + 12, 22 - 5, 17 + 0: 2 steps of 2, 2 of 3 operations
    assert calculator_episode(*BIRDS).respond(calc("10 + 12 - 5 + 0")).reward == pytest.approx(2 / 3)


def test_a_step_is_paid_once_and_building_on_it_is_not_a_guess():
    """Level 3, "market 3 5 2 4": 3 + 5 * 2 - 4; steps 5 * 2 = 10, 3 + 10 = 13, 13 - 4 = 9 (1/3 each). A turn that
    recomputes earlier turns' steps on its way to a new one is paid for the new one alone, undiluted; a turn that
    only recomputes earns 0. Catches: counting redone steps as operations (the second turn: 1/3 x 1/2), and not
    remembering the steps reached (the last turn: 1/3 again, the episode over 1)."""
    episode = calculator_episode(3, "market 3 5 2 4")
    got = rewards(episode, calc("5 * 2"), calc("3 + 5 * 2"), calc("3 + 5 * 2 - 4"), calc("3 + 5 * 2 - 4"))
    assert got == pytest.approx([1 / 3, 1 / 3, 1 / 3, 0.0])
    again = calculator_episode(3, "market 3 5 2 4")
    # within one turn a repeat of the turn's own new step counts: 5 * 2 (new), 5 * 2 (counted): 1/3 x 1/2
    assert rewards(again, calc("5 * 2", "2 * 5")) == pytest.approx([1 / 6])


def test_an_operation_must_be_the_reference_s_on_its_operands():
    """"tickets 4 3 5": (4 - 3) * 5, steps 4 - 3 = 1 and 1 * 5 = 5: the answer is a question's number, and the
    last step an identity; the reference's own identity is paid (in either order), a copied "5" is not, nor is
    3 - 4 (- keeps its order). Catches: sorting the operands of - and / (3 - 4 would pay 4 - 3's half)."""
    assert rewards(calculator_episode(2, "tickets 4 3 5"), calc("3 - 4"), calc("5")) == [0.0, 0.0]
    assert rewards(calculator_episode(2, "tickets 4 3 5"), calc("4 - 3"), calc("5 * 1")) == [0.5, 0.5]
    # "cookies 6 4 5": (6 + 4) / 5; 5 / 10 is not the step 10 / 5 (1/2 for 6 + 4 alone)
    assert rewards(calculator_episode(2, "cookies 6 4 5"), calc("5 / (4 + 6)")) == pytest.approx([1 / 4])


APPLES = (2, "apples 11 12 8")  # 11 + 12 * 8; steps 12 * 8 = 96, then 11 + 96 = 107


def test_guessing_across_turns_earns_less_than_honest_working():
    """Three guessing episodes tied honest working's 1 while precision was per turn: a wrong guess in a turn
    of its own cost nothing. Now an operation that reaches no step stays counted in every later turn's precision.
    Catches: the earlier turns' waste left out of the precision (the whole expressions: [0, 0, 1]), and failed
    calls not counted as waste (the peek: 2/12 = 1/6)."""
    assert rewards(calculator_episode(*APPLES), calc("11 + 12 * 8")) == [1.0]
    # one wrong whole expression per turn: 11 * 12, 132 + 8 (2 wasted); 11 + 12, 23 * 8 (4); then both steps:
    # 2/2 x 2/(2 + 4)
    got = rewards(calculator_episode(*APPLES), calc("11 * 12 + 8"), calc("(11 + 12) * 8"), calc("11 + 12 * 8"))
    assert got == pytest.approx([0.0, 0.0, 1 / 3])
    # one operation per turn: 12 + 8, 12 - 8 wasted; 12 * 8: 1/2 x 1/(1 + 2); 11 + 96: 1/2 x 1/(1 + 2); 1/3 in all
    got = rewards(calculator_episode(*APPLES), calc("12 + 8"), calc("12 - 8"), calc("12 * 8"), calc("11 + 96"))
    assert got == pytest.approx([0.0, 0.0, 1 / 6, 1 / 6])
    # the peek: six whole expressions (12 operations; "11 + 12 * 8" among them would reach both steps: 10 wasted)
    # and a malformed call (1 more) spoil turn 0, which showed every value; then the honest call: 2/2 x 2/(2 + 11)
    peek = calc(*[f"11 {o} 12 {o2} 8" for o in "+-*" for o2 in "+*"], errors=("malformed tool call: x",))
    assert rewards(calculator_episode(*APPLES), peek, calc("11 + 12 * 8")) == pytest.approx([0.0, 2 / 13])


@pytest.mark.parametrize("canonical, route", [
    ("birds 5 12 8", "5 - 8 + 12"), ("birds 5 12 8", "5 + (12 - 8)"), ("birds 5 12 8", "12 - 8 + 5"),
    ("stickers 11 12 4", "11 / 4 * 12"), ("stickers 11 12 4", "11 * (12 / 4)"),
    ("birds 7 4 4", "4 - 4 + 7"),  # the answer is a question's number: 7 + 4 - 4
])
def test_another_order_of_the_reference_s_work_earns_the_full_reward(canonical, route):
    """The question's numbers and the reference's operators, in another order, to the reference's value: every step
    reached, the call's 2 operations performed: 2/2 x 2/2, as the reference's own order ("5 + 12 - 8" works 5 + 12
    = 17, 17 - 8 = 9; "5 - 8 + 12" works 5 - 8 = -3, -3 + 12 = 9, neither a step: it earned 0). Four guesses of the
    whole expression in one turn, the reference among them, earn 2/8. Catches: routes not recognised (`route =
    False` in calc_steps._reach: 0 for each route)."""
    assert rewards(calculator_episode(2, canonical), calc(route)) == [1.0]
    # 5 + 12 - 8 (both steps), 5 * 12 - 8, 5 + 12 * 8, 5 - 12 - 8: 2 steps of 2, 8 operations: 2/2 x 2/8
    guesses = calc("5 + 12 - 8", "5 * 12 - 8", "5 + 12 * 8", "5 - 12 - 8")
    assert rewards(calculator_episode(2, "birds 5 12 8"), guesses) == pytest.approx([1 / 4])


@pytest.mark.parametrize("canonical, expression, reward", [
    ("birds 10 12 5", "12 - 10 + 5", 0.0),  # its numbers and operators, but 7, not 17: 12 - 10, 2 + 5 reach nothing
    ("birds 10 12 5", "22 - 5 + 0", 1 / 4),  # the identity's 0 is no number of it: 22 - 5 a step, + 0 not: 1/2 x 1/2
    ("birds 10 12 5", "17 + 5 - 5", 1 / 4),  # the answer copied: numbers 5 5 17; 22 wasted, 22 - 5 a step: 1/2 x 1/2
    ("tickets 4 3 5", "5 / (4 - 3)", 1 / 4),  # = (4 - 3) * 5 = 5, / for *: 4 - 3 a step, 5 / 1 not: 1/2 x 1/2
    ("birds 7 4 4", "7 * 4 / 4", 0.0),  # = 7 + 4 - 4 = 7, * and / for + and -: 28 and 7 by other operations
    ("birds 7 4 4", "7 + 4 - 4 + 0", 2 / 3),  # 7 + 4, 11 - 4 (both steps), 7 + 0 (wasted): 2/2 x 2/3
])
def test_a_route_needs_the_question_s_numbers_the_reference_s_operators_and_value(canonical, expression, reward):
    """Another route earns the full reward only with exactly the question's numbers (no identity's 0 or 1, no
    value copied), the reference's operators (no coincidence: 5 / 1 = 5 * 1) and the reference's value; otherwise
    its operations are matched one by one. Catches, one condition of calc_steps.is_route dropped: the value ("12 -
    10 + 5" would earn 1), the numbers ("22 - 5 + 0", "17 + 5 - 5": 1), the operators ("5 / (4 - 3)", "7 * 4 / 4":
    1)."""
    assert rewards(calculator_episode(2, canonical), calc(expression)) == pytest.approx([reward])


WORKING = "10 + 12 - 5"  # BIRDS' whole expression in one call: 1
PEEK = calc(*[f"10 {o} 12 {o2} 5" for o in "+-*" for o2 in "+-"], errors=("malformed tool call: x",))


@pytest.mark.parametrize("turns, expected", [
    # literals: a failed call each, 1 operation wasted each; then the working: 2/2 x 2/(2 + 1), 2/2 x 2/(2 + 8)
    ([calc("17"), calc(WORKING)], [0.0, 2 / 3]),
    ([calc(*map(str, range(13, 21))), calc(WORKING)], [0.0, 1 / 5]),
    # copying the question: the sentence is a failed call (2/3 after it); its numbers in order, 10 + 12 + 5: the
    # step 10 + 12 and 22 + 5 wasted: 1/2 x 1/2, then 22 - 5: 1/2 x 1/(1 + 1)
    ([calc("There are 10 birds on a tree"), calc(WORKING)], [0.0, 2 / 3]),
    ([calc("10 + 12 + 5"), calc("22 - 5")], [0.25, 0.25]),
    # enumerations across turns: one operation per turn (10 + 5, 12 + 5 wasted; then 1/2 x 1/3 twice), one whole
    # expression per turn (120 - 5, 10 + 60: 4 wasted; 2/2 x 2/6); in one turn (2 steps, 8 operations)
    ([calc("10 + 5"), calc("12 + 5"), calc("10 + 12"), calc("22 - 5")], [0.0, 0.0, 1 / 6, 1 / 6]),
    ([calc("10 * 12 - 5"), calc("10 + 12 * 5"), calc(WORKING)], [0.0, 0.0, 1 / 3]),
    ([calc(WORKING, "10 * 12 - 5", "10 + 12 * 5", "10 - 12 - 5")], [1 / 4]),
    # the peek: 12 operations, 2 would reach steps, + the malformed call: 11 wasted; then 2/2 x 2/13
    ([PEEK, calc(WORKING)], [0.0, 2 / 13]),
    # repeated identical calls: in one turn (2 steps, 4 operations); a wrong call across turns (2 wasted: 2/4);
    # a reached step across turns (a turn that reaches nothing new wastes it: 1/2, 0, 1/2 x 1/2)
    ([calc(WORKING, WORKING)], [0.5]),
    ([calc("10 + 5"), calc("10 + 5"), calc(WORKING)], [0.0, 0.0, 0.5]),
    ([calc("10 + 12"), calc("10 + 12"), calc("22 - 5")], [0.5, 0.0, 0.25]),
    ([calc("10 + 12 - 5 + 0")], [2 / 3]),  # an identity: 2 steps, 3 operations
])
def test_every_guessing_strategy_earns_strictly_less_than_honest_working_over_the_episode(turns, expected):
    """Honest working earns 1 however it is split (test_honest_working_earns_1_per_episode_however_it_is_split);
    each guessing strategy (literals, copying the question, enumerations across turns and within one, the peek
    through a spoiled turn, repeated identical calls, identities) earns strictly less over the whole episode, the
    rewards derived in the comments. Catches: a failed call not counted as waste (literals or the copied sentence,
    then working: 1), a turn that only redoes a reached step not wasting it (1/2 + 0 + 1/2), the earlier turns'
    waste left out of the precision (1)."""
    got = rewards(calculator_episode(*BIRDS), *turns)
    assert got == pytest.approx(expected) and sum(got) < 1.0


def test_an_episode_never_earns_more_than_1_whatever_it_calls():
    """100 episodes of 6 turns, each of 1-4 calls drawn from honest steps, other routes, repeats, identities,
    guesses and literals: every episode's step rewards add up to at most 1; and 100 more that open with a guess
    (an operation that reaches no step, or a literal) earn strictly less than 1. Catches: a step paid twice across
    turns, a share not bounded by the reference's steps, a route paying steps already reached, the earlier turns'
    waste left out of the precision."""
    pool = ["10 + 12", "12 + 10", "22 - 5", "10 + 12 - 5", "10 - 5 + 12", "12 + (10 - 5)", "17 + 0", "13 + 4",
            "10 - 5", "22 * 1", "17", "5 - 22"]
    guesses = ["10 - 5", "13 + 4", "17 + 0", "12 - 10 + 5", "10 * 12 - 5", "17"]
    rng = random.Random(0)
    for _ in range(100):
        turns = [calc(*rng.choices(pool, k=rng.randint(1, 4))) for _ in range(6)]
        assert sum(rewards(calculator_episode(*BIRDS), *turns)) <= 1.0 + 1e-12
        assert sum(rewards(calculator_episode(*BIRDS), calc(rng.choice(guesses)), *turns[1:])) < 1.0


# -- the filesystem ---------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def fs_prompt(level: int, canonical: str):
    task = filesystem.FilesystemTask(TaskConfig(name="filesystem", level=level))
    train, held = filesystem.splits(level)
    return task.prompt(next(p for p in train + held if p.canonical == canonical), "eval")


def fs_episode(level: int, canonical: str):
    return filesystem.FilesystemEnvironment(EpisodeConfig()).start(fs_prompt(level, canonical))


def fs(*calls: tuple[str, dict], errors: tuple[str, ...] = ()) -> ModelTurn:
    return ModelTurn(0, "", tuple(ToolCall(name, arguments) for name, arguments in calls), errors)


RENAME = (1, "rename|notes.txt|todo.txt|hello")  # {notes.txt} -> {todo.txt}: 2 paths wrong at the start
THERE, BACK = ("mv", {"src": "notes.txt", "dst": "todo.txt"}), ("mv", {"src": "todo.txt", "dst": "notes.txt"})
LOOK = ("ls", {"path": "."})


def test_filesystem_undo_then_redo_is_paid_once():
    """Turns: rename (2 -> 0 wrong: 2/2), undo (2), redo (0, no fewer than before): 1, 0, 0. Catches: the fewest
    wrong paths taken from the last turn instead of the episode's best (the redo would be paid again)."""
    assert rewards(fs_episode(*RENAME), fs(THERE), fs(BACK), fs(THERE)) == [1.0, 0.0, 0.0]


def test_filesystem_calls_that_change_nothing_earn_nothing():
    """mv a b then mv b a in one turn ends where it began: 0 with both calls valid; reads alone: 0 and valid; a
    write of the text a file holds changed nothing and is a failed call (the turn earns 0 beside the honest call).
    Catches: paying a change that was undone within the turn, and counting a no-change write as valid."""
    episode = fs_episode(*RENAME)
    both = episode.respond(fs(THERE, BACK))
    assert (both.valid_calls, both.invalid_calls, both.reward) == (2, 0, 0.0)
    looked = episode.respond(fs(LOOK, ("cat", {"path": "notes.txt"})))
    assert (looked.valid_calls, looked.invalid_calls, looked.reward) == (2, 0, 0.0)
    assert looked.text == "notes.txt\nhello"
    same = episode.respond(fs(("write", {"path": "notes.txt", "content": "hello"}), THERE))
    assert same.text == "error: write: notes.txt: nothing changed (it already was so)\nok"
    assert (same.valid_calls, same.invalid_calls, same.reward) == (1, 1, 0.0)


def test_filesystem_pay_does_not_grow_with_calls_and_guessing_earns_less():
    """Honest rename: 1. With 7 reads beside it: still 1 (reads are not changes). Back and forth three times in one
    turn: the end state is right (2/2) but 1 of 3 changes fixed a path: 1/3. Creating a file by guessing its text
    (write x, write y, write the goal's): 1 of 3 changes: 1/3 of 1. Catches: precision left out (1 for the
    guesses), reads taken for changes (an ls changes nothing: it would fail and spoil the honest turn)."""
    assert rewards(fs_episode(*RENAME), fs(THERE, *[LOOK] * 7)) == [1.0]
    assert rewards(fs_episode(*RENAME), fs(THERE, BACK, THERE)) == pytest.approx([1 / 3])
    create = fs_episode(1, "write|notes.txt|todo.txt|hello")  # {notes.txt} -> {notes.txt, todo.txt: hello}: 1 wrong
    guesses = [("write", {"path": "todo.txt", "content": text}) for text in ("hi", "done", "hello")]
    assert rewards(create, fs(*guesses)) == pytest.approx([1 / 3])


def test_filesystem_episode_earns_at_most_1_and_a_spoiled_turn_s_progress_is_spent():
    """Level 2 "mkdir_move|notes.txt|docs|hello": {notes.txt} -> {docs, docs/notes.txt}, 3 paths wrong. Two turns:
    mkdir (3 -> 2: 1/3), mv (2 -> 0: 2/3), adding up to 1 as one turn of both does. A turn spoiled by a bad call
    earns 0 and its progress is spent: a later read-only turn earns 0 (the former rule paid it 1), the mv 2/3.
    Catches: moving the fewest wrong paths only on turns without a bad call (the mv would earn 1)."""
    mkdir, mv = ("mkdir", {"path": "docs"}), ("mv", {"src": "notes.txt", "dst": "docs"})
    canonical = (2, "mkdir_move|notes.txt|docs|hello")
    assert rewards(fs_episode(*canonical), fs(mkdir), fs(mv)) == pytest.approx([1 / 3, 2 / 3])
    assert rewards(fs_episode(*canonical), fs(mkdir, mv)) == [1.0]
    spoiled = fs(mkdir, errors=("malformed tool call: x",))
    assert rewards(fs_episode(*canonical), spoiled, fs(LOOK)) == [0.0, 0.0]
    assert rewards(fs_episode(*canonical), spoiled, fs(mv)) == pytest.approx([0.0, 2 / 3])  # not 3/3
    rng = random.Random(0)
    pool = [mkdir, mv, ("rm", {"path": "docs"}), ("mv", {"src": "docs/notes.txt", "dst": "."}), LOOK,
            ("write", {"path": "notes.txt", "content": "x"}), ("write", {"path": "docs/notes.txt", "content": "hello"})]
    for _ in range(100):  # 100 episodes of 6 turns of 1-3 calls
        episode = fs_episode(*canonical)
        assert sum(rewards(episode, *[fs(*rng.choices(pool, k=rng.randint(1, 3))) for _ in range(6)])) <= 1 + 1e-12


def test_the_step_records_are_values_that_no_turn_can_change_in_place():
    """An episode's Progress is handed from turn to turn and the reference's Work is shared by every row of a group:
    they and their Steps are frozen values (equal ones hash alike, assignment refused), so one turn's code cannot
    alter what another turn is paid against. Catches frozen=True dropped from Step, Work or Progress."""
    from dataclasses import FrozenInstanceError

    from rlvr.tasks.envs.calc_steps import Progress, Step, Work

    step = Step("+", Fraction(6), Fraction(5), Fraction(11))
    work, progress = Work((step,), (5, 6), Fraction(11)), Progress(frozenset({0}), 2)
    assert step.operation == ("+", (5, 6)) and work.operators == ("+",)  # what a turn's reward compares
    for record, field, value in ((step, "value", Fraction(12)), (work, "value", Fraction(0)),
                                 (progress, "wasted", 0)):
        assert hash(record) == hash(type(record)(**vars(record)))
        with pytest.raises(FrozenInstanceError):
            setattr(record, field, value)


def test_a_bare_number_s_error_quotes_at_most_40_characters_of_it():
    """What the model wrote comes back in the observation, a prompt token of every later turn: a 62-character bare
    number (parentheses around 17) is quoted by its first 40 characters only. Catches the cut moved to 39 or 41."""
    written = "(" * 30 + "17" + ")" * 30
    answer, work = calculator.calculation(written)
    assert work is None and f"{written[:40]!r} is a number" in answer and written[:41] not in answer


def test_a_tree_improved_by_no_call_of_the_turn_pays_nothing_and_does_not_divide_by_zero():
    """A call abandoned at its time limit in an earlier turn may still land its change later (its thread is left to
    finish): the tree then has fewer paths wrong though no call of this turn changed it. The turn (reads only) earns
    0, without a ZeroDivisionError from its zero changing calls. Catches max(len(changes), 1) turned to 0."""
    episode = fs_episode(*RENAME)
    episode.tree.root["todo.txt"] = episode.tree.root.pop("notes.txt")  # what the abandoned mv did, late
    looked = episode.respond(fs(LOOK))
    assert (looked.valid_calls, looked.invalid_calls, looked.reward) == (1, 0, 0.0)


def test_a_no_change_error_quotes_at_most_60_characters_of_the_path():
    """The path of a change that changed nothing comes back in the observation, cut at 60 characters (paths may be
    256). Catches the cut moved to 59 or 61."""
    episode, name = fs_episode(*RENAME), "n" * 64  # MAX_NAME_CHARS
    episode.respond(fs(("write", {"path": name, "content": "x"})))
    again = episode.respond(fs(("write", {"path": name, "content": "x"})))
    assert again.text == f"error: write: {'n' * 60}: nothing changed (it already was so)"


def test_a_turn_that_ends_worse_than_it_began_earns_0_not_a_penalty():
    """Step rewards are never negative: a turn that fixes a path (write todo.txt: 2 -> 1 wrong) and then breaks more
    (mkdir junk, junk2: 3 wrong) ends 1 worse than the best so far and earns 0, though one of its changes fixed a path.
    Catches the floor of progress moved from 0 to -1 (-1/2 x 1/3 here)."""
    episode = fs_episode(*RENAME)
    turn = fs(("write", {"path": "todo.txt", "content": "hello"}), ("mkdir", {"path": "junk"}),
              ("mkdir", {"path": "junk2"}))
    observed = episode.respond(turn)
    assert (observed.valid_calls, observed.invalid_calls, observed.reward) == (3, 0, 0.0)
