"""bench/mutate_change.py, checked on a toy repository: mutants only on the lines a change touches,
each run against the tests that execute it (also when only a subprocess executes it), planted mutants killed,
an untested line and a weak assert reported as survivors, a listed equivalent not counted.

The full runs over rlvr/ are a bench (hours on this machine); this is the fast check that the set-up itself works,
run in CI."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from mutation_operators import OURS  # noqa: E402

pytest.importorskip("cosmic_ray")

BASE_CODE = "def total(a, b):\n    return a + b\n"
CHANGE = '''

def label(n):
    if n > 10:
        return "big"
    return "small"


def unused(x):
    return x * 2


def scaled(x):
    return x * 2
'''
TESTS = '''import subprocess
import sys

from pkg.calc import scaled, total


def test_total():
    assert total(2, 3) == 5


def test_label_only_in_a_subprocess():
    out = subprocess.run([sys.executable, "-c", "from pkg.calc import label; print(label(11), label(10))"],
                         capture_output=True, text=True, check=True).stdout
    assert out.split() == ["big", "small"]


def test_scaled_weakly():
    assert scaled(0) == 0  # x * 3 and x / 2 pass this too
'''


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args], cwd=repo, check=True,
                   capture_output=True)


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> Path:
    repo = tmp_path_factory.mktemp("toy")
    (repo / "pkg").mkdir()
    (repo / "tests").mkdir()
    (repo / "pkg" / "__init__.py").write_text("")
    (repo / "pkg" / "calc.py").write_text(BASE_CODE)
    (repo / "tests" / "test_calc.py").write_text(TESTS)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    (repo / "pkg" / "calc.py").write_text(BASE_CODE + CHANGE)  # the change, not committed
    (repo / "bench").mkdir()
    (repo / "bench" / "equivalent_mutants.md").write_text(
        "| file | definition | line | mutant | why it cannot change behaviour |\n|---|---|---|---|---|\n"
        "| pkg/calc.py | scaled | `return x * 2` | `return x / 2` | planted: listed, so not counted |\n")
    return repo


def _run(repo: Path, *args: str) -> tuple[int, str, dict]:
    report = repo / "report.json"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "mutate_change.py"), "HEAD", "--root", str(repo),
                           "--paths", "pkg", "--report", str(report), *args], capture_output=True, text=True,
                          timeout=300)
    return done.returncode, done.stdout + done.stderr, json.loads(report.read_text()) if report.is_file() else {}


def test_the_change_s_mutants_are_run_against_the_tests_that_execute_them(toy):
    code, out, report = _run(toy)
    mutants = report["mutants"]
    # only the changed lines: `return a + b` (line 2, unchanged since HEAD) is never mutated
    assert mutants and all(m["first"] > 2 for m in mutants), out
    by = {(m["before"], m["after"]): m for m in mutants}
    # label() runs only in a subprocess: its mutants are still killed, by that test
    for after in ("if n >= 10:", "if not n > 10:", "if n > 11:"):
        assert by[("if n > 10:", after)]["status"] == "killed", out
        assert "test_label_only_in_a_subprocess" in by[("if n > 10:", after)]["detail"]
    assert by[('return "small"', "return None")]["status"] == "killed"
    # two functions with the same body: `unused` is run by no test, `scaled` by a weak one
    unused = [m for m in mutants if m["before"] == "return x * 2" and m["first"] == 12]
    scaled = {m["after"]: m["status"] for m in mutants if m["before"] == "return x * 2" and m["first"] == 16}
    assert unused and {m["status"] for m in unused} == {"NO TESTS"}
    assert scaled == {"return x * 3": "SURVIVED", "return x * 1": "SURVIVED", "return None": "killed",
                      "return x / 2": "equivalent"}, out  # listed for scaled only: unused's x / 2 still counts
    assert code == 1  # survivors: the exit status says so
    row = next(line for line in out.splitlines() if line.startswith("pkg/calc.py"))
    # 7 label + 4 unused + 4 scaled mutants; killed 7 + 1, survived 2, no tests 4, equivalent 1 -> 6/14 = 42.9 %
    assert row.split()[1:] == ["15", "8", "2", "0", "4", "1", "42.9", "%"]


def test_resume_runs_only_what_was_not_killed(toy):
    code, out, report = _run(toy, "--resume")
    ran = [line for line in out.splitlines() if line.startswith(("killed ", "SURVIVED ", "NO TESTS "))]
    # the 8 killed are taken from the report; the 2 survivors and the 4 untested are tried again
    assert len(ran) == 6 and all(" pkg/calc.py:" in line for line in ran), out
    assert sum(m["status"] == "killed" for m in report["mutants"]) == 8


@pytest.mark.parametrize("name", sorted(OURS))
def test_our_operators_make_the_mutations_their_examples_show(name):
    from cosmic_ray.mutating import mutate_code
    for example in OURS[name].examples():
        assert mutate_code(example.pre_mutation_code, OURS[name](), example.occurrence) == example.post_mutation_code


def test_annotations_are_not_mutated(tmp_path):
    """`int | None` -> `int & None` in an annotation changes nothing that runs (`from __future__ import
    annotations`): such mutants would only be noise to list as equivalent."""
    from mutate_change import mutants_of

    (tmp_path / "m.py").write_text("from __future__ import annotations\n\n\n"
                                   "def f(a: int | None = 3) -> int | None:\n    x: int | None = a\n"
                                   "    return x | 1\n")
    found = {(m.first, m.after) for m in mutants_of(tmp_path, "m.py", set(range(1, 7)))}
    assert ("return x & 1" in {after for _, after in found})  # the code's own `|` is mutated
    assert all(line == 6 or "int | None" in after for line, after in found if line in (4, 5)), found
    assert not any("&" in after and line in (4, 5) for line, after in found)


def test_exception_classes_are_replaced_dotted_or_not(tmp_path):
    """cosmic-ray's ExceptionReplacer stopped the whole listing on `except json.JSONDecodeError` (an
    AttributeError on a dotted class); ours replaces a dotted class whole and numbers bare names as cosmic-ray
    does (its own examples still hold)."""
    from cosmic_ray.mutating import mutate_code
    from cosmic_ray.operators.exception_replacer import ExceptionReplacer

    from mutate_change import mutants_of
    from mutation_operators import DottedExceptionReplacer, make

    assert isinstance(make("core/ExceptionReplacer"), DottedExceptionReplacer)
    for example in DottedExceptionReplacer.examples() + ExceptionReplacer.examples():
        if example.pre_mutation_code == example.post_mutation_code:  # a bare `except:` has nothing to replace
            continue
        assert mutate_code(example.pre_mutation_code, DottedExceptionReplacer(), example.occurrence) == \
            example.post_mutation_code
    (tmp_path / "m.py").write_text("import json\n\n\ndef f(s):\n    try:\n        return json.loads(s)\n"
                                   "    except (ValueError, json.JSONDecodeError):\n        return None\n")
    replaced = {m.after for m in mutants_of(tmp_path, "m.py", set(range(1, 9)))
                if m.operator == "core/ExceptionReplacer"}
    assert replaced == {"except (CosmicRayTestingException, json.JSONDecodeError):",
                        "except (ValueError, CosmicRayTestingException):"}


def test_a_sample_keeps_a_few_mutants_of_every_file_the_same_on_every_run(capsys):
    """--sample N: a change of thousands of mutants gets at most N a file, picked by digest (so a resumed run picks
    the same ones), and no file is left out."""
    from mutate_change import Mutant, _sample

    def mutant(path, i):
        return Mutant(path, "f", "core/AddNot", i, i, i, "x", "not x", f"{(i * 7919) % 1000:04d}{path}")
    mutants = [mutant(p, i) for p in ("a.py", "b.py") for i in range(10)] + [mutant("c.py", 0)]
    picked = _sample(mutants, 3)
    assert [sum(m.path == p for m in picked) for p in ("a.py", "b.py", "c.py")] == [3, 3, 1]
    assert {m.digest for m in picked if m.path == "a.py"} == set(sorted(m.digest for m in mutants
                                                                        if m.path == "a.py")[:3])
    assert [m.key for m in _sample(list(reversed(mutants)), 3)] == [m.key for m in picked]
    assert "sampled 7 of 21 mutants" in capsys.readouterr().out
    assert _sample(mutants, 0) == mutants
    # a listed equivalent is kept (reported, never run) and takes none of its file's N places
    listed = mutant("c.py", 1)
    listed.status = "equivalent"
    again = _sample(mutants + [listed], 3)
    assert listed in again and [m.key for m in again if m is not listed] == [m.key for m in picked]


def test_a_negative_sample_is_refused(capsys):
    from mutate_change import main

    with pytest.raises(SystemExit):
        main(["--sample", "-1", "--list", "HEAD"])
    assert "must be 0 (every mutant) or more, not -1" in capsys.readouterr().err
