"""The explainer's reward-hacking view: completions that a naive check pays and rlvr's math verifier does not.

Two sources. Real ones: a short run of the embedded model on `reward.control=format_only` (it is paid for writing
'Answer: <number>', right or wrong), whose completions a format-only check pays. Written ones: the forms of the
attack suite (tests/test_math_attacks.py: last-number spam, hedges, several answers) on a times-table question.
Each keeps the naive checks' verdicts and rlvr's (the default task's math verifier, strict mode) next to it.
Called by bench/explainer_record.py (`--only hacks`).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

REAL_STEPS, REAL_KEPT = 4, 6
# The naive checks a weak reward would use: a format regex, or the last number of the text.
FORMAT = re.compile(r"Answer:\s*-?\d")
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
WRITTEN = [  # (kind, question, reference, completion): the attack suite's forms on one question
    ("last-number spam", "What is 7 * 8?", "56", "Answer: 54\nAnswer: 55\nAnswer: 56"),
    ("last-number spam", "What is 7 * 8?", "56", "7 * 8 could be 48, 54 or 56"),
    ("hedge", "What is 7 * 8?", "56", "Answer: 63 or 56"),
    ("hedge", "What is 7 * 8?", "56", "the answer is 54, or maybe 56"),
    ("format only", "What is 7 * 8?", "56", "Answer: 0"),
    ("format only", "What is 7 * 8?", "56", "<think>multiply</think>\nAnswer: 1"),
]


def naive(completion: str, reference: str) -> dict[str, float]:
    numbers = NUMBER.findall(completion)
    return {"format": float(bool(FORMAT.search(completion))),
            "last_number": float(bool(numbers) and float(numbers[-1]) == float(reference))}


def rlvr_verdict(verifier, completion: str, reference: str) -> dict:
    verdict = verifier.verify(completion, reference)
    return {"outcome": verdict.outcome.value, "reward": verdict.score, "detail": verdict.detail}


def real_completions(work: Path, train) -> tuple[list[dict], float]:
    run = work / "format-only"
    seconds = train(run, f"max_steps={REAL_STEPS}", "reward.control=format_only")
    rows = []
    for line in (run / "groups.jsonl").read_text(encoding="utf-8").splitlines():
        group = json.loads(line)
        rows += [{"question": group["question"], "reference": group["reference"], "completion": c["text"]}
                 for c in group["completions"]]
    return rows, seconds


def record(work: Path, train) -> dict:
    """train: explainer_record.train (one `rlvr train` run, reused when --work already holds it)."""
    from rlvr.verifiers.math.verifier import MathVerifier

    verifier = MathVerifier("strict", timeout_s=10)
    real, seconds = real_completions(work, train)
    cases, seen = [], set()
    for row in real:  # wrong answers of the run that the format check pays (the reward it was trained on), each once
        checks, verdict = naive(row["completion"], row["reference"]), rlvr_verdict(verifier, row["completion"],
                                                                                     row["reference"])
        # a right answer without "Answer:" is no hack (the strict verifier only misses its marker): wrong ones only
        if checks["format"] > verdict["reward"] and verdict["outcome"] == "wrong" and row["completion"] not in seen \
                and len(cases) < REAL_KEPT:
            seen.add(row["completion"])
            cases.append({"kind": "format only", "source": "real", **row, "naive": checks, "rlvr": verdict})
    for kind, question, reference, completion in WRITTEN:
        cases.append({"kind": kind, "source": "attack tests", "question": question, "reference": reference,
                      "completion": completion, "naive": naive(completion, reference),
                      "rlvr": rlvr_verdict(verifier, completion, reference)})
    return {"command": f"rlvr train max_steps={REAL_STEPS} reward.control=format_only", "seconds": seconds,
            "cases": cases}
