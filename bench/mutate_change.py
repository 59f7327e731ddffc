"""Machine-made mutants of the lines a change touches, each run against the tests that execute it.

    .venv/bin/python bench/mutate_change.py BASE                       # lines of rlvr/ changed since BASE
    .venv/bin/python bench/mutate_change.py BASE --paths rlvr/agents   # only under these paths
    .venv/bin/python bench/mutate_change.py --whole rlvr/agents/wiring.py rlvr/tasks/levels.py
    .venv/bin/python bench/mutate_change.py BASE --sample 20           # a change too large to run whole

The mutants come from cosmic-ray's operators (bench/mutation_operators.py says which and why): it rewrites a
parsed copy of the file, one change at a time. This script copies the repository (tracked and new files, never
.venv or runs) to a scratch directory, measures once with coverage.py which tests run each line
(bench/mutation_coverage.py; subprocesses included, cached under .mutants/), then writes each mutant into the
copy and runs only its tests, cheapest first, up to --budget seconds of their measured time (default 30; at least
one test), stopping at the first failure; a fork server imports torch and transformers once for all of them
(bench/mutation_forkserver.py). A mutant is

    killed      a test failed            SURVIVED   every test passed: no test sees this change
    TIMEOUT     the tests ran past their limit (3x their measured time + 60 s): reported, never counted killed
    NO TESTS    no test runs the line: as good as survived
    equivalent  listed in bench/equivalent_mutants.md with the reason it cannot change behaviour (not run)

It prints one line a mutant and a table per file with the survival rate, (survived + no tests) / decided, and
exits 1 when any non-equivalent mutant survives. `--report FILE` keeps every outcome as JSON, written as it
goes; `--resume` skips what that file says was killed (a long run survives an interruption; survivors are tried again,
with `--tests` against just the tests written for them).
"""
from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutation_coverage import CoverageMap, measure  # noqa: E402
from mutation_operators import make, operator_names, positions  # noqa: E402
from mutation_scopes import SCOPES  # noqa: E402
from mutations import copy_tracked  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EQUIVALENTS = ROOT / "bench" / "equivalent_mutants.md"


@dataclass
class Mutant:
    path: str  # relative to the repository root
    definition: str  # the enclosing function or class, e.g. Class.method ("" at module level)
    operator: str
    occurrence: int  # cosmic-ray's count of this operator's sites in the file
    first: int  # the lines the change spans
    last: int
    before: str  # the changed lines, stripped, as they read before and after
    after: str
    digest: str  # of the mutated file: two operators that write the same code are one mutant
    status: str = "pending"  # killed | SURVIVED | TIMEOUT | NO TESTS | equivalent
    seconds: float = 0.0
    detail: str = ""

    @property
    def key(self) -> str:
        return f"{self.path} | {self.definition} | {self.before} | {self.after}"


def changed_lines(root: Path, base: str, paths: list[str]) -> dict[str, set[int]]:
    """Lines of .py files under `paths` that differ from `base` (the working tree, committed or not)."""
    diff = subprocess.run(["git", "diff", "-U0", "--no-color", "--relative", base, "--", *paths], cwd=root,
                          check=True, capture_output=True, text=True).stdout
    changed: dict[str, set[int]] = {}
    current = None
    for line in diff.splitlines():
        if line.startswith("+++ "):
            current = line[6:] if line.startswith("+++ b/") and line.endswith(".py") else None
        elif line.startswith("@@") and current:
            start, _, count = re.match(r"@@ -\S+ \+(\d+)(,(\d+))? @@", line).groups()
            n = 1 if count is None else int(count)
            changed.setdefault(current, set()).update(range(int(start), int(start) + n))
    untracked = subprocess.run(["git", "ls-files", "--others", "--exclude-standard", "--", *paths], cwd=root,
                               check=True, capture_output=True, text=True).stdout.split()
    for name in untracked:
        if name.endswith(".py"):
            changed[name] = set(range(1, len((root / name).read_text().splitlines()) + 1))
    return {p: lines for p, lines in changed.items() if lines and (root / p).is_file()}


def _changed_text(source: str, mutated: str) -> tuple[int, int, str, str]:
    old, new = source.splitlines(), mutated.splitlines()
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    changes = [op for op in matcher.get_opcodes() if op[0] != "equal"]
    i1, i2, j1, j2 = changes[0][1], changes[-1][2], changes[0][3], changes[-1][4]
    return (i1 + 1, max(i2, i1 + 1), " / ".join(s.strip() for s in old[i1:i2]),
            " / ".join(s.strip() for s in new[j1:j2]))


def _definition(module, position: tuple[int, int]) -> str:
    """The dotted name of the function or class around a position (the key tells apart equal lines)."""
    node, names = module.get_leaf_for_position(position, include_prefixes=True), []
    while node is not None:
        if node.type in ("funcdef", "classdef"):
            names.append(node.name.value)
        node = node.parent
    return ".".join(reversed(names))


def _in_annotation(module, position: tuple[int, int]) -> bool:
    """Whether a position lies in a type annotation (a parameter's, a return's, `x: T = ...`): with `from __future__
    import annotations` nothing evaluates them, so a mutant there is noise, not a finding."""
    node = module.get_leaf_for_position(position, include_prefixes=True)
    while node is not None and node.parent is not None:
        parent = node.parent
        if (parent.type in ("tfpdef", "annassign") and node is parent.children[-1 if parent.type == "tfpdef" else 1]
                ) or (parent.type in ("param", "funcdef") and node is parent.annotation):
            return True
        node = parent
    return False


def mutants_of(root: Path, path: str, lines: set[int]) -> list[Mutant]:
    """Every mutant of the default operator set whose site touches `lines` (not in an annotation), that compiles,
    once each."""
    from cosmic_ray.ast import get_ast
    from cosmic_ray.mutating import mutate_code
    source = (root / path).read_text()
    module = get_ast(source)
    found: dict[str, Mutant] = {}
    for name in operator_names():
        operator = make(name)
        for occurrence, (start, end) in enumerate(positions(operator, module)):
            if not lines & set(range(start[0], end[0] + 1)) or _in_annotation(module, start):
                continue
            mutated = mutate_code(source, operator, occurrence)
            if mutated is None or mutated == source:
                continue
            try:
                compile(mutated, path, "exec")
            except SyntaxError:
                continue
            first, last, before, after = _changed_text(source, mutated)
            digest = hashlib.sha256(mutated.encode()).hexdigest()[:16]
            found.setdefault(digest, Mutant(path, _definition(module, start), name, occurrence, first, last, before,
                                            after, digest))
    return sorted(found.values(), key=lambda m: (m.first, m.operator, m.occurrence))


def read_equivalents(path: Path = EQUIVALENTS) -> dict[str, str]:
    """`| file | definition | `before` | `after` | reason |` rows -> {key: reason}. A cell's code may hold `|`
    written as `\\|` (markdown's escape)."""
    listed = {}
    if path.is_file():
        for row in path.read_text().splitlines():
            cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", row.strip().strip("|"))]
            if row.startswith("|") and len(cells) >= 5 and cells[2].startswith("`"):
                listed[f"{cells[0]} | {cells[1]} | {cells[2].strip('`')} | {cells[3].strip('`')}"] = cells[4]
    return listed


class TestRunner:
    """One fork server (bench/mutation_forkserver.py) per scratch copy: torch and transformers are imported once,
    each mutant's tests run in a fresh fork that imports rlvr from the copy."""

    def __init__(self, tree: Path):
        env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
        self.tree = tree
        self.server = subprocess.Popen([sys.executable, str(Path(__file__).parent / "mutation_forkserver.py")],
                                       cwd=tree, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if "ready" not in json.loads(self.server.stdout.readline() or "{}"):
            raise SystemExit("the test runner (bench/mutation_forkserver.py) did not start")

    def run(self, tests: list[str], timeout: float) -> tuple[bool | None, str]:
        """-> (passed, the first failing test or the output's last line); passed is None on a timeout."""
        self.server.stdin.write(json.dumps({"tests": tests, "timeout": timeout}) + "\n")
        self.server.stdin.flush()
        answer = json.loads(self.server.stdout.readline())
        if answer["code"] is None:
            return None, f"timed out after {timeout:.0f} s"
        lines = answer["output"].strip().splitlines()
        failed = [line.split(" ")[1] for line in lines if line.startswith(("FAILED ", "ERROR "))]
        if answer["code"] == 5:
            return None, "no tests collected (a wrong test id?)"
        return answer["code"] == 0, failed[0] if failed else (lines[-1] if lines else f"exit {answer['code']}")

    def close(self) -> None:
        self.server.stdin.close()
        self.server.wait()


def decide(mutant: Mutant, runner: TestRunner, coverage: CoverageMap, budget: float) -> Mutant:
    """Write the mutant into the runner's copy, run its tests there (the cheapest first, up to `budget` seconds
    of their measured time, at least one), put the file back."""
    covering = coverage.tests_for(mutant.path, mutant.first, mutant.last)
    if not covering:
        mutant.status, mutant.detail = "NO TESTS", "no test runs these lines"
        return mutant
    tests = covering[:1] + [t for i, t in enumerate(covering[1:], 1) if coverage.seconds(covering[:i + 1]) <= budget]
    target = runner.tree / mutant.path
    source = target.read_text()
    from cosmic_ray.mutating import mutate_code
    target.write_text(mutate_code(source, make(mutant.operator), mutant.occurrence))
    started = time.monotonic()
    try:
        passed, detail = runner.run(tests, 3 * coverage.seconds(tests) + 60)
    finally:
        target.write_text(source)
    mutant.seconds = time.monotonic() - started
    mutant.status = {True: "SURVIVED", False: "killed", None: "TIMEOUT"}[passed]
    shown = f"{len(tests)} of {len(covering)} covering tests" + (" (the cheapest)" if len(tests) < len(covering)
                                                                 else "")
    mutant.detail = detail if passed is False else f"{shown} passed" if passed else detail
    return mutant


def summarise(mutants: list[Mutant]) -> tuple[str, bool]:
    """-> (the per-file table, whether every mutant is killed, timed out or equivalent)."""
    columns = ("killed", "SURVIVED", "TIMEOUT", "NO TESTS", "equivalent")
    rows = [f"{'file':44s} {'mutants':>7s} {'killed':>7s} {'survived':>8s} {'timeout':>7s} {'no tests':>8s} "
            f"{'equiv.':>6s} {'survival':>8s}"]
    clean = True
    for path in sorted({m.path for m in mutants}):
        counts = {c: sum(m.status == c for m in mutants if m.path == path) for c in columns}
        lost = counts["SURVIVED"] + counts["NO TESTS"]
        decided = lost + counts["killed"]
        clean &= lost == 0
        rate = f"{100 * lost / decided:.1f} %" if decided else "-"
        rows.append(f"{path:44s} {sum(counts.values()):7d} {counts['killed']:7d} {counts['SURVIVED']:8d} "
                    f"{counts['TIMEOUT']:7d} {counts['NO TESTS']:8d} {counts['equivalent']:6d} {rate:>8s}")
    return "\n".join(rows), clean


def _definition_lines(root: Path, spec: str) -> tuple[str, set[int]]:
    """`PATH` -> every line; `PATH::NAME` or `PATH::Class.method` -> the lines of that definition."""
    path, _, name = spec.partition("::")
    if not (root / path).is_file():
        raise SystemExit(f"--whole: no such file: {path}")
    text = (root / path).read_text()
    if not name:
        return path, set(range(1, len(text.splitlines()) + 1))
    from cosmic_ray.ast import get_ast
    scope = get_ast(text)
    for part in name.split("."):
        found = [d for d in list(scope.iter_funcdefs()) + list(scope.iter_classdefs()) if d.name.value == part]
        if not found:
            raise SystemExit(f"--whole: {path} has no definition {name!r}")
        scope = found[0]
    return path, set(range(scope.start_pos[0], scope.end_pos[0] + 1))


def _scope(args, root: Path) -> dict[str, set[int]]:
    """BASE's changed lines under --paths, plus every line --whole names."""
    specs = list(args.whole)
    for name in args.scope:
        if name not in SCOPES:
            raise SystemExit(f"--scope: no scope {name!r} (bench/mutation_scopes.py has {', '.join(SCOPES)})")
        specs += SCOPES[name]
    if not args.base and not specs:
        raise SystemExit("give BASE (a commit to compare with), --whole FILE[::NAME] ..., --scope NAME, or more")
    folders = [s for s in specs if (root / s).is_dir()]
    specs = [s for s in specs if s not in folders] + sorted(
        str(p.relative_to(root)) for f in folders for p in (root / f).rglob("*.py") if p.stat().st_size)
    scope = changed_lines(root, args.base, args.paths) if args.base else {}
    for spec in specs:
        path, lines = _definition_lines(root, spec)
        scope.setdefault(path, set()).update(lines)
    return scope


def _print(mutant: Mutant) -> None:
    print(f"{mutant.status:10s} {mutant.path}:{mutant.first:<4d} {mutant.operator.split('/')[-1]:38s} "
          f"{mutant.before[:60]!r} -> {mutant.after[:60]!r}  ({mutant.seconds:.1f} s) {mutant.detail}", flush=True)


def _run(pending: list[Mutant], trees: list[Path], coverage: CoverageMap, budget: float, save) -> None:
    runners = [TestRunner(tree) for tree in trees]
    free = list(runners)
    try:
        with ThreadPoolExecutor(max_workers=len(runners)) as pool:
            def work(mutant: Mutant) -> Mutant:
                runner = free.pop()  # each worker thread holds one copy while it runs (list.pop is atomic)
                try:
                    return decide(mutant, runner, coverage, budget)
                finally:
                    free.append(runner)
            for mutant in pool.map(work, pending):
                _print(mutant)
                save()
    finally:
        for runner in runners:
            runner.close()


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 (every mutant) or more, not {value}")
    return value


def _sample(mutants: list[Mutant], per_file: int) -> list[Mutant]:
    """At most `per_file` mutants of each file, the ones whose digest sorts first: a pseudo-random pick that is the
    same on every run of the same code (so --resume works), for a change too large to run whole. The per-file
    rates are then estimates from the sample."""
    if not per_file:
        return mutants
    picked = [m for m in mutants if m.status == "equivalent"]  # listed: kept, never run, not counted
    for path in sorted({m.path for m in mutants}):
        picked += sorted((m for m in mutants if m.path == path and m.status != "equivalent"),
                         key=lambda m: m.digest)[:per_file]
    print(f"sampled {len(picked)} of {len(mutants)} mutants (at most {per_file} a file besides listed "
          "equivalents)", flush=True)
    return sorted(picked, key=lambda m: (m.path, m.first, m.operator, m.occurrence))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", nargs="?", help="the commit the change is measured against")
    parser.add_argument("--paths", nargs="*", default=["rlvr"], help="only changes under these (default: rlvr)")
    parser.add_argument("--whole", nargs="*", default=[], help="also every line of these: FILE or FILE::NAME")
    parser.add_argument("--scope", nargs="*", default=[], help="also these named sets (bench/mutation_scopes.py)")
    parser.add_argument("--tests", nargs="*", default=[], help="measure and run only these tests (default: all)")
    parser.add_argument("--budget", type=float, default=30.0,
                        help="seconds of measured test time a mutant gets, cheapest tests first (default 30)")
    parser.add_argument("--jobs", type=int, default=1, help="mutants run at once, each in its own copy")
    parser.add_argument("--report", type=Path, help="write every outcome here as JSON, as the run goes")
    parser.add_argument("--resume", action="store_true", help="skip the mutants --report says were killed")
    parser.add_argument("--sample", type=_non_negative, default=0,
                        help="at most this many mutants a file, the same pick every run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the mutants and stop (no tests run)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this one)")
    parser.add_argument("--equivalents", type=Path, default=None, help="default: bench/equivalent_mutants.md")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    scope = _scope(args, root)
    mutants = [m for path in sorted(scope) for m in mutants_of(root, path, scope[path])]
    equivalent = read_equivalents(args.equivalents or root / "bench" / "equivalent_mutants.md")
    for m in mutants:
        if m.key in equivalent:
            m.status, m.detail = "equivalent", equivalent[m.key]
    mutants = _sample(mutants, args.sample)
    if args.list or not mutants:
        for m in mutants:
            _print(m)
        print(f"{len(mutants)} mutants in {len(scope)} files")
        return 0
    done = {}
    if args.resume and args.report and args.report.is_file():
        done = {(m["key"], m["digest"]): m for m in json.loads(args.report.read_text())["mutants"]}
    for m in mutants:
        if m.status == "pending" and done.get((m.key, m.digest), {}).get("status") == "killed":  # survivors rerun
            m.status, m.seconds, m.detail = (done[(m.key, m.digest)][k] for k in ("status", "seconds", "detail"))

    def save() -> None:
        if args.report:
            rows = [{**asdict(m), "key": m.key} for m in mutants]
            args.report.write_text(json.dumps({"scope": {p: len(s) for p, s in scope.items()}, "mutants": rows}))

    with tempfile.TemporaryDirectory(prefix="rlvr-mutate-") as scratch:
        trees = [Path(scratch) / f"tree{i}" for i in range(max(1, args.jobs))]
        for tree in trees:
            copy_tracked(tree, root)
        started = time.monotonic()
        coverage = measure(trees[0], sorted(scope), args.tests, root / ".mutants")
        print(f"coverage of {len(scope)} files measured in {time.monotonic() - started:.0f} s "
              f"({len(coverage.durations)} tests, {len(coverage.failed)} failing unmutated and left out)", flush=True)
        _run([m for m in mutants if m.status == "pending"], trees, coverage, args.budget, save)
    save()
    for m in mutants:
        if m.status in ("SURVIVED", "NO TESTS"):
            print(f"\nsurvivor {m.path}:{m.first} ({m.operator})\n  - {m.before}\n  + {m.after}")
    table, clean = summarise(mutants)
    print("\n" + table)
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
