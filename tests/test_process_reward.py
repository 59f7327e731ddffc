"""The process-reward hook of multi-turn episodes: rlvr/agents/process_reward.py, with a tiny
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

def tensor_score(turn_text, prompt):
    import torch
    if "pair" in turn_text:
        return torch.tensor([1.0, 2.0])
    return torch.tensor(len(turn_text) / 2)

def wordy(turn_text, prompt):
    if "long" in turn_text:
        return "w" * 100
    raise RuntimeError("first line " + "x" * 200 + "\\nsecond line")
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


def test_a_one_number_tensor_is_a_score_and_a_longer_one_a_counted_failure(scorers):
    """A scorer written with torch may return a 0-d tensor: that is its number. A tensor of several numbers is no
    score: 0 and counted, never an exception in the training step."""
    hook = build(f"{scorers}:tensor_score")
    scored = hook.score(turns_of(episode("abc", "pair")), [prompt("1")])
    assert scored.scores.tolist() == [[1.5, 0.0, 0.0]]  # len("abc") / 2; the pair scores 0
    assert scored.failed == 1 and scored.first_error.startswith("tensor_score returned Tensor 'tensor([1., 2.])'")


def test_failure_reasons_are_short_for_the_run_log(scorers):
    """A failure's reason goes to the run log: a returned value is quoted up to 40 characters, an exception's
    message by its first line, up to 120 characters."""
    hook = build(f"{scorers}:wordy")
    scored = hook.score(turns_of(episode("long")), [prompt("1")])
    assert scored.first_error == f"wordy returned str {'w' * 40!r}, not a number"
    scored = hook.score(turns_of(episode("boom")), [prompt("1")])
    assert scored.first_error == "wordy raised RuntimeError: " + ("first line " + "x" * 200)[:120]


def test_a_builtin_without_a_signature_is_accepted_and_its_calls_tell(scorers):
    """A function whose signature cannot be read (some builtins) is not refused at build time (it may well take
    two arguments); what its calls do is counted as any scorer's failures are."""
    hook = build("math:log")
    scored = hook.score(turns_of(episode("ab")), [prompt("1")])
    assert scored.failed == 1 and scored.first_error.startswith("log raised TypeError")


def test_a_prompt_or_record_per_row_missing_is_the_callers_bug_not_a_silent_shift(scorers):
    """score(turns, prompts) pairs row b with prompts[b] and records[b]: one too few of either would score rows
    against another row's prompt (zip stops early), so each mismatch is a ValueError naming the counts."""
    hook = build(f"{scorers}:length")
    turns = turns_of(episode("a"), episode("b"))
    with pytest.raises(ValueError, match="^1 prompts and 2 records for 2 rows$"):
        hook.score(turns, [prompt("1")])
    turns.records.pop()
    with pytest.raises(ValueError, match="^2 prompts and 1 records for 2 rows$"):
        hook.score(turns, [prompt("1"), prompt("2")])


def test_step_scores_are_float32_whatever_torch_s_default_dtype(scorers):
    """The scores are added to float32 advantages; a scorer module (user code) that sets torch's default dtype to
    float64 at import must not turn them into doubles."""
    hook = build(f"{scorers}:length")
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        scored = hook.score(turns_of(episode("ab")), [prompt("7")])
    finally:
        torch.set_default_dtype(before)
    assert scored.scores.dtype == torch.float32 and scored.scores.tolist() == [[3.0, 0.0, 0.0]]  # 2 + 1


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
