"""Mutation check: does a test fail when the code behind a documented claim is broken?

Each mutation in bench/mutation_catalogue.py replaces one line of rlvr/ with a plausible bug (a restore that
restores nothing, a flipped sign, a dropped guard). For each, this script copies the repository's tracked files
to a scratch directory, applies the one-line change there (never in the working tree), runs only the tests named
for it, and records whether they failed. A mutation no test catches means a claim no test protects: give it a
test or take the claim out of the docs.

    .venv/bin/python bench/mutations.py                    # all of them, ~10-15 min on 2 CPU cores
    .venv/bin/python bench/mutations.py --only resume,kl   # names containing any of these words
    .venv/bin/python bench/mutations.py --list

Before the mutants, the named tests run once on the unmutated copy: a test that already fails proves nothing
about a mutant, so the script stops there. The exit status is 1 when any mutant survives, is undecided (a timeout) or
cannot be applied.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutation_catalogue import CATALOGUE, Mutation  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Outcome:
    mutation: Mutation
    status: str  # caught | SURVIVED | UNDECIDED (timed out, no tests) | NOT APPLIED
    seconds: float
    detail: str  # the first failing test, or why it could not be applied


def copy_tracked(destination: Path, root: Path = ROOT) -> None:
    """The tracked files and new ones git does not ignore, so a local .venv, run directories or caches do not
    travel (or get mutated), while a change not yet committed does."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                            check=True, capture_output=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = root / name
        if source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def apply(mutation: Mutation, tree: Path) -> str | None:
    """Replace the one line; -> the original file text, or None (with nothing changed) when the line is not
    there exactly once or the result does not compile (a syntax error would be "caught" by any test)."""
    path = tree / mutation.path
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    hits = [i for i, line in enumerate(lines) if line.strip() == mutation.original]
    if len(hits) != 1:
        return None
    line = lines[hits[0]]
    indent = line[: len(line) - len(line.lstrip())]
    lines[hits[0]] = indent + mutation.replacement + "\n"
    mutated = "".join(lines)
    try:
        compile(mutated, str(path), "exec")
    except SyntaxError:
        return None
    path.write_text(mutated)
    return text


def run_tests(tests: tuple[str, ...], tree: Path, timeout: float) -> tuple[bool | None, str]:
    """-> (passed, first failing test id or the tail of the output); passed is None when the run timed out (on a
    busy machine that says nothing about the mutant) or collected no test: reported, never counted as caught."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
    # its own session, so that a timeout kills the trainers the tests started too (they hold the output pipes open)
    process = subprocess.Popen(command, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, start_new_session=True)
    try:
        stdout, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return None, f"timed out after {timeout:.0f} s (rerun with a larger --timeout)"
    done = subprocess.CompletedProcess(command, process.returncode, stdout, "")
    failed = [line.split(" ")[1] for line in done.stdout.splitlines() if line.startswith(("FAILED ", "ERROR "))]
    if done.returncode == 0:
        return True, ""
    if done.returncode == 5:
        return None, "no tests collected (a wrong test id?)"
    return False, failed[0] if failed else done.stdout.strip().splitlines()[-1:][0] if done.stdout.strip() else ""


def check(mutation: Mutation, tree: Path, timeout: float) -> Outcome:
    started = time.monotonic()
    original = apply(mutation, tree)
    if original is None:
        return Outcome(mutation, "NOT APPLIED", 0.0, f"line not found exactly once in {mutation.path}, or the "
                                                     "replacement does not compile")
    try:
        passed, detail = run_tests(mutation.tests, tree, timeout)
    finally:
        (tree / mutation.path).write_text(original)
    seconds = time.monotonic() - started
    status = {True: "SURVIVED", False: "caught", None: "UNDECIDED"}[passed]
    return Outcome(mutation, status, seconds, detail or "tests passed")


def baseline(mutations: list[Mutation], tree: Path, timeout: float) -> str | None:
    tests = tuple(dict.fromkeys(t for m in mutations for t in m.tests))
    passed, detail = run_tests(tests, tree, timeout * 4)
    return None if passed else detail or "timed out"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated words; keep mutations whose name has one")
    parser.add_argument("--list", action="store_true", help="print the catalogue and exit")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per mutant's test run")
    args = parser.parse_args(argv)
    words = [w.strip() for w in args.only.split(",") if w.strip()]
    chosen = [m for m in CATALOGUE if not words or any(w in m.name for w in words)]
    if args.list or not chosen:
        for m in chosen or CATALOGUE:
            print(f"{m.name:32s} {m.path}: {m.original!r} -> {m.replacement!r}  [{', '.join(m.tests)}]")
        return 0 if chosen else 2
    with tempfile.TemporaryDirectory(prefix="rlvr-mutants-") as scratch:
        tree = Path(scratch)
        copy_tracked(tree)
        broken = baseline(chosen, tree, args.timeout)
        if broken is not None:
            print(f"the unmutated code fails its own tests ({broken}): fix that first")
            return 1
        outcomes = []
        for mutation in chosen:
            outcome = check(mutation, tree, args.timeout)
            outcomes.append(outcome)
            print(f"{outcome.status:11s} {mutation.name:32s} {outcome.seconds:6.1f} s  {outcome.detail}", flush=True)
    survivors = [o for o in outcomes if o.status != "caught"]
    print(f"\n{len(outcomes) - len(survivors)} of {len(outcomes)} mutations caught"
          + (f"; not caught: {', '.join(o.mutation.name for o in survivors)}" if survivors else ""))
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
