"""Units of the families a grade-school to competition dataset uses.

The project's rule (rlvr.verifiers.math.units): equal only with the same unit or no unit (a unit on one side only is
read as the number); different units of one quantity are WRONG, never converted; so is a currency mismatch. Before,
a reference unit the table did not know ('pounds', 'acres', 'cups', 'GB', 'tons', 'watts', 'quarts') was never
compared, so '5 kg', '5 hectares', '5 MB', '5 kilowatts' answered it; a unit written '\\,\\text{cm}' after a box was
not read at all; 'cm^{-1}' was cm; 'permille' was a counted noun. Hand-labelled, in all three answer modes.
"""
from __future__ import annotations

import pytest

from rlvr.types import Outcome
from rlvr.verifiers.math.units import unit_of, unit_problem
from rlvr.verifiers.math.verifier import MathVerifier

C, W = Outcome.CORRECT, Outcome.WRONG
MODES = ("latex", "strict", "last_number")


@pytest.fixture(scope="module")
def verifiers():
    return {mode: MathVerifier(mode=mode) for mode in MODES}


REPORTED = [  # every pair scored 1.0 before
    ("Answer: 5 kg", "5 \\text{ pounds}"), ("Answer: 5 oz", "5 lb"), ("Answer: 5 square feet", "5 \\text{ acres}"),
    ("Answer: 5 hectares", "5 \\text{ acres}"), ("Answer: 5 tablespoons", "5 \\text{ cups}"),
    ("Answer: 5 MB", "5 \\text{ GB}"), ("Answer: 5 mg", "5 \\text{ tons}"), ("Answer: 5 kilowatts", "5 \\text{ watts}"),
    ("Answer: 5 pints", "5 \\text{ quarts}"), ("\\boxed{5}\\,\\text{cm}^{-1}", "5 cm"),
    ("Answer: 5 permille", "5"),
]
WRONG = REPORTED + [
    ("Answer: 5 pounds", "5 kg"), ("\\boxed{5}\\text{ cm}", "5 m"), ("\\boxed{5}\\,\\text{cm}^2", "5 \\text{ cm}"),
    ("Answer: 5 kJ", "5 \\text{ J}"), ("Answer: 5 kWh", "5 \\text{ kW}"), ("Answer: 5 Gb", "5\\text{GB}"),
    ("Answer: 5 bytes", "5 \\text{ bits}"), ("Answer: 5 Tbsp", "5 \\text{ tsp}"),
    ("Answer: 5 gallons", "5 \\text{ quarts}"),
    ("Answer: 5 MHz", "5 \\text{ kHz}"), ("Answer: 5 acres", "5 \\text{ ha}"), ("Answer: 5 nm", "5 \\text{ mm}"),
    ("Answer: £5", "5 \\text{ lb}"), ("Answer: \\$5", "5 \\text{ pounds}"), ("\\boxed{5} pints", "5 \\text{ quarts}"),
    ("Answer: 5 kg", "5 \\text{ apples}"),
    ("Answer: 5 per mille", "5"), ("Answer: 5 ounces", "5 \\text{ grams}"),
]
CORRECT = [
    ("Answer: 5 kg", "5 kg"), ("Answer: 5 kilograms", "5 kg"), ("Answer: 5 lbs", "5 \\text{ pounds}"),
    ("Answer: 5 pounds", "5 \\text{ lb}"), ("Answer: 5", "5 \\text{ pounds}"), ("Answer: 5 pounds", "5"),
    ("Answer: £5", "5 \\text{ pounds}"), ("Answer: 5 pounds", "£5"),  # 'pound' alone is mass or money
    ("Answer: 5 acres", "5 \\text{ acres}"), ("Answer: 5 gigabytes", "5 \\text{ GB}"),
    ("Answer: 5 watts", "5 \\text{ W}"), ("Answer: 5 quarts", "5 \\text{ qt}"), ("\\boxed{5}\\,\\text{cm}", "5 cm"),
    ("Answer: 5 teaspoons", "5 \\text{ tsp}"), ("Answer: 5 fl oz", "5 \\text{ fl oz}"),
    ("Answer: 5 fluid ounces", "5 \\text{ oz}"), ("Answer: 5 tonnes", "5 \\text{ tons}"),
    ("Answer: 5 calories", "5 \\text{ kcal}"), ("Answer: 5 mL", "5 \\text{ cm}^3"),
    ("Answer: 5 kilowatt-hours", "5 \\text{ kWh}"), ("Answer: 5 sq ft", "5 \\text{ square feet}"),
    ("Answer: 5 sqft", "5 \\text{ ft}^2"), ("Answer: 5 light-years", "5 \\text{ ly}"),
    ("Answer: $5\\text{ cm}^{-1}$", "5 \\text{ cm}^{-1}"), ("\\boxed{5}\\,\\text{cm}^{-1}", "5"),
    ("Answer: 5 permille", "0.005"), ("Answer: 5 percent", "0.05"), ("Answer: 5 percent", "5"),
    # count nouns: one side only is the number; the same noun (any number, adjectives) on both sides too
    ("Answer: 17 birds", "17"), ("Answer: 5 apples", "5"), ("Answer: 5", "5 \\text{ apples}"),
    ("Answer: 5 apples", "5 \\text{ apples}"), ("Answer: 5 bird", "5 \\text{ birds}"),
    ("Answer: 12 red apples", "12 \\text{ apples}"), ("Answer: 5 different ways", "5 \\text{ ways}"),
    ("Answer: 5 arrangements", "5 \\text{ ways}"), ("Answer: 5 oranges", "5 \\text{ apples}"),  # words: the number
    ("Answer: 5 boxes", "5 \\text{ box}"), ("The answer is 5 square units.", "5 \\text{ cm}^2"),
    ("Answer: 5 pairs", "5"), ("Answer: 5 pairs", "5 \\text{ pairs}"),  # 'how many pairs': a count noun
    ("\\boxed{6abc}", "6cba"), ("\\boxed{2xy}", "2yx"),  # letters without a space are variables, not words
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("completion, reference", WRONG, ids=[f"{i}:{c[:20]}" for i, (c, _) in enumerate(WRONG)])
def test_different_units_are_wrong(verifiers, mode, completion, reference):
    verdict = verifiers[mode].verify(completion, reference)
    assert verdict.outcome is W, verdict


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("completion, reference", CORRECT, ids=[f"{i}:{c[:20]}" for i, (c, _) in enumerate(CORRECT)])
def test_the_same_unit_or_none_is_correct(verifiers, mode, completion, reference):
    verdict = verifiers[mode].verify(completion, reference)
    assert verdict.outcome is C, verdict


@pytest.mark.parametrize("written, unit", [
    ("5 pounds", "pound"), ("5 lbs", "lb"), ("5 oz", "oz"), ("5 fluid ounces", "floz"), ("5 metric tons", "tonne"),
    ("5 acres", "acre"), ("5 ha", "hectare"), ("5 square feet", "ft^2"), ("5 cups", "cup"), ("5 Tbsp", "tbsp"),
    ("5 GB", "GB"), ("5 gigabytes", "GB"), ("5 Gb", "Gb"), ("5 kilowatts", "kW"), ("5 KW", "kW"),
    ("5 kilowatt-hours", "kWh"), ("5 Cal", "kcal"), ("5 MHz", "MHz"), ("5\\,\\text{cm}^{-1}", "cm^-1"),
    ("5 m^2", "m^2"), ("5 apples", None), ("2^{99}", None), ("5 units", None),
    # a power in words or superscript is the same power: all four are cubic centimetres
    ("5 cm cubed", "cm^3"), ("5 cm³", "cm^3"), ("5 cubic cm", "cm^3"), ("5 m squared", "m^2"),
])
def test_unit_of_the_new_families(written, unit):
    assert unit_of(written) == unit


def test_words_on_either_side_are_read_as_the_number_and_a_known_unit_against_words_is_not():
    assert unit_problem("5 oranges", "5 \\text{ apples}") is None
    assert unit_problem("5 apples", "5 \\text{ Apple}") is None
    assert unit_problem("5 kg", "5 \\text{ apples}")
    assert unit_problem("5 oranges", "5") is None and unit_problem("5", "5 \\text{ apples}") is None
    assert unit_problem("5 percent", "5 \\text{ apples}") is None  # a value word is no noun: forms decides
    assert unit_problem("6 ba", "6 ab") is None  # words of fewer than three letters: variables
