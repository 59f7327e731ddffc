"""A full GRPO run (rollout -> verify -> advantages -> update -> log -> checkpoint -> eval) on a tiny random
model, in seconds. Checks the run-directory contract of docs/design.md, not learning."""
from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoModelForCausalLM

from rlvr.cli.main import main
from rlvr.config.run import ConfigError, load_config
from rlvr.grpo.loop import train

REQUIRED_METRICS = {"step", "elapsed_s", "reward_mean", "loss", "kl", "reward/math", "completion_length",
                    "clip_fraction", "entropy", "zero_std_fraction", "outcomes/math/correct",
                    "outcomes/math/unparseable", "reflection_rate", "tokens_per_s", "peak_memory_gb",
                    "clip_fraction_low", "clip_fraction_high", "time/group_view_s", "kl_max"}


def tiny_overrides(model_dir, out_dir, steps=2):
    return [f"model.name_or_path={model_dir}", f"output_dir={out_dir}", f"max_steps={steps}",
            "rollout.group_size=4", "rollout.prompts_per_step=2", "rollout.max_new_tokens=8",
            "optimizer.micro_batch_size=4", "eval.size=3", "eval.samples=2", "optimizer.lr=1e-3"]


def test_train_writes_run_directory(tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    assert main(["train", *tiny_overrides(tiny_model_dir, out)]) == 0
    assert (out / "config.yaml").is_file()
    assert load_config(out / "config.yaml").max_steps == 2  # the resolved config reloads as it was run
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    records = [r for r in rows if "loss" in r]
    assert [r["step"] for r in records] == [1, 2]
    # the end-of-run evaluation closes the held-out curve in metrics.jsonl: one eval-only row
    assert [(r["step"], 0.0 <= r["eval/pass@1"] <= 1.0) for r in rows if "loss" not in r] == [(2, True)]
    for record in records:
        assert REQUIRED_METRICS <= set(record), REQUIRED_METRICS - set(record)
        assert record["outcomes/math/correct"] + record["outcomes/math/wrong"] + record[
            "outcomes/math/unparseable"] + record["outcomes/math/timeout"] + record["outcomes/math/error"] == 8
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert samples and {"completion", "reward", "verdicts", "reference"} <= set(samples[0])
    for record in records:  # at mu = 1 the loss's ratio is 1: nothing is clipped on either side
        assert record["clip_fraction"] == record["clip_fraction_low"] == record["clip_fraction_high"] == 0.0
    groups = [json.loads(line) for line in (out / "groups.jsonl").read_text().splitlines()]
    assert [g["step"] for g in groups] == [1, 2] and all(len(g["completions"]) == 4 for g in groups)
    for c in (c for g in groups for c in g["completions"]):
        assert len(c["tokens"]) == len(c["token_advantages"]) == len(c["token_ratios"]) >= 1
        special = lambda t: len(t) > 1 and t[0] == "<" and t[-1] == ">"  # noqa: E731 (<unk>, <|im_end|>, ...)
        shown = "".join(t for t in c["tokens"] if not special(t))  # the text is decoded without specials
        assert shown == c["text"]  # one entry per generated token
        assert all(a == pytest.approx(c["advantage"], abs=1e-5) for a in c["token_advantages"])
    # the random model's groups all tie (reward 0): no gradient, so the weights did not move and pi_new / pi_old is 1
    # on every token: pi_old (the sampler's log-probs here) is measured as the trainer measures the policy
    assert all(r["grad_norm"] == 0 for r in records)
    assert max(abs(r - 1) for g in groups for c in g["completions"] for r in c["token_ratios"]) < 1e-5
    evals = [json.loads(line) for line in (out / "eval.jsonl").read_text().splitlines()]
    assert evals[-1]["problems"] == 3 and 0.0 <= evals[-1]["pass@1"] <= 1.0
    reloaded = AutoModelForCausalLM.from_pretrained(out / "final")  # save_pretrained layout
    assert reloaded.config.num_hidden_layers == 2


def test_train_step_changes_policy_weights(tiny_model_dir, tmp_path):
    # lr 1e-3 on a random model: the final weights must differ from the initial ones (an update happened),
    # unless every group tied, which the logged zero_std_fraction would show.
    config = load_config(None, tiny_overrides(tiny_model_dir, tmp_path / "r", steps=1) + ["eval.at_end=false"])
    (tmp_path / "r").mkdir()
    final = train(config, tmp_path / "r")
    before = AutoModelForCausalLM.from_pretrained(tiny_model_dir).state_dict()
    after = AutoModelForCausalLM.from_pretrained(final).state_dict()
    record = json.loads((tmp_path / "r" / "metrics.jsonl").read_text())
    changed = any(not torch.equal(before[k], after[k]) for k in before)
    assert changed or record["zero_std_fraction"] == 1.0


def test_refuses_existing_run_directory(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "keep.txt").write_text("precious")
    assert main(["train", *tiny_overrides(tiny_model_dir, out)]) == 2
    assert "already holds files" in capsys.readouterr().err
    assert (out / "keep.txt").read_text() == "precious"
    assert not (out / "metrics.jsonl").exists()


def test_default_output_dir_is_a_new_dated_run(tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = [a for a in tiny_overrides(tiny_model_dir, "unused", steps=1) if not a.startswith("output_dir=")]
    assert main(["train", *args, "eval.at_end=false"]) == 0
    (run,) = (tmp_path / "runs").iterdir()
    assert (run / "final" / "config.json").is_file()
    assert load_config(run / "config.yaml").output_dir == str(run.relative_to(tmp_path))


def test_python_api_never_reuses_a_run_directory(tiny_model_dir, tmp_path):
    config = load_config(None, tiny_overrides(tiny_model_dir, tmp_path / "r", steps=1) + ["eval.at_end=false"])
    train(config)
    metrics = (tmp_path / "r" / "metrics.jsonl").read_text()
    again = load_config(None, tiny_overrides(tiny_model_dir, tmp_path / "r", steps=1) + ["eval.at_end=false"])
    with pytest.raises(ConfigError, match="already holds files"):
        train(again)
    assert (tmp_path / "r" / "metrics.jsonl").read_text() == metrics  # the first run is untouched


def test_periodic_eval_lands_in_the_step_row_for_plotting(tiny_model_dir, tmp_path):
    """Training reward and held-out pass@1 side by side, so reward hacking is visible in one plot."""
    out = tmp_path / "run"
    assert main(["train", *tiny_overrides(tiny_model_dir, out, steps=3), "eval.every=2", "eval.at_end=false"]) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], "eval/pass@1" in r, "reward_mean" in r) for r in rows] == [
        (1, False, True), (2, True, True), (3, False, True)]


def test_max_minutes_ends_the_run_as_max_steps_would_and_a_resume_keeps_it_ended(tiny_model_dir, tmp_path,
                                                                                  monkeypatch):
    """max_minutes (a shipped preset bounds its own time): after the step in which the budget runs out,
    the run saves final/ and its checkpoint at that step and evaluates, as at max_steps; the same command again
    (checkpoint.resume=auto) says the time is used instead of training on."""
    import rlvr.metrics.logger as logger

    clock = iter(range(0, 100_000, 25))  # each reading of the run's elapsed time is 25 s later than the one before
    monkeypatch.setattr(logger.RunLogger, "elapsed", lambda self: float(next(clock)))
    out = tmp_path / "run"
    command = ["train", *tiny_overrides(tiny_model_dir, out, steps=5), "max_minutes=1", "checkpoint.resume=auto"]
    assert main(command) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    trained = [r["step"] for r in rows if "loss" in r]
    assert trained and trained[-1] < 5  # the premise: it stopped before max_steps
    assert [r["step"] for r in rows if "loss" not in r] == [trained[-1]]  # the end-of-run evaluation, at that step
    assert (out / "final" / "config.json").is_file()
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == [f"step-{trained[-1]:06d}"]
    assert main(command) == 0  # resumed: its time is used, nothing more is trained
    again = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in again if "loss" in r] == trained
