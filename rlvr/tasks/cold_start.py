"""Cold-start data without a hub: readable worked solutions for the built-in tasks.

DeepSeek-R1 (section 2.3.1) starts its RL from a few thousand readable long-CoT examples, each laid out as a
reasoning block and then a summary answer. Here every row is

    <think>
    a short, correct derivation
    </think>
    Answer: 56                      (the task's verifiable format; see `answer_part`)

and its prompt turns are exactly the task's own (`Task.prompt`: system turn, one-shot pair, question), so SFT
and RL see identical prompts. Rows come only from the TRAIN split; the held-out problems never appear.

  * arithmetic: derivations are generated for every problem of levels 1-4 (column-wise addition, borrowing,
    splitting a factor into tens and ones, "multiplication first" for a + b * c), several derivations each.
    They are kept short on purpose (SmolLM2 spends a token per digit): a level-1 think block is at most 36
    tokens, a whole symbols completion of levels 1-3 at most 48 and of level 4 under 64, so SFT and rollouts
    with max_new_tokens ~ 64 stay cheap on a CPU and are never truncated. A prompt asked as a story
    (task.phrasing words or mixed, rlvr/tasks/phrasings.py) first states the expression it asks for, "That is
    3 + 4 * 5.", then derives it; such a completion is at most 59 tokens at levels 1-3 with the preferred
    derivation and at most 63 with any other. task.phrasing=words_new is refused: those stories stay out of
    training. A plain question (rlvr/tasks/plain.py: one user turn with its own instruction) gets the
    symbols row's think block (its first equation names the expression, also when the question says 'times') and
    then the answer in the form its instruction asks: 'Answer: X', only the number, or \\boxed{X} (no instruction:
    'Answer: X'), so that the model learns to end its turn on a question asked as a user would ask it; at most 2
    tokens more than the symbols row (the box). The question's instruction decides, also where the task's verifiers
    ask for <answer> tags (`format`): a plain prompt carries no task.instruction. mixed draws symbols or words
    per row (1/2 each, seeded), all symbols, words or plain (1/3 each).
    Levels: the rows cover task.train_levels (or task.level alone), each level with its own train split and
    derivations; see Sizes.
  * qa: the dataset's own worked solution is the think block when the answer column carries one (GSM8K
    "rationale #### 72", with its <<48/2=24>> calculator notes removed; a MATH solution ending in \\boxed{});
    rows without one are skipped and counted (task.bad_rows=error stops on them instead).

Sizes: size = 0 gives one row per distinct train problem; a larger size repeats problems, each copy with the
next derivation (a qa row has only its own rationale, so its copies are identical); a smaller size is a
seeded subset. With several arithmetic levels, size is split evenly across them (the remainder one row each to the
lowest levels), and size = 0 gives each level as many rows as the smallest level's train split has problems (level
1: 137), so every level weighs the same, as LevelMix draws levels uniformly in RL; the rows are then shuffled
together. Everything is a function of (task, size, seed) only.
"""
from __future__ import annotations

import random
import re
from typing import Any, Callable, Sequence

from rlvr.config.run import ConfigError, TaskConfig
from rlvr.tasks.arithmetic import DRAWN, ArithmeticTask
from rlvr.tasks.phrasings import HasCanonical, check_phrasing, expression_line
from rlvr.tasks.plain import PLAIN, plain_style
from rlvr.types import Prompt

SOURCE = "cold_start"
_CALCULATOR_NOTE = re.compile(r"<<[^<>]*>>")  # GSM8K's "48/2 = <<48/2=24>>24": tool-call notes, not prose
_LETTER = re.compile(r"[A-Za-z]{2,}")  # a rationale has words, not only a box


class ColdStartError(ConfigError):
    """No usable cold-start row, or a task without a generator; printed by the CLI as one line."""


# ---------------------------------------------------------------- the completion layout
def answer_part(reference: str, task: TaskConfig) -> str:
    """The final answer in the form the task's verifiers read: <answer> tags when the R1 `format` verifier is
    on (or the instruction asks for them), \\boxed{} when the instruction asks for a box, else 'Answer: X'
    (the default instruction, read by the math verifier's strict mode and by `answer_format`)."""
    if "format" in task.verifiers or "<answer>" in task.instruction:
        return f"<answer>{reference}</answer>"
    if "\\boxed" in task.instruction:
        return f"\\boxed{{{reference}}}"
    return f"Answer: {reference}"


def completion_text(think: str, reference: str, task: TaskConfig, answer: str | None = None) -> str:
    """`<think>\\n...\\n</think>\\n<answer part>` (`answer`, else the task's answer_part); without the opening tag
    when the chat template already opens the think block in the prompt (task.think_prefilled, trl#6966), as the
    model would write it."""
    opening = "" if task.think_prefilled else "<think>\n"
    return f"{opening}{think.strip()}\n</think>\n{answer_part(reference, task) if answer is None else answer}"


def plain_answer_part(reference: str, instruction: str) -> str:
    """The answer a plain question's instruction asks for (rlvr/tasks/plain.py INSTRUCTIONS), each read by the math
    verifier in mode strict: only the number, \\boxed{X}, else 'Answer: X' (also where there is no instruction)."""
    if "only the number" in instruction:
        return reference
    if "\\boxed" in instruction:
        return f"\\boxed{{{reference}}}"
    return f"Answer: {reference}"


def row(prompt: Prompt, completion: str) -> dict[str, Any]:
    return {"id": prompt.id, "messages": [*map(dict, prompt.messages), {"role": "assistant", "content": completion}],
            "source": SOURCE}


# ---------------------------------------------------------------- arithmetic derivations
# Level-3 preferred derivations (options[0]) state every intermediate result (level 2 states the result: see
# arithmetic_derivations); every level's preferred derivation fits a word-problem row, whose
# think block adds an expression line ("That is 97 + 94.", 11 tokens), in 60 SmolLM2 tokens; every other option fits
# in 63 (tests/test_cold_start.py measures both). Hence the split forms come before the column forms at level 2
# (a column-first word row took 65 tokens: "Ones: 7 + 4 = 11, carry 1. Tens: 9 + 9 + 1 = 19. So 191."), a ten's
# product is written out (120, not 12 * 10) and the column labels carry no colon.
def _add(a: int, b: int) -> list[str]:
    s = a + b
    out = []
    tens, units = b // 10 * 10, b % 10
    if tens and units:  # 47 + 35 = 47 + 30 + 5
        out.append(f"{a} + {b} = {a} + {tens} + {units} = {a + tens} + {units} = {s}.")
    if a >= 10 and b >= 10 and a > 12:  # column-wise (level 2 only; level 1 sums stay one step)
        ones = a % 10 + b % 10
        carry = f", carry 1. Tens {a // 10} + {b // 10} + 1" if ones >= 10 else f". Tens {a // 10} + {b // 10}"
        out.append(f"Ones {a % 10} + {b % 10} = {ones}{carry} = {s // 10}. So {s}.")
    if b < 10 and a % 10 + b > 10:  # make the next ten first: 8 + 5 = 8 + 2 + 3 = 10 + 3, 54 + 8 = 54 + 6 + 2
        need = 10 - a % 10
        out.append(f"{a} + {b} = {a} + {need} + {b - need} = {a + need} + {b - need} = {s}.")
    return [*out, f"{a} + {b} = {s}.", f"{a} plus {b} is {s}."]


def _subtract(a: int, b: int) -> list[str]:
    d = a - b
    out = []
    tens, units = b // 10 * 10, b % 10
    if tens and units:  # 53 - 27 = 53 - 20 - 7
        out.append(f"{a} - {b} = {a} - {tens} - {units} = {a - tens} - {units} = {d}.")
    ones = a % 10
    if a >= 10 and b < 10 and ones < b:  # down to the ten first: 54 - 8 = 54 - 4 - 4; 50 - 8 = 40 + 10 - 8
        out.append(f"{a} - {b} = {a} - {ones} - {b - ones} = {a - ones} - {b - ones} = {d}." if ones else
                   f"{a} - {b} = {a - 10} + 10 - {b} = {a - 10} + {10 - b} = {d}.")
    if b >= 10:  # column-wise, borrowing a ten when the ones digit is too small
        if a % 10 >= b % 10:
            column = f"Ones {a % 10} - {b % 10} = {d % 10}. Tens {a // 10} - {b // 10} = {d // 10}."
        else:
            column = (f"Ones {a % 10 + 10} - {b % 10} = {d % 10}, borrow 1. "
                      f"Tens {a // 10} - 1 - {b // 10} = {d // 10}.")
        out.append(f"{column} So {d}.")
    return [*out, f"{a} - {b} = {d}.", f"{b} + {d} = {a}, so {a} - {b} = {d}."]


def _times_small(a: int, b: int) -> list[str]:
    """a * b with both factors <= 12: the times tables."""
    p = a * b
    if 0 in (a, b):
        return [f"Anything times 0 is 0: {a} * {b} = 0."]
    if 1 in (a, b):
        return [f"Times 1 changes nothing: {a} * {b} = {p}."]
    out = [f"{a} * {b} = {p}."]
    if 6 <= b <= 9:  # 7 * 8 = 70 - 7 * 2
        out.insert(0, f"{a} * {b} = {10 * a} - {a} * {10 - b} = {10 * a} - {a * (10 - b)} = {p}.")
    elif b > 10:  # 7 * 12 = 70 + 7 * 2
        out.insert(0, f"{a} * {b} = {10 * a} + {a} * {b - 10} = {10 * a} + {a * (b - 10)} = {p}.")
    elif b == 10:
        out.insert(0, f"Times 10 appends a zero: {a} * 10 = {p}.")
    elif b <= 4:  # 7 * 3 = 7 + 7 + 7
        out.insert(0, f"{a} * {b} = {' + '.join([str(a)] * b)} = {p}.")
    if b % 2 == 0 and b >= 4:  # 7 * 8 = 7 * 4 * 2
        out.append(f"{a} * {b} = {a} * {b // 2} * 2 = {a * b // 2} * 2 = {p}.")
    return out


def _level1_rule(a: int, op: str, b: int) -> str | None:
    """A one-step rule for the level-1 facts that follow one (a factor 0, 1, 10 or 11 times a digit; adding 0
    or 10), else None. Rules cover both orders: "0 * 8" and "8 * 0" read the same rule."""
    if op == "*":
        p = a * b
        if 0 in (a, b):
            return f"Anything times 0 is 0: {a} * {b} = 0."
        if 1 in (a, b):
            return f"Times 1 changes nothing: {a} * {b} = {p}."
        if 10 in (a, b):
            return f"Times 10 appends a zero to {p // 10}: {a} * {b} = {p}."
        if 11 in (a, b) and p // 11 <= 9:
            return f"11 times a digit writes the digit twice: {a} * {b} = {p}."
        return None
    s = a + b
    if 0 in (a, b):
        return f"Adding 0 changes nothing: {a} + {b} = {s}."
    if 10 in (a, b):
        return f"Adding 10 adds one ten to {s - 10}: {a} + {b} = {s}."
    return None


def _times_by_digit(a: int, b: int) -> list[str]:
    """Two-digit a times one-digit b (level 3)."""
    p, tens, units = a * b, a // 10 * 10, a % 10
    if not units:
        return [f"{a} * {b} = {a // 10} * {b} * 10 = {a // 10 * b} * 10 = {p}.", f"{a} * {b} = {p}."]
    low = units * b
    carry = f", carry {low // 10}. Tens {a // 10} * {b} + {low // 10}" if low >= 10 else f". Tens {a // 10} * {b}"
    out = [f"{a} * {b} = {tens} * {b} + {units} * {b} = {tens * b} + {low} = {p}.",
           f"Ones {units} * {b} = {low}{carry} = {p // 10}. So {p}."]
    if units >= 7:  # 48 * 6 = 50 * 6 - 2 * 6
        up = tens + 10
        out.append(f"{a} * {b} = {up} * {b} - {up - a} * {b} = {up * b} - {(up - a) * b} = {p}.")
    return out


def _times_two_digits(a: int, b: int) -> list[str]:
    """Two-digit a times two-digit b (level 4): split a factor into tens and ones."""
    p = a * b
    out = []
    for x, y in ((a, b), (b, a)):  # 47 * 36 = 47 * 30 + 47 * 6, or = 40 * 36 + 7 * 36
        tens, units = y // 10 * 10, y % 10
        if units:
            out.append(f"{a} * {b} = {x} * {tens} + {x} * {units} = {x * tens} + {x * units} = {p}.")
        else:
            out.append(f"{a} * {b} = {x} * {y // 10} * 10 = {x * (y // 10)} * 10 = {p}.")
    if b % 10 >= 7:  # 47 * 38 = 47 * 40 - 47 * 2
        up = b // 10 * 10 + 10
        out.append(f"{a} * {b} = {a} * {up} - {a} * {up - b} = {a * up} - {a * (up - b)} = {p}.")
    return out


def _add_times(a: int, b: int, c: int) -> list[str]:
    """a + b * c (level 3): multiplication binds tighter than addition."""
    bc, s = b * c, a + b * c
    return [f"First {b} * {c} = {bc}, then {a} + {bc} = {s}.",  # * before +; the short form (see _add)
            f"Multiplication first: {b} * {c} = {bc}. Then {a} + {bc} = {s}.",
            f"{a} + {b} * {c} = {a} + {bc} = {s}, since * comes before +.",
            f"Do {b} * {c} first, which is {bc}; adding {a} gives {s}."]


def arithmetic_derivations(canonical: str, level: int) -> list[str]:
    """Correct, readable derivations of one problem ("7 * 8", "3 + 4 * 5"), the preferred one first."""
    parts = canonical.split()
    numbers = [int(x) for x in parts[::2]]
    if len(parts) == 5:
        return _add_times(*numbers)
    a, b = numbers
    op = parts[1]
    if level == 1:
        # Times tables and small sums are recalled, not derived: SmolLM2-135M errs in the extra steps of a
        # derivation (measured: held-out pass@1 0.49 after a cold start whose level-1 solutions were mostly
        # multi-step, 0.71 with one-step statements). A one-step rule comes first where one applies
        # (a rule could carry over to held-out problems, a recalled fact cannot), although the trained model
        # seldom writes it: docs/notes/2026-11-23-cold-start-level-1.md. The derivations stay as further options.
        steps = _add(a, b) if op == "+" else _times_small(a, b)
        direct = f"{canonical} = {a + b if op == '+' else a * b}."
        rule = _level1_rule(a, op, b)
        return list(dict.fromkeys([rule, direct, *steps] if rule else [direct, *steps]))  # in order, no repeats
    if level == 2:
        # Two-digit sums and differences are stated, not derived, in the preferred form: SFT from the base model on
        # 256 level-2 rows (mixed phrasing) reached held-out pass@1 0.50 (symbols) / 0.45 (new stories) with
        # "47 + 35 = 82.", 0.25 / 0.33 with the split form and 0.15 / 0.10 with the column form (30 problems x 2
        # each; direct - split +0.25 +- 0.17 on symbols): as at level 1, each extra step is one
        # more place for a 135M model to err. A story's row still states its expression first (the step that
        # carries to new wordings); the derivations stay as options.
        result, derive = {"+": (a + b, _add), "-": (a - b, _subtract), "*": (a * b, _times_small)}[op]
        return list(dict.fromkeys([f"{canonical} = {result}.", *derive(a, b)]))
    if op == "+":
        return _add(a, b)
    if op == "-":
        return _subtract(a, b)
    if level == 3:
        return _times_by_digit(a, b)
    if level == 4:
        return _times_two_digits(a, b)
    return _times_small(a, b)


# ---------------------------------------------------------------- sizes, seeds and the two tasks
def selection(n: int, size: int, seed: int) -> list[tuple[int, int]]:
    """(item, copy) pairs, shuffled by seed: size 0 -> each item once; size > n -> every item size // n times
    plus a seeded subset for the rest; size < n -> a seeded subset."""
    if n == 0:
        return []
    rng = random.Random(seed)
    full, rest = divmod(size or n, n)
    picks = [(item, copy) for copy in range(full) for item in range(n)]
    picks += [(item, full) for item in sorted(rng.sample(range(n), rest))]
    rng.shuffle(picks)
    return picks


def _derivation(options: Sequence[str], key: str, copy: int, seed: int) -> str:
    """The first copy of a problem takes its preferred derivation (options[0]); copy k > 0 takes the k-th of the
    others after a per-problem offset seeded by (seed, problem), so a repeated problem cycles through all of
    them and the extra copies vary across problems."""
    if copy == 0 or len(options) == 1:
        return options[0]
    others = options[1:]
    offset = random.Random(f"{seed}/{key}").randrange(len(others))
    return (others[(offset + copy - 1) % len(others)] if copy <= len(others) else
            options[(offset + copy) % len(options)])


def level_sizes(train_sizes: Sequence[int], size: int) -> list[int]:
    """Rows per level (levels ascending, `train_sizes` their train splits): size split evenly, the remainder one
    row each to the lowest levels; size 0 = as many rows per level as the smallest train split holds problems
    (one level: each train problem once). Equal rows per level as LevelMix draws levels uniformly in RL."""
    if size == 0:
        return [min(train_sizes)] * len(train_sizes)
    base, extra = divmod(size, len(train_sizes))
    return [base + (i < extra) for i in range(len(train_sizes))]


def check_cold_start_phrasing(task: TaskConfig) -> None:
    """The phrasing a cold start is never written in (words_new), one ColdStartError (also checked by a recipe
    before any stage runs: rlvr/pipeline/checks.py)."""
    if task.phrasing == "words_new":
        raise ColdStartError("sft.data=cold_start with task.phrasing=words_new: those stories are kept out of "
                             "training to measure transfer; use symbols, words, plain, mixed or all for the cold "
                             "start")


def _arithmetic_completion(problem: HasCanonical, phrasing: str, think: str, reference: str, task: TaskConfig) -> str:
    """A story first states the expression it asks for; a plain question ends in the answer form its own instruction
    asks for (module docstring)."""
    if phrasing == PLAIN:
        return completion_text(think, reference, task, plain_answer_part(reference, plain_style(problem).instruction))
    return completion_text(f"{expression_line(problem)}\n{think}" if phrasing != "symbols" else think, reference, task)


def _arithmetic_rows(task: TaskConfig, size: int, seed: int) -> list[dict[str, Any]]:
    check_cold_start_phrasing(task)
    choices = DRAWN.get(task.phrasing, (task.phrasing,))
    sources = [ArithmeticTask(task.model_copy(update={"level": level}))
               for level in sorted(task.train_levels or [task.level])]
    rows = []
    for source, count in zip(sources, level_sizes([len(s.train) for s in sources], size)):
        draw = random.Random(f"cold_start-phrasing/{seed}/{source.level}")  # mixed, all: a phrasing per row
        for item, copy in selection(len(source.train), count, seed):
            problem = source.train[item]
            phrasing = choices[draw.randrange(len(choices))]  # one choice: always it (the draw feeds nothing else)
            think = _derivation(arithmetic_derivations(problem.canonical, source.level), problem.canonical, copy,
                                seed)
            prompt = source.prompt(problem, "train", phrasing)
            rows.append(row(prompt, _arithmetic_completion(problem, phrasing, think, prompt.reference, task)))
    if len(sources) > 1:  # interleave the levels, so that any first rows hold all of them
        random.Random(f"cold_start-levels/{seed}").shuffle(rows)
    return rows


def rationale(answer: Any) -> str | None:
    """The worked solution in an answer cell, or None: GSM8K's text before '####' (calculator notes removed),
    or a whole solution that ends in \\boxed{} and has words besides the box."""
    from rlvr.verifiers.math.verifier import last_boxed

    if not isinstance(answer, str):
        return None
    if "####" in answer:
        text = answer.rsplit("####", 1)[0]
    elif last_boxed(answer) is not None and _LETTER.search(answer.replace("\\boxed", "")):
        text = answer
    else:
        return None
    text = _CALCULATOR_NOTE.sub("", text).strip()
    return text if text and "<think>" not in text and "</think>" not in text else None


def _qa_rows(task: TaskConfig, size: int, seed: int) -> list[dict[str, Any]]:
    from rlvr.tasks.qa import QATask
    from rlvr.tasks.screening import Screening

    source = QATask(task)
    screening = Screening(f"{task.path} (cold start)", task.bad_rows, ColdStartError)
    usable = []
    for item in source.train:
        think = rationale(item.columns.get(task.answer_field))
        if think is None:
            screening.reject(item.index, f"column {task.answer_field!r} holds no worked solution")
        else:
            usable.append((item, think))
    if not usable:
        raise ColdStartError(
            f"{task.path}: none of its {len(source.train)} train rows carries a worked solution in column "
            f"{task.answer_field!r} (GSM8K 'reasoning #### 72' or a solution ending in \\boxed{{}}), so no cold-start "
            "data can be made from it; give SFT your own long-CoT data with sft.data=FILE.jsonl")
    screening.report(len(usable))
    rows = []
    for index, _ in selection(len(usable), size, seed):
        item, think = usable[index]
        prompt = source.prompt(item)
        rows.append(row(prompt, completion_text(think, prompt.reference, task)))
    return rows


GENERATORS: dict[str, Callable[[TaskConfig, int, int], list[dict[str, Any]]]] = {
    "arithmetic": _arithmetic_rows,
    "qa": _qa_rows,
}


def cold_start_rows(task: TaskConfig, size: int, seed: int) -> list[dict[str, Any]]:
    """Cold-start SFT rows {"id", "messages", "source": "cold_start"} for `task` (module docstring)."""
    if size < 0:
        raise ColdStartError(f"sft.cold_start_size must be >= 0, got {size}")
    check_phrasing(task)  # before the generator: a qa task with phrasing=words is refused, not silently ignored
    generator = GENERATORS.get(task.name)
    if generator is None:
        raise ColdStartError(f"sft.data=cold_start: no worked-solution generator for task {task.name!r} "
                             f"(there are for {', '.join(sorted(GENERATORS))}); use sft.data=FILE.jsonl")
    return generator(task, size, seed)


__all__ = ["ColdStartError", "GENERATORS", "answer_part", "arithmetic_derivations", "cold_start_rows",
           "completion_text", "plain_answer_part", "rationale", "selection"]
