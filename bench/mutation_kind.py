"""What one entry of the mutation catalogue is (bench/mutation_catalogue.py)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutation:
    name: str  # the claim, in a few words (--only matches on it)
    path: str  # relative to the repository root
    original: str  # the line as it stands, stripped
    replacement: str  # the broken line (re-indented like the original)
    tests: tuple[str, ...]  # pytest ids, run from the repository root


def _m(name: str, path: str, original: str, replacement: str, *tests: str) -> Mutation:
    return Mutation(name, path, original, replacement, tests)
