"""Exact estimators for answers drawn from n samples per problem: pass@k, majority vote (maj@k), best-of-N.

Each estimator is the expected correctness over a uniformly random k-subset of the n samples, computed exactly
(integers, then one division), so maj@k and best-of-N are unbiased from n >= k samples just as pass@k is
(Chen et al. 2021, Codex). Votes are cast by *extracted, normalised* final answers:

- The answer is the math verifier's own final answer (rlvr.verifiers.math.extract.final_answer, in the task's
  answer mode), so a vote reads a completion exactly as the reward does. Plain numbers vote by exact value
  ("56", "56.0", "\\boxed{56}" -> "56"; "0.5", "\\frac{1}{2}", "1/2" -> "1/2"); other answers by their text
  without whitespace (after the verifier's own `canonical`). A completion without a final answer abstains:
  it fills a slot of the subset but never wins a vote.
- Tie-break (deterministic, independent of the order in which a subset is drawn): distinct answers have one
  fixed rank, more votes among all n samples first, then earlier first appearance; among the answers tied for
  most votes in a subset the better-ranked one wins.
- An answer group counts as correct only if every one of its samples is correct: samples with the same answer
  can differ in correctness only through non-answer verifiers (format), and a vote never earns credit that one
  of its own voters would not.
- Best-of-N: the highest score wins; equal scores go to the earlier sample.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Sequence

from rlvr.verifiers.math.cut import cut_mid_answer
from rlvr.verifiers.math.extract import EXPLICIT_KINDS, MODES, as_number, canonical, final_answer


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples of which c are correct: 1 - C(n-c, k) / C(n, k) (Chen et al. 2021)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    return float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))  # exact, then one rounding


# ---------------------------------------------------------------- answers
def normalise_answer(text: str) -> str:
    """The voting key of an extracted answer: a plain number as its exact Fraction text, else the verifier's
    canonical text without whitespace."""
    value = as_number(text)
    if value is not None:
        return str(value)
    return "".join(canonical(text).split())


def extracted_answer(completion: str, answer_mode: str = "strict", truncated: bool = False) -> str | None:
    """The normalised final answer of a completion as the math verifier reads it; None = no answer (abstains).
    A completion cut at max_new_tokens votes only with an answer it stated as one (EXPLICIT_KINDS), as the verifier
    scores it: a fallback reading would vote for a number its own verdict calls no answer."""
    if answer_mode not in MODES:
        raise ValueError(f"answer_mode must be one of {', '.join(MODES)}, got {answer_mode!r}")
    found = final_answer(completion, answer_mode)  # type: ignore[arg-type]
    if found is None or (truncated and (found.kind not in EXPLICIT_KINDS or cut_mid_answer(completion, found))):
        return None
    key = normalise_answer(found.text)
    return key or None


@dataclass(frozen=True)
class Vote:
    answer: str  # normalised answer
    count: int  # samples (of all n) that gave it
    first: int  # index of its first sample


def ranked_votes(answers: Sequence[str | None]) -> list[Vote]:
    """Distinct answers in their fixed tie-break rank: most votes first, then earliest first appearance.
    The first one is the plain majority vote of all samples (abstentions never count)."""
    votes: dict[str, Vote] = {}
    for index, answer in enumerate(answers):
        if answer is None:
            continue
        seen = votes.get(answer)
        votes[answer] = Vote(answer, 1, index) if seen is None else Vote(answer, seen.count + 1, seen.first)
    return sorted(votes.values(), key=lambda v: (-v.count, v.first))


# ---------------------------------------------------------------- maj@k
def _truncated_product(a: list[int], b: list[int], degree: int) -> list[int]:
    """Coefficients of a(t) * b(t) up to t^degree (polynomials as coefficient lists, constant first)."""
    out = [0] * (min(len(a) + len(b) - 1, degree + 1))
    for i, x in enumerate(a[:degree + 1]):
        if x:
            for j, y in enumerate(b[:degree + 1 - i]):
                out[i + j] += x * y
    return out


def _ways(groups: list[tuple[int, int]], draws: int) -> int:
    """Ways to draw `draws` samples from groups given as (size c_h, cap_h), at most cap_h from group h: the
    coefficient of t^draws in prod_h sum_{x <= cap_h} C(c_h, x) t^x."""
    poly = [1]
    for size, cap in groups:
        poly = _truncated_product(poly, [math.comb(size, x) for x in range(min(size, cap) + 1)], draws)
    return poly[draws] if draws < len(poly) else 0


def _win_ways(rank: int, votes: list[Vote], abstain: int, k: int) -> int:
    """Number of k-subsets in which votes[rank] wins: it gets j >= 1 votes, every better-ranked answer fewer
    than j, every worse-ranked one at most j, abstentions any number (a generating function over the others)."""
    own, total = votes[rank].count, 0
    for j in range(1, min(own, k) + 1):
        others = [(vote.count, j - 1 if other < rank else j) for other, vote in enumerate(votes) if other != rank]
        total += math.comb(own, j) * _ways(others + [(abstain, abstain)], k - j)
    return total


def maj_at_k(answers: Sequence[str | None], correct: Sequence[bool], k: int) -> float:
    """Expected correctness of the majority vote of a uniformly random k-subset of the n samples (exact).

    answers[i] is sample i's normalised answer (None abstains), correct[i] its correctness. See the module
    docstring for the tie-break and for when an answer group is correct. With k = n it is the plain majority
    vote of all samples; a subset of abstentions only counts as wrong.
    """
    n = len(answers)
    if len(correct) != n:
        raise ValueError(f"maj@k got {n} answers and {len(correct)} correctness flags")
    if not 1 <= k <= n:
        raise ValueError(f"maj@k needs 1 <= k <= n, got n={n} k={k}")
    votes = ranked_votes(answers)
    right = {answer for answer in (v.answer for v in votes)
             if all(ok for a, ok in zip(answers, correct) if a == answer)}
    abstain = sum(answer is None for answer in answers)
    ways = sum(_win_ways(rank, votes, abstain, k) for rank, vote in enumerate(votes) if vote.answer in right)
    return float(Fraction(ways, math.comb(n, k)))


# ---------------------------------------------------------------- best-of-N
def best_of_n(scores: Sequence[float], correct: Sequence[bool], n_pick: int) -> float:
    """Expected correctness of the highest-scoring sample of a uniformly random n_pick-subset (exact).

    Samples are ranked by score, equal scores by index (earlier wins). The sample at rank position p (0 = best)
    is the best of a subset exactly when the subset holds it and n_pick - 1 of the n - 1 - p samples ranked
    below it: probability C(n - 1 - p, n_pick - 1) / C(n, n_pick). With score = correctness (an oracle) this
    is pass@n_pick.
    """
    n = len(scores)
    if len(correct) != n:
        raise ValueError(f"best-of-N got {n} scores and {len(correct)} correctness flags")
    if not 1 <= n_pick <= n:
        raise ValueError(f"best-of-N needs 1 <= N <= n, got n={n} N={n_pick}")
    if not all(math.isfinite(s) for s in scores):
        raise ValueError(f"best-of-N needs finite scores, got {list(scores)}")
    order = sorted(range(n), key=lambda i: (-scores[i], i))
    ways = sum(math.comb(n - 1 - position, n_pick - 1) for position, i in enumerate(order) if correct[i])
    return float(Fraction(ways, math.comb(n, n_pick)))


def best_index(scores: Sequence[float]) -> int:
    """The best-of-N pick of all samples: highest score, earliest on ties."""
    if not scores:
        raise ValueError("best-of-N needs at least one sample")
    return min(range(len(scores)), key=lambda i: (-scores[i], i))


def paired_difference(after: Sequence[float], before: Sequence[float]) -> tuple[float, float]:
    """Per-problem pass rates of two models on the same problems -> (mean difference, its standard error).

    Paired over problems: d_i = after_i - before_i, SE = sample std of d / sqrt(P) (Bessel-corrected). Pairing
    removes the problem-difficulty variance that two independent pass@1 estimates would each carry, so a stage's
    change can be told from sampling noise ("no RL stage lowers held-out pass@1")."""
    if len(after) != len(before) or len(after) < 2:
        raise ValueError(f"paired difference needs the same >= 2 problems on both sides, got {len(after)} and "
                         f"{len(before)}")
    diffs = [a - b for a, b in zip(after, before)]
    mean = sum(diffs) / len(diffs)
    variance = sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1)
    return mean, math.sqrt(variance / len(diffs))
