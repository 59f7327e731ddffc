"""Exact estimators (rlvr.evaluation.voting): pass@k, maj@k and best-of-N against hand-derived values and brute-force
enumeration of every k-subset; best-of-N with an oracle scorer is pass@N; answer extraction and normalisation."""
from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from fractions import Fraction

import pytest

from rlvr.evaluation.voting import (
    best_index,
    best_of_n,
    extracted_answer,
    maj_at_k,
    paired_difference,
    pass_at_k,
    ranked_votes,
)


# ---------------------------------------------------------------- brute force
def brute_maj(answers, correct, k) -> Fraction:
    """Mean over every k-subset of: the subset's winner (most votes, ties by the fixed rank) is a correct group."""
    rank = {v.answer: i for i, v in enumerate(ranked_votes(answers))}
    right = {a for a in rank if all(ok for b, ok in zip(answers, correct) if b == a)}
    wins = []
    for subset in itertools.combinations(range(len(answers)), k):
        tally = Counter(answers[i] for i in subset if answers[i] is not None)
        if not tally:
            wins.append(0)
            continue
        top = max(tally.values())
        winner = min((a for a, c in tally.items() if c == top), key=rank.__getitem__)
        wins.append(int(winner in right))
    return Fraction(sum(wins), len(wins))


def brute_best(scores, correct, n_pick) -> Fraction:
    wins = []
    for subset in itertools.combinations(range(len(scores)), n_pick):
        best = min(subset, key=lambda i: (-scores[i], i))
        wins.append(int(correct[best]))
    return Fraction(sum(wins), len(wins))


def brute_pass(correct, k) -> Fraction:
    hits = [any(correct[i] for i in s) for s in itertools.combinations(range(len(correct)), k)]
    return Fraction(sum(hits), len(hits))


# ---------------------------------------------------------------- pass@k
def test_pass_at_k_hand_values():
    # n=4, c=1, k=2: 1 - C(3,2)/C(4,2) = 1 - 3/6 = 0.5; c=0 -> 0; n - c < k -> 1
    assert pass_at_k(4, 1, 2) == 0.5
    assert pass_at_k(4, 0, 3) == 0.0
    assert pass_at_k(4, 3, 2) == 1.0
    # n=16, c=2, k=4: 1 - C(14,4)/C(16,4) = 1 - 1001/1820 = 819/1820 = 0.45
    assert pass_at_k(16, 2, 4) == 0.45


@pytest.mark.parametrize("n,c,k", [(3, 4, 1), (4, 1, 0), (4, 1, 5), (4, -1, 1)])
def test_pass_at_k_rejects_impossible_arguments(n, c, k):
    with pytest.raises(ValueError, match="pass@k"):
        pass_at_k(n, c, k)


# ---------------------------------------------------------------- maj@k
def test_maj_at_k_hand_example():
    # answers 7,7,8,- (one abstains); 7 is right. The 6 pairs: {0,1} 7; {0,2} 7-8 tie -> 7 (more votes of all
    # four); {0,3} 7; {1,2} 7 (tie again); {1,3} 7; {2,3} 8 wrong -> 5/6.
    answers, correct = ["7", "7", "8", None], [True, True, False, False]
    assert maj_at_k(answers, correct, 2) == 5 / 6
    # k=1: a random single sample: 7 twice of four -> 1/2 (the abstention never wins)
    assert maj_at_k(answers, correct, 1) == 0.5
    # k=4: every sample: 7 has 2 votes, 8 one -> right
    assert maj_at_k(answers, correct, 4) == 1.0


def test_maj_tie_goes_to_the_earlier_answer_when_counts_tie_overall():
    # 8 then 7, one vote each: the fixed rank puts 8 (first seen) ahead, so the pair votes 8 (wrong): 0.
    assert maj_at_k(["8", "7"], [False, True], 2) == 0.0
    assert maj_at_k(["7", "8"], [True, False], 2) == 1.0


def test_maj_only_abstentions_is_wrong_and_a_mixed_group_is_not_correct():
    assert maj_at_k([None, None, None], [False, False, False], 2) == 0.0
    # answer 5 given twice, one of them failed the format check: the group is not correct -> 0 whatever wins
    assert maj_at_k(["5", "5", "6"], [True, False, False], 3) == 0.0


def test_maj_at_n_is_the_plain_majority_vote():
    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(1, 9)
        answers = [rng.choice([None, "1", "2", "3"]) for _ in range(n)]
        correct = [a == "2" for a in answers]
        votes = ranked_votes(answers)
        expected = 1.0 if votes and votes[0].answer == "2" else 0.0
        assert maj_at_k(answers, correct, n) == expected


@pytest.mark.parametrize("seed", range(60))
def test_maj_at_k_matches_enumeration_of_all_subsets(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 9)
    answers = [rng.choice([None, "1", "2", "3", "4"]) for _ in range(n)]
    # "2" always right, "3" right or wrong per sample (so its group is mixed on some seeds), the rest wrong
    correct = [a == "2" or (a == "3" and rng.random() < 0.7) for a in answers]
    for k in range(1, n + 1):
        assert maj_at_k(answers, correct, k) == float(brute_maj(answers, correct, k)), (answers, correct, k)


def test_maj_at_k_validates_its_inputs():
    with pytest.raises(ValueError, match="1 <= k <= n"):
        maj_at_k(["1"], [True], 2)
    with pytest.raises(ValueError, match="correctness flags"):
        maj_at_k(["1", "2"], [True], 1)


def test_maj_at_k_with_many_distinct_answers():
    answers = [str(i) for i in range(63)] + ["0"]  # 64 samples: "0" twice, 62 other answers once each
    correct = [a == "0" for a in answers]
    # "0" has the most votes of all, so it also wins every 1-1 tie: it wins a 16-subset exactly when the subset
    # holds at least one of its two samples: 1 - C(62,16)/C(64,16).
    assert maj_at_k(answers, correct, 16) == float(1 - Fraction(math.comb(62, 16), math.comb(64, 16)))
    assert maj_at_k(answers, correct, 64) == 1.0


# ---------------------------------------------------------------- best-of-N
def test_best_of_n_hand_example():
    # scores .5 .9 .1, correct T F T, N=2: pairs {0,1} -> 1 (wrong), {0,2} -> 0 (right), {1,2} -> 1 (wrong): 1/3
    assert best_of_n([0.5, 0.9, 0.1], [True, False, True], 2) == 1 / 3
    # N=1: a random sample: 2 of 3 right
    assert best_of_n([0.5, 0.9, 0.1], [True, False, True], 1) == 2 / 3
    # equal scores: the earlier sample wins, so (wrong, right) with N=2 picks the wrong one
    assert best_of_n([1.0, 1.0], [False, True], 2) == 0.0
    assert best_index([0.2, 0.7, 0.7]) == 1


@pytest.mark.parametrize("seed", range(40))
def test_best_of_n_matches_enumeration(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 8)
    scores = [rng.choice([0.0, 0.5, 1.0, 1.5]) for _ in range(n)]  # few values: many ties
    correct = [rng.random() < 0.5 for _ in range(n)]
    for k in range(1, n + 1):
        assert best_of_n(scores, correct, k) == float(brute_best(scores, correct, k))


@pytest.mark.parametrize("seed", range(40))
def test_best_of_n_with_an_oracle_scorer_is_pass_at_n(seed):
    rng = random.Random(1000 + seed)
    n = rng.randint(1, 10)
    correct = [rng.random() < 0.4 for _ in range(n)]
    oracle = [float(ok) for ok in correct]  # the verifier itself as the scorer
    for k in range(1, n + 1):
        assert best_of_n(oracle, correct, k) == pass_at_k(n, sum(correct), k)  # exactly, not approximately
        assert pass_at_k(n, sum(correct), k) == float(brute_pass(correct, k))


def test_best_of_n_validates_its_inputs():
    with pytest.raises(ValueError, match="finite"):
        best_of_n([math.nan, 1.0], [True, False], 1)
    with pytest.raises(ValueError, match="1 <= N <= n"):
        best_of_n([1.0], [True], 2)


# ---------------------------------------------------------------- answers
@pytest.mark.parametrize("completion", ["7 * 8 = 56\nAnswer: 56", "Answer: 56.0", "so \\boxed{56}",
                                        "<think>maybe 54</think>\nAnswer: 56", "Answer: 56.00"])
def test_forms_of_one_number_vote_together(completion):
    assert extracted_answer(completion, "strict") == "56"


def test_fractions_and_decimals_vote_together_text_ignores_whitespace():
    assert {extracted_answer(c) for c in ["Answer: 0.5", "\\boxed{\\frac{1}{2}}", "Answer: 1/2"]} == {"1/2"}
    assert extracted_answer("\\boxed{x + 1}") == extracted_answer("\\boxed{x+1}") == "x+1"


def test_no_answer_abstains_and_modes_are_the_verifiers():
    assert extracted_answer("I do not know") is None
    assert extracted_answer("<think>Answer: 5</think>") is None  # reasoning does not count, as in the verifier
    assert extracted_answer("so it is 7.", "last_number") == "7"
    assert extracted_answer("so it is 7.", "strict") is None
    with pytest.raises(ValueError, match="answer_mode"):
        extracted_answer("Answer: 1", "loose")


def test_a_cut_completion_votes_only_with_a_stated_answer():
    # the verifier scores a completion cut at max_new_tokens only by an explicit answer; its vote follows,
    # else a cut ramble ending in "42" would vote for 42 while its own verdict says it gave no answer
    ramble = "so we add them and keep going, 40 and then 42"
    assert extracted_answer(ramble, "last_number") == "42"
    assert extracted_answer(ramble, "last_number", truncated=True) is None
    assert extracted_answer("working... Answer: 42\n", "last_number", truncated=True) == "42"
    assert extracted_answer("working... Answer: 42", "last_number", truncated=True) is None  # may be 42x, cut
    assert extracted_answer("it is \\boxed{42} so", "strict", truncated=True) == "42"


def test_ranked_votes_order():
    votes = ranked_votes(["3", None, "4", "4", "3", "5"])
    # 3 and 4 both have two votes; 3 appeared first. 5 last with one.
    assert [(v.answer, v.count, v.first) for v in votes] == [("3", 2, 0), ("4", 2, 2), ("5", 1, 5)]


def test_paired_difference_hand_example():
    # d = after - before = [0.5, 0, 0.25, -0.25]: mean 0.125; squared deviations 0.140625 + 0.015625 +
    # 0.015625 + 0.140625 = 0.3125, / (4 - 1) = 0.104167 (sample variance), / 4 problems = 0.026042 -> SE 0.16137
    mean, se = paired_difference([1.0, 0.5, 1.0, 0.75], [0.5, 0.5, 0.75, 1.0])
    assert mean == pytest.approx(0.125)
    assert se == pytest.approx(math.sqrt(0.3125 / 3 / 4)) and se == pytest.approx(0.16137, abs=1e-5)


def test_paired_difference_of_a_constant_shift_has_no_noise_and_inputs_are_checked():
    assert paired_difference([0.75, 1.0, 0.5], [0.5, 0.75, 0.25]) == pytest.approx((0.25, 0.0))
    with pytest.raises(ValueError, match="same >= 2 problems"):
        paired_difference([1.0, 0.0], [1.0])
    with pytest.raises(ValueError, match="same >= 2 problems"):
        paired_difference([1.0], [0.0])
