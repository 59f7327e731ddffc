"""`rlvr verify`: score a JSONL file of completions with one verifier, to debug rewards before training.

Input: one JSON object per line with `completion` and `reference` (or `answer`, e.g. a GSM8K '#### 42'
solution), and optionally `"truncated": true` or `"finish_reason": "length"` for a completion cut at max_new_tokens
(the math verifier then counts only an explicit final answer, as in training). Output: one verdict per input
line, `{"line": n, "outcome", "score", "detail"}`, in input order, so output line i always belongs to input line i.
A line that cannot be used (not UTF-8, not JSON, not an object, a missing or mistyped field, a blank line) gets an
`error` verdict whose detail names the problem; it is counted in the summary and the command still exits 0. Problems
with the command itself (unknown verifier, unreadable input, unwritable output) raise VerifyInputError before
anything is written, which `rlvr.cli.main.main` prints as one `rlvr: error: ...` line with exit code 2.

The summary (stderr) counts every outcome, zeros included, as the training metrics do (rewards.outcome_counts).

A run's samples.jsonl is valid input too, and re-checks what training logged: a line that holds
the verdict training recorded under the verifier's name ("verdicts") gets that verdict as "recorded" and
"agrees" (same outcome and score) beside the new one, and the summary counts the lines that disagree. `--verifier
environment` re-scores a multi-turn run's episodes: each line's recorded final state ("episode") judged by the
task's environment against the recorded task row (prompt id, question, reference, columns); the answer verifiers
("math", ...) re-check the episode's last model turn, which is the line's "completion".
"""
from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable

from rlvr.cli.args import config_from_args
from rlvr.config.run import TaskConfig
from rlvr.config.sections import EpisodeConfig
from rlvr.errors import UserFacingError
from rlvr.types import Outcome, Prompt, Verdict
from rlvr.verifiers import VERIFIERS, Verifier, safe_verify
from rlvr.verifiers.base import error_verdict

REFERENCE_FIELDS = ("reference", "answer")  # first present wins


class VerifyInputError(UserFacingError, ValueError):
    """A problem with `rlvr verify`'s arguments or files, phrased for the user (exit code 2)."""


STATE_VERIFIER = "environment"  # re-scores recorded episodes' final states: samples.jsonl's "episode"
SAME_SCORE = 1e-9  # a re-checked score this close to the recorded one agrees (JSON keeps floats exactly)


@dataclass(frozen=True)
class Line:
    """One usable input line: the text checked, its reference, and the whole object (a samples.jsonl row also
    holds the prompt's id, question and columns, and the verdicts training recorded)."""

    completion: str  # the completion; for the environment verifier, the episode's recorded final state
    reference: str
    record: dict[str, Any]

    def prompt(self) -> Prompt:
        """The task row as far as samples.jsonl recorded it: an environment's state check may read its columns
        (examples/capitals.py reads prompt.columns["country"])."""
        question, columns = self.record.get("question"), self.record.get("columns")
        return Prompt(str(self.record.get("prompt_id", "recorded")),
                      ({"role": "user", "content": question},) if isinstance(question, str) else (), self.reference,
                      columns if isinstance(columns, dict) else {})

    def recorded(self, verifier: str) -> dict[str, Any] | None:
        """The verdict training recorded under this verifier's name ("verdicts" of a samples.jsonl row), or None
        when the line holds none that can be compared (an outcome string and a numeric score)."""
        verdicts = self.record.get("verdicts")
        verdict = verdicts.get(verifier) if isinstance(verdicts, dict) else None
        if not isinstance(verdict, dict) or not isinstance(verdict.get("outcome"), str):
            return None
        score = verdict.get("score")
        if isinstance(score, bool) or not isinstance(score, (int, float)):
            return None
        return {"outcome": verdict["outcome"], "score": float(score), "detail": str(verdict.get("detail", ""))}


Check = Callable[[Line], Verdict]


def _state_check(task: TaskConfig, episode: EpisodeConfig | None) -> Check:
    """The task's environment judging each line's recorded final state against its recorded task row (`score_state`
    is pure, so the verdict is the one training gave unless the environment's code or the config changed)."""
    from rlvr.agents.scoring import state_verdict
    from rlvr.agents.wiring import plays_episodes
    from rlvr.tasks import build_task

    built = build_task(task)
    environment = built.environment(episode or EpisodeConfig()) if plays_episodes(built) else None
    if environment is None or not environment.scores_state:
        raise VerifyInputError(f"verifier {STATE_VERIFIER!r} re-scores recorded episodes' final states, and task "
                               f"{task.name!r} has no environment state to check (give --task / task.name)")
    return lambda line: state_verdict(environment, line.completion, line.prompt())


def build_verifier(name: str, task: TaskConfig) -> Verifier:
    factory = VERIFIERS.get(name)
    if factory is None:
        raise VerifyInputError(f"unknown verifier {name!r}; valid verifiers: {', '.join(sorted(VERIFIERS))}, "
                               f"{STATE_VERIFIER} (a multi-turn run's recorded final states)")
    return factory(task)


def build_check(name: str, task: TaskConfig, episode: EpisodeConfig | None = None) -> tuple[Check, bool]:
    """(verdict of one line, whether lines need a reference) for a verifier name."""
    if name == STATE_VERIFIER:
        return _state_check(task, episode), True
    verifier = build_verifier(name, task)
    return (lambda line: safe_verify(verifier, line.completion, line.reference, was_cut(line.record)),
            _reference_required(verifier))


def was_cut(record: dict) -> bool:
    """Cut at the length cap, so only an explicit answer counts: "truncated": true (samples.jsonl records it), or
    "finish_reason": "length" (vLLM's and OpenAI's outputs say so)."""
    return record.get("truncated") is True or record.get("finish_reason") == "length"


def _reference_required(verifier: Verifier) -> bool:
    """Format-only verifiers declare `reference=""`; those may be fed lines without a reference."""
    try:
        params = list(inspect.signature(verifier.verify).parameters.values())
    except (TypeError, ValueError):
        return True
    return len(params) < 2 or params[1].default is inspect.Parameter.empty


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def parse_line(raw: bytes, needs_reference: bool, state: bool = False) -> Line | str:
    """One input line's completion and reference, or a string saying what is wrong with it. `state`: the
    recorded episode's final state stands for the completion (samples.jsonl of a multi-turn run)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        return f"bad input line: not UTF-8 ({err.reason} at byte {err.start})"
    if not text.strip():
        return "bad input line: blank line (expected a JSON object)"
    try:
        record = json.loads(text)
    except json.JSONDecodeError as err:
        return f"bad input line: not valid JSON ({err.msg} at column {err.colno})"
    if not isinstance(record, dict):
        return f"bad input line: expected a JSON object, got a JSON {_type_name(record)}"
    if state:
        episode = record.get("episode")
        if not isinstance(episode, dict) or not isinstance(episode.get("final_state"), str):
            return "bad input line: no recorded episode with a 'final_state' string (a multi-turn run's samples.jsonl)"
        record = {**record, "completion": episode["final_state"]}
    if "completion" not in record:
        return f"bad input line: missing field 'completion' (fields present: {', '.join(map(repr, record)) or 'none'})"
    completion = record["completion"]
    if not isinstance(completion, str):
        return f"bad input line: field 'completion' must be a string, got {_type_name(completion)}"
    if "truncated" in record and not isinstance(record["truncated"], bool):  # "true", 1: not silently "not cut"
        return f"bad input line: field 'truncated' must be true or false, got {_type_name(record['truncated'])}"
    field = next((name for name in REFERENCE_FIELDS if name in record), None)
    if field is None:
        if needs_reference:
            return "bad input line: missing field 'reference' (or 'answer')"
        return Line(completion, "", record)
    reference = record[field]
    if isinstance(reference, (int, float)) and not isinstance(reference, bool):
        reference = str(reference)  # datasets often store numeric answers as numbers
    if not isinstance(reference, str):
        return f"bad input line: field {field!r} must be a string or a number, got {_type_name(reference)}"
    return Line(completion, reference, record)


def _open_output(output: Path | None, input_path: Path) -> IO[str]:
    if output is None:
        return sys.stdout
    if output.exists() and output.resolve() == input_path.resolve():
        raise VerifyInputError(f"--output {str(output)!r} is the input file; choose another path")
    if output.is_dir():
        raise VerifyInputError(f"--output {str(output)!r} is a directory; give a file path")
    if not output.parent.is_dir():
        raise VerifyInputError(f"--output {str(output)!r}: directory {str(output.parent)!r} does not exist")
    try:
        return output.open("w", encoding="utf-8")
    except OSError as err:
        raise VerifyInputError(f"cannot write --output {str(output)!r}: {err.strerror or err}") from None


def format_summary(counts: Counter[Outcome], total_score: float, bad_lines: int, label: str) -> str:
    """Table of outcomes (count, share), the mean score and the number of unusable input lines."""
    total = sum(counts.values())
    rows = [f"{label}: {total} line{'' if total == 1 else 's'}",
            f"  {'outcome':<12} {'count':>7} {'share':>7}"]
    for outcome in Outcome:
        share = counts[outcome] / total if total else 0.0
        rows.append(f"  {outcome.value:<12} {counts[outcome]:>7} {share:>7.1%}")
    rows.append(f"  {'mean score':<12} {total_score / total if total else 0.0:>15.3f}")
    if bad_lines:
        rows.append(f"  {bad_lines} bad input line{'' if bad_lines == 1 else 's'} counted as error "
                    "(their detail says why)")
    if not total:
        rows.append("  the input file has no lines")
    return "\n".join(rows)


@dataclass
class Tally:
    """What the summary counts: outcomes, scores, unusable lines, and the lines whose re-checked verdict
    disagrees with the one recorded in them (samples.jsonl: did the verifier or the environment change?)."""

    counts: Counter[Outcome] = field(default_factory=Counter)
    total_score: float = 0.0
    bad_lines: int = 0
    compared: int = 0
    disagreeing: list[int] = field(default_factory=list)  # input line numbers

    def add(self, number: int, parsed: Line | str, check: Check, verifier: str) -> dict[str, Any]:
        """One output line; with the recorded verdict and whether the two agree when the input line holds one."""
        if isinstance(parsed, str):
            verdict, recorded = error_verdict(parsed), None
            self.bad_lines += 1
        else:
            verdict, recorded = check(parsed), parsed.recorded(verifier)
        self.counts[verdict.outcome] += 1
        self.total_score += verdict.score
        row = {"line": number, **verdict.as_json()}
        if recorded is None:
            return row
        agrees = recorded["outcome"] == verdict.outcome.value and abs(recorded["score"] - verdict.score) <= SAME_SCORE
        self.compared += 1
        if not agrees:
            self.disagreeing.append(number)
        return {**row, "recorded": recorded, "agrees": agrees}

    def comparison(self) -> str:
        """The summary's last line, when some input lines held a recorded verdict ("" otherwise)."""
        if not self.compared:
            return ""
        lines = ", ".join(map(str, self.disagreeing[:10])) + (", ..." if len(self.disagreeing) > 10 else "")
        return (f"  recorded verdicts: {self.compared} compared, {len(self.disagreeing)} disagree"
                + (f" (line{'' if len(self.disagreeing) == 1 else 's'} {lines})" if self.disagreeing else ""))


def verify_file(verifier_name: str, input_path: Path, task: TaskConfig, output: Path | None = None,
                episode: EpisodeConfig | None = None) -> int:
    """Verify every line of `input_path`; write verdict lines to `output` (stdout if None), the summary to
    stderr. Returns 0 once the file could be read (bad lines are error verdicts); raises VerifyInputError
    for an unknown verifier, an unreadable input file or an unwritable output path."""
    input_path, output = Path(input_path), None if output is None else Path(output)
    check, needs_reference = build_check(verifier_name, task, episode)
    if not input_path.exists():
        raise VerifyInputError(f"input file {str(input_path)!r} does not exist")
    if not input_path.is_file():
        raise VerifyInputError(f"input {str(input_path)!r} is not a file (expected a .jsonl file)")
    try:
        source = input_path.open("rb")
    except OSError as err:
        raise VerifyInputError(f"cannot read input file {str(input_path)!r}: {err.strerror or err}") from None
    tally, state = Tally(), verifier_name == STATE_VERIFIER
    with source:
        sink = _open_output(output, input_path)
        try:
            for number, raw in enumerate(source, start=1):  # a final newline adds no (blank) line
                parsed = parse_line(raw.rstrip(b"\r\n"), needs_reference, state)
                line = json.dumps(tally.add(number, parsed, check, verifier_name), ensure_ascii=False)
                # a lone surrogate in a detail (model-written error text) cannot be encoded: escape, never crash
                sink.write(line.encode("utf-8", "backslashreplace").decode("utf-8") + "\n")
            sink.flush()
        except BrokenPipeError:  # `rlvr verify ... | head`: the reader left; stop quietly
            # Python's documented recipe: point stdout at devnull so the exit-time flush cannot fail again.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
        except OSError as err:
            raise VerifyInputError(f"I/O error while verifying {str(input_path)!r}: {err.strerror or err}") from None
        finally:
            if sink is not sys.stdout:
                sink.close()
    label = f"{verifier_name} verifier on {input_path}"
    summary = format_summary(tally.counts, tally.total_score, tally.bad_lines, label)
    print("\n".join(filter(None, (summary, tally.comparison()))), file=sys.stderr)
    if output is not None:
        print(f"wrote {output}", file=sys.stderr)
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    # The same config and overrides as `rlvr train`, so rewards are debugged exactly as training
    # computes them: `rlvr verify task.code_reward_mode=all task.code_time_limit_s=2 --verifier code ...`.
    extra = [f"task.answer_mode={args.answer_mode}"] if args.answer_mode else []
    config = config_from_args(args.config, args.overrides + extra)
    return verify_file(args.verifier, Path(args.input), config.task, Path(args.output) if args.output else None,
                       config.episode)


def register(sub) -> None:
    ve = sub.add_parser("verify", help="score a JSONL file of completions with one verifier")
    ve.add_argument("config", nargs="?", help="YAML config file (optional; its task section is used)")
    ve.add_argument("overrides", nargs="*", help="dotted.key=value overrides, as for train, e.g. "
                                                  "task.code_reward_mode=all task.code_time_limit_s=2")
    ve.add_argument("--verifier", required=True, help="verifier name, e.g. math, format, answer_format; "
                                                       "environment: a multi-turn run's recorded final states")
    ve.add_argument("--input", required=True, help="JSONL with 'completion' and 'reference' (or 'answer') fields, "
                                                    "e.g. a run's samples.jsonl (re-checked against its verdicts)")
    ve.add_argument("--answer-mode", default=None, help="shorthand for task.answer_mode=...")
    ve.add_argument("--output", default=None, help="write verdict lines here instead of stdout")
    ve.set_defaults(func=cmd_verify)
