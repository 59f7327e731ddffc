"""LoRA through peft on the tiny random Llama: the reference is the base model with the adapter
off, one update touches the adapters only, a run saves merged weights + adapter/, resume is exact, bad settings
give one clear error."""
from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

pytest.importorskip("peft")  # the `test` extra installs it; without it this file has nothing to test

from rlvr.cli.main import main  # noqa: E402
from rlvr.config.run import ConfigError, LoraConfig, load_config  # noqa: E402
from rlvr.errors import UserFacingError  # noqa: E402
from rlvr.model.logprobs import batched_logprobs  # noqa: E402
from rlvr.model.lora import ADAPTER_DIR, AdapterOffReference, LoraError, wrap_policy  # noqa: E402
from test_train_tiny import tiny_overrides  # noqa: E402

# The random model never answers correctly, so every group ties on correctness and the advantages are 0; whether
# the overlong penalty differs within a group depends on the sampled lengths (all 8 tokens with some seeds), so an
# entropy bonus gives the adapters a gradient whatever is sampled.
LORA = ["model.lora.enabled=true", "model.lora.r=4", "eval.at_end=false", "reward.workers=1", "threads=1",
        "reward.overlong_buffer=6", "algorithm.entropy_coef=0.1"]


def plain(model_dir):
    return AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()


def wrapped_with_trained_adapter(model_dir):
    """A LoRA policy whose adapter changes the output: peft starts B at zero (the update B A is then 0), so
    fill B with noise as a few training steps would."""
    wrapped = wrap_policy(plain(model_dir), LoraConfig(enabled=True, r=4))
    torch.manual_seed(0)
    with torch.no_grad():
        for name, param in wrapped.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.5)
    return wrapped


def scoring_inputs(vocab: int):
    """2 prompts (the second left-padded by 2) x 2 completions each; the last completion ends after 3 tokens."""
    g = torch.Generator().manual_seed(1)
    prompt_ids = torch.randint(3, vocab, (2, 6), generator=g)
    prompt_mask = torch.ones(2, 6, dtype=torch.long)
    prompt_mask[1, :2] = 0
    completion_ids = torch.randint(3, vocab, (4, 5), generator=g)
    completion_mask = torch.ones(4, 5, dtype=torch.long)
    completion_mask[3, 3:] = 0
    return prompt_ids, prompt_mask, torch.tensor([0, 0, 1, 1]), completion_ids, completion_mask


def test_reference_with_adapter_off_equals_the_base_model(tiny_model_dir):
    # Exact (torch.equal), not to a tolerance: with the adapter disabled every peft LoRA layer returns its base
    # Linear's output, so the same float operations run in the same order as in the untouched model.
    wrapped = wrapped_with_trained_adapter(tiny_model_dir)
    base = plain(tiny_model_dir)
    inputs = scoring_inputs(base.config.vocab_size)
    reference = batched_logprobs(AdapterOffReference(wrapped), *inputs, temperature=0.7, micro_batch_size=2)
    expected = batched_logprobs(base, *inputs, temperature=0.7, micro_batch_size=2)
    policy = batched_logprobs(wrapped.get_base_model(), *inputs, temperature=0.7, micro_batch_size=2)
    assert torch.equal(reference, expected)
    assert not torch.allclose(policy, expected)  # the adapter is on again outside the reference forward


def test_one_step_trains_only_the_adapters(tiny_model_dir, tmp_path):
    from rlvr.grpo.setup import setup
    from rlvr.grpo.step import grpo_step

    config = load_config(None, tiny_overrides(tiny_model_dir, tmp_path / "r", steps=1) + LORA)
    run = setup(config, tmp_path / "r")
    policy = run.models.policy
    try:
        assert {id(p) for g in run.optim.optimizer.param_groups for p in g["params"]} == {
            id(p) for n, p in policy.named_parameters() if "lora_" in n}  # the optimizer sees adapters only
        before = {n: p.detach().clone() for n, p in policy.named_parameters()}
        record, *_ = grpo_step(run, 1)
        assert record["grad_norm"] > 0  # the step had something to learn (see LORA)
    finally:
        run.service.close()
    after = dict(policy.named_parameters())
    frozen = [n for n in before if "lora_" not in n]
    assert frozen and all(torch.equal(before[n], after[n]) for n in frozen)  # base weights bit-identical
    assert any(not torch.equal(before[n], after[n]) for n in before if "lora_B" in n)


def test_run_saves_merged_model_and_adapter(tiny_model_dir, tmp_path):
    from peft import PeftModel

    out = tmp_path / "run"
    assert main(["train", *tiny_overrides(tiny_model_dir, out, steps=1), *LORA]) == 0
    final = out / "final"
    merged = AutoModelForCausalLM.from_pretrained(final)  # a plain HF model: rlvr eval, the next pipeline stage
    assert not (final / "adapter_config.json").exists()  # else transformers would load it as an adapter
    adapter = PeftModel.from_pretrained(plain(tiny_model_dir), final / ADAPTER_DIR)
    # merge_and_unload adds the same (alpha/r) B A in place; float sums of the same terms: equal up to round-off
    folded = adapter.merge_and_unload().state_dict()
    for key, tensor in merged.state_dict().items():
        torch.testing.assert_close(tensor, folded[key], rtol=0, atol=1e-6)
    (checkpoint,) = (out / "checkpoints").iterdir()
    assert (checkpoint / "model" / ADAPTER_DIR / "adapter_model.safetensors").is_file()


def test_lora_resume_is_exact(tiny_model_dir, tmp_path):
    # One run of 2 steps vs a run of 1 step continued to 2 from its final checkpoint (max_steps may change
    # on resume): the adapter comes back from checkpoint/model/adapter/, so the weights match bit for bit.
    # The adapter is non-zero after step 1 (see LORA), so a resume that lost it would end elsewhere.
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    assert main(["train", *tiny_overrides(tiny_model_dir, straight, steps=2), *LORA]) == 0
    assert main(["train", *tiny_overrides(tiny_model_dir, stopped, steps=1), *LORA]) == 0
    assert main(["train", *tiny_overrides(tiny_model_dir, stopped, steps=2), *LORA,
                 f"checkpoint.resume={stopped}"]) == 0
    a = AutoModelForCausalLM.from_pretrained(straight / "final").state_dict()
    b = AutoModelForCausalLM.from_pretrained(stopped / "final").state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("override, message", [
    ("model.lora.r=0", "model.lora.r"),
    ("model.lora.dropout=0.1", "model.lora.dropout=0.1 must be 0"),
    ("model.lora.target_modules=[]", "model.lora.target_modules is empty"),
])
def test_bad_lora_config_is_one_clear_error(tiny_model_dir, tmp_path, override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, tiny_overrides(tiny_model_dir, tmp_path / "r") + LORA + [override])


def test_unknown_target_module_names_what_the_model_has(tiny_model_dir, tmp_path, capsys):
    assert issubclass(LoraError, UserFacingError)
    out = tmp_path / "run"
    assert main(["train", *tiny_overrides(tiny_model_dir, out, steps=1), *LORA,
                 "model.lora.target_modules=[qkv]"]) == 2
    err = capsys.readouterr().err
    assert "rlvr: error: model.lora.target_modules: ['qkv'] are not Linear layers" in err and "q_proj" in err


def test_sft_sample_and_non_grpo_recipe_stages_refuse_lora(tmp_path):
    """They share RunConfig but never wrap the model: one clear error instead of silently ignoring the adapters."""
    from rlvr.model.lora import LoraError
    from rlvr.pipeline.checks import before_any_stage
    from rlvr.pipeline.runner import plan
    from rlvr.pipeline.spec import load_recipe
    from rlvr.sampling.run import rejection_sample
    from rlvr.sft.trainer import sft

    config = load_config(None, ["model.lora.enabled=true", "sft.data=cold_start"])
    with pytest.raises(LoraError, match="supported by `rlvr train` .* rlvr sft would ignore it"):
        sft(config, tmp_path / "sft")
    with pytest.raises(LoraError, match="rlvr sample would ignore it"):
        rejection_sample(config, tmp_path / "sample")
    assert not (tmp_path / "sft").exists() and not (tmp_path / "sample").exists()  # refused before claiming
    recipe = load_recipe("r1", ["stages.cold_start.model.lora.enabled=true"])
    with pytest.raises(ConfigError, match="stage 'cold_start': model.lora applies to grpo stages only"):
        before_any_stage(recipe, plan(recipe, tmp_path / "run"))


def test_an_engine_with_its_own_weights_receives_the_merged_lora_weights(tiny_model_dir, tmp_path):
    # hf_process holds a plain copy of the model: after every step it gets W + (alpha/r) B A (lora.MergedWeights).
    # Had it kept the base weights, step 2 would sample from another policy than in-process, the rewards and
    # parameters would part, and the post-sync probe would stop the run (its threshold is 0.01).
    import json

    from safetensors.torch import load_file

    runs = {}
    for kind in ("hf", "hf_process"):
        runs[kind] = tmp_path / kind
        args = [*tiny_overrides(tiny_model_dir, runs[kind], steps=2), *LORA, f"rollout.engine.kind={kind}",
                "rollout.engine.threads=1"]
        assert main(["train", *args]) == 0
    rows = {k: [json.loads(line) for line in (d / "metrics.jsonl").read_text().splitlines()] for k, d in runs.items()}
    assert [r["reward_mean"] for r in rows["hf"]] == [r["reward_mean"] for r in rows["hf_process"]]
    assert [r["completion_length"] for r in rows["hf"]] == [r["completion_length"] for r in rows["hf_process"]]
    assert all(r["engine/agreement_kl"] < 1e-8 for r in rows["hf_process"])
    a, b = (load_file(runs[k] / "final" / "model.safetensors") for k in ("hf", "hf_process"))
    base = load_file(tiny_model_dir / "model.safetensors")
    assert any(not torch.equal(base[k], b[k]) for k in b)  # the adapters moved the merged weights
    assert max(float((a[k] - b[k]).abs().max()) for k in a) <= 1e-5
