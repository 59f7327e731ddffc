"""model.init=random: shapes without weights, with the embedded model's tokenizer."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rlvr.config.model import AUTO_BF16_MIN_PARAMETERS, approximate_parameters
from rlvr.config.run import ConfigError, load_config
from rlvr.errors import UserFacingError
from rlvr.model.architectures import MARKER, SHAPES, random_config
from rlvr.model.load import context_length, load_model, load_tokenizer, random_shape_config


def model_config(*overrides: str):
    return load_config(None, ["model.init=random", *overrides]).model


@pytest.mark.parametrize(("name", "millions"), [
    # parameters of the published models (their model cards / a loaded copy): SmolLM2-135M 134,515,008 (the embedded
    # model converted here), Qwen2.5-0.5B 0.49B, Qwen2.5-1.5B 1.54B, Llama-3.2-1B 1.24B (tied embeddings)
    ("smollm2-135m", 134.515), ("qwen2.5-0.5b", 494.033), ("qwen2.5-1.5b", 1543.714), ("llama-3.2-1b", 1235.814)])
def test_each_shipped_shape_has_its_published_size(name, millions):
    from transformers import AutoModelForCausalLM

    config = random_shape_config(model_config(f"model.architecture={name}"))
    with torch.device("meta"):  # the shape alone: no memory, no initialisation
        model = AutoModelForCausalLM.from_config(config)
    assert sum(p.numel() for p in model.parameters()) / 1e6 == pytest.approx(millions, abs=0.001)
    # model.dtype=auto sizes models by formula (the config imports no torch): Qwen's q/k/v biases are all it leaves out
    assert approximate_parameters(SHAPES[name]) / 1e6 == pytest.approx(millions, abs=0.06)  # 1.5B: 0.057M of biases


@pytest.mark.parametrize(("overrides", "dtype"), [
    ([], "float32"),  # the CPU: always fp32
    (["model.init=random", "model.architecture=qwen2.5-1.5b"], "float32"),
    (["model.device=cuda"], "float32"),  # the embedded 135M model: fp32 measured faster on an H200
    (["model.device=cuda:1", "model.init=random", "model.architecture=qwen2.5-0.5b"], "bfloat16"),
    (["model.device=cuda", "model.init=random", "model.architecture=tiny"], "float32"),
    (["model.device=cuda", "model.name_or_path=Qwen/Qwen2.5-7B-Instruct"], "bfloat16"),  # a hub id: unread, bf16
    (["model.device=cuda", "model.init=random", "model.architecture=qwen2.5-0.5b", "model.dtype=float32"], "float32"),
    (["model.device=mps", "model.dtype=auto", "model.init=random", "model.architecture=qwen2.5-0.5b"], "float32"),
])
def test_auto_precision_is_bf16_on_a_gpu_from_the_measured_size_up(overrides, dtype):
    assert 134.5e6 < AUTO_BF16_MIN_PARAMETERS < 494.0e6  # between the two sizes measured (config/model.py)
    assert load_config(None, overrides).model.dtype == dtype


def test_auto_precision_is_resolved_on_assignment_too():
    model = load_config(None, ["model.device=cuda", "model.init=random", "model.architecture=qwen2.5-0.5b",
                               "model.dtype=float32"]).model
    model.dtype = "auto"
    assert model.dtype == "bfloat16"
    model.device = "cpu"
    model.dtype = "auto"
    assert model.dtype == "float32"


def test_auto_precision_reads_a_local_model_s_size(tmp_path, tiny_model_dir):
    assert load_config(None, ["model.device=cuda", f"model.name_or_path={tiny_model_dir}"]).model.dtype == "float32"
    big = tmp_path / "big"
    big.mkdir()
    (big / "config.json").write_text(json.dumps(SHAPES["llama-3.2-1b"]))
    assert load_config(None, ["model.device=cuda", f"model.name_or_path={big}"]).model.dtype == "bfloat16"
    shape = ["model.device=cuda", "model.init=random", f"model.architecture={big / 'config.json'}"]
    assert load_config(None, shape).model.dtype == "bfloat16"  # a shape given as a file is sized too
    # an evaluation target: the default config's model (135M: fp32) pointed at the 1B directory chooses again
    assert load_config(None, ["model.device=cuda"]).model.at(str(big)).dtype == "bfloat16"
    assert load_config(None, ["model.device=cuda", "model.dtype=float32"]).model.at(str(big)).dtype == "float32"


def test_a_random_run_s_stages_after_the_first_load_their_trained_weights(tmp_path):
    from rlvr.pipeline.runner import plan
    from rlvr.pipeline.spec import load_recipe

    recipe = load_recipe("r1", ["model.init=random", "model.architecture=tiny"])
    models = [stage.config["model"] for stage in plan(recipe, tmp_path / "run").stages]
    assert (models[0]["init"], models[0]["architecture"]) == ("random", "tiny")  # the base model: the shape
    later = [m for m in models if "stages" in m["name_or_path"]]  # an earlier stage's final/ checkpoint
    assert later and all((m["init"], m["architecture"]) == ("pretrained", None) for m in later)


def test_a_random_tiny_model_is_the_named_shape_and_the_same_for_policy_and_reference():
    config = model_config("model.architecture=tiny")
    policy, reference = load_model(config, trainable=True), load_model(config, trainable=False)
    assert (policy.config.num_hidden_layers, policy.config.hidden_size) == (2, 64)
    assert policy.config.vocab_size == len(load_tokenizer(config)) == 49152
    weights = policy.model.layers[0].mlp.up_proj.weight
    assert 0.01 < float(weights.detach().std()) < 0.03  # transformers: normal, std initializer_range 0.02; not zeros
    pairs = zip(policy.state_dict().items(), reference.state_dict().items(), strict=True)
    for (name, mine), (_, theirs) in pairs:
        assert torch.equal(mine, theirs), name  # one seed: the KL starts at exactly 0, as from a checkpoint


def test_the_vocabulary_grows_to_the_tokenizer_and_a_larger_one_is_kept(tmp_path):
    tokenizer = load_tokenizer(model_config())
    small = dict(SHAPES["tiny"], vocab_size=1000)
    assert random_config(small, tokenizer).vocab_size == len(tokenizer) == 49152  # every token id has a row
    assert random_config(dict(SHAPES["tiny"], vocab_size=60000), tokenizer).vocab_size == 60000  # padded, as Qwen's
    path = tmp_path / "config.json"
    path.write_text(json.dumps(small))
    assert load_model(model_config(f"model.architecture={path}")).config.vocab_size == 49152


def test_the_context_is_the_shape_s_not_the_tokenizer_model_s():
    assert context_length(model_config("model.architecture=tiny")) == 2048  # the embedded model's is 8192
    assert context_length(load_config(None, []).model) == 8192


@pytest.mark.parametrize(("overrides", "words"), [
    (["model.architecture=tiny"], "set model.init=random"),
    (["model.init=random", "model.architecture=qwen2.5-05b"], "did you mean 'qwen2.5-0.5b'"),
    (["model.init=random", "rollout.engine.kind=vllm"], "use rollout.engine.kind=hf or hf_process"),
])
def test_settings_that_cannot_mean_what_they_say_are_refused(overrides, words):
    with pytest.raises(ConfigError, match=words.replace(".", r"\.").replace("(", r"\(")):
        load_config(None, overrides)


@pytest.mark.parametrize(("text", "words"), [(None, "cannot read it"), ("{", "is not JSON"),
                                             ('{"hidden_size": 64}', "holds no model_type")])
def test_a_bad_config_file_is_one_clear_error(tmp_path, text, words):
    path = tmp_path / "shape.json"
    if text is not None:
        path.write_text(text)
    with pytest.raises(UserFacingError, match=words):
        load_model(model_config(f"model.architecture={path}"))


RUNS = {  # one command each; the module starts all three at once (2 cores here: they share them)
    "train": ["train", "max_steps=1", "eval.at_end=false", "rollout.max_new_tokens=8", "rollout.prompts_per_step=2",
              "rollout.group_size=2", "rollout.dynamic_sampling.enabled=false"],
    "sft": ["sft", "sft.data=cold_start", "sft.cold_start_size=8", "sft.epochs=1", "sft.batch_size=8"],
    "sample": ["sample", "sample.prompts=2", "sample.samples=2", "rollout.max_new_tokens=8"]}


@pytest.fixture(scope="module")
def random_runs(tmp_path_factory) -> dict[str, tuple[Path, subprocess.Popen]]:
    started = {}
    for name, command in RUNS.items():
        run_dir = tmp_path_factory.mktemp(name) / "run"
        with open(run_dir.parent / "stdout", "w") as out, open(run_dir.parent / "stderr", "w") as err:  # no pipe
            started[name] = run_dir, subprocess.Popen(  # to fill while the test waits on another run
                [sys.executable, "-m", "rlvr", *command, "model.init=random", "model.architecture=tiny",
                 f"output_dir={run_dir}"], stdout=out, stderr=err)
    yield started
    for _, proc in started.values():
        proc.kill()
        proc.wait()


def finished(random_runs, name: str) -> tuple[Path, str, str]:
    run_dir, proc = random_runs[name]
    proc.wait(timeout=300)
    stdout, stderr = ((run_dir.parent / stream).read_text() for stream in ("stdout", "stderr"))
    assert proc.returncode == 0, stderr[-2000:]
    return run_dir, stdout, stderr


def test_a_run_says_its_weights_are_random_in_its_log_and_its_directory(random_runs):
    run_dir, stdout, stderr = finished(random_runs, "train")
    assert "RANDOM weights of the tiny shape (3.2M parameters" in stdout.splitlines()[1]  # the run log's own,
    assert "RANDOM weights of the tiny shape" in stderr  # after the directory line; and where the model loaded
    assert "RANDOM weights of the tiny shape (3.2M parameters" in (run_dir / MARKER).read_text()
    saved = (run_dir / "config.yaml").read_text()
    assert "init: random" in saved and "dtype: float32" in saved  # auto, resolved once and saved as what it chose
    # evaluating the run loads what it trained, not new random weights
    from rlvr.evaluation.target import resolve_target

    path, config = resolve_target(str(run_dir), None, [])
    assert path == str(run_dir / "final") and (config.model.name_or_path, config.model.init) == (path, "pretrained")
    assert config.model.architecture is None


@pytest.mark.parametrize("name", ["sft", "sample"])
def test_random_sft_and_sampling_runs_are_marked_too(random_runs, name):
    run_dir, stdout, _ = finished(random_runs, name)
    assert "RANDOM weights of the tiny shape" in (run_dir / MARKER).read_text()
    assert "RANDOM weights of the tiny shape" in stdout  # the run's own log (the loader says it on stderr)


def test_multi_query_shapes_load_and_a_head_count_that_does_not_divide_is_one_error(tmp_path):
    mqa, odd = tmp_path / "mqa.json", tmp_path / "odd.json"
    mqa.write_text(json.dumps(dict(SHAPES["tiny"], num_key_value_heads=1)))  # one KV head for all (MQA)
    odd.write_text(json.dumps(dict(SHAPES["tiny"], num_key_value_heads=3)))
    assert load_model(model_config(f"model.architecture={mqa}")).config.num_key_value_heads == 1
    with pytest.raises(UserFacingError, match="no multiple of num_key_value_heads=3"):
        load_model(model_config(f"model.architecture={odd}"))


def test_the_logged_prompt_length_is_a_mean_over_prompts():
    from rlvr.grpo.step_log import mean_prompt_tokens

    # two prompts, 2 and 3 real tokens (the first left-padded): (2 + 3) / 2
    assert mean_prompt_tokens(torch.tensor([[0, 1, 1], [1, 1, 1]])) == 2.5
