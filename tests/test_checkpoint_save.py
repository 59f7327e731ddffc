"""What a checkpoint saves and what a resume puts back (rlvr/checkpoint/resume.py save/restore), on the tiny
model in-process: the weights, AdamW's state, the schedule, the prompt stream's cursor, the curriculum and critic,
the skip counters, the clock, every RNG; the logs cut back to the step; the final checkpoint's weights hard-linked
from final/; retention. The bit-exact end-to-end runs are test_resume.py's (slow): these say which part broke."""
from __future__ import annotations

import itertools
import json
import random

import pytest
import torch

import rlvr.checkpoint.resume as resume_module
from rlvr.checkpoint.resume import CHECKPOINTS, Parts, restore, save
from rlvr.checkpoint.state import MODEL_DIR, STATE_FILE, CountingStream, rng_state
from rlvr.checkpoint.store import latest_good, list_checkpoints, verify_checkpoint
from rlvr.distributed.context import DistContext

GUARD = {"consecutive_skips": 1, "skipped_steps": 2}


class Component:
    """A curriculum or a critic as save/restore see it: whatever it holds goes through its state_dict."""

    def __init__(self, value):
        self.value = value

    def state_dict(self):
        return {"value": self.value}

    def load_state_dict(self, state):
        self.value = state["value"]


def parts_of(model_dir, curriculum=None, critic=None) -> Parts:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    policy = AutoModelForCausalLM.from_pretrained(model_dir)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 / (step + 1))
    return Parts(policy, AutoTokenizer.from_pretrained(model_dir), optimizer, scheduler,
                 CountingStream(itertools.count()), curriculum, critic)


def train_one_step(parts: Parts) -> None:
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    parts.policy(input_ids=ids, labels=ids).loss.backward()
    parts.optimizer.step()
    parts.scheduler.step()
    parts.optimizer.zero_grad()


def test_a_checkpoint_puts_back_everything_that_decides_the_next_step(tmp_path, tiny_model_dir):
    run_dir = tmp_path / "run"
    trained = parts_of(tiny_model_dir, Component("curriculum at step 4"), Component("critic at step 4"))
    train_one_step(trained)
    prompts = [next(trained.prompt_stream) for _ in range(5)]  # 0..4 handed out
    random.seed(11), torch.manual_seed(11)
    checkpoint = save(run_dir, 4, trained, elapsed_s=12.5, guard=GUARD, keep=2, extra={"note": "kept"})
    expected_draws = (random.random(), torch.rand(3))
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps({"step": s}) + "\n" for s in range(1, 7)))
    assert (checkpoint.path / MODEL_DIR / "tokenizer.json").is_file()  # the model directory loads on its own

    fresh = parts_of(tiny_model_dir, Component("fresh"), Component("fresh"))
    weights = dict(trained.policy.named_parameters())
    assert not all(torch.equal(p, weights[n]) for n, p in fresh.policy.named_parameters())  # the step moved them
    random.seed(99), torch.manual_seed(99)
    state = restore(checkpoint, fresh, lambda: itertools.count(), run_dir)

    assert all(torch.equal(p, weights[n]) for n, p in fresh.policy.named_parameters())
    moments = trained.optimizer.state_dict()["state"]
    assert all(torch.equal(fresh.optimizer.state_dict()["state"][i]["exp_avg"], moments[i]["exp_avg"])
               for i in moments)
    assert fresh.scheduler.state_dict() == trained.scheduler.state_dict()
    assert (fresh.curriculum.value, fresh.critic.value) == ("curriculum at step 4", "critic at step 4")
    assert prompts == [0, 1, 2, 3, 4] and fresh.prompt_stream.drawn == 5 and next(fresh.prompt_stream) == 5
    assert (state.step, state.elapsed_s, state.consecutive_skips, state.skipped_steps) == (4, 12.5, 1, 2)
    assert state.extra == {"note": "kept"}
    assert [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3, 4]
    again = (random.random(), torch.rand(3))  # restored last: loading the model and the stream drew nothing after
    assert again[0] == expected_draws[0] and torch.equal(again[1], expected_draws[1])


def test_a_run_without_a_curriculum_or_critic_resumes_into_parts_that_have_one(tmp_path, tiny_model_dir):
    """A checkpoint that saved none (a run without them, resumed with resume_force) leaves the new run's own."""
    checkpoint = save(tmp_path, 1, parts_of(tiny_model_dir), elapsed_s=0.0, guard=GUARD, keep=2)
    fresh = parts_of(tiny_model_dir, Component("own curriculum"), Component("own critic"))
    restore(checkpoint, fresh, lambda: itertools.count(), tmp_path)
    assert (fresh.curriculum.value, fresh.critic.value) == ("own curriculum", "own critic")


def test_retention_keeps_the_newest_save_total_limit(tmp_path, tiny_model_dir):
    parts = parts_of(tiny_model_dir)
    for step in (1, 2, 3):
        save(tmp_path, step, parts, elapsed_s=0.0, guard=GUARD, keep=2)
    assert [c.step for c in list_checkpoints(tmp_path / CHECKPOINTS)] == [2, 3]


@pytest.mark.parametrize("links", [True, False])
def test_the_final_checkpoint_takes_its_weights_from_final(tmp_path, tiny_model_dir, monkeypatch, links):
    """The checkpoint at the end of a run hard-links final/'s files (subdirectories too, e.g. a LoRA run's
    adapter/) instead of writing the weights again; where a link cannot be made (another filesystem) they are
    copied. Either way the checkpoint verifies and holds final/'s very bytes."""
    parts = parts_of(tiny_model_dir)
    final = tmp_path / "final"
    parts.policy.save_pretrained(final)
    parts.tokenizer.save_pretrained(final)
    (final / "adapter").mkdir()
    (final / "adapter" / "adapter_config.json").write_text("{}")
    if not links:
        def no_link(source, target):
            raise OSError(18, "Invalid cross-device link")

        monkeypatch.setattr(resume_module.os, "link", no_link)
    with torch.no_grad():  # the policy in memory differs from final/: the checkpoint must hold final/'s
        next(parts.policy.parameters()).add_(1.0)
    checkpoint = save(tmp_path / "run", 3, parts, elapsed_s=0.0, guard=GUARD, keep=2, model_from=final)
    verify_checkpoint(checkpoint.path)
    for source in [p for p in final.rglob("*") if p.is_file()]:
        linked = checkpoint.path / MODEL_DIR / source.relative_to(final)
        assert linked.read_bytes() == source.read_bytes()
        assert (linked.stat().st_ino == source.stat().st_ino) is links
    assert latest_good(tmp_path / "run" / CHECKPOINTS, log=lambda _: None).step == 3


def test_a_checkpoint_of_a_sharded_run_is_refused_by_a_one_process_run(tmp_path, tiny_model_dir):
    """An FSDP2 checkpoint names the optimizer's parameters: restoring it into a one-process policy is one clear
    error naming both strategies, not a failure deep inside torch's load_state_dict."""
    from rlvr.distributed.context import DistributedError

    parts = parts_of(tiny_model_dir)
    checkpoint = save(tmp_path, 1, parts, elapsed_s=0.0, guard=GUARD, keep=2)
    state = torch.load(checkpoint.path / STATE_FILE, weights_only=False)
    state["optimizer"]["param_groups"][0]["params"] = [f"model.{n}" for n, _ in parts.policy.named_parameters()]
    torch.save(state, checkpoint.path / STATE_FILE)
    with pytest.raises(DistributedError, match="written by a distributed.strategy=fsdp2 run and this launch is ddp"):
        restore(checkpoint, parts_of(tiny_model_dir), lambda: itertools.count(), tmp_path)


def test_every_rank_takes_its_own_rng_and_only_rank_0_cuts_the_logs(tmp_path, tiny_model_dir):
    """Under torchrun every rank loads the same files but continues its own RNG stream (saved per rank in
    extra), and the logs, which rank 0 alone writes, are cut by rank 0 alone."""
    parts = parts_of(tiny_model_dir)
    torch.manual_seed(0)
    rank0 = rng_state()
    torch.manual_seed(1)
    rank1 = rng_state()
    expected = torch.rand(3)  # what rank 1 draws next
    checkpoint = save(tmp_path, 2, parts, elapsed_s=0.0, guard=GUARD, keep=2,
                      extra={"world_size": 2, "rank_rng": [rank0, rank1]})
    (tmp_path / "metrics.jsonl").write_text('{"step": 2}\n{"step": 3}\n')
    torch.manual_seed(5)
    restore(checkpoint, parts_of(tiny_model_dir), lambda: itertools.count(), tmp_path,
            DistContext(rank=1, world_size=2, local_rank=1, backend=None))
    assert torch.equal(torch.rand(3), expected)
    assert (tmp_path / "metrics.jsonl").read_text() == '{"step": 2}\n{"step": 3}\n'
