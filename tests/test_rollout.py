"""The transformers rollout engine: completion masks, nucleus filter, token picking, and the sampler agreeing
with the trainer's teacher-forced log-probs on a tiny random Llama."""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from transformers import BatchEncoding

from conftest import tiny_llama
from rlvr.model.logprobs import completion_logprobs
from rlvr.rollout.base import SamplingParams
from rlvr.rollout.hf import HFRolloutEngine, completion_mask, pick_tokens, stop_token_ids, top_p_filter
from rlvr.types import Prompt

torch.set_num_threads(1)

PAD = 63
STOPS = [3, 7, 11, 19, 23, 29, 31, 37]  # 8 of 64 ids: with a random model most rows stop within 16 tokens


def engine(model, pad_id: int = PAD, stop_ids=STOPS, fused: bool = True) -> HFRolloutEngine:
    eng = HFRolloutEngine.__new__(HFRolloutEngine)
    eng.model, eng.tokenizer, eng.stop_ids = model, SimpleNamespace(pad_token_id=pad_id), list(stop_ids)
    eng.fused = fused
    return eng


def prompts():
    """2 prompts of length 5, the second left-padded by 2."""
    ids = torch.tensor([[5, 9, 14, 2, 40], [PAD, PAD, 8, 17, 33]])
    mask = torch.tensor([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]])
    return ids, mask


# --- completion_mask ----------------------------------------------------------------------------------

def test_completion_mask_keeps_first_stop_and_masks_after() -> None:
    ids = torch.tensor([[4, 5, 2, 9, 2], [2, 4, 4, 4, 4], [4, 4, 4, 4, 2]])
    assert completion_mask(ids, [2]).tolist() == [[1, 1, 1, 0, 0], [1, 0, 0, 0, 0], [1, 1, 1, 1, 1]]


def test_completion_mask_when_pad_is_eos() -> None:
    # pad == eos == 2: the padding after the first EOS is itself EOS; the first one is still kept
    ids = torch.tensor([[4, 5, 2, 2, 2], [4, 2, 2, 2, 2]])
    assert completion_mask(ids, [2]).tolist() == [[1, 1, 1, 0, 0], [1, 1, 0, 0, 0]]


def test_completion_mask_without_stop_is_all_ones() -> None:
    ids = torch.tensor([[4, 5, 6, 9], [1, 1, 1, 1]])
    assert completion_mask(ids, [2, 3]).tolist() == [[1, 1, 1, 1], [1, 1, 1, 1]]


def test_completion_mask_several_stop_ids() -> None:
    # stops {2, 3}: row 0 stops at the 3 (index 1), row 1 at the 2 (index 2)
    ids = torch.tensor([[4, 3, 2, 9], [4, 5, 2, 3]])
    assert completion_mask(ids, [2, 3]).tolist() == [[1, 1, 0, 0], [1, 1, 1, 0]]


# --- top_p_filter ---------------------------------------------------------------------------------------

PROBS = torch.tensor([[0.5, 0.3, 0.15, 0.05]])


def _kept(logits: torch.Tensor, top_p: float) -> list[bool]:
    return torch.isfinite(top_p_filter(logits, top_p))[0].tolist()


def test_top_p_keeps_smallest_nucleus() -> None:
    # sorted probs [.5,.3,.15,.05], mass before each: [0, .5, .8, .95]; top_p 0.7 keeps those with mass before
    # < 0.7 -> the first two (0.5 + 0.3 = 0.8 >= 0.7; the first alone, 0.5, is not enough)
    logits = PROBS.log()
    assert _kept(logits, 0.7) == [True, True, False, False]
    # kept logits are unchanged, so renormalised probs are [.5, .3]/.8 = [0.625, 0.375]
    torch.testing.assert_close(torch.softmax(top_p_filter(logits, 0.7), dim=-1),
                               torch.tensor([[0.625, 0.375, 0.0, 0.0]]), rtol=0, atol=1e-6)


def test_top_p_order_does_not_matter() -> None:
    # same probs shuffled to [.15, .5, .05, .3]: the kept ones are still the .5 and the .3
    logits = PROBS[:, [2, 0, 3, 1]].log()
    assert _kept(logits, 0.7) == [False, True, False, True]


def test_top_p_one_keeps_all_and_tiny_top_p_keeps_top_token() -> None:
    logits = PROBS.log()
    assert _kept(logits, 1.0) == [True, True, True, True]
    assert torch.equal(top_p_filter(logits, 1.0), logits)
    assert _kept(logits, 1e-6) == [True, False, False, False]
    # 0.9: mass before [0, .5, .8, .95] -> the first three (0.95 >= 0.9 drops the last)
    assert _kept(logits, 0.9) == [True, True, True, False]


# --- pick_tokens --------------------------------------------------------------------------------------------

def test_pick_tokens_greedy_returns_argmax_and_its_logprob() -> None:
    # row 0: logits log [.2,.7,.1] -> argmax 1, log p = log 0.7 = -0.3566749
    # row 1: logits [0, 0, log 3] -> p = [1/5, 1/5, 3/5] -> argmax 2, log 0.6 = -0.5108256
    logits = torch.tensor([[math.log(0.2), math.log(0.7), math.log(0.1)], [0.0, 0.0, math.log(3.0)]])
    token, logprob = pick_tokens(logits, SamplingParams(temperature=0.0))
    assert token.tolist() == [1, 2]
    torch.testing.assert_close(logprob, torch.tensor([-0.3566749, -0.5108256]), rtol=0, atol=1e-6)


def test_pick_tokens_sampled_logprob_is_under_tempered_nucleus() -> None:
    # logits log [.5,.3,.15,.05] at T = 1, top_p 0.7: only tokens 0 and 1 can be drawn, with log-probs
    # log(.5/.8) = -0.4700036 and log(.3/.8) = -0.9808293
    torch.manual_seed(0)
    logits = PROBS.log().expand(200, 4)
    token, logprob = pick_tokens(logits, SamplingParams(temperature=1.0, top_p=0.7))
    assert set(token.tolist()) == {0, 1}
    expected = torch.where(token == 0, torch.tensor(-0.4700036), torch.tensor(-0.9808293))
    torch.testing.assert_close(logprob, expected, rtol=0, atol=1e-6)
    # at T = 0.5 without top_p: logits/T = 2 log p -> p^2 normalised: [.25,.09,.0225,.0025]/.365
    # token 0: log(.25/.365) = -0.3784364
    token, logprob = pick_tokens(PROBS.log().expand(200, 4), SamplingParams(temperature=0.5))
    torch.testing.assert_close(logprob[token == 0], torch.full_like(logprob[token == 0], -0.3784364),
                               rtol=0, atol=1e-6)


# --- stop_token_ids --------------------------------------------------------------------------------------

def test_stop_token_ids_merges_generation_config_and_tokenizer() -> None:
    model = SimpleNamespace(generation_config=SimpleNamespace(eos_token_id=[2, 5]))
    assert stop_token_ids(model, SimpleNamespace(eos_token_id=9)) == [2, 5, 9]
    assert stop_token_ids(model, SimpleNamespace(eos_token_id=5)) == [2, 5]  # no duplicate
    single = SimpleNamespace(generation_config=SimpleNamespace(eos_token_id=4))
    assert stop_token_ids(single, SimpleNamespace(eos_token_id=None)) == [4]
    none = SimpleNamespace(generation_config=SimpleNamespace(eos_token_id=None))
    assert stop_token_ids(none, SimpleNamespace(eos_token_id=9)) == [9]


# --- HFRolloutEngine.sample ----------------------------------------------------------------------------------

def test_sample_shapes_and_padding_after_stop() -> None:
    model = tiny_llama()
    ids, mask = prompts()
    torch.manual_seed(0)
    completion_ids, logprobs = engine(model).sample(ids, mask, 4, SamplingParams(1.0, 1.0, 16))
    assert completion_ids.shape == logprobs.shape and completion_ids.shape[0] == 8
    assert completion_ids.shape[1] <= 16
    cmask = completion_mask(completion_ids, STOPS)
    stopped = (torch.isin(completion_ids, torch.tensor(STOPS)) & (cmask > 0)).any(dim=1)
    assert stopped.sum() >= 2  # the check below has rows to look at
    assert (completion_ids[cmask == 0] == PAD).all()
    assert (logprobs[cmask == 0] == 0).all()
    assert (logprobs[cmask == 1] < 0).all()
    # the loop ends early only when every row has stopped
    if completion_ids.shape[1] < 16:
        assert stopped.all()


@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_sampling_logprobs_equal_teacher_forced(temperature: float) -> None:
    """Sampler and trainer agree: the log-prob recorded while sampling equals the trainer's log-prob of the
    same token under logits / T (top_p = 1)."""
    model = tiny_llama()
    ids, mask = prompts()
    torch.manual_seed(1)
    group = 3
    completion_ids, sampled = engine(model).sample(ids, mask, group, SamplingParams(temperature, 1.0, 12))
    cmask = completion_mask(completion_ids, STOPS)
    rows = torch.arange(2).repeat_interleave(group)  # contiguous groups: rows [g*G, (g+1)*G) share prompt g
    with torch.no_grad():
        forced, _ = completion_logprobs(model, ids, mask, rows, completion_ids, cmask, temperature)
    assert cmask.sum() >= 6
    torch.testing.assert_close(sampled * cmask, forced * cmask, rtol=0, atol=1e-4)


@pytest.mark.parametrize("temperature, top_p", [(1.0, 1.0), (0.7, 0.9)])
def test_dropping_finished_rows_changes_no_token(monkeypatch, temperature: float, top_p: float) -> None:
    """The decode batch sheds finished rows. Every row draws its random number each step whether it is
    still in the batch or not, so the same seed gives the same tokens with rows dropped at every finish (share
    1.0) as with no row ever dropped (share 0.0), and log-probs equal to float tolerance."""
    import rlvr.rollout.hf as hf

    model = tiny_llama()
    ids, mask = prompts()
    sampling = SamplingParams(temperature, top_p, 16, seed=7)
    runs = {}
    for share in (0.0, 1.0):
        monkeypatch.setattr(hf, "DROP_AT_LIVE_SHARE", share)
        runs[share] = engine(model).sample(ids, mask, 4, sampling)
    kept_ids, kept_lp = runs[0.0]
    dropped_ids, dropped_lp = runs[1.0]
    lengths = completion_mask(kept_ids, STOPS).sum(dim=1)
    assert lengths.min() < lengths.max()  # rows finish at different steps: there was something to drop
    assert torch.equal(kept_ids, dropped_ids)
    torch.testing.assert_close(kept_lp, dropped_lp, rtol=0, atol=1e-5)


def test_draw_from_inverts_the_cumulative_distribution() -> None:
    """p = [0, .5, 0, .3, .2]: cumulative [0, .5, .5, .8, 1.0]. u = 0 -> token 1 (the first with mass; token 0 has
    none), .49 -> 1, .5 -> 3 (token 2 has no mass), .79 -> 3, .8 -> 4, .999 -> 4. Rows that sum to 2 (unnormalised)
    scale u by the total: the same tokens."""
    from rlvr.rollout.hf import draw_from

    probs = torch.tensor([0.0, 0.5, 0.0, 0.3, 0.2]).expand(6, 5)
    uniform = torch.tensor([0.0, 0.49, 0.5, 0.79, 0.8, 0.999])
    assert draw_from(probs, uniform).tolist() == [1, 1, 3, 3, 4, 4]
    assert draw_from(2 * probs, uniform).tolist() == [1, 1, 3, 3, 4, 4]


def test_greedy_is_deterministic_and_matches_teacher_forcing() -> None:
    model = tiny_llama()
    ids, mask = prompts()
    eng = engine(model, stop_ids=[3])  # one rare stop id: greedy runs are long
    greedy = SamplingParams(temperature=0.0, top_p=1.0, max_new_tokens=10)
    a_ids, a_lp = eng.sample(ids, mask, 2, greedy)
    b_ids, b_lp = eng.sample(ids, mask, 2, greedy)
    assert torch.equal(a_ids, b_ids) and torch.equal(a_lp, b_lp)
    assert torch.equal(a_ids[0], a_ids[1]) and torch.equal(a_ids[2], a_ids[3])  # a group is all alike
    cmask = completion_mask(a_ids, [3])
    rows = torch.tensor([0, 0, 1, 1])
    with torch.no_grad():
        # greedy log-probs are reported under the untempered distribution (T = 1)
        forced, _ = completion_logprobs(model, ids, mask, rows, a_ids, cmask, 1.0)
        logits = model(input_ids=torch.cat([ids[1, 2:], a_ids[2]])[None]).logits[0]
    torch.testing.assert_close(a_lp * cmask, forced * cmask, rtol=0, atol=1e-4)
    # each greedy token is the argmax of the plain forward over prompt 1 (padding dropped) + the completion
    n = int(cmask[2].sum())
    assert torch.equal(logits[2: 2 + n].argmax(dim=-1), a_ids[2, :n])


def test_sampling_varies_within_a_group_and_repeats_with_the_seed() -> None:
    model = tiny_llama()
    ids, mask = prompts()
    eng = engine(model, stop_ids=[3])
    params = SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=8)
    torch.manual_seed(123)
    first, _ = eng.sample(ids, mask, 4, params)
    torch.manual_seed(123)
    again, _ = eng.sample(ids, mask, 4, params)
    assert torch.equal(first, again)
    # 4 rows of 8 tokens over a 64-token vocabulary: within each group, the rows are pairwise distinct
    for g in range(2):
        rows = first[4 * g: 4 * g + 4]
        assert len({tuple(r.tolist()) for r in rows}) == 4


def test_sample_with_pad_equal_to_eos() -> None:
    # pad == eos: the completion mask derived from the stop token still keeps the EOS, drops the padding
    model = tiny_llama()
    ids, mask = prompts()
    torch.manual_seed(0)
    completion_ids, logprobs = engine(model, pad_id=STOPS[0]).sample(ids, mask, 4, SamplingParams(1.0, 1.0, 16))
    cmask = completion_mask(completion_ids, STOPS)
    is_stop = torch.isin(completion_ids, torch.tensor(STOPS))
    stopped = is_stop.any(dim=1)
    assert stopped.sum() >= 2 and (completion_ids == STOPS[0]).any()
    for b in range(completion_ids.shape[0]):
        if stopped[b]:
            first = int(is_stop[b].nonzero()[0])
            # kept up to and including the first stop (whether sampled or the pad==eos id), nothing after
            assert cmask[b].tolist() == [1] * (first + 1) + [0] * (completion_ids.shape[1] - first - 1)
            assert logprobs[b, first] < 0  # the EOS keeps its sampled log-prob
        else:
            assert cmask[b].all()
    assert (completion_ids[cmask == 0] == STOPS[0]).all()
    assert (logprobs[cmask == 1] < 0).all() and (logprobs[cmask == 0] == 0).all()


# --- HFRolloutEngine.generate with a stub tokenizer ---------------------------------------------------------

class StubTokenizer:
    """Whitespace-separated integers <-> ids; left padding with pad id 63; eos 3."""

    pad_token_id = PAD
    eos_token_id = 3

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        return " ".join(m["content"] for m in messages)

    def __call__(self, texts, return_tensors="pt", padding=True, add_special_tokens=False):
        seqs = [[int(t) for t in text.split()] for text in texts]
        width = max(len(s) for s in seqs)
        ids = [[PAD] * (width - len(s)) + s for s in seqs]
        mask = [[0] * (width - len(s)) + [1] * len(s) for s in seqs]
        return BatchEncoding({"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(mask)})

    def batch_decode(self, ids, skip_special_tokens=True):
        special = {PAD, self.eos_token_id}
        return [" ".join(str(t) for t in row.tolist() if not (skip_special_tokens and t in special)) for row in ids]


def test_generate_builds_a_consistent_rollout_batch() -> None:
    model = tiny_llama()
    model.generation_config.eos_token_id = 7
    eng = HFRolloutEngine(model, StubTokenizer())
    assert eng.stop_ids == [7, 3]
    prompts_ = [Prompt(id="a", messages=({"role": "user", "content": "5 9 14 2 40"},), reference="1"),
                Prompt(id="b", messages=({"role": "user", "content": "8 17"},), reference="2")]
    torch.manual_seed(3)
    batch = eng.generate(prompts_, 3, SamplingParams(1.0, 1.0, 40))
    assert batch.size == 6 and batch.group_size == 3
    assert batch.prompt_ids.tolist()[1] == [PAD, PAD, PAD, 8, 17]
    assert batch.prompt_mask.tolist()[1] == [0, 0, 0, 1, 1]
    has_stop = torch.isin(batch.completion_ids, torch.tensor([7, 3])).any(dim=1)
    assert torch.equal(batch.truncated, ~has_stop)
    assert batch.truncated.any() and not batch.truncated.all()  # seed 3 gives both kinds of row
    assert (batch.completion_mask.sum(dim=1)[batch.truncated] == batch.completion_ids.shape[1]).all()
    assert (batch.sampling_logprobs[batch.completion_mask == 0] == 0).all()
    for b in range(6):
        n = int(batch.completion_mask[b].sum())
        kept = [t for t in batch.completion_ids[b, :n].tolist() if t not in (PAD, 3)]
        assert batch.completions[b] == " ".join(str(t) for t in kept)
