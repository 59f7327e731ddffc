"""Every command under the device trap (tests/device_trap.py): the policy on `cpu:0`, and any op that
would combine a host tensor with the policy's on a GPU fails, so the CPU-only CI catches what crashed
`rlvr train model.device=cuda` at step 1 (types.length_order's group maxima, TrainBatch.rows' advantages).

First the trap's own rules (each test fails if its rule is dropped), then the two bugs, then the commands on the
tiny model, a step or two each.
"""
from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from device_trap import POLICY_DEVICE, DeviceMixError, device_trap, on_host
from rlvr.cli.main import main


def _grad_on_host(d):
    weight = torch.nn.Parameter(torch.ones(2, device=d))
    weight.grad = torch.zeros(2)


def _set(d, index, values):
    x = torch.arange(6.0, device=d)
    x[index] = values


# CUDA's rules, as cases: (name, op with `d` the policy's device, does CUDA raise?). The trap must agree on every
# one on the CPU; on a machine with a GPU the same cases run on CUDA itself (test_the_cases_hold_on_cuda).
CASES = [
    ("host tensor + policy tensor", lambda d: torch.ones(3, device=d) + torch.ones(3), True),
    ("host 1-element tensor + policy tensor", lambda d: torch.ones(3, device=d) + torch.ones(1), True),
    ("0-dim host tensor + policy tensor", lambda d: torch.ones(3, device=d) + torch.tensor(2.0), False),
    ("factory on x.device + x", lambda d: (lambda x: torch.zeros(3, device=x.device) + x)(torch.ones(3, device=d)),
     False),
    ("x.cpu() * x", lambda d: (lambda x: x.cpu() * x)(torch.ones(3, device=d)), True),
    ("cat of host and policy", lambda d: torch.cat([torch.ones(2, device=d), torch.ones(2)]), True),
    ("policy tensor indexed by host indices", lambda d: torch.ones(6, device=d)[torch.tensor([0, 2])], False),
    ("host tensor indexed by policy indices", lambda d: torch.ones(6)[torch.tensor([0, 2], device=d)], True),
    ("scatter into a host factory with policy rows (the first bug the trap found)",
     lambda d: torch.zeros(2, dtype=torch.long).scatter_reduce(0, torch.tensor([0, 1], device=d),
                                                               torch.tensor([3, 4], device=d), reduce="amax"), True),
    ("policy[host indices] = scalar", lambda d: _set(d, torch.tensor([0, 2]), 0.0), False),
    ("policy[slice] = host values (a copy)", lambda d: _set(d, slice(1, 3), torch.ones(2)), False),
    ("policy[host indices] = host values", lambda d: _set(d, torch.tensor([0, 2]), torch.ones(2)), True),
    ("policy[list] = host values", lambda d: _set(d, [0, 2], torch.ones(2)), True),
    ("policy.index_put_ host values", lambda d: torch.ones(6, device=d).index_put_(
        (torch.tensor([0, 2]),), torch.ones(2)), True),
    ("policy.copy_(host)", lambda d: torch.ones(6, device=d).copy_(torch.zeros(6)), False),
    ("numpy of a policy tensor", lambda d: torch.ones(2, device=d).numpy(), True),
    ("host generator samples on the policy", lambda d: torch.rand(2, generator=torch.Generator(), device=d), True),
    ("policy generator samples on the policy",
     lambda d: torch.rand(2, generator=torch.Generator(device=d), device=d), False),
    ("module on the policy, host input", lambda d: torch.nn.Linear(3, 2).to(d)(torch.ones(1, 3)), True),
    ("module on the policy, policy input", lambda d: torch.nn.Linear(3, 2).to(d)(torch.ones(1, 3, device=d)), False),
    ("module never moved, policy input", lambda d: torch.nn.Linear(3, 2)(torch.ones(1, 3, device=d)), True),
    ("a host gradient for a policy parameter", _grad_on_host, True),
]


@pytest.mark.parametrize("op, raises", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_trap_raises_where_cuda_would(op, raises):
    with device_trap() as trap:
        if raises:
            with pytest.raises(DeviceMixError):
                op(POLICY_DEVICE)
        else:
            op(POLICY_DEVICE)
    assert len(trap.violations) == raises  # recorded even where rlvr's own `except` would swallow the error


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (CI has none): checks the cases themselves")
@pytest.mark.parametrize("op, raises", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_cases_hold_on_cuda(op, raises):
    if raises:
        with pytest.raises((RuntimeError, TypeError)):  # TypeError: numpy of a CUDA tensor
            op("cuda")
    else:
        op("cuda")


def test_placement_follows_device_arguments_moves_and_inputs():
    with device_trap():
        x = torch.ones(2, 3, device=POLICY_DEVICE)
        assert not on_host(x) and on_host(torch.ones(3)) and on_host(torch.ones(3, device="cpu"))
        assert x.device == torch.device("cpu", 0) and torch.ones(3).device == torch.device("cpu")
        assert not on_host(torch.zeros(3, device=x.device))  # x.device answers cpu:0: the factory follows x
        assert on_host(x.cpu()) and on_host(x.to("cpu")) and not on_host(x.cpu().to(x))
        assert not on_host(x.to(torch.float64)) and not on_host(x.new_zeros(2)) and not on_host(torch.ones_like(x))
        assert not on_host(torch.tensor([1, 2]).to(POLICY_DEVICE)) and not on_host(x.sum(dim=0))
        assert not on_host(x[torch.tensor([1])]) and not on_host(x + torch.tensor(1.0))
        assert not on_host(x)  # x.cpu() is x itself on a CPU; the trap's alias left x's mark alone
        host = torch.ones(3)
        assert on_host(host.to(torch.float64)) and on_host(host[1:]) and on_host(host * 2)
        assert on_host(torch.from_numpy(host.numpy())) and on_host(torch.nn.Linear(2, 2).weight)
        with pytest.raises(DeviceMixError, match=r"TensorBase.mul at .*test_device_trap.py:\d+: host tensors"):
            x.cpu() * x


def test_loaded_models_are_on_the_host_until_moved(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    with device_trap():
        model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
        assert all(on_host(t) for t in [*model.parameters(), *model.buffers()])
        model.to(POLICY_DEVICE)  # Module._apply's param.data = ...: the parameters become the policy's
        assert not any(on_host(t) for t in [*model.parameters(), *model.buffers()])
        assert next(model.parameters()).device == torch.device("cpu", 0)


def test_the_first_bug_a_host_factory_scattered_into_with_policy_rows():
    """types.length_order once made its group maxima with torch.zeros(n) and scattered into them
    with the rows' indices; the fixed function runs under the trap."""
    from rlvr.types import length_order

    with device_trap():
        rows = torch.tensor([0, 0, 1, 1], device=POLICY_DEVICE)
        lengths = torch.tensor([1, 3, 2, 2], device=POLICY_DEVICE)
        with pytest.raises(DeviceMixError, match="scatter_reduce"):
            torch.zeros(2, dtype=lengths.dtype).scatter_reduce(0, rows, lengths, reduce="amax", include_self=False)
        mask = (torch.arange(4, device=POLICY_DEVICE)[None] < lengths[:, None]).float()
        order = length_order(mask, rows)
    assert order.tolist() == [0, 1, 2, 3] and not on_host(order)


CONFIGS = Path(__file__).resolve().parent.parent / "configs"
# On a machine with a GPU, RLVR_TEST_DEVICE=cuda runs the commands below on the GPU itself, without the trap, and
# RLVR_TEST_DTYPE=bfloat16 in mixed precision (every command on CUDA, fp32 and bf16).
DEVICE = os.environ.get("RLVR_TEST_DEVICE", POLICY_DEVICE)
DTYPE = [f"model.dtype={os.environ['RLVR_TEST_DTYPE']}"] if os.environ.get("RLVR_TEST_DTYPE") else []
on_the_trap = pytest.mark.skipif(DEVICE != POLICY_DEVICE, reason="checks the trap itself")


def trapped():
    return device_trap() if DEVICE == POLICY_DEVICE else contextlib.nullcontext(SimpleNamespace(violations=[]))


def tiny_train(model_dir, out, *extra, preset: str | None = None) -> list[str]:
    config = [str(CONFIGS / f"{preset}.yaml")] if preset else []
    return ["train", *config, f"model.name_or_path={model_dir}", f"model.device={DEVICE}", *DTYPE,
            f"output_dir={out}", "max_steps=1", "rollout.group_size=4", "rollout.prompts_per_step=2",
            "rollout.max_new_tokens=6", "optimizer.micro_batch_size=4", "eval.size=2", "eval.samples=2",
            "reward.workers=0", "threads=1", "rollout.dynamic_sampling.max_extra_prompts=2", *extra]


@on_the_trap
def test_the_second_bug_host_scores_meet_the_policy_rows(tiny_model_dir, tmp_path, monkeypatch):
    """Once the verifiers' scores, and so the advantages, stayed on the host; TrainBatch.rows then
    indexed them with the policy's micro-batch order. Undoing stages.finish_scoring's move brings that back."""
    monkeypatch.setattr("rlvr.types.ScoredBatch.to", lambda scored, device: scored)
    with device_trap() as trap, pytest.raises(DeviceMixError):
        main(tiny_train(tiny_model_dir, tmp_path / "run", "eval.at_end=false"))
    assert trap.violations and "a host tensor (8,) indexed by policy indices" in trap.violations[0]
    assert "rlvr/types.py" in trap.violations[0]


def run_trapped(argv: list[str]) -> None:
    with trapped() as trap:
        code = main(argv)
    assert not trap.violations, "would fail on a GPU:\n" + "\n".join(trap.violations)
    assert code == 0


@pytest.fixture(scope="module")
def reward_model_dir(tiny_model_dir, tmp_path_factory):
    from transformers import AutoTokenizer, LlamaConfig, LlamaForSequenceClassification

    target = tmp_path_factory.mktemp("trap-rm")
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(target)
    torch.manual_seed(0)
    LlamaForSequenceClassification(LlamaConfig.from_pretrained(tiny_model_dir, num_labels=1)).save_pretrained(target)
    return target


def test_train_grpo_with_dynamic_sampling_curriculum_overlong_reward_model_and_eval(tiny_model_dir, tmp_path,
                                                                                    reward_model_dir):
    out = tmp_path / "run"
    run_trapped(tiny_train(tiny_model_dir, out, "curriculum.enabled=true", "reward.overlong_buffer=2",
                           f"reward.model_path={reward_model_dir}", "eval.greedy=true"))
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 1] and "eval/pass@1" in rows[1]  # the step, then the final eval


def test_train_ppo_critic_with_lora_kl_in_the_reward_correction_and_a_resume(tiny_model_dir, tmp_path):
    pytest.importorskip("peft")
    out = tmp_path / "run"
    settings = ["model.lora.enabled=true", "model.lora.r=4", "rollout.correction.mode=tis", "eval.at_end=false"]
    run_trapped(tiny_train(tiny_model_dir, out, *settings, preset="ppo"))
    # the checkpoint's optimizer, critic and adapter state come back from the host (torch.load) to the policy
    run_trapped(tiny_train(tiny_model_dir, out, *settings, "max_steps=2", f"checkpoint.resume={out}", preset="ppo"))
    assert [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()] == [1, 2]


@pytest.mark.parametrize("task", ["calculator", "filesystem"])
def test_train_and_evaluate_episodes_with_process_credit_and_dynamic_sampling(tiny_model_dir, tmp_path, task):
    """The multi-turn path (turns, environment tokens, state scores, per-turn credit) under the trap."""
    out = tmp_path / "run"
    run_trapped(tiny_train(tiny_model_dir, out, f"task.name={task}", "task.one_shot=false", "episode.list_tools=false",
                           "episode.max_turns=2",
                           "episode.tokens_per_turn=6", "episode.tokens_per_episode=30", "episode.credit=process",
                           "rollout.dynamic_sampling.enabled=true", "eval.greedy=true"))
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert "episode/turns_mean" in rows[0] and "eval/episode/turns_per_episode" in rows[-1]


@pytest.mark.parametrize("preset", sorted(p.stem for p in CONFIGS.glob("*.yaml") if p.stem != "ppo"))
def test_every_preset_trains_a_step(tiny_model_dir, tmp_path, preset):
    # dapo's overlong buffer (8 tokens) must be shorter than the budget: 10 tokens instead of 6
    run_trapped(tiny_train(tiny_model_dir, tmp_path / "run", "eval.at_end=false", "rollout.max_new_tokens=10",
                           preset=preset))


def test_async_engine_process_and_a_report_of_the_run(tiny_model_dir, tmp_path, monkeypatch):
    """hf_process: the engine's own process (run without the trap) and the trainer exchange host tensors only over
    their pipe; on CUDA a probe holding CUDA tensors received from the engine could not be sent back to it."""
    from rlvr.rollout.process import ProcessEngine

    sent, send = [], ProcessEngine._send

    def checked_send(engine, command):
        tensors = [v for v in vars(command).values() if isinstance(v, torch.Tensor)]
        tensors += [v for r in vars(command).values() if hasattr(r, "completion_ids") for v in vars(r).values()
                    if isinstance(v, torch.Tensor)]
        sent.append([on_host(t) if DEVICE == POLICY_DEVICE else t.device.type == "cpu" for t in tensors])
        return send(engine, command)

    monkeypatch.setattr(ProcessEngine, "_send", checked_send)
    out = tmp_path / "run"
    run_trapped(tiny_train(tiny_model_dir, out, "max_steps=2", "eval.at_end=false", "rollout.engine.kind=hf_process",
                           "rollout.engine.max_staleness=1", "samples_per_step=8", "rollout.correction.mode=tis"))
    assert any(len(flags) >= 5 for flags in sent), "no agreement probe was sent: the pipe's tensors went unchecked"
    assert all(all(flags) for flags in sent), f"policy-device tensors sent over the pipe: {sent}"
    assert main(["report", str(out), "--output", str(tmp_path / "report.html")]) == 0
    assert (tmp_path / "report.html").stat().st_size > 10_000


def test_recipe_r1_runs_sft_sample_and_evaluations(tiny_model_dir, tmp_path, monkeypatch):
    # a random model is never right: every sample is accepted, so the second SFT stage has rows (as in
    # test_pipeline_signals.py); the first SFT packs its rows (padding_free), the second cuts them into prompt and
    # completion (shared_prefix, the default; length_grouped moves its batch as padding_free does: MicroBatch.to)
    monkeypatch.setattr("rlvr.sampling.run.is_correct", lambda candidate, weights: True)
    monkeypatch.setattr("rlvr.sampling.select.is_correct", lambda candidate, weights: True)
    run_trapped(["recipe", "r1", "--output-dir", str(tmp_path / "r1"), f"model.name_or_path={tiny_model_dir}",
                 f"model.device={DEVICE}", *DTYPE, "rollout.max_new_tokens=6", "rollout.group_size=2",
                 "rollout.prompts_per_step=2", "optimizer.micro_batch_size=4", "reward.workers=0",
                 "samples_per_step=0", "stages.cold_start.sft.cold_start_size=4", "stages.cold_start.sft.epochs=1",
                 "stages.cold_start.sft.batch_size=2", "stages.cold_start.sft.batching=padding_free",
                 "stages.plain_answers.sample.prompts=2", "stages.plain_answers.sample.samples=2",
                 "stages.plain_answers.sample.batch_size=2", "stages.rejection_sampling.sample.prompts=2",
                 "stages.rejection_sampling.sample.samples=2", "stages.rejection_sampling.sample.batch_size=2",
                 "stages.sft_on_samples.sft.batch_size=2",
                 # 5 % of 4 or 2 rows rounds to no mixed row (an error): a third, so that the mix is exercised
                 "stages.cold_start.sft.mix_ratio=0.34", "stages.sft_on_samples.sft.mix_ratio=0.34",
                 "evaluation.eval.size=2", "evaluation.eval.samples=2"])
    assert json.loads((tmp_path / "r1" / "manifest.json").read_text())["finished"]


@pytest.mark.parametrize("recipe, stages", [
    ("r1-zero", ["stages.zero_rl.max_steps=1"]),
    ("distill", ["stages.traces.sample.prompts=2", "stages.traces.sample.samples=2",
                 "stages.traces.sample.batch_size=2", "stages.student_sft.sft.batch_size=2",
                 "stages.student_sft.optimizer.micro_batch_size=2"])])
def test_recipes_r1_zero_and_distill_run(tiny_model_dir, tmp_path, monkeypatch, recipe, stages):
    """The GPU checks name both: GRPO from the base model with the format reward; a teacher's verified samples
    (every one accepted, as above) and the student's SFT, then the evaluations."""
    monkeypatch.setattr("rlvr.sampling.run.is_correct", lambda candidate, weights: True)
    monkeypatch.setattr("rlvr.sampling.select.is_correct", lambda candidate, weights: True)
    run_trapped(["recipe", recipe, "--output-dir", str(tmp_path / recipe), f"model.name_or_path={tiny_model_dir}",
                 f"model.device={DEVICE}", *DTYPE, "rollout.max_new_tokens=6", "rollout.group_size=2",
                 "rollout.prompts_per_step=2", "optimizer.micro_batch_size=4", "reward.workers=0",
                 "samples_per_step=0", *stages, "evaluation.eval.size=2", "evaluation.eval.samples=2"])
    assert json.loads((tmp_path / recipe / "manifest.json").read_text())["finished"]


def test_eval_scaling_and_generate_with_a_thinking_budget(tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = [str(tiny_model_dir), f"model.device={DEVICE}", *DTYPE, "rollout.max_new_tokens=6"]
    run_trapped(["eval", *model, "--scaling", "--size", "2", "--n", "1", "--n-list", "1,2", "--budgets", "2"])
    run_trapped(["generate", *model, "--prompt", "What is 7 * 8?", "--n", "3", "--think-budget", "3",
                 "--mode", "best-of", "--reference", "56", "--json"])
    assert (tmp_path / "scaling.json").is_file()


def test_the_config_accepts_cpu_0_for_the_trap_and_refuses_other_cpu_indices():
    from rlvr.config.run import ConfigError, load_config

    assert load_config(None, [f"model.device={POLICY_DEVICE}", f"reward.model_device={POLICY_DEVICE}"]).model.device \
        == "cpu:0"
    with pytest.raises(ConfigError, match=r"model\.device"):
        load_config(None, ["model.device=cpu:1"])
