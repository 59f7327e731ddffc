"""The difficulty sweet spot's math (rlvr/algorithms/difficulty.py), by hand."""
from __future__ import annotations

import pytest

from rlvr.algorithms.difficulty import expected_abs_advantage, tie_probability


def test_tie_probability_by_hand() -> None:
    # p^G + (1 - p)^G: G = 2, p = 0.5 -> 0.25 + 0.25; G = 4, p = 0.5 -> 2 / 16; G = 3, p = 0.9 -> 0.729 + 0.001
    assert tie_probability(0.5, 2) == pytest.approx(0.5)
    assert tie_probability(0.5, 4) == pytest.approx(0.125)
    assert tie_probability(0.9, 3) == pytest.approx(0.730)
    # always right, always wrong, or a group of one: every group ties
    assert tie_probability(1.0, 8) == tie_probability(0.0, 8) == tie_probability(0.3, 1) == 1.0


def test_expected_abs_advantage_by_hand() -> None:
    # G = 2, p = 0.5: k = 1 with probability 1/2 -> rewards [1, 0], mean 0.5, Bessel std sqrt(0.5) = 0.70710678,
    # |A| = 0.5 / (0.70710678 + 1e-4) = 0.7070068 for both; k = 0 and k = 2 tie (A = 0). E|A| = 0.3535034.
    assert expected_abs_advantage(0.5, 2) == pytest.approx(0.3535034, abs=1e-6)
    # G = 4, p = 0.5: k = 1 or 3 (8/16): std 0.5, |A| = 0.75 / 0.5001 = 1.4997 once and 0.25 / 0.5001 = 0.49990
    # three times, mean 0.74985; k = 2 (6/16): std sqrt(1/3) = 0.57735, |A| = 0.5 / 0.57745 = 0.865876.
    # E|A| = 0.5 * 0.74985 + 0.375 * 0.865876 = 0.6996285
    assert expected_abs_advantage(0.5, 4) == pytest.approx(0.6996285, abs=1e-5)
    assert expected_abs_advantage(0.0, 4) == expected_abs_advantage(1.0, 4) == expected_abs_advantage(0.4, 1) == 0.0


def test_bad_inputs_are_refused() -> None:
    for p, g in ((-0.1, 4), (1.5, 4), (0.5, 0)):
        with pytest.raises(ValueError, match="need 0 <= p <= 1 and G >= 1"):
            tie_probability(p, g)
