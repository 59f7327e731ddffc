"""Inference-time scaling (rlvr.evaluation): thinking-budget forcing on a scripted model, the generate() API and
its choices, the scaling curves, and the `generate` / `eval --scaling` commands on a tiny random model."""
from __future__ import annotations

import json

import pytest
import torch

from rlvr.cli.main import main
from rlvr.config.run import EvalConfig, ModelConfig
from rlvr.evaluation.budget import CLOSE_TEXT, BudgetedEngine
from rlvr.evaluation.evaluate import ProblemSamples
from rlvr.evaluation.generate import choose, generate
from rlvr.evaluation.scaling import n_curve, run_scaling, table, write_csv
from rlvr.model.load import load_model, load_tokenizer
from rlvr.rewards.rewarder import Rewarder
from rlvr.rollout.base import SamplingParams
from rlvr.rollout.hf import HFRolloutEngine
from rlvr.types import Prompt
from rlvr.verifiers.math.verifier import MathVerifier

torch.set_num_threads(1)
PROMPT = Prompt("p/0", ({"role": "user", "content": "What is 3 + 4?"},), "7", {"level": 1, "op": "+"})
GREEDY = SamplingParams(0.0, 1.0, 40)


class Scripted(torch.nn.Module):
    """Wraps a tiny Llama (for its KV cache) but writes `script` one token per completion position: the position
    is read from the attention mask (real tokens so far minus the prompt's), so a second call that re-reads
    prompt + first part goes on with the script where it stopped. One prompt per batch (one prompt length)."""

    def __init__(self, inner, script_ids: list[int], prompt_len: int):
        super().__init__()
        self.inner, self.script, self.prompt_len = inner, torch.tensor(script_ids), prompt_len
        self.generation_config = inner.generation_config

    def forward(self, input_ids, attention_mask, **kwargs):
        out = self.inner(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        position = (attention_mask.sum(dim=1) - self.prompt_len).clamp(max=len(self.script) - 1)  # [R]
        logits = torch.full_like(out.logits, -1e4)  # [R, T, V]
        logits[torch.arange(len(position)), -1, self.script[position]] = 0.0
        out.logits = logits
        return out


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    config = ModelConfig(name_or_path=str(tiny_model_dir))
    return load_model(config, trainable=False), load_tokenizer(config)


def scripted_engine(tiny, text: str, eos: bool) -> HFRolloutEngine:
    model, tokenizer = tiny
    ids = tokenizer(text, add_special_tokens=False)["input_ids"] + ([tokenizer.eos_token_id] if eos else [])
    prompt_len = int(HFRolloutEngine(model, tokenizer).encode([PROMPT])[1].sum())
    return HFRolloutEngine(Scripted(model, ids, prompt_len), tokenizer)


def test_budget_appends_close_after_exactly_b_tokens_when_the_model_never_closes(tiny):
    _, tokenizer = tiny
    engine = scripted_engine(tiny, "x" * 200, eos=False)  # thinks forever, never writes </think>
    batch = BudgetedEngine(engine, think_budget=6, answer_tokens=3).generate([PROMPT], 2, GREEDY)
    close = tokenizer(CLOSE_TEXT, add_special_tokens=False)["input_ids"]
    x = tokenizer("x", add_special_tokens=False)["input_ids"]
    for row in range(2):
        ids = batch.completion_ids[row][batch.completion_mask[row] > 0].tolist()
        assert ids == x * 6 + close + x * 3  # B = 6 thinking tokens, the delimiter, 3 answer tokens
        assert batch.completions[row] == "xxxxxx" + CLOSE_TEXT + "xxx"
    assert batch.forced.tolist() == [True, True] and batch.truncated.tolist() == [True, True]
    assert batch.sampling_logprobs[0, 6:6 + len(close)].abs().sum() == 0  # forced tokens were not sampled


def test_budget_changes_nothing_for_a_model_that_closes_early(tiny):
    text = "<think>ab</think>Answer: 7"  # 17 characters of thinking, closed before the budget of 20
    engine = scripted_engine(tiny, text, eos=True)
    batch = BudgetedEngine(engine, think_budget=20, answer_tokens=3).generate([PROMPT], 1, GREEDY)
    plain = engine.generate([PROMPT], 1, GREEDY)
    assert batch.completions == plain.completions == [text]
    assert batch.completion_mask.sum().item() == plain.completion_mask.sum().item() == len(text) + 1  # + EOS
    assert batch.forced.tolist() == [False] and batch.truncated.tolist() == [False]


def test_budget_none_is_the_plain_engine_and_bad_budgets_are_refused(tiny):
    engine = scripted_engine(tiny, "Answer: 7", eos=True)
    assert BudgetedEngine(engine, None, 4).generate([PROMPT], 1, GREEDY).completions == ["Answer: 7"]
    with pytest.raises(ValueError, match="think budget"):
        BudgetedEngine(engine, 0, 4)
    with pytest.raises(ValueError, match="answer budget"):
        BudgetedEngine(engine, 4, 0)


def test_choose_follows_the_estimators_rules():
    assert choose("majority", ["8", "7", "7", None], None) == 1  # 7 has two votes: its first sample
    assert choose("majority", ["8", "7"], None) == 0  # 1-1 tie: the answer seen first
    assert choose("majority", [None, None], None) == 0  # every sample abstains
    assert choose("best_of", ["8", "7", "7"], [0.1, 0.9, 0.9]) == 1  # equal best scores: the earlier
    assert choose("sample", ["8", "7"], None) == 0


def test_generate_api_records(tiny):
    model, tokenizer = tiny
    rewarder = Rewarder({"math": (MathVerifier(), 1.0)})
    torch.manual_seed(0)
    results = generate(model, tokenizer, [PROMPT, "What is 2 + 2?"], 3, "best_of", scorer=rewarder,
                       think_budget=4, answer_budget=2, sampling=SamplingParams(1.0, 1.0, 8))
    assert [r.prompt.id for r in results] == ["p/0", "prompt/1"] and all(len(r.samples) == 3 for r in results)
    for r in results:
        scores = [s.score for s in r.samples]
        assert r.samples[r.chosen].score == max(scores) and r.text == r.samples[r.chosen].text
        assert sum(v.count for v in r.votes) == sum(s.answer is not None for s in r.samples)
        assert all(s.tokens <= 4 + len(CLOSE_TEXT) + 2 for s in r.samples)  # think budget + delimiter + answer
    json.dumps([r.as_json() for r in results])
    with pytest.raises(ValueError, match="scorer"):
        generate(model, tokenizer, [PROMPT], 2, "best_of")
    with pytest.raises(ValueError, match="mode"):
        generate(model, tokenizer, [PROMPT], 2, "vote")


def samples(correct: list[bool], answers: list[str | None]) -> ProblemSamples:
    n = len(correct)
    return ProblemSamples(PROMPT, tuple(correct), tuple(answers), tuple(map(float, correct)), (5,) * n, (False,) * n)


def test_n_curve_from_one_sample_set():
    problems = [samples([True, False, False, False], ["7", "8", "8", None]),
                samples([False, True, True, False], ["9", "7", "7", "6"])]
    curve = n_curve(problems, [1, 2, 4])
    assert [p.n for p in curve] == [1, 2, 4]
    # pass@4 = 1 for both; maj@4: 8 beats 7 in the first (0), 7 wins the second (1) -> 1/2; best-of with the
    # oracle scores used here is pass@N
    assert curve[-1].pass_at == 1.0 and curve[-1].majority == 0.5
    assert all(p.best_of == p.pass_at for p in curve)
    assert all(a.pass_at <= b.pass_at for a, b in zip(curve, curve[1:]))


def test_run_scaling_on_a_scripted_model(tiny, tmp_path):
    engine = scripted_engine(tiny, "x" * 200, eos=False)
    config = EvalConfig(samples=2, temperature=1.0, batch_size=4, answer_budget=3)
    result = run_scaling(engine, Rewarder({"math": (MathVerifier(), 1.0)}), [PROMPT], config, 12, [1, 2, 4], [3, 5],
                         "strict")
    assert [p.n for p in result.by_n] == [1, 2, 4] and [p.budget for p in result.by_budget] == [None, 3, 5]
    assert all(a.pass_at <= b.pass_at for a, b in zip(result.by_n, result.by_n[1:]))
    close = len(CLOSE_TEXT)  # one token per character
    assert [p.mean_length for p in result.by_budget] == [12, 3 + close + 3, 5 + close + 3]
    assert [p.forced for p in result.by_budget] == [0.0, 1.0, 1.0]
    assert "maj@N" in table(result) and json.dumps(result.as_json())
    rows = write_csv(result, tmp_path / "s.csv").read_text().splitlines()
    assert rows[0] == "curve,x,metric,value" and len(rows) == 1 + 3 * 3 + 3


def test_generate_command(tiny_model_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = main(["generate", str(tiny_model_dir), "rollout.max_new_tokens=6", "--prompt", "What is 7 * 8?",
                 "--n", "3", "--think-budget", "3", "--mode", "best-of", "--reference", "56", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads(out)
    assert len(data["samples"]) == 3 and data["mode"] == "best_of" and "chosen (best_of)" in err


@pytest.mark.parametrize("extra,fragment", [
    (["--prompt", " "], "--prompt"), (["--prompt", "q", "--mode", "best-of"], "--reference"),
    (["--prompt", "q", "--think-budget", "0"], "--think-budget"), (["--prompt", "q", "--n", "0"], "eval.samples"),
    (["nokey", "--prompt", "q"], "dotted.key=value")])
def test_generate_command_errors_are_one_line(tmp_path, capsys, extra, fragment):
    code = main(["generate", str(tmp_path / "no-such-model"), *extra])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("rlvr: error: ") and fragment in err, err


def test_generate_command_missing_model(tmp_path, capsys):
    code = main(["generate", str(tmp_path / "no-such-model"), "--prompt", "What is 1 + 1?"])
    err = capsys.readouterr().err
    assert code == 2 and "does not exist" in err and err.count("\n") == 1


def test_eval_scaling_command(tiny_model_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = main(["eval", str(tiny_model_dir), "rollout.max_new_tokens=6", "--scaling", "--size", "2", "--n", "1",
                 "--n-list", "1,2", "--budgets", "2"])
    out, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads(out)
    assert [p["n"] for p in data["by_n"]] == [1, 2] and [p["budget"] for p in data["by_budget"]] == [None, 2]
    assert json.loads((tmp_path / "scaling.json").read_text()) == data
    assert (tmp_path / data["plot"]).is_file() and "accuracy against N" in err


@pytest.mark.parametrize("mode", ["best_of", "majority"])
def test_generate_a_cut_ramble_ending_in_the_reference_neither_scores_nor_votes(tiny, mode):
    # Scripted "3 + 4 = 7" with no EOS, cut at exactly its length: truncated, and its last number is the reference.
    # In last_number mode it got 1.0 and voted "7" when scored without the cut flag; with it, only an
    # explicit answer counts. Mutations caught: dropping truncated= from the scorer call, or from extracted_answer.
    model, tokenizer = tiny
    scorer = Rewarder({"math": (MathVerifier("last_number"), 1.0)})
    text = "3 + 4 = 7"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    engine = scripted_engine(tiny, text, eos=False)
    (cut,) = generate(engine.model, tokenizer, [PROMPT], 2, mode, scorer=scorer, answer_mode="last_number",
                      sampling=SamplingParams(0.0, 1.0, len(ids)))
    assert [s.text for s in cut.samples] == [text, text] and all(s.truncated for s in cut.samples)
    assert [s.score for s in cut.samples] == [0.0, 0.0]
    assert [s.answer for s in cut.samples] == [None, None] and cut.answer is None and cut.votes == ()
    ended = scripted_engine(tiny, text, eos=True)  # the same text ended by the model: scores and votes
    (done,) = generate(ended.model, tokenizer, [PROMPT], 2, mode, scorer=scorer, answer_mode="last_number",
                       sampling=SamplingParams(0.0, 1.0, len(ids) + 4))
    assert [s.score for s in done.samples] == [1.0, 1.0] and done.answer == "7"


def test_scores_of_passes_the_cut_flags_to_rewarders_and_pools_only():
    # "3 + 4 = 7" cut: 0 from a Rewarder and from a reward pool (flags passed), while a plain two-argument scorer
    # is still called as before. Catches dropping the flags on either path, or passing them to a plain callable.
    from rlvr.config.run import TaskConfig
    from rlvr.evaluation.generate import scores_of
    from rlvr.rewards.service import RewardService

    rows, texts = [PROMPT, PROMPT], ["3 + 4 = 7", "3 + 4 = 7"]
    rewarder = Rewarder({"math": (MathVerifier("last_number"), 1.0)})
    assert scores_of(rewarder, rows, texts, [True, False]) == [0.0, 1.0]
    with RewardService.start(TaskConfig(name="qa", answer_mode="last_number"), workers=0) as pool:
        assert scores_of(pool, rows, texts, [True, False]) == [0.0, 1.0]
    assert scores_of(lambda prompts, completions: [0.5] * len(completions), rows, texts, [True, False]) == [0.5, 0.5]
