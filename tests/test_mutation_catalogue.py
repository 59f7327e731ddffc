"""bench/mutation_catalogue.py names each mutation by a line that must occur exactly once in its file; a refactor
that rewrites such a line leaves the mutation unable to apply (bench/mutations.py then reports it, but only when
someone runs it). This catches the drift at once (it happened twice: the recipe's fall-marking
line, then a compile line)."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from mutation_catalogue import CATALOGUE  # noqa: E402


def test_every_mutation_names_a_line_that_occurs_exactly_once():
    assert len(CATALOGUE) > 90
    counts = {m.name: [line.strip() for line in (ROOT / m.path).read_text().splitlines()].count(m.original)
              for m in CATALOGUE}
    assert {name: n for name, n in counts.items() if n != 1} == {}


def test_every_mutation_names_tests_that_exist():
    missing = []
    for m in CATALOGUE:
        for test in m.tests:
            path, _, name = test.partition("::")
            if not (ROOT / path).is_file() or f"def {name.split('[')[0]}(" not in (ROOT / path).read_text():
                missing.append(test)
    assert missing == []
