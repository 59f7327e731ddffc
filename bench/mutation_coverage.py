"""Which tests run each line: one coverage.py run of the suite with a context per test, for
bench/mutate_change.py to give each mutant only the tests that execute it.

Subprocesses count: a test that starts `rlvr train` or torchrun ranks covers the lines those processes run. The
coverage configuration is handed to them through COVERAGE_PROCESS_START (coverage's own start-up hook, installed
with the package), and its static context is the test id the plugin (bench/mutation_context.py) exports.
Lines run only at import time (module constants, defaults in signatures, dataclass fields) have no test context;
they get every test that runs some other line of their file, and every test of a test file that names the module
(`rlvr.agents.protocol`): a test that only builds a frozen record and assigns to it runs no line of the record's file
(the dataclass's methods are generated), yet it is the test that kills `frozen=True` dropped.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent


@dataclass
class CoverageMap:
    lines: dict[str, dict[int, list[str]]]  # file (relative) -> line -> test ids ("" = no test: import time)
    durations: dict[str, float] = field(default_factory=dict)  # test id -> seconds in the coverage run
    failed: list[str] = field(default_factory=list)  # tests that failed unmutated: no use against a mutant
    importers: dict[str, set[str]] = field(default_factory=dict)  # file -> tests of the test files naming its module

    def tests_for(self, path: str, first: int, last: int) -> list[str]:
        """The tests that run any of lines first..last (whole test functions, fastest first), and all the file's
        tests when those lines run at import; [] when nothing runs them."""
        by_line = self.lines.get(path, {})
        hit = {t for line in range(first, last + 1) for t in by_line.get(line, [])}
        ids = {t for t in hit if t}
        if "" in hit:  # run at import: every test of the file may read it (a subprocess's import has a test id,
            ids |= {t for tests in by_line.values() for t in tests if t}  # so `ids` alone would hold only those)
            ids |= self.importers.get(path, set())
        failed = {_function(t) for t in self.failed}
        functions = {_function(t) for t in ids} - failed
        cost = {}
        for test, seconds in self.durations.items():
            cost[_function(test)] = cost.get(_function(test), 0.0) + seconds
        return sorted(functions, key=lambda t: (cost.get(t, 0.0), t))

    def seconds(self, tests: list[str]) -> float:
        chosen = set(tests)
        return sum(s for t, s in self.durations.items() if _function(t) in chosen)

    def to_json(self) -> dict:
        return {"lines": self.lines, "durations": self.durations, "failed": self.failed}

    @classmethod
    def from_json(cls, data: dict) -> CoverageMap:
        lines = {path: {int(k): v for k, v in by_line.items()} for path, by_line in data["lines"].items()}
        return cls(lines, data["durations"], data["failed"])


def _function(test_id: str) -> str:
    """`tests/t.py::test_x[case]` -> `tests/t.py::test_x`: parameters are run together (ids with odd characters
    do not always survive a command line)."""
    return test_id.split("[", 1)[0]


def cache_key(tree: Path, files: list[str], tests: list[str]) -> str:
    """Changes when a Python file outside bench/, the target files or the chosen tests change."""
    digest = hashlib.sha256("\0".join(sorted(files) + ["--"] + sorted(tests)).encode())
    for path in sorted(p for p in tree.rglob("*.py") if p.relative_to(tree).parts[0] != "bench"):
        digest.update(str(path.relative_to(tree)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _configuration(scratch: Path, tree: Path, files: list[str]) -> Path:
    include = "".join(f"\n    {tree / f}" for f in files)
    config = scratch / "coverage.ini"
    config.write_text(f"[run]\ndata_file = {scratch / 'data'}\nparallel = true\ninclude ={include}\n"
                      "context = ${RLVR_MUTANT_CONTEXT}\n")
    return config


def measure(tree: Path, files: list[str], tests: list[str], cache: Path | None = None) -> CoverageMap:
    """Run `tests` (default: the whole suite) once under coverage in `tree`; -> the map for `files`."""
    key = cache_key(tree, files, tests)
    stored = cache / f"coverage-{key}.json" if cache else None
    if stored is not None and stored.is_file():
        return _with_importers(CoverageMap.from_json(json.loads(stored.read_text())), tree, files)
    with tempfile.TemporaryDirectory(prefix="rlvr-coverage-") as name:
        scratch = Path(name)
        config = _configuration(scratch, tree, files)
        outcomes = scratch / "outcomes.json"
        env = {**os.environ, "COVERAGE_PROCESS_START": str(config), "RLVR_MUTANT_OUTCOMES": str(outcomes),
               "PYTHONPATH": os.pathsep.join([str(tree), str(BENCH)]), "PYTHONDONTWRITEBYTECODE": "1"}
        env.pop("RLVR_MUTANT_CONTEXT", None)
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "mutation_context", *tests]
        done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
        if not outcomes.is_file():
            raise SystemExit(f"the coverage run of the tests did not finish (exit {done.returncode}):\n"
                             + "\n".join((done.stdout + done.stderr).splitlines()[-20:]))
        result = _read(scratch, tree, files, json.loads(outcomes.read_text()))
    if stored is not None:
        stored.parent.mkdir(parents=True, exist_ok=True)
        stored.write_text(json.dumps(result.to_json()))
    return _with_importers(result, tree, files)


def _with_importers(coverage: CoverageMap, tree: Path, files: list[str]) -> CoverageMap:
    """coverage with `importers` filled: for each file, the measured tests whose test file names its module."""
    by_test_file: dict[str, set[str]] = {}
    for test in coverage.durations:
        by_test_file.setdefault(test.split("::")[0], set()).add(test)
    texts = {name: (tree / name).read_text(errors="replace") for name in by_test_file if (tree / name).is_file()}
    for path in files:
        module = path.removesuffix(".py").replace("/", ".")
        coverage.importers[path] = {t for name, text in texts.items() if module in text for t in by_test_file[name]}
    return coverage


def _read(scratch: Path, tree: Path, files: list[str], outcomes: dict) -> CoverageMap:
    import coverage
    measured = coverage.Coverage(data_file=str(scratch / "data"), config_file=False)
    measured.combine(data_paths=[str(scratch)], keep=True)
    data = measured.get_data()
    lines = {}
    for relative in files:
        by_line = data.contexts_by_lineno(str(tree / relative))
        lines[relative] = {line: sorted({_test_of(c) for c in contexts}) for line, contexts in by_line.items()}
    return CoverageMap(lines, outcomes["durations"], outcomes["failed"])


def _test_of(context: str) -> str:
    """A recorded context -> the test id: a subprocess's static context is the id, the pytest process's dynamic
    one is too; coverage joins both with '|' when a process has both."""
    parts = [p for p in context.split("|") if p]
    return parts[-1] if parts else ""
