"""task.phrasing=plain: the arithmetic problems asked as a user would, in one user turn without the system
turn, the example or task.instruction, each with its own instruction (rlvr/tasks/plain.py, rlvr/tasks/arithmetic.py),
and graded by the task's own verifier (mode strict, which reads a bare number: rlvr/verifiers/math/bare.py)."""
from __future__ import annotations

import hashlib
import itertools

import pytest

from rlvr.config.run import ConfigError, TaskConfig, load_config
from rlvr.evaluation.sets import evaluation_prompts
from rlvr.tasks.arithmetic import ArithmeticTask, Problem
from rlvr.tasks.cold_start import ColdStartError, cold_start_rows
from rlvr.tasks.plain import INSTRUCTIONS, SHAPES, expression, plain_question, plain_style
from rlvr.types import Outcome
from rlvr.verifiers import build_verifiers


def test_the_style_is_read_from_sha256_of_the_problem():
    # Hand-derived from d = int(sha256("plain/7 * 8")): d % 4 = 1 (SHAPES[1], 'Compute'), d // 4 % 2 = 0 (symbols),
    # d // 8 % 4 = 1 (INSTRUCTIONS[1], 'Give only the number.'); the test reads the digest itself, not plain.py's
    digest = int(hashlib.sha256(b"plain/7 * 8").hexdigest(), 16)
    assert (digest % 4, digest // 4 % 2, digest // 8 % 4) == (1, 0, 1)
    assert plain_question(Problem("7 * 8", 56)) == "Compute 7 * 8. Give only the number."
    # pinned: 3 + 4 * 5 has (0, 1, 2): 'What is', words, \boxed; 53 - 27 has (3, 1, 3): '= ?', words, no instruction
    assert plain_question(Problem("3 + 4 * 5", 23)) == "What is 3 plus 4 times 5? Put the final answer in \\boxed{}."
    assert plain_question(Problem("53 - 27", 26)) == "53 minus 27 = ?"  # no instruction: no trailing space either


def test_operators_as_words_keep_the_order_that_gives_the_value():
    # '3 plus 4 times 5' reads 3 + (4 * 5) = 23 by the usual order, as the reference does
    assert expression("3 + 4 * 5", words=True) == "3 plus 4 times 5"
    assert expression("53 - 27", words=True) == "53 minus 27" and expression("53 - 27", words=False) == "53 - 27"


@pytest.mark.parametrize("level", [1, 3])
def test_thirty_held_out_problems_see_every_shape_form_and_instruction(level):
    # eval.size is 30 per set in the R1 recipe: each style must be measured there (catches a choice stuck on one)
    styles = [plain_style(p) for p in ArithmeticTask(TaskConfig(level=level)).held_out[:30]]
    assert {s.shape for s in styles} == set(SHAPES) and {s.words for s in styles} == {True, False}
    assert {s.instruction for s in styles} == set(INSTRUCTIONS)


def test_a_plain_prompt_is_one_user_turn_whatever_the_task_sets():
    config = TaskConfig(level=1, phrasing="plain", system_prompt="You are a calculator.", one_shot=True,
                        instruction="Think first.")
    prompt = ArithmeticTask(config).prompt(Problem("7 * 8", 56), "eval")
    # catches a system turn, the one-shot pair or task.instruction leaking in
    assert prompt.messages == ({"role": "user", "content": "Compute 7 * 8. Give only the number."},)
    assert prompt.id == "arithmetic-l1/eval/plain/7 * 8" and prompt.reference == "56"
    assert prompt.columns == {"level": 1, "op": "*", "phrasing": "plain", "set": "L1 plain"}
    drawn = list(itertools.islice(ArithmeticTask(config).train_prompts(5), 5))
    assert all("/train/plain/" in p.id and len(p.messages) == 1 for p in drawn)
    with pytest.raises(ValueError, match="symbols, words, words_new or plain, got 'mixed'"):
        ArithmeticTask(TaskConfig(phrasing="mixed")).prompt(Problem("7 * 8", 56), "train")


def test_plain_eval_prompts_are_the_held_out_problems_under_their_own_ids():
    plain = ArithmeticTask(TaskConfig(level=3, phrasing="plain")).eval_prompts(30)
    symbols = ArithmeticTask(TaskConfig(level=3)).eval_prompts(30)
    assert [p.id.split("/")[-1] for p in plain] == [p.id.split("/")[-1] for p in symbols]  # same problems, in order
    assert not {p.id for p in plain} & {p.id for p in symbols}  # never the same id: both can be sets of one run


def test_plain_sets_load_and_evaluate_beside_the_others():
    config = load_config(None, ["eval.size=4", "eval.sets=[{level: 1}, {level: 1, phrasing: plain}]"])
    prompts = evaluation_prompts(config)
    assert [p.columns["set"] for p in prompts] == ["level=1"] * 4 + ["level=1 phrasing=plain"] * 4
    with pytest.raises(ConfigError, match="phrasing"):
        load_config(None, ["task.phrasing=plainly"])  # one clear error for an unknown phrasing


def test_every_instruction_is_graded_by_the_task_verifier():
    # the form each instruction asks for is read by mode strict (the arithmetic default); 7 * 8 = 56
    verify = build_verifiers(TaskConfig(level=1, phrasing="plain"))["math"].verify
    replies = {INSTRUCTIONS[0]: "7 * 8 = 56\nAnswer: 56", INSTRUCTIONS[1]: "56", INSTRUCTIONS[2]: "\\boxed{56}",
               INSTRUCTIONS[3]: "56."}
    assert set(replies) == set(INSTRUCTIONS)
    assert all(verify(reply, "56").outcome is Outcome.CORRECT for reply in replies.values())
    assert verify("7 * 8 = 56", "56").outcome is Outcome.UNPARSEABLE  # an unmarked equation stays unread


def test_the_cold_start_writes_plain_questions_in_their_own_answer_form():
    # it refused them until the rows could end in the form each instruction asks (tests/test_cold_start.py has the
    # forms); the never-trained stories stay refused
    rows = cold_start_rows(TaskConfig(phrasing="plain"), 10, seed=0)
    assert len(rows) == 10 and all("/train/plain/" in r["id"] and len(r["messages"]) == 2 for r in rows)
    with pytest.raises(ColdStartError, match="phrasing=words_new"):
        cold_start_rows(TaskConfig(phrasing="words_new"), 10, seed=0)


def test_phrasing_all_draws_every_phrasing_a_third_each_and_leaves_mixed_as_it_was():
    # R1's last RL stage trains over every kind of prompt (sec. 2.3.4)
    config = TaskConfig(level=1, phrasing="all")
    first, again = (ArithmeticTask(config).train_prompts(s) for s in (3, 3))
    drawn = list(itertools.islice(first, 60))
    assert [p.id for p in drawn] == [p.id for p in itertools.islice(again, 60)]  # seeded: exact on resume
    phrasings = [p.columns["phrasing"] for p in drawn]
    assert set(phrasings) == {"symbols", "words", "plain"}
    assert all(10 <= phrasings.count(name) <= 30 for name in set(phrasings))  # Binomial(60, 1/3): mean 20, sd 3.7
    plain = [p for p in drawn if p.columns["phrasing"] == "plain"]
    assert all(len(p.messages) == 1 and "/train/plain/" in p.id for p in plain)  # one user turn, its own id
    symbols = ArithmeticTask(TaskConfig(level=1)).train_prompts(3)  # the same problems: only the asking differs
    assert [p.id.split("/")[-1] for p in drawn] == [p.id.split("/")[-1] for p in itertools.islice(symbols, 60)]
    held_out = ArithmeticTask(config).eval_prompts(30)
    assert [p.columns["phrasing"] for p in held_out[:6]] == ["symbols", "words", "plain"] * 2  # in turn
    mixed = list(itertools.islice(ArithmeticTask(TaskConfig(level=1, phrasing="mixed")).train_prompts(3), 60))
    assert {p.columns["phrasing"] for p in mixed} == {"symbols", "words"}  # mixed never draws plain


def test_a_style_is_a_value_that_cannot_change():
    # the style is read from the problem's hash once; a mutable one could be changed by a caller after the fact
    import dataclasses
    style = plain_style(Problem("7 * 8", 56))
    with pytest.raises(dataclasses.FrozenInstanceError):
        style.words = not style.words  # type: ignore[misc]
