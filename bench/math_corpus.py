"""Agreement of the math verifier with hand labels, per answer mode, and of plain math-verify on the same rows.

The corpus (bench/data/math_corpus.jsonl, one {"completion", "reference", "label", "form"} per line) holds
completions written the way models and datasets write answers, correct and wrong, with
hedges, spam, answers only inside <think>, distractor numbers and full solutions. label is the hand verdict:
true when the completion commits to one final answer, outside its reasoning, equal to the reference.

Plain math-verify is `verify(parse("\\boxed{gold}"), parse(completion))` with its default extraction
(LatexExtractionConfig + ExprExtractionConfig) and its own timeouts (this runs on the main thread), the gold
read as rlvr reads it. A false positive is a row scored correct whose label is false.

    .venv/bin/python bench/math_corpus.py [--corpus bench/data/math_corpus.jsonl] [--show-disagreements]
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rlvr.verifiers.math.extract import MODES  # noqa: E402
from rlvr.verifiers.math.verifier import MathVerifier, extract_reference  # noqa: E402

CORPUS = Path(__file__).parent / "data" / "math_corpus.jsonl"


@dataclass(frozen=True)
class Row:
    completion: str
    reference: str
    label: bool
    form: str


@dataclass(frozen=True)
class Score:
    name: str
    agree: int
    total: int
    false_positives: int
    false_negatives: int
    seconds: float
    disagreements: tuple[tuple[Row, bool], ...]

    @property
    def agreement(self) -> float:
        return self.agree / self.total


def load(path: Path) -> list[Row]:
    return [Row(**json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def score(name: str, judge, rows: list[Row]) -> Score:
    """Compare judge(row) -> bool (scored correct) with each row's label."""
    start = time.monotonic()
    scored = [(row, judge(row)) for row in rows]
    wrong = tuple((row, got) for row, got in scored if got != row.label)
    return Score(name, len(rows) - len(wrong), len(rows), sum(got for _, got in wrong),
                 sum(not got for _, got in wrong), time.monotonic() - start, wrong)


def rlvr_judge(mode: str):
    verifier = MathVerifier(mode, timeout_s=10)
    return lambda row: verifier.verify(row.completion, row.reference).score == 1.0


def math_verify_judge():
    from math_verify import parse, verify

    logging.disable(logging.WARNING)

    def judge(row: Row) -> bool:
        gold = parse("\\boxed{" + (extract_reference(row.reference) or "") + "}")
        return bool(gold) and verify(gold, parse(row.completion))

    return judge


def report(scores: list[Score], show: bool) -> None:
    print(f"{'judge':28} {'agreement':>16} {'false pos':>9} {'false neg':>9} {'seconds':>8}")
    for s in scores:
        print(f"{s.name:28} {s.agree:4d}/{s.total:<4d} {100 * s.agreement:6.1f} % {s.false_positives:9d} "
              f"{s.false_negatives:9d} {s.seconds:8.1f}")
    if show:
        for s in scores:
            for row, got in s.disagreements:
                print(f"[{s.name}] {row.form}: scored {got}, label {row.label}: "
                      f"{row.completion[-70:]!r} vs {row.reference!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--show-disagreements", action="store_true")
    args = parser.parse_args(argv)
    rows = load(args.corpus)
    print(f"{len(rows)} rows ({sum(r.label for r in rows)} labelled correct) from {args.corpus}")
    MathVerifier(timeout_s=60).verify("\\boxed{\\sqrt{4}}", "2")  # start the worker outside the timings
    scores = [score(f"rlvr math, mode {mode}", rlvr_judge(mode), rows) for mode in MODES]
    scores.append(score("plain math-verify", math_verify_judge(), rows))
    report(scores, args.show_disagreements)
    return 0


if __name__ == "__main__":
    sys.exit(main())
