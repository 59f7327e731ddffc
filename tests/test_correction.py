"""Rollout correction and the trainer-vs-engine agreement check (item 2): the weights on
hand-made tensors with hand-derived numbers, then on a tiny random Llama sampled by the in-process engine, with
shared weights and with a deliberately different engine (stale weights, another temperature)."""
from __future__ import annotations

import copy
import json
import math
from dataclasses import astuple

import pytest
import torch

from rlvr.algorithms.correction import (
    CorrectionSettings,
    CorrectionStats,
    EngineMismatch,
    check_agreement,
    correction_stats,
    importance_weights,
    mismatch_kl,
)
from rlvr.algorithms.loss import LossSpec, policy_loss
from rlvr.algorithms.objectives import ClipRange
from rlvr.cli.main import main
from rlvr.config.run import ConfigError, RunConfig, load_config
from rlvr.errors import UserFacingError
from rlvr.model.logprobs import completion_logprobs
from rlvr.rollout.base import SamplingParams
from rlvr.rollout.hf import HFRolloutEngine, completion_mask
from rlvr.training.update import UpdateSettings, train_step
from rlvr.types import TrainBatch
from test_rollout import STOPS, engine, prompts, tiny_llama  # the tiny random Llama and the sampler around it
from test_train_tiny import tiny_overrides
from test_update import perturbed

torch.set_num_threads(1)

LN = math.log


# --- the weights, by hand ----------------------------------------------------------------------------------

def _token_batch():
    """One row, three loss tokens with ratios pi_old / mu = [1, 3, 0.5], then a padding position whose log-probs
    are garbage (log ratio 7: it must be ignored)."""
    behaviour = torch.tensor([[-1.0, -2.0, -0.5, 0.0]])
    trainer = behaviour + torch.tensor([[0.0, LN(3), LN(0.5), 7.0]])
    mask = torch.tensor([[1, 1, 1, 0]])
    return trainer, behaviour, mask


def test_token_tis_truncates_at_the_cap():
    # cap 2: min([1, 3, 0.5], 2) = [1, 2, 0.5]; padding holds the neutral 1
    w = importance_weights(*_token_batch(), mode="tis", level="token", cap=2.0)
    torch.testing.assert_close(w.weights, torch.tensor([[1.0, 2.0, 0.5, 1.0]]))
    assert not w.masked.any()


def test_token_mis_masks_over_cap_tokens_only():
    # cap 2: ratio 3 > 2 is dropped (weight 0); 0.5 is kept at 1 (the mask is one-sided); padding is not "masked"
    w = importance_weights(*_token_batch(), mode="mis", level="token", cap=2.0)
    torch.testing.assert_close(w.weights, torch.tensor([[1.0, 0.0, 1.0, 1.0]]))
    assert w.masked.tolist() == [[False, True, False, False]]


def test_none_is_all_ones():
    w = importance_weights(*_token_batch(), mode="none", level="token", cap=2.0)
    assert torch.equal(w.weights, torch.ones(1, 4)) and not w.masked.any()


def _sequence_batch():
    """Row 0: token ratios [2, 2] and a padding position (log ratio ln 100, ignored) -> product 4.
    Row 1: [2, 0.25, 1] -> product 0.5. Row 2: no loss token at all -> empty product 1."""
    log_ratio = torch.tensor([[LN(2), LN(2), LN(100)], [LN(2), LN(0.25), 0.0], [5.0, 5.0, 5.0]])
    behaviour = torch.full((3, 3), -1.5)
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [0, 0, 0]])
    return behaviour + log_ratio, behaviour, mask


def test_sequence_tis_caps_the_product_of_token_ratios():
    # row 0: min(4, 2) = 2 on each loss token (each token ratio alone, 2, would not be capped at all);
    # row 1: 0.5 on every token; row 2: 1
    w = importance_weights(*_sequence_batch(), mode="tis", level="sequence", cap=2.0)
    torch.testing.assert_close(w.weights, torch.tensor([[2.0, 2.0, 1.0], [0.5, 0.5, 0.5], [1.0, 1.0, 1.0]]))
    token = importance_weights(*_sequence_batch(), mode="tis", level="token", cap=2.0)
    torch.testing.assert_close(token.weights[0], torch.tensor([2.0, 2.0, 1.0]))


def test_sequence_mis_drops_whole_rows():
    # row 0: 4 > 2 -> both loss tokens dropped; row 1: 0.5 <= 2 kept; row 2 has nothing to drop
    w = importance_weights(*_sequence_batch(), mode="mis", level="sequence", cap=2.0)
    torch.testing.assert_close(w.weights, torch.tensor([[0.0, 0.0, 1.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]))
    assert w.masked.tolist() == [[True, True, False], [False, False, False], [False, False, False]]


def test_huge_ratios_stay_finite():
    # a log ratio of 1000 (e^1000 overflows float32 and float64): tis gives exactly the cap, mis drops it, and
    # the KL estimate is the clamped e^50 - 1 - 50 ~ 5.18e21, finite
    trainer, behaviour, mask = torch.tensor([[1000.0, 0.0]]), torch.zeros(1, 2), torch.ones(1, 2)
    for level in ("token", "sequence"):
        assert importance_weights(trainer, behaviour, mask, "tis", level, 2.0).weights[0, 0].item() == 2.0
        assert importance_weights(trainer, behaviour, mask, "mis", level, 2.0).masked[0, 0]
    kl = mismatch_kl(trainer, behaviour, mask)
    assert math.isfinite(kl) and kl == pytest.approx((math.exp(50) - 51) / 2, rel=1e-9)


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="unknown correction mode"):
        importance_weights(*_token_batch(), mode="clip", level="token", cap=2.0)


# --- statistics and the agreement check ----------------------------------------------------------------------

def test_mismatch_kl_is_k3_over_the_loss_tokens():
    # r = pi/mu = [1, 3, 0.5]: r - 1 - ln r = [0, 3 - 1 - 1.098612, 0.5 - 1 + 0.693147] = [0, 0.901388, 0.193147];
    # mean over the 3 loss tokens = 1.094535 / 3 = 0.364845 (the padding's ratio e^7 is ignored)
    assert mismatch_kl(*_token_batch()) == pytest.approx(0.364845, abs=1e-6)
    trainer, _, mask = _token_batch()
    assert mismatch_kl(trainer, trainer, mask) == 0.0


def test_statistics_by_hand():
    # tis: weights [1, 2, 0.5] -> mean 3.5 / 3 = 1.166667, max 2, nothing masked
    # mis: weights [1, 0, 1] -> mean 2 / 3, max 1, masked share 1 / 3; the KL is the same 0.364845
    batch = _token_batch()
    tis = correction_stats(importance_weights(*batch, "tis", "token", 2.0), *batch)
    assert (tis.mean_weight, tis.max_weight, tis.masked_share) == pytest.approx((3.5 / 3, 2.0, 0.0))
    mis = correction_stats(importance_weights(*batch, "mis", "token", 2.0), *batch)
    assert (mis.mean_weight, mis.max_weight, mis.masked_share) == pytest.approx((2 / 3, 1.0, 1 / 3))
    assert tis.mismatch_kl == pytest.approx(0.364845, abs=1e-6) == mis.mismatch_kl


def test_statistics_of_micro_batches_add_up_to_the_batch():
    # the step's numbers are token means over the whole batch, whatever the micro-batch split
    trainer, behaviour, mask = _sequence_batch()
    whole = correction_stats(importance_weights(trainer, behaviour, mask, "mis", "token", 1.5), trainer, behaviour,
                             mask)
    parts = CorrectionStats(0.0, 0.0, 0.0, 0.0, 0.0)
    for rows in (slice(0, 1), slice(1, 3)):
        t, b, m = trainer[rows], behaviour[rows], mask[rows]
        parts = parts + correction_stats(importance_weights(t, b, m, "mis", "token", 1.5), t, b, m)
    assert astuple(parts) == pytest.approx(astuple(whole))
    # 5 loss tokens with ratios [2, 2 | 2, 0.25, 1]: cap 1.5 drops the three 2s -> masked share 3/5
    assert whole.tokens == 5 and whole.masked_share == pytest.approx(0.6)


def test_agreement_check_raises_one_clear_error():
    with pytest.raises(EngineMismatch) as err:
        check_agreement(0.25, 0.01)
    text = str(err.value)
    for part in ("disagree", "0.25", "max_mismatch_kl=0.01", "weight sync", "temperature", "stale"):
        assert part in text, part
    assert issubclass(EngineMismatch, UserFacingError)  # rlvr/cli/main.py main() prints it as one line, exit 2


@pytest.mark.parametrize("kl, threshold", [(0.25, None), (0.25, 0.0), (0.005, 0.01), (math.nan, 0.01)])
def test_agreement_check_passes_when_off_below_or_nan(kl, threshold):
    # NaN comes from a diverged trainer, which the non-finite-step guard handles (rlvr/training/guards.py)
    assert check_agreement(kl, threshold) is None


# --- the loss: the weights multiply the surrogate, not the KL ----------------------------------------------------

def test_policy_loss_weights_the_surrogate_and_not_the_kl():
    # ratio 1 (logp = old = 0), A = 1, two loss tokens with weights [2, 0], reference [-0.1, 0.2], beta 0.04:
    # surrogate per token -1 -> weighted [-2, 0] -> sequence mean -1; k3 KL (unweighted) per token
    # [e^-0.1 + 0.1 - 1, e^0.2 - 0.2 - 1] = [0.004837, 0.021403] -> mean 0.013120; loss = -1 + 0.04 * 0.013120
    # d loss / d logp = -A w / 2 + beta (1 - e^(ref - logp)) / 2 = [-1 + 0.0019033, 0 - 0.0044281]: the token that
    # mis dropped keeps the pull towards the reference
    logp = torch.zeros(1, 2, requires_grad=True)
    spec = LossSpec("ppo_clip", ClipRange(0.2, 0.2), "sequence_mean", "k3", 0.04, 0.0)
    terms = policy_loss(logp, torch.zeros(1, 2), torch.tensor([[-0.1, 0.2]]), torch.tensor([1.0]),
                        torch.ones(1, 2), spec, 1.0, weights=torch.tensor([[2.0, 0.0]]))
    assert terms.policy_loss.item() == pytest.approx(-1.0)
    assert terms.kl.item() == pytest.approx(0.013120, abs=1e-6)
    assert terms.loss.item() == pytest.approx(-1.0 + 0.04 * 0.013120, abs=1e-6)
    terms.loss.backward()
    torch.testing.assert_close(logp.grad, torch.tensor([[-0.9980967, -0.0044281]]), rtol=0, atol=1e-6)


# --- a real sampler: the in-process engine on a tiny random Llama ---------------------------------------------------

# The sampler decodes token by token against its KV cache, the trainer runs one forward over the whole completion:
# the same float32 math in other shapes and summation orders, so log-probs agree to ~1e-6, not bit for bit
# (tests/test_rollout.py bounds them by 1e-4). A token weight is exp(difference): within 1e-4 of 1; a sequence
# weight multiplies up to 12 of them: within 12 x 1e-4.
TOKEN_TOL, MAX_NEW = 1e-4, 12
DEFAULT_THRESHOLD = RunConfig().rollout.correction.max_mismatch_kl


def _sample(model, temperature: float = 1.0, group: int = 4):
    """-> (prompt ids, prompt mask, rows, completion ids, completion mask, behaviour log-probs) from the sampler."""
    ids, mask = prompts()
    torch.manual_seed(1)
    completion_ids, sampled = engine(model).sample(ids, mask, group, SamplingParams(temperature, 1.0, MAX_NEW))
    cmask = completion_mask(completion_ids, STOPS)
    return ids, mask, torch.arange(2).repeat_interleave(group), completion_ids, cmask, sampled * cmask


def _trainer(model, batch, temperature: float = 1.0) -> torch.Tensor:
    with torch.no_grad():
        return completion_logprobs(model, *batch[:5], temperature)[0]


def _stale_pair():
    """(trainer, engine): the engine still holds the weights from before one large Adam step (lr 0.05) of the
    trainer: a weight sync that was not applied."""
    trainer = tiny_llama()
    stale = copy.deepcopy(trainer)
    batch = _sample(trainer)
    optimizer = torch.optim.Adam(trainer.parameters(), lr=0.05)
    logp = completion_logprobs(trainer, *batch[:5], 1.0)[0]
    advantages = torch.tensor([1.0, -1.0] * 4)[:, None]  # any direction: the point is that the weights moved
    (-(advantages * logp * batch[4]).sum()).backward()
    optimizer.step()
    return trainer.eval(), stale


@pytest.mark.parametrize("level", ["token", "sequence"])
def test_shared_weights_give_weights_of_one_and_no_masking(level):
    model = tiny_llama()
    batch = _sample(model)
    trainer, behaviour, cmask = _trainer(model, batch), batch[5], batch[4]
    assert cmask.sum() >= 6
    tol = TOKEN_TOL if level == "token" else MAX_NEW * TOKEN_TOL
    for mode in ("tis", "mis"):
        w = importance_weights(trainer, behaviour, cmask, mode, level, cap=2.0)
        torch.testing.assert_close(w.weights, torch.ones_like(w.weights), rtol=0, atol=tol)
        assert not w.masked.any()
    kl = mismatch_kl(trainer, behaviour, cmask)
    assert 0.0 <= kl < 1e-8 < DEFAULT_THRESHOLD  # fp32 noise: measured 3e-14 here
    check_agreement(kl, DEFAULT_THRESHOLD)


def test_stale_engine_is_reweighted_masked_and_caught():
    trainer_model, stale = _stale_pair()
    batch = _sample(stale)  # the engine samples with the stale weights
    trainer, behaviour, cmask = _trainer(trainer_model, batch), batch[5], batch[4]
    ratio = torch.exp(trainer - behaviour)
    over = (ratio > 2.0) & (cmask > 0)
    assert over.any() and ((ratio < 0.5) & (cmask > 0)).any()  # far off, in both directions
    tis = importance_weights(trainer, behaviour, cmask, "tis", "token", cap=2.0)
    inside = cmask > 0
    assert (tis.weights[inside] - 1).abs().max() > 0.5 and tis.weights.max() == pytest.approx(2.0)
    torch.testing.assert_close(tis.weights[inside], ratio[inside].clamp(max=2.0), rtol=1e-5, atol=0)
    mis = importance_weights(trainer, behaviour, cmask, "mis", "token", cap=2.0)
    assert torch.equal(mis.masked, over) and torch.equal(mis.weights[inside], (~over[inside]).float())
    kl = mismatch_kl(trainer, behaviour, cmask)
    assert kl > DEFAULT_THRESHOLD
    with pytest.raises(EngineMismatch, match="disagree"):
        check_agreement(kl, DEFAULT_THRESHOLD)


def test_engine_at_another_temperature_is_caught():
    model = tiny_llama()
    batch = _sample(model, temperature=0.3)  # the trainer scores at rollout.temperature = 1
    kl = mismatch_kl(_trainer(model, batch, 1.0), batch[5], batch[4])
    assert kl > DEFAULT_THRESHOLD
    assert mismatch_kl(_trainer(model, batch, 0.3), batch[5], batch[4]) < 1e-8  # like terms agree again


def _train_batch(batch) -> TrainBatch:
    ids, mask, rows, cids, cmask, behaviour = batch
    advantages = torch.tensor([1.0, -0.5, 0.5, -1.0] * 2)
    return TrainBatch(ids, mask, rows, cids, cmask.float(), advantages, None, None, behaviour)


def _settings(correction: CorrectionSettings | None) -> UpdateSettings:
    spec = LossSpec("ppo_clip", ClipRange(0.2, 0.2), "sequence_mean", "k3", 0.0, 0.0)
    return UpdateSettings(spec, 1.0, 4, 1e9, MAX_NEW, correction)


def test_update_with_a_stale_engine_stops_before_the_step():
    trainer_model, stale = _stale_pair()
    batch = _train_batch(_sample(stale))
    before = copy.deepcopy(trainer_model.state_dict())
    optimizer = torch.optim.SGD(trainer_model.parameters(), lr=1.0)
    with pytest.raises(EngineMismatch, match="mismatch KL"):
        train_step(trainer_model, batch, optimizer, _settings(CorrectionSettings("tis", "token", 2.0, 0.01)))
    after = trainer_model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # nothing was applied
    assert all(p.grad is None for p in trainer_model.parameters())


def test_update_logs_the_correction_and_none_leaves_the_step_unchanged():
    model = tiny_llama()
    batch = _train_batch(_sample(model))
    results = {}
    for name, correction in (("off", None), ("none", CorrectionSettings("none", "token", 2.0, 0.01)),
                             ("tis", CorrectionSettings("tis", "token", 2.0, 0.01))):
        policy = copy.deepcopy(model)
        stats = train_step(policy, batch, torch.optim.SGD(policy.parameters(), lr=1.0), _settings(correction))
        results[name] = (policy, stats)
    assert results["off"][1].correction is None
    for name in ("none", "tis"):
        c = results[name][1].correction
        assert c.tokens == float(batch.completion_mask.sum()) and c.masked_share == 0.0 and c.mismatch_kl < 1e-8
        assert c.mean_weight == pytest.approx(1.0, abs=TOKEN_TOL if name == "tis" else 0.0)
    off, none, tis = (dict(results[k][0].named_parameters()) for k in ("off", "none", "tis"))
    for key in off:  # mode none multiplies by nothing; tis by weights within 1e-4 of 1
        assert torch.equal(off[key], none[key]), key
        torch.testing.assert_close(tis[key], off[key], rtol=0, atol=1e-4, msg=key)


# --- the loop and the config ---------------------------------------------------------------------------------------

def test_train_step_with_correction_writes_its_metrics(tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    args = [*tiny_overrides(tiny_model_dir, out, steps=1), "eval.at_end=false", "rollout.correction.mode=mis",
            "rollout.correction.level=sequence"]
    assert main(["train", *args]) == 0
    record = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
    # the in-process engine shares the trainer's weights: nothing is masked and the KL is fp32 noise
    assert record["correction/masked_share"] == 0.0 and record["correction/mean_weight"] == 1.0
    assert record["correction/max_weight"] == 1.0 and 0.0 <= record["correction/mismatch_kl"] < 1e-8


def test_a_run_whose_engine_holds_other_weights_stops_with_one_clear_error(tiny_model_dir, tmp_path, monkeypatch,
                                                                          capsys):
    # the engine samples with a perturbed copy of the policy (as if it served another checkpoint)
    class PerturbedEngine:
        @staticmethod
        def configured(model, tokenizer, rollout):
            return HFRolloutEngine.configured(perturbed(model, seed=3, scale=0.5), tokenizer, rollout)

    monkeypatch.setattr("rlvr.grpo.backends.HFRolloutEngine", PerturbedEngine)
    out = tmp_path / "run"
    assert main(["train", *tiny_overrides(tiny_model_dir, out, steps=2), "eval.at_end=false"]) == 2
    err = capsys.readouterr().err
    assert err.count("rlvr: error:") == 1 and "the rollout engine and the trainer disagree" in err
    assert "Traceback" not in err


def test_correction_with_top_p_below_one_is_refused():
    for mode in ("tis", "mis"):
        with pytest.raises(ConfigError, match="rollout.top_p=0.9"):
            load_config(None, ["rollout.top_p=0.9", f"rollout.correction.mode={mode}"])
    # the default (mode none) still runs with a nucleus; the agreement check is then skipped (grpo.setup)
    assert load_config(None, ["rollout.top_p=0.9"]).rollout.correction.mode == "none"


def test_an_older_runs_config_without_the_correction_section_still_resumes():
    """A config.yaml written before rollout.correction existed compares as the defaults (mode none: the old
    behaviour), so its resume is not refused for a section it could not have had."""
    from rlvr.checkpoint.state import config_differences, with_current_defaults
    from rlvr.config.run import RunConfig

    current = RunConfig().model_dump(mode="json")
    older = RunConfig().model_dump(mode="json")
    del older["rollout"]["correction"]
    assert config_differences(older, current) != []  # compared raw, the missing section would refuse the resume
    assert config_differences(with_current_defaults(older), current) == []
    older["rollout"]["group_size"] = 4  # a real difference is still reported
    assert config_differences(with_current_defaults(older), current) == ["rollout.group_size: 4 -> 8"]


def test_config_names_match_the_functions():
    from typing import get_args

    from rlvr.algorithms.correction import LEVELS, MODES
    from rlvr.config.run import CorrectionConfig

    assert get_args(CorrectionConfig.model_fields["mode"].annotation) == MODES
    assert get_args(CorrectionConfig.model_fields["level"].annotation) == LEVELS
