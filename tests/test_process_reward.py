"""The process-reward hook of multi-turn episodes (issue 26, item 3): rlvr/agents/process_reward.py, with a tiny
function scorer written to a temporary module and a tiny random sequence-classification model."""
from __future__ import annotations

import sys
import textwrap
from dataclasses import replace

import pytest
import torch
from transformers import AutoTokenizer, LlamaConfig, LlamaForSequenceClassification

from rlvr.agents.process_reward import build_process_reward
from rlvr.agents.protocol import EpisodeRecord
from rlvr.config.base import ConfigError
from rlvr.config.run import ModelConfig, RewardConfig
from rlvr.config.sections import EpisodeConfig
from rlvr.errors import UserFacingError
from rlvr.rewards.reward_model import RewardModel, RewardModelError, RewardModelSettings
from rlvr.types import Prompt, Turns

SCORERS = "process_reward_test_scorers"
SCORERS_SOURCE = """
import math

NOT_CALLABLE = 3

def length(turn_text, prompt):
    return len(turn_text) + len(prompt.reference)

def picky(turn_text, prompt):
    if "none" in turn_text:
        return None
    if "boom" in turn_text:
        raise RuntimeError("boom")
    if "nan" in turn_text:
        return math.nan
    if "word" in turn_text:
        return "good"
    return -2.5

def three_args(turn_text, prompt, extra):
    return 0.0
"""


@pytest.fixture
def scorers(tmp_path, monkeypatch):
    """Two importable modules on sys.path: the scorers above, and one that raises when imported."""
    (tmp_path / f"{SCORERS}.py").write_text(textwrap.dedent(SCORERS_SOURCE))
    (tmp_path / "process_reward_test_broken.py").write_text("raise RuntimeError('at import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield SCORERS
    for name in (SCORERS, "process_reward_test_broken"):
        sys.modules.pop(name, None)


def build(source):
    return build_process_reward(EpisodeConfig(process_reward=source), RewardConfig(), ModelConfig())


def episode(*turns: str) -> EpisodeRecord:
    """A record whose model turns are `turns`, with a tool turn after each but the last."""
    messages = []
    for i, text in enumerate(turns):
        messages.append({"role": "assistant", "content": text})
        if i < len(turns) - 1:
            messages.append({"role": "tool", "content": f"tool reply {i}"})
    return EpisodeRecord(messages=messages, stop_reason="max_turns")  # cut: every model turn is a step


def turns_of(*records: EpisodeRecord, steps: int = 3) -> Turns:
    counts = [r.step_count() for r in records]
    mask = torch.tensor([[t < n for t in range(steps)] for n in counts])
    return Turns(torch.zeros(len(records), 1, dtype=torch.long), torch.zeros(mask.shape), mask, list(records))


def prompt(reference: str, question: str = "What is 2 + 3?") -> Prompt:
    # a one-shot exchange before the real question, as environment tasks write them
    messages = ({"role": "user", "content": "Example: what is 1 + 1?"}, {"role": "assistant", "content": "2"},
                {"role": "user", "content": question})
    return Prompt(id=f"test/{reference}", messages=messages, reference=reference)


def test_function_scorer_by_hand(scorers):
    hook = build(f"{scorers}:length")
    turns = turns_of(episode("ab", "abcd", "Answer: 5"), episode("x", ""))
    scored = hook.score(turns, [prompt("7"), prompt("12")])
    # length = len(turn text) + len(row's reference): row 0 (reference "7"): 2 + 1, 4 + 1, 9 + 1;
    # row 1 (reference "12"): 1 + 2, 0 + 2, and 0 where it has no third turn. Tool turns are not scored.
    assert scored.scores.tolist() == [[3.0, 5.0, 10.0], [3.0, 2.0, 0.0]]
    assert scored.failed == 0 and scored.first_error == ""


def test_a_failing_scorer_costs_the_turn_not_the_step(scorers):
    hook = build(f"{scorers}:picky")
    turns = turns_of(episode("none", "boom", "nan"), episode("word", "fine"))
    scored = hook.score(turns, [prompt("1"), prompt("2")])
    # None, a raise, NaN and a string each score 0 and are counted; "fine" gets its -2.5 unclamped.
    assert scored.scores.tolist() == [[0.0, 0.0, 0.0], [0.0, -2.5, 0.0]]
    assert scored.failed == 4
    assert scored.first_error == "picky returned None"


def test_records_must_match_the_turn_mask(scorers):
    hook = build(f"{scorers}:length")
    turns = turns_of(episode("a", "b"), episode("c"))
    turns.records[1] = episode("c", "d")  # two model turns in the record, one in the mask
    with pytest.raises(ValueError, match="row 1: 2 steps"):
        hook.score(turns, [prompt("1"), prompt("2")])


def test_a_final_answer_is_no_step_and_is_not_scored(scorers):
    hook = build(f"{scorers}:length")
    answered = replace(episode("call", "Answer: 5"), stop_reason="answered")
    turns = turns_of(answered, episode("xy", "z"))
    assert turns.turn_mask.tolist() == [[True, False, False], [True, True, False]]  # step_count 1 and 2
    scored = hook.score(turns, [prompt("1"), prompt("2")])
    assert scored.scores[0, 1] == 0.0 and scored.scores[0, 0] != 0.0  # the answer turn is left unscored
    assert scored.scores[1, 1] != 0.0  # a cut episode's last turn is a step


@pytest.mark.parametrize("source, says", [
    ("process_reward_test_missing_module:f", "could not import module 'process_reward_test_missing_module'"),
    (f"{SCORERS}:missing", f"module '{SCORERS}' has no function 'missing'"),
    (f"{SCORERS}:NOT_CALLABLE", "has no function 'NOT_CALLABLE'"),
    (f"{SCORERS}:three_args", "three_args must take (turn_text, prompt)"),
    ("process_reward_test_broken:f", "RuntimeError: at import"),
    ("score the turns please", "neither 'module:function'"),
    ("/no/such/process/model", "neither 'module:function'"),
])
def test_a_bad_process_reward_is_one_config_error(scorers, source, says):
    with pytest.raises(ConfigError) as caught:
        build(source)
    assert isinstance(caught.value, UserFacingError)
    assert str(caught.value).startswith(f"episode.process_reward={source!r}")
    assert says in str(caught.value)


def test_no_process_reward_no_hook():
    assert build(None) is None


@pytest.fixture(scope="module")
def prm_dir(tiny_model_dir, tmp_path_factory):
    """The conftest's character tokenizer and chat template, with a random 1-label Llama classifier head."""
    target = tmp_path_factory.mktemp("tiny-prm")
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(target)
    config = LlamaConfig.from_pretrained(tiny_model_dir, num_labels=1)
    torch.manual_seed(2)
    model = LlamaForSequenceClassification(config)
    with torch.no_grad():  # a random head gives logits near 0; scale it so scores spread over (0, 1)
        model.score.weight.mul_(50.0)
    model.save_pretrained(target)
    return target


def test_model_scorer_scores_question_and_turn_as_the_reward_model_does(prm_dir):
    hook = build(str(prm_dir))
    texts = [["Let me add.", "Answer: 5"], ["<tool_call>x</tool_call>", "hmm", "Answer: 4"]]
    turns = turns_of(episode(*texts[0]), episode(*texts[1]))
    scored = hook.score(turns, [prompt("5"), prompt("5", question="What is 1 + 3?")])
    # The same (last user turn, turn text) pairs through the reward model's own scorer, one pair at a time.
    reference = RewardModel.load(RewardModelSettings(str(prm_dir), 1, "cpu", "float32", False))
    want = [[reference.score(["What is 2 + 3?"], [t])[0] for t in texts[0]] + [0.0],
            [reference.score(["What is 1 + 3?"], [t])[0] for t in texts[1]]]
    torch.testing.assert_close(scored.scores, torch.tensor(want), rtol=0, atol=1e-5)
    assert len({round(v, 4) for v in scored.scores.flatten().tolist()}) == 6  # the scores depend on the text
    assert scored.failed == 0


def test_a_directory_that_is_no_classifier_names_the_setting(tiny_model_dir):
    # a causal LM: transformers would put a random head on it; the reward model's loader refuses, naming our key
    with pytest.raises(RewardModelError, match=r"^episode\.process_reward=.*is not a trained reward model"):
        build(str(tiny_model_dir))
