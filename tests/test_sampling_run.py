"""`rlvr sample` end to end on the tiny random Llama (tests/conftest.py): the dataset and its provenance, a
SIGTERM-stopped run resumed to the same dataset, mixing, and every input error before any sampling.

The tiny model never solves arithmetic, so the math verifier is replaced by a deterministic reward function
(correct when the completion's character codes sum to a multiple of 3) plus a constant 'reward_model'."""
from __future__ import annotations

import dataclasses
import json
import os
import signal

import pytest
import torch

from rlvr.cli.main import main
from rlvr.config.run import ConfigError, load_config
from rlvr.rewards.rewarder import Rewarder
from rlvr.rollout.hf import HFRolloutEngine
from rlvr.sampling import SampleError
from rlvr.sampling.records import PROGRESS, load_progress
from rlvr.sampling.run import MISSES, rejection_sample
from rlvr.sampling.select import select_best


def third(prompts, completions, **columns):
    return [1.0 if sum(map(ord, c)) % 3 == 0 else 0.0 for c in completions]


def critic(prompts, completions, **columns):
    return [0.5] * len(completions)  # never CORRECT: must not keep anything out (select.REWARD_MODEL)


@pytest.fixture(autouse=True)
def fake_rewarder(monkeypatch):
    monkeypatch.setattr("rlvr.sampling.run.make_rewarder",
                        lambda config: Rewarder({"math": (third, config.task.verifiers["math"]),
                                                 "reward_model": (critic, 0.5)}))


REAL_GENERATE = HFRolloutEngine.generate


@pytest.fixture(autouse=True)
def rollouts_that_end(monkeypatch):
    """The tiny random model rarely writes its end-of-turn token within 8 tokens, and a completion cut by the budget
    is never kept: these tests of the dataset machinery mark every completion as ended, except
    test_cut_completions_are_counted_and_never_kept, which puts REAL_GENERATE back."""
    def ended(self, prompts, group_size, sampling):
        rollouts = REAL_GENERATE(self, prompts, group_size, sampling)
        return dataclasses.replace(rollouts, truncated=torch.zeros_like(rollouts.truncated))
    monkeypatch.setattr(HFRolloutEngine, "generate", ended)


def overrides(model_dir, out, *extra):
    return [f"model.name_or_path={model_dir}", f"output_dir={out}", "sample.prompts=6", "sample.batch_size=4",
            "sample.samples=4", "sample.keep=2", "rollout.max_new_tokens=8", "threads=1", *extra]


def rows_of(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_dataset_rows_carry_messages_and_provenance(tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    result = rejection_sample(load_config(None, overrides(tiny_model_dir, out)))
    assert result.complete and result.path == out / "sft_data.jsonl"
    assert (result.prompts_done, result.sampled) == (6, 24)
    assert result.correct == result.outcomes["math/correct"] and result.acceptance_rate == result.correct / 24
    rows = rows_of(result.path)
    assert len(rows) == result.rows_kept > 0
    done = load_progress(out)
    assert len(done) == 6 and len((out / PROGRESS).read_text().splitlines()) == 6
    for row in rows:
        prompt_id, index = row["id"].rsplit("#", 1)
        sample = done[prompt_id].candidates[int(index)]
        assert row["source"] == "rejection_sampling" and row["messages"][-1] == {"role": "assistant",
                                                                                 "content": sample.text}
        assert row["messages"][-2]["role"] == "user"  # the prompt's own turns come first
        assert row["provenance"] == {"model": str(tiny_model_dir), "step": None, "sampled": 4,
                                     "correct": select_best(done[prompt_id].candidates, 2, "shortest",
                                                            {"math": 1.0}).correct,
                                     "reward": sample.reward, "length": sample.length,
                                     "verdicts": {"math": "correct", "reward_model": "wrong"}}
        assert sample.reward == 1.25  # 1 x 1.0 + 0.5 x 0.5
    expected = sum(len(select_best(r.candidates, 2, "shortest", {"math": 1.0}).kept) for r in done.values())
    assert result.rows_kept == expected
    report = json.loads((out / "report.json").read_text())
    assert report["rows_kept"] == result.rows_kept and report["complete"] and report["model"] == str(tiny_model_dir)
    assert report["prompts_missed"] == len(rows_of(out / MISSES))


def test_misses_list_the_prompts_not_every_sample_solved(tiny_model_dir, tmp_path, monkeypatch):
    """misses.jsonl (a last RL stage's task.focus). Reward: every sample of a '+' prompt is correct, of a
    '*' prompt those whose characters sum to a multiple of 3. So '+' prompts never appear (a file listing every
    prompt fails) and the '*' prompts appear with their own correct counts (a file of 0-correct ones only fails
    when one of them had 1-3 correct, checked below)."""
    def plus_or_third(prompts, completions, **columns):
        return [1.0 if "+" in str(p) else float(sum(map(ord, c)) % 3 == 0) for p, c in zip(prompts, completions)]

    monkeypatch.setattr("rlvr.sampling.run.make_rewarder",
                        lambda config: Rewarder({"math": (plus_or_third, 1.0)}))
    out = tmp_path / "run"
    rejection_sample(load_config(None, overrides(tiny_model_dir, out, "sample.prompts=12")))
    done = load_progress(out)
    counts = {p: sum(c.verdicts["math"].value == "correct" for c in r.candidates) for p, r in done.items()}
    expected = sorted(({"id": p, "correct": n, "samples": 4} for p, n in counts.items() if n < 4),
                      key=lambda m: m["id"])
    assert sorted(rows_of(out / MISSES), key=lambda m: m["id"]) == expected
    assert any("+" in p for p in done) and all("*" in m["id"] for m in expected)
    assert any(0 < m["correct"] < 4 for m in expected)  # partly solved prompts are misses too
    assert load_config(out / "config.yaml").output_dir == str(out)


def test_cut_completions_are_counted_and_never_kept(tiny_model_dir, tmp_path, monkeypatch):
    def every_third_cut(self, prompts, group_size, sampling):  # rows 0, 3, 6, ... cut by the budget
        rollouts = REAL_GENERATE(self, prompts, group_size, sampling)
        rows = torch.arange(len(rollouts.truncated), device=rollouts.truncated.device)
        return dataclasses.replace(rollouts, truncated=rows % 3 == 0)
    monkeypatch.setattr(HFRolloutEngine, "generate", every_third_cut)
    result = rejection_sample(load_config(None, overrides(tiny_model_dir, tmp_path / "run")))
    candidates = [c for r in load_progress(tmp_path / "run").values() for c in r.candidates]
    assert [c.ended for c in candidates] == [row % 3 != 0 for row in _batch_rows(candidates)]  # per completion
    assert result.cut == sum(not c.ended for c in candidates) == 9  # batches of 16 and 8 rows: 6 + 3 cut, 15 not
    paid = [c for c in candidates if c.verdicts["math"].value == "correct"]
    assert any(not c.ended for c in paid) and any(c.ended for c in paid)  # both kinds occur: the test can fail
    assert result.correct == sum(c.ended for c in paid)
    kept = {row["messages"][-1]["content"] for row in rows_of(result.path)}
    assert kept and kept <= {c.text for c in paid if c.ended}  # keep=2, yet no cut completion is among them
    assert "9 cut by the token budget" in result.line()


def _batch_rows(candidates) -> list[int]:
    """The row of each completion in its generation batch (4 prompts x 4 samples, then 2 x 4): the cut pattern's
    index."""
    return [(i % 16) if i < 16 else i - 16 for i in range(len(candidates))]


def test_sigterm_then_resume_writes_the_uninterrupted_dataset(tiny_model_dir, tmp_path, monkeypatch):
    whole = rejection_sample(load_config(None, overrides(tiny_model_dir, tmp_path / "whole")))
    generate, calls = HFRolloutEngine.generate, []

    def interrupted(self, prompts, group_size, sampling):
        calls.append(len(prompts))
        if len(calls) == 1:  # a real SIGTERM while the first batch is being sampled
            os.kill(os.getpid(), signal.SIGTERM)
        return generate(self, prompts, group_size, sampling)

    monkeypatch.setattr(HFRolloutEngine, "generate", interrupted)
    out = tmp_path / "parts"
    stopped = rejection_sample(load_config(None, overrides(tiny_model_dir, out)))
    assert not stopped.complete and stopped.prompts_done == 4 and not stopped.path.exists()
    assert len(load_progress(out)) == 4  # the batch in flight finished and was recorded
    resumed = rejection_sample(load_config(None, overrides(tiny_model_dir, out, "checkpoint.resume=auto")))
    assert calls == [4, 2]  # the resumed run sampled only the second batch
    assert resumed.complete and resumed.rows_kept == whole.rows_kept
    assert resumed.path.read_bytes() == whole.path.read_bytes()
    assert sorted((out / PROGRESS).read_text().splitlines()) == sorted(
        (tmp_path / "whole" / PROGRESS).read_text().splitlines())


def test_resume_checks_settings_and_reselects_without_sampling(tiny_model_dir, tmp_path, monkeypatch):
    out = tmp_path / "run"
    first = rejection_sample(load_config(None, overrides(tiny_model_dir, out)))
    with pytest.raises(ConfigError, match="sample.temperature: 1.0 -> 0.5"):
        rejection_sample(load_config(None, overrides(tiny_model_dir, out, "checkpoint.resume=auto",
                                                     "sample.temperature=0.5")))
    monkeypatch.setattr(HFRolloutEngine, "__init__", lambda *a: pytest.fail("a finished run loads no model"))
    again = rejection_sample(load_config(None, overrides(tiny_model_dir, out, "checkpoint.resume=auto",
                                                         "sample.keep=1")))
    assert again.complete and again.rows_kept == sum(r.correct > 0 for r in [
        select_best(rec.candidates, 1, "shortest", {"math": 1.0}) for rec in load_progress(out).values()])
    assert again.rows_kept <= first.rows_kept and len(rows_of(again.path)) == again.rows_kept


def test_general_rows_are_mixed_at_the_ratio(tiny_model_dir, tmp_path):
    general = tmp_path / "general.jsonl"
    general.write_text("".join(json.dumps({"messages": [{"role": "user", "content": f"hi {i}"},
                                                         {"role": "assistant", "content": f"hello {i}"}]}) + "\n"
                               for i in range(3)))
    result = rejection_sample(load_config(None, overrides(tiny_model_dir, tmp_path / "run",
                                                          f"sample.mix_path={general}", "sample.mix_ratio=0.5")))
    rows = rows_of(result.path)
    assert result.rows_general == result.rows_kept  # kept * 0.5 / (1 - 0.5)
    assert sum(r["source"] == "general" for r in rows) == result.rows_general
    assert len(rows) == result.rows_kept + result.rows_general
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["mix_with_replacement"] == (result.rows_kept > 3)


def test_cli_prints_the_summary(tiny_model_dir, tmp_path, capsys):
    assert main(["sample", *overrides(tiny_model_dir, tmp_path / "run", f"sample.student={tiny_model_dir}")]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("rlvr sample: 6 prompts, 24 sampled, ") and "acceptance rate" in last
    assert last.endswith(str(tmp_path / "run" / "sft_data.jsonl"))


def test_input_errors_come_before_any_run_directory(tiny_model_dir, tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": []}\n')
    no_template = tmp_path / "student"
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.chat_template = None
    tokenizer.save_pretrained(no_template)
    (no_template / "config.json").write_text((tiny_model_dir / "config.json").read_text())
    cases = [([f"sample.mix_path={bad}", "sample.mix_ratio=0.2"], "sample.mix_path"),
             (["sample.mix_ratio=0.2"], "sample.mix_ratio=0.2 needs sample.mix_path"),
             ([f"sample.student={no_template}"], "sample.student"),
             (["task.verifiers={math: 0.0}"], "task.verifiers")]
    for extra, message in cases:
        assert main(["sample", *overrides(tiny_model_dir, tmp_path / "run", *extra)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("rlvr: error: ") and message in err, err
        assert not (tmp_path / "run").exists()


def test_existing_output_file_is_never_overwritten(tiny_model_dir, tmp_path):
    precious = tmp_path / "data.jsonl"
    precious.write_text("mine\n")
    with pytest.raises(SampleError, match="already exists"):
        rejection_sample(load_config(None, overrides(tiny_model_dir, tmp_path / "run", f"sample.output={precious}")))
    assert precious.read_text() == "mine\n" and not (tmp_path / "run").exists()
