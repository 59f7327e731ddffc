"""groups.jsonl's rows: which group is shown, per-token advantages, and the ratio pi_new / pi_old
the update left on each token, against values worked out by hand."""
from __future__ import annotations

import math

import pytest
import torch

from rlvr.grpo.group_view import decode_tokens, group_row, pick_group, token_kl, token_ratios
from rlvr.types import Outcome, Prompt, RolloutBatch, ScoredBatch, Verdict


def test_pick_group_skips_tied_groups_and_rotates_by_step() -> None:
    # G = 2, four groups: rewards (1, 1) tied, (0, 1) differs, (0, 0) tied, (1, 0) differs -> untied groups [1, 3]
    rewards = torch.tensor([1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0])
    ok = torch.ones(8, dtype=torch.bool)
    assert [pick_group(rewards, 2, ok, step) for step in (1, 2, 3)] == [3, 1, 3]  # untied[step % 2]
    assert pick_group(torch.zeros(8), 2, ok, 5) == 0  # all tied: the first group
    # group 1's second reward unscorable: one valid reward left, which counts as tied -> only group 3 remains
    assert pick_group(rewards, 2, torch.tensor([True, True, True, False, True, True, True, True]), 2) == 3


def test_token_ratios_by_hand() -> None:
    # rows 2, 3 of a batch; pi_old from the scoring forward: log 0.5, log 0.25 ; after the update log 0.6, log 0.2
    # -> ratios 0.6 / 0.5 = 1.2 and 0.2 / 0.25 = 0.8
    old = torch.log(torch.tensor([[0.1, 0.1], [0.1, 0.1], [0.5, 0.25], [0.5, 0.25]]))
    new = torch.log(torch.tensor([[0.6, 0.2], [0.6, 0.2]]))
    rows = torch.tensor([2, 3])
    seen = []
    rescore = lambda r: seen.append(r.tolist()) or new  # noqa: E731
    torch.testing.assert_close(token_ratios(old, old * 9, 1.0, rows, rescore), torch.tensor([[1.2, 0.8]] * 2))
    assert seen == [[2, 3]]  # only the group's rows are scored again
    # no scoring forward (mu = 1): the sampler's log-probs are pi_old at top_p = 1 ...
    torch.testing.assert_close(token_ratios(None, old, 1.0, rows, rescore), torch.tensor([[1.2, 0.8]] * 2))
    # ... but not under top-p (renormalised nucleus): no ratio rather than a wrong one; nor without a rescorer
    assert token_ratios(None, old, 0.95, rows, rescore) is None
    assert token_ratios(old, old, 1.0, rows, None) is None


def test_token_kl_by_hand() -> None:
    # k3 = exp(d) - d - 1 with d = log pi_ref - log pi (DeepSeekMath eq. 4). Rows 2, 3; pi_old 0.5 and 0.25, pi_ref
    # 0.25 and 0.25: d = log 0.5 = -0.693147 -> k3 = 0.5 + 0.693147 - 1 = 0.193147; d = 0 -> 0.
    old = torch.log(torch.tensor([[0.1, 0.1], [0.1, 0.1], [0.5, 0.25], [0.5, 0.25]]))
    ref = torch.log(torch.tensor([[0.9, 0.9], [0.9, 0.9], [0.25, 0.25], [0.25, 0.25]]))
    rows = torch.tensor([2, 3])
    expected = torch.tensor([[0.193147, 0.0]] * 2)
    torch.testing.assert_close(token_kl(old, old * 9, ref, 1.0, rows, "k3"), expected)
    # mu = 1 (no scoring forward): the sampler's log-probs are what the loss's one pass saw
    torch.testing.assert_close(token_kl(None, old, ref, 1.0, rows, "k3"), expected)
    # k1 = log pi - log pi_ref = 0.693147 on the first token
    torch.testing.assert_close(token_kl(old, old, ref, 1.0, rows, "k1"), torch.tensor([[0.693147, 0.0]] * 2))
    # no KL in the loss (beta = 0 or KL in the reward), no reference, or a top-p sampler: nothing recorded
    assert token_kl(old, old, ref, 1.0, rows, None) is None
    assert token_kl(old, old, None, 1.0, rows, "k3") is None
    assert token_kl(None, old, ref, 0.9, rows, "k3") is None


def _batch(rewards: list[float]) -> tuple[RolloutBatch, ScoredBatch]:
    # one prompt, G = 2: completion 0 is 3 tokens (ids 5 6 7), completion 1 is 2 tokens (ids 8 9) then padding
    prompt = Prompt("p/0", ({"role": "user", "content": "What is 2 + 2?"},), "4")
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    rollouts = RolloutBatch([prompt], 2, torch.tensor([[1, 2]]), torch.ones(1, 2, dtype=torch.long),
                            torch.tensor([[5, 6, 7], [8, 9, 0]]), mask, torch.zeros(2, 3), ["abc", "de"],
                            torch.tensor([False, True]))
    verdicts = [Verdict(Outcome.CORRECT, 1.0, "ok"), Verdict(Outcome.WRONG, 0.0, "extracted 5, expected 4")]
    scored = ScoredBatch(torch.tensor(rewards), torch.ones(2, dtype=torch.bool), {"math": verdicts},
                         {"math": torch.tensor(rewards)})
    return rollouts, scored


def test_group_row_with_one_advantage_per_completion() -> None:
    rollouts, scored = _batch([1.0, 0.0])
    # GRPO: mean 0.5, Bessel std sqrt(((0.5)^2 + (0.5)^2) / 1) = 0.7071068 -> A = +-0.5 / 0.7071068 = +-0.7071068
    adv = torch.tensor([0.7071068, -0.7071068])
    ratios = torch.tensor([[1.5, 1.0, 0.7], [1.1, 0.9, 1.0]])
    row = group_row(7, rollouts, scored, adv, 0, lambda ids: "".join(f"<{i}>" for i in ids), (0.2, 0.28), ratios)
    assert (row["step"], row["prompt_id"], row["question"], row["reference"]) == (7, "p/0", "What is 2 + 2?", "4")
    assert (row["clip_low"], row["clip_high"]) == (0.2, 0.28)
    first, second = row["completions"]
    assert first["tokens"] == ["<5>", "<6>", "<7>"] and second["tokens"] == ["<8>", "<9>"]  # padding left out
    assert first["token_advantages"] == [0.70711] * 3 and second["token_advantages"] == [-0.70711] * 2
    assert first["advantage"] == pytest.approx(0.7071068) and second["advantage"] == pytest.approx(-0.7071068)
    assert first["token_ratios"] == [1.5, 1.0, 0.7] and second["token_ratios"] == [1.1, 0.9]
    assert (first["reward"], second["reward"], first["truncated"], second["truncated"]) == (1.0, 0.0, False, True)
    assert second["verdicts"]["math"] == {"outcome": "wrong", "score": 0.0, "detail": "extracted 5, expected 4"}


def test_group_row_with_per_token_advantages_and_no_ratios() -> None:
    rollouts, scored = _batch([1.0, 0.0])
    # per-token advantages (GAE): the completion's advantage shown is the mean over its own tokens
    # row 0: (0.3 + 0.6 + 0.9) / 3 = 0.6 ; row 1: (-0.2 + -0.4) / 2 = -0.3 (the padding's 5.0 is left out)
    adv = torch.tensor([[0.3, 0.6, 0.9], [-0.2, -0.4, 5.0]])
    row = group_row(1, rollouts, scored, adv, 0, lambda ids: "".join(map(str, ids)), (0.2, 0.2), None)
    first, second = row["completions"]
    assert first["token_advantages"] == [0.3, 0.6, 0.9] and second["token_advantages"] == [-0.2, -0.4]
    assert math.isclose(first["advantage"], 0.6, abs_tol=1e-6) and math.isclose(second["advantage"], -0.3,
                                                                                 abs_tol=1e-6)
    assert first["token_ratios"] is None and second["token_ratios"] is None


def test_decode_tokens_keeps_multibyte_characters_whole() -> None:
    """Byte-level BPE: ids are the UTF-8 bytes here. "a√b" = 61 | e2 88 9a | 62; decoded one by one the three bytes of
    the square root are each U+FFFD; in context the third byte completes it and carries the character."""
    decode = lambda ids: bytes(ids).decode("utf-8", errors="replace")  # noqa: E731
    ids = list("a√b".encode())
    assert [decode([i]) for i in ids] == ["a", "\ufffd", "\ufffd", "\ufffd", "b"]  # what per-id decoding showed
    assert decode_tokens(decode, ids) == ["a", "", "", "\u221a", "b"]
    # an emoji (4 bytes) right at the start, and a completion cut inside a character (max_new_tokens): the cut
    # bytes keep their replacement character rather than vanishing
    smile = list("\U0001f600".encode())
    assert decode_tokens(decode, smile + [0x21]) == ["", "", "", "\U0001f600", "!"]
    assert decode_tokens(decode, [0x21] + smile[:2]) == ["!", "", "\ufffd"]


def test_decode_tokens_keeps_the_leading_spaces_of_sentencepiece_tokens() -> None:
    # SentencePiece drops the space of a sequence's first word: " the" alone decodes to "the", but after "cat" the
    # space belongs to the token ("cat" + " the"). Joined, the pieces read as the whole decode does.
    vocab = {1: " cat", 2: " the", 3: " mat"}
    decode = lambda ids: "".join(vocab[i] for i in ids).lstrip(" ")  # noqa: E731
    pieces = decode_tokens(decode, [1, 2, 3])
    assert pieces == ["cat", " the", " mat"] and "".join(pieces) == decode([1, 2, 3])
    # beyond the context window (2 tokens here) the result is the same
    assert decode_tokens(decode, [1, 2, 3, 2, 1], context=2) == ["cat", " the", " mat", " the", " cat"]


def test_logged_ratios_are_the_updated_policy_over_pi_old_on_the_shown_group() -> None:
    """stages.group_view_row on a real (tiny) model: group 1 of 2 is shown (group 0 tied), and its ratios equal
    exp(log pi_new - log pi_old) taken from full-batch forwards before and after a weight change, row for row."""
    from types import SimpleNamespace

    from conftest import tiny_llama
    from rlvr.config.run import load_config
    from rlvr.grpo.plan import step_plan
    from rlvr.grpo.setup import Models
    from rlvr.grpo.stages import group_view_row
    from rlvr.model.logprobs import batched_logprobs

    torch.manual_seed(0)
    policy = tiny_llama()
    prompts = [Prompt(f"p/{i}", ({"role": "user", "content": "q"},), "1") for i in range(2)]
    ids = torch.randint(0, 64, (4, 5))
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 0, 0, 0]])
    rollouts = RolloutBatch(prompts, 2, torch.randint(0, 64, (2, 3)), torch.ones(2, 3, dtype=torch.long), ids, mask,
                            torch.zeros(4, 5), ["a"] * 4, torch.zeros(4, dtype=torch.bool))
    rewards = torch.tensor([1.0, 1.0, 0.0, 1.0])  # group 0 tied, group 1 differs -> group 1 (rows 2, 3) is shown
    verdicts = [Verdict(Outcome.CORRECT if r else Outcome.WRONG, float(r)) for r in rewards.tolist()]
    scored = ScoredBatch(rewards, torch.ones(4, dtype=torch.bool), {"math": verdicts}, {"math": rewards})
    config = load_config(None, ["rollout.temperature=0.7"])
    forward = lambda: batched_logprobs(policy, rollouts.prompt_ids, rollouts.prompt_mask,  # noqa: E731
                                       rollouts.prompt_index, ids, mask, 0.7, 4)
    with torch.no_grad():
        old = forward()
        for p in policy.parameters():
            p.add_(0.05 * torch.randn_like(p))  # "the update"
        new = forward()
    models = Models(policy, None, SimpleNamespace(decode=lambda t: "".join(chr(97 + i % 26) for i in t)))
    row = group_view_row(step_plan(config).group_view, models, False, 3, rollouts, scored,
                         torch.tensor([0.0, 0.0, -0.7, 0.7]), old)
    assert row["prompt_id"] == "p/1" and [c["reward"] for c in row["completions"]] == [0.0, 1.0]
    expected = torch.exp(new - old)
    for j, (r, length) in enumerate(((2, 4), (3, 2))):
        shown = row["completions"][j]["token_ratios"]
        assert len(shown) == length and max(abs(x - 1) for x in shown) > 1e-3  # the weights did move
        torch.testing.assert_close(torch.tensor(shown), expected[r, :length], rtol=0, atol=1e-5)


def test_pass_rates_cover_every_group_of_the_batch_tied_ones_too() -> None:
    from types import SimpleNamespace

    from rlvr.grpo.group_view import pass_rates
    from rlvr.types import Outcome, Verdict

    right, wrong = Verdict(Outcome.CORRECT, 1.0), Verdict(Outcome.WRONG, 0.0)
    # 3 prompts, G = 2, two verifiers: a completion passes only when both say correct.
    # p0: (math right, format right), (math right, format wrong) -> 1/2; p1: both right twice -> 1 (a tied group);
    # p2: nothing right -> 0 (tied too), its second row unscorable -> 0/1
    verdicts = {"math": [right, right, right, right, wrong, wrong],
                "format": [right, wrong, right, right, right, wrong]}
    rollouts = SimpleNamespace(group_size=2, prompts=[SimpleNamespace(id=f"p{i}") for i in range(3)])
    scored = SimpleNamespace(verdicts=verdicts, scorable=torch.tensor([True] * 5 + [False]))
    assert pass_rates(rollouts, scored) == [["p0", 0.5], ["p1", 1.0], ["p2", 0.0]]
    scored.scorable = torch.tensor([True] * 4 + [False, False])  # no scorable row: no rate for p2
    assert pass_rates(rollouts, scored) == [["p0", 0.5], ["p1", 1.0]]
