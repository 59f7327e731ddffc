"""task.phrasing: arithmetic problems asked as stories from a training set of templates or from a set
never trained on, with symbols unchanged (rlvr/tasks/phrasings.py, rlvr/tasks/arithmetic.py)."""
from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rlvr.config.run import ConfigError, TaskConfig, load_config
from rlvr.tasks import build_task
from rlvr.tasks.arithmetic import ArithmeticTask, Problem, splits
from rlvr.tasks.phrasings import NEW, TRAIN, expression_line, operators, render, template_for, word_question

ROOT = Path(__file__).resolve().parent.parent
INSTRUCTION = "End with 'Answer: <number>'."
BOUNDARY = (0, 1, 12, 99)  # 0 and 1 test the noun forms; 12 and 99 the level ranges' ends


def ids(prompts) -> list[str]:
    return [p.id for p in prompts]


# ---------------------------------------------------------------- symbols: exactly as before phrasings
def test_symbols_ids_and_questions_are_unchanged():
    task = ArithmeticTask(TaskConfig(level=1))
    # Pinned from the code before phrasings existed (evaluations are paired by id across runs); catches a symbols
    # id that gains the phrasing ("arithmetic-l1/eval/symbols/6 * 10").
    assert ids(task.eval_prompts(3)) == ["arithmetic-l1/eval/6 * 10", "arithmetic-l1/eval/4 * 3",
                                         "arithmetic-l1/eval/12 * 0"]
    prompt = task.prompt(Problem("7 * 8", 56), "eval")
    assert prompt.id == "arithmetic-l1/eval/7 * 8" and prompt.reference == "56"
    assert prompt.messages[-1]["content"] == f"What is 7 * 8? {INSTRUCTION}"
    assert prompt.columns == {"level": 1, "op": "*", "phrasing": "symbols", "set": "L1 symbols"}
    level3 = ArithmeticTask(TaskConfig(level=3))
    # the same problem stream as before (pinned too): a phrasing draw must not consume the problem RNG
    assert ids(itertools.islice(level3.train_prompts(5), 3)) == [
        "arithmetic-l3/train/2 + 9 * 0", "arithmetic-l3/train/5 + 7 * 5", "arithmetic-l3/train/95 * 9"]


# ---------------------------------------------------------------- the templates
def test_render_fills_numbers_with_the_noun_form_they_need():
    # hand-derived: 1 takes the singular, 0 the plural, a bare field the number alone
    assert render("Mia has {a|sticker|stickers}. She gets {b} more.", (1, 0)) == "Mia has 1 sticker. She gets 0 more."
    assert render("{a|cow|cows}, {b|cow|cows}, {c}", (0, 2, 7)) == "0 cows, 2 cows, 7"  # catches n != 1 -> singular
    assert expression_line(Problem("3 + 4 * 5", 23)) == "That is 3 + 4 * 5."
    assert operators("3 + 4 * 5") == "+*" and operators("53 - 27") == "-"


@pytest.mark.parametrize("templates", [TRAIN, NEW], ids=["train", "new"])
def test_every_template_renders_for_boundary_numbers_in_canonical_order(templates):
    assert set(templates) == {"+", "-", "*", "+*"}
    for op, group in templates.items():
        arity = 3 if op == "+*" else 2
        for template in group:
            for values in itertools.product(BOUNDARY, repeat=arity):
                text = render(template.text, values)
                assert "{" not in text and "}" not in text, text  # catches a field the regex does not match
                # every operand once, in canonical order, and no other number: the expression is recoverable
                assert re.findall(r"\d+", text) == [str(v) for v in values], text
                assert not re.search(r"\b1 \w+s\b", text), text  # "1 cows": catches a lost singular form
                assert template.noun in text and text.endswith("?"), text


def test_train_and_new_sets_share_no_template_noun_name_or_sentence():
    assert all(len(TRAIN[op]) >= 4 and len(NEW[op]) >= 3 for op in TRAIN)

    def sentences(templates) -> set[str]:
        return {s for group in templates.values() for t in group for s in re.split(r"(?<=[.?;]) ", t.text)}

    def words(templates) -> set[str]:
        return {w.lower() for group in templates.values() for t in group for w in re.findall(r"[A-Za-z]+", t.text)}

    def names(templates) -> set[str]:  # capitalised words: the people and the sentence openings
        return {w for group in templates.values() for t in group for w in re.findall(r"\b[A-Z][a-z]*\b", t.text)}

    assert not sentences(TRAIN) & sentences(NEW)  # catches a NEW template copied from TRAIN
    train_nouns = {t.noun for group in TRAIN.values() for t in group}
    new_nouns = {t.noun for group in NEW.values() for t in group}
    assert train_nouns == {"stickers", "cows", "pages", "marbles"}
    assert new_nouns == {"shells", "passengers", "coins", "trees", "eggs", "seats"}
    # a counted object of one set, singular or plural, is no word at all in the other set's stories
    for nouns, other in ((train_nouns, NEW), (new_nouns, TRAIN)):
        assert not {form for n in nouns for form in (n, n[:-1])} & words(other)
    assert names(TRAIN) & names(NEW) == {"A", "How"}  # only an article and the question word are shared


def test_template_choice_is_sha256_of_set_and_problem_not_python_hash():
    problem = Problem("3 + 4 * 5", 23)
    expected = {
        "words": "Tom read 3 pages on Monday. Then he read 4 chapters of 5 pages each. How many pages did he read "
                 "in all?",
        "words_new": "A theatre has 3 seats on its balcony and 4 rows of 5 seats downstairs. How many seats are "
                     "there altogether?",
    }
    assert {s: word_question(problem, s) for s in expected} == expected
    # Another interpreter with other hash salts picks the same: catches hash() in place of sha256
    code = ("from rlvr.tasks.arithmetic import Problem; from rlvr.tasks.phrasings import word_question; "
            "print(word_question(Problem('3 + 4 * 5', 23), 'words'))")
    for salt in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": salt, "PYTHONPATH": str(ROOT)}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert out.stdout.strip() == expected["words"]
    # every template of a kind is used (level 1 "+" train problems): catches a choice stuck on one index
    used = {template_for(p, "words").noun for p in splits(1)[0] if operators(p.canonical) == "+"}
    assert used == {"stickers", "cows", "pages", "marbles"}


# ---------------------------------------------------------------- the task
def test_word_prompts_carry_the_phrasing_in_id_and_columns_and_keep_the_instruction():
    task = ArithmeticTask(TaskConfig(level=3, phrasing="words_new"))
    prompt = task.prompt(Problem("3 + 4 * 5", 23), "eval")
    assert prompt.id == "arithmetic-l3/eval/words_new/3 + 4 * 5"  # catches an id without the phrasing
    assert prompt.columns == {"level": 3, "op": "+*", "phrasing": "words_new", "set": "L3 words_new"}
    assert prompt.messages[-1]["content"] == (
        "A theatre has 3 seats on its balcony and 4 rows of 5 seats downstairs. How many seats are there "
        f"altogether? {INSTRUCTION}")
    assert prompt.messages[0]["content"] == f"What is 3 + 4? {INSTRUCTION}"  # the one-shot example stays symbols
    words = ArithmeticTask(TaskConfig(level=3, phrasing="words"))
    drawn = list(itertools.islice(words.train_prompts(5), 30))
    assert all(p.columns["phrasing"] == "words" and "/train/words/" in p.id for p in drawn)
    # the same problems as the symbols stream of the seed: only the asking differs
    assert [p.id.split("/")[-1] for p in drawn[:3]] == ["2 + 9 * 0", "5 + 7 * 5", "95 * 9"]
    assert all(p.columns["phrasing"] == "words_new" for p in task.eval_prompts(50))
    with pytest.raises(ValueError, match="got 'mixed'"):  # mixed fixes no phrasing for a single prompt
        ArithmeticTask(TaskConfig(phrasing="mixed")).prompt(Problem("7 * 8", 56), "train")


def test_mixed_train_stream_is_seeded_and_mixes_both_phrasings():
    config = TaskConfig(level=1, phrasing="mixed")
    first, again, other = (ArithmeticTask(config).train_prompts(s) for s in (3, 3, 4))
    drawn = list(itertools.islice(first, 40))
    assert ids(drawn) == ids(itertools.islice(again, 40))  # same seed, same stream: exact on resume
    assert ids(drawn) != ids(itertools.islice(other, 40))
    phrasings = [p.columns["phrasing"] for p in drawn]
    assert set(phrasings) == {"symbols", "words"}  # catches a draw that always gives one phrasing
    assert 10 <= phrasings.count("words") <= 30  # Binomial(40, 1/2): mean 20, sd 3.2
    symbols = ArithmeticTask(TaskConfig(level=1)).train_prompts(3)
    assert [p.id.split("/")[-1] for p in drawn] == [p.id.split("/")[-1] for p in itertools.islice(symbols, 40)]
    # the stream itself, pinned (phrasing=all was added beside it: mixed must not change)
    assert ids(drawn[:4]) == ["arithmetic-l1/train/11 * 11", "arithmetic-l1/train/2 + 7",
                              "arithmetic-l1/train/words/2 * 5", "arithmetic-l1/train/12 + 6"]


def test_mixed_eval_alternates_along_the_held_out_order():
    mixed, symbols = ArithmeticTask(TaskConfig(level=1, phrasing="mixed")), ArithmeticTask(TaskConfig(level=1))
    prompts = mixed.eval_prompts(200)
    # catches a first-half / second-half split (eval.size 20 would then be all symbols)
    assert [p.columns["phrasing"] for p in prompts[:4]] == ["symbols", "words", "symbols", "words"]
    assert ids(prompts[:2]) == ["arithmetic-l1/eval/6 * 10", "arithmetic-l1/eval/words/4 * 3"]
    assert sum(p.columns["phrasing"] == "words" for p in prompts) == 100  # half and half, exactly
    assert ids(mixed.eval_prompts(200)) == ids(prompts)  # fixed: the same every call
    assert [p.id for p in prompts[::2]] == [p.id for p in symbols.eval_prompts(200)[::2]]


def test_tasks_without_phrasings_refuse_a_non_default_one():
    for name in ("calculator", "filesystem"):  # catches build_task without check_phrasing
        with pytest.raises(ConfigError, match=r"task.phrasing=words: only arithmetic has word phrasings"):
            build_task(TaskConfig(name=name, phrasing="words"))
    build_task(TaskConfig(name="calculator"))  # the default stays accepted: catches a check on every task
    with pytest.raises(ConfigError, match="task.phrasing"):
        load_config(None, ["task.phrasing=sentences"])  # not one of the four
