"""The calculator's answer verifier on what the embedded model actually writes.

tests/data/calculator_episodes.jsonl is the last model turn of 64 episodes of SmolLM2-135M-Instruct on level-2
calculator prompts, recorded on 2026-11-28 by `rlvr train configs/agents/calculator.yaml max_steps=2
samples_per_step=32 eval.at_end=false` (its samples.jsonl, trimmed to these fields). The expected outcome of each is
derived here by hand from the text, not from the recorded verdict: a last turn that is exactly 'Answer: N' is CORRECT
when N is the reference and WRONG otherwise; every other last turn in this sample is a call cut by its token budget or
prose without an 'Answer:' line, and has no final answer (UNPARSEABLE)."""
from __future__ import annotations

import json
import re
from pathlib import Path

from rlvr.config.run import TaskConfig
from rlvr.tasks import build_task
from rlvr.types import Outcome
from rlvr.verifiers import build_verifiers

ROWS = [json.loads(line) for line in (Path(__file__).parent / "data" / "calculator_episodes.jsonl").read_text(
    encoding="utf-8").splitlines()]
_PLAIN = re.compile(r"Answer: (-?\d+)")


def _by_hand(row: dict) -> Outcome:
    plain = _PLAIN.fullmatch(row["completion"])
    if plain:
        return Outcome.CORRECT if plain.group(1) == row["reference"] else Outcome.WRONG
    assert "Answer:" not in row["completion"], row  # no other form occurs in this sample
    return Outcome.UNPARSEABLE


def test_the_recorded_sample_is_what_the_docstring_says():
    """64 episodes; both kinds of last turn occur, so the comparison below covers each outcome."""
    assert len(ROWS) == 64
    assert {_by_hand(r) for r in ROWS} == {Outcome.CORRECT, Outcome.WRONG, Outcome.UNPARSEABLE}


def test_the_calculator_s_verifiers_agree_with_the_hand_reading_on_every_recorded_episode():
    """The task's own verifiers (task.verifiers, "math" in strict mode) score each recorded last turn as read by
    hand. Catches a strict mode that stops reading 'Answer: N' lines, and a calculator task left in last_number mode
    (it would read a number out of a cut call, '{"expression": 6 + 5 * 4}', as a WRONG answer instead of none)."""
    config = TaskConfig(name="calculator", level=2)
    verifiers = build_verifiers(config)
    assert build_task(config).answer_verifiers is None  # None: the task's verifiers read the answer
    for row in ROWS:
        verdicts = {name: v.verify(row["completion"], row["reference"]) for name, v in verifiers.items()}
        assert verdicts["math"].outcome is _by_hand(row), (row, verdicts["math"])
        assert verdicts["math"].outcome.value == row["recorded"]  # and as the run recorded it
