"""Same seed, same weights: two runs of one seed, one after the other, end with torch.equal weights and the
same metrics, also when the verifier workers answer late and in another order.

The cause found for the issue: the packed forward read each completion token's predicting state by advanced
indexing, whose backward (index_put with accumulate) adds duplicate indices from several threads in a racy order on
a CPU, and every row of a group reads its prompt's last state (rlvr/model/logprobs.py `_packed_states`). It shows only
when that backward is split over threads: more than 32768 elements (torch's grain size, tokens x hidden), hence a
tiny model of hidden size 256 here, and 2 threads.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import LlamaConfig, LlamaForCausalLM

import determinism_helpers
from conftest import build_tiny_model
from rlvr.config.run import load_config
from rlvr.grpo import loop as grpo
from rlvr.grpo import setup as grpo_setup
from rlvr.model.logprobs import completion_logprobs
from rlvr.rewards.service import RewardService

THREADS = 2  # the race needs the backward split over threads; the default config uses all cores (threads=0)
MEASURED = ("elapsed_s", "tokens_per_s", "peak_memory_gb")  # wall clock and memory: metrics that may differ


def wide_tiny_model(target: Path) -> Path:
    """The conftest tiny model (character tokenizer, chat template, tied embeddings) at hidden size 256: a micro-batch
    of 8 rows x 32 tokens then has 65536 > 32768 state elements, so its backward runs on two threads."""
    build_tiny_model(target)
    config = LlamaConfig.from_pretrained(target)
    config.hidden_size, config.intermediate_size = 256, 512
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(target)
    return target


@pytest.fixture(scope="module")
def wide_model(tmp_path_factory) -> Path:
    return wide_tiny_model(tmp_path_factory.mktemp("wide-tiny"))


@pytest.fixture(autouse=True)
def restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@dataclass
class RunOutput:
    weights: dict[str, torch.Tensor]
    metrics: list[dict]  # metrics.jsonl without the MEASURED and time/ keys
    groups: list[dict]  # groups.jsonl (the group view)
    samples: list[dict]


def train_run(model_dir: Path, out: Path, factory, monkeypatch) -> RunOutput:
    """A run with the default config's features on the tiny model (2 reward workers, dynamic sampling on, 2
    micro-batches a step, group view on), its verifier workers built by `factory` (tests/determinism_helpers.py)."""
    config = load_config(None, [
        f"model.name_or_path={model_dir}", f"output_dir={out}", "max_steps=2", "seed=3", f"threads={THREADS}",
        "rollout.prompts_per_step=2", "rollout.group_size=8", "rollout.max_new_tokens=32",
        "rollout.dynamic_sampling.max_extra_prompts=4", "optimizer.micro_batch_size=8", "optimizer.lr=1e-3",
        "eval.at_end=false", "samples_per_step=16"])
    assert config.reward.workers == 2 and config.group_view and config.batch_size == 2 * config.micro_batch_size
    monkeypatch.setattr(grpo_setup, "build_reward_service", lambda c, rewarder: RewardService.start(
        c.task, workers=c.reward.workers, deadline_s=c.reward.deadline_s, verifier_factory=factory))
    grpo.train(config)
    read = lambda name: [json.loads(line) for line in (out / name).read_text().splitlines()]  # noqa: E731
    metrics = [{k: v for k, v in row.items() if k not in MEASURED and not k.startswith("time/")}
               for row in read("metrics.jsonl")]
    return RunOutput(load_file(out / "final" / "model.safetensors"), metrics, read("groups.jsonl"),
                     read("samples.jsonl"))


@pytest.fixture(scope="module")
def first_run(wide_model, tmp_path_factory) -> RunOutput:
    with pytest.MonkeyPatch.context() as monkeypatch:
        return train_run(wide_model, tmp_path_factory.mktemp("det") / "first", determinism_helpers.digit_factory,
                         monkeypatch)


def assert_same_run(a: RunOutput, b: RunOutput, initial: dict[str, torch.Tensor]) -> None:
    # the comparison proves something only if the weights moved and the run used what the default config uses
    assert any(not torch.equal(a.weights[k], initial[k]) for k in a.weights)
    assert max(row["dynamic_sampling/rounds"] for row in a.metrics) > 1  # a second round was gathered
    assert all(row["reward_service/workers"] == 2 for row in a.metrics) and len(a.groups) == 2
    assert a.weights.keys() == b.weights.keys()
    different = [k for k in a.weights if not torch.equal(a.weights[k], b.weights[k])]
    assert not different, f"{len(different)} of {len(a.weights)} tensors differ, e.g. {different[:3]}"
    assert a.metrics == b.metrics
    assert a.groups == b.groups and a.samples == b.samples


def test_two_runs_of_one_seed_are_bit_identical(wide_model, first_run, tmp_path, monkeypatch):
    second = train_run(wide_model, tmp_path / "second", determinism_helpers.digit_factory, monkeypatch)
    assert_same_run(first_run, second, load_file(wide_model / "model.safetensors"))


def test_late_verifier_workers_change_nothing(wide_model, first_run, tmp_path, monkeypatch):
    log = tmp_path / "delays.log"
    monkeypatch.setenv(determinism_helpers.DELAY_LOG, str(log))  # the workers inherit the environment
    delayed = train_run(wide_model, tmp_path / "delayed", determinism_helpers.slow_digit_factory, monkeypatch)
    delays = [line.split() for line in log.read_text().splitlines()]
    # every verdict came late (one line per sample the service verified), from both workers
    assert len(delays) == delayed.metrics[-1]["reward_service/completed"] > 0
    assert len({pid for pid, _ in delays}) == 2 and sum(float(s) for _, s in delays) > 0.1
    assert_same_run(first_run, delayed, load_file(wide_model / "model.safetensors"))


def test_packed_backward_sums_a_groups_shared_state_in_one_order(wide_model):
    """The root cause alone: 8 rows of one prompt, so all 8 first tokens read the prompt's last state, and the
    backward is split over 2 threads; 16 backward passes give the same gradients to the bit."""
    torch.set_num_threads(THREADS)
    model = LlamaForCausalLM.from_pretrained(wide_model).float().eval()
    generator = torch.Generator().manual_seed(0)
    prompt_ids = torch.randint(3, 60, (1, 20), generator=generator)
    completion_ids = torch.randint(3, 60, (8, 32), generator=generator)
    inputs = (prompt_ids, torch.ones_like(prompt_ids), torch.zeros(8, dtype=torch.long), completion_ids,
              torch.ones_like(completion_ids))
    grads = []
    # 16 passes: the unordered sum is a race between the 2 threads, which a busy machine (the mutation check's
    # scratch run) sometimes lets 6 passes win every time (a mutation run: one survival at 6)
    for _ in range(16):
        model.zero_grad(set_to_none=True)
        logprobs, _ = completion_logprobs(model, *inputs)
        logprobs.sum().backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
    assert all(g.abs().sum() > 0 for g in grads[0].values())
    for other in grads[1:]:
        assert all(torch.equal(grads[0][n], other[n]) for n in grads[0])
