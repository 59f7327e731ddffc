"""`rlvr verify`: score a JSONL file of completions with one verifier, to debug rewards before training.

Input: one JSON object per line with `completion` and `reference` (or `answer`, e.g. a GSM8K '#### 42'
solution). Output: one verdict per input line, `{"line": n, "outcome", "score", "detail"}`, in input order,
so output line i always belongs to input line i. A line that cannot be used (not UTF-8, not JSON, not an
object, a missing or mistyped field, a blank line) gets an `error` verdict whose detail names the problem;
it is counted in the summary and the command still exits 0. Problems with the command itself (unknown
verifier, unreadable input, unwritable output) raise VerifyInputError before anything is written, which
`rlvr.cli.main.main` prints as one `rlvr: error: ...` line with exit code 2.

The summary (stderr) counts every outcome, zeros included, as the training metrics do (rewards.outcome_counts).
"""
from __future__ import annotations

import inspect
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import IO, Any

from rlvr.config.run import TaskConfig
from rlvr.config.sections import EpisodeConfig
from rlvr.errors import UserFacingError
from rlvr.types import Outcome, Prompt, Verdict
from rlvr.verifiers import VERIFIERS, Verifier, safe_verify
from rlvr.verifiers.base import error_verdict

REFERENCE_FIELDS = ("reference", "answer")  # first present wins


class VerifyInputError(UserFacingError, ValueError):
    """A problem with `rlvr verify`'s arguments or files, phrased for the user (exit code 2)."""


STATE_VERIFIER = "environment"  # re-scores recorded episodes' final states (issue 26): samples.jsonl's "episode"


class RecordedStateVerifier:
    """The task's environment judging a recorded final state against the recorded reference (`score_state` is
    pure, so the verdict is the one training gave unless the environment's code changed). Prompt columns are not
    recorded: an environment whose check reads them cannot be re-scored from samples.jsonl."""

    def __init__(self, environment):
        self.environment = environment

    def verify(self, completion: str, reference: str) -> Verdict:  # completion: the final state's text
        prompt = Prompt("recorded", (), reference)
        verdict = self.environment.score_state(completion, prompt)
        return verdict if isinstance(verdict, Verdict) else error_verdict("score_state gave no verdict")


def _state_verifier(task: TaskConfig, episode: EpisodeConfig | None) -> Verifier:
    from rlvr.agents.wiring import plays_episodes
    from rlvr.tasks import build_task

    built = build_task(task)
    environment = built.environment(episode or EpisodeConfig()) if plays_episodes(built) else None
    if environment is None or not environment.scores_state:
        raise VerifyInputError(f"verifier {STATE_VERIFIER!r} re-scores recorded episodes' final states, and task "
                               f"{task.name!r} has no environment state to check (give --task / task.name)")
    return RecordedStateVerifier(environment)


def build_verifier(name: str, task: TaskConfig, episode: EpisodeConfig | None = None) -> Verifier:
    if name == STATE_VERIFIER:
        return _state_verifier(task, episode)
    factory = VERIFIERS.get(name)
    if factory is None:
        raise VerifyInputError(f"unknown verifier {name!r}; valid verifiers: {', '.join(sorted(VERIFIERS))}")
    return factory(task)


def _reference_required(verifier: Verifier) -> bool:
    """Format-only verifiers declare `reference=""`; those may be fed lines without a reference."""
    try:
        params = list(inspect.signature(verifier.verify).parameters.values())
    except (TypeError, ValueError):
        return True
    return len(params) < 2 or params[1].default is inspect.Parameter.empty


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def parse_line(raw: bytes, needs_reference: bool, state: bool = False) -> tuple[str, str] | str:
    """(completion, reference) from one input line, or a string saying what is wrong with it. `state`: the
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
    field = next((name for name in REFERENCE_FIELDS if name in record), None)
    if field is None:
        if needs_reference:
            return "bad input line: missing field 'reference' (or 'answer')"
        return completion, ""
    reference = record[field]
    if isinstance(reference, (int, float)) and not isinstance(reference, bool):
        reference = str(reference)  # datasets often store numeric answers as numbers
    if not isinstance(reference, str):
        return f"bad input line: field {field!r} must be a string or a number, got {_type_name(reference)}"
    return completion, reference


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


def verify_file(verifier_name: str, input_path: Path, task: TaskConfig, output: Path | None = None,
                episode: EpisodeConfig | None = None) -> int:
    """Verify every line of `input_path`; write verdict lines to `output` (stdout if None), the summary to
    stderr. Returns 0 once the file could be read (bad lines are error verdicts); raises VerifyInputError
    for an unknown verifier, an unreadable input file or an unwritable output path."""
    input_path, output = Path(input_path), None if output is None else Path(output)
    verifier = build_verifier(verifier_name, task, episode)
    if not input_path.exists():
        raise VerifyInputError(f"input file {str(input_path)!r} does not exist")
    if not input_path.is_file():
        raise VerifyInputError(f"input {str(input_path)!r} is not a file (expected a .jsonl file)")
    try:
        source = input_path.open("rb")
    except OSError as err:
        raise VerifyInputError(f"cannot read input file {str(input_path)!r}: {err.strerror or err}") from None
    needs_reference = _reference_required(verifier)
    counts: Counter[Outcome] = Counter()
    total_score, bad_lines = 0.0, 0
    with source:
        sink = _open_output(output, input_path)
        try:
            for number, raw in enumerate(source, start=1):  # a final newline adds no (blank) line
                parsed = parse_line(raw.rstrip(b"\r\n"), needs_reference, verifier_name == STATE_VERIFIER)
                if isinstance(parsed, str):
                    verdict: Verdict = error_verdict(parsed)
                    bad_lines += 1
                else:
                    verdict = safe_verify(verifier, *parsed)
                counts[verdict.outcome] += 1
                total_score += verdict.score
                line = json.dumps({"line": number, **verdict.as_json()}, ensure_ascii=False)
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
    print(format_summary(counts, total_score, bad_lines, label), file=sys.stderr)
    if output is not None:
        print(f"wrote {output}", file=sys.stderr)
    return 0
