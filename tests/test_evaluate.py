"""Evaluation (evaluation/evaluate.py): the estimators wired to scripted completions with hand-derived numbers, the
reward model counting in best-of-k but never in correctness, breakdowns, the JSON keys, and evaluate_model on a tiny
random model."""
from __future__ import annotations

import json

import pytest
import torch

from rlvr.cli.main import main
from rlvr.config.run import ConfigError, EvalConfig, load_config
from rlvr.evaluation.evaluate import EvalResult, evaluate, evaluate_model, problem_samples
from rlvr.rewards.rewarder import Rewarder
from rlvr.types import Prompt, RolloutBatch
from rlvr.verifiers.format import AnswerLineVerifier
from rlvr.verifiers.math.verifier import MathVerifier

torch.set_num_threads(1)

A = Prompt("t/a", ({"role": "user", "content": "What is 7 * 8?"},), "56", {"level": 1, "op": "*"})
B = Prompt("t/b", ({"role": "user", "content": "What is 3 + 4?"},), "7", {"level": 1, "op": "+"})
SAMPLED = {"t/a": ["Answer: 56", "Answer: 56.0", "Answer: 54", "no answer"],
           "t/b": ["Answer: 8", "Answer: 8", "Answer: 7", "Answer: 9"]}
GREEDY = {"t/a": "Answer: 56", "t/b": "Answer: 9"}


class ScriptedEngine:
    """Returns fixed completions (`sampled`, `greedy`; default SAMPLED, GREEDY; 'Answer: 0' for other prompts): one
    token per character, 'no answer' marked truncated."""

    def __init__(self, sampled: dict[str, list[str]] | None = None, greedy: dict[str, str] | None = None):
        self.calls: list[float] = []
        self.sampled, self.greedy = sampled or SAMPLED, greedy or GREEDY

    def generate(self, prompts: list[Prompt], group_size: int, sampling) -> RolloutBatch:
        self.calls.append(sampling.temperature)
        texts = [t for p in prompts for t in (self.sampled.get(p.id, ["Answer: 0"] * 8)[:group_size]
                                              if sampling.temperature > 0
                                              else [self.greedy.get(p.id, "Answer: 0")] * group_size)]
        width = max(map(len, texts))
        mask = torch.tensor([[1] * len(t) + [0] * (width - len(t)) for t in texts])  # [B, C]
        return RolloutBatch(prompts=list(prompts), group_size=group_size, prompt_ids=torch.zeros(len(prompts), 1),
                            prompt_mask=torch.ones(len(prompts), 1), completion_ids=mask.clone(), completion_mask=mask,
                            sampling_logprobs=torch.zeros(mask.shape), completions=texts,
                            truncated=torch.tensor([t == "no answer" for t in texts]))


def prefers_eight(prompts, completions, **columns):
    """A 'reward model' that loves the wrong answer 8: its 1.0 is a CORRECT verdict, yet never correctness."""
    return [1.0 if c == "Answer: 8" else 0.0 for c in completions]


def rewarder() -> Rewarder:
    return Rewarder({"math": (MathVerifier(), 1.0), "answer_format": (AnswerLineVerifier(), 0.0),
                     "reward_model": (prefers_eight, 1.0)})


def run_eval(**settings) -> tuple[EvalResult, ScriptedEngine]:
    engine = ScriptedEngine()
    config = EvalConfig(samples=4, batch_size=1, ks=[1, 2, 4, 8], **settings)
    return evaluate(engine, rewarder(), [A, B], config, max_new_tokens=16), engine


def test_estimators_from_scripted_samples():
    result, engine = run_eval()
    # A: correct T T F F, answers 56 56 54 -; B: correct F F T F, answers 8 8 7 9 (see SAMPLED)
    # pass@1 = (2/4 + 1/4) / 2 = 0.375; pass@2: A 1 - C(2,2)/C(4,2) = 5/6, B 1 - C(3,2)/6 = 1/2 -> 2/3
    assert result.pass_at_1 == 0.375
    assert result.pass_at_k[2] == pytest.approx(2 / 3, abs=1e-15) and result.pass_at_k[4] == 1.0
    # maj@2: A's pairs lose only {54, -}: 5/6; B's pairs win only {7, 9} (a 1-1 tie, 7 seen first): 1/6 -> 1/2.
    # maj@4: A votes 56 (right), B votes 8 (wrong) -> 1/2
    assert result.maj_at_k == {1: 0.375, 2: 0.5, 4: 0.5}
    # best-of: total reward = math + reward model. A: [1, 1, 0, 0]; B: [1, 1, 1, 0] (the two 8s score 1 from
    # the reward model, the 7 from math). best_of_2: A 5/6 (samples 0, 1 ranked first), B 1/6 (sample 2 wins
    # only the pair {2, 3}); best_of_4: A sample 0 (right), B sample 0 (tie, earliest; wrong) -> 1/2
    assert result.best_of_k[2] == pytest.approx(0.5, abs=1e-15) and result.best_of_k[4] == 0.5
    assert 8 not in result.pass_at_k  # k > n skipped
    assert result.greedy == 0.5  # A's greedy 56 right, B's 9 wrong
    assert engine.calls == [0.6, 0.6, 0.0, 0.0]  # 2 sampled chunks (batch_size 1), then greedy


def test_reward_model_never_makes_a_sample_correct():
    result, _ = run_eval()
    b = result.breakdown["op"]["+"]
    assert b.pass_at[1] == 0.25  # only the 7 is correct, though the reward model's verdict on the 8s is CORRECT
    assert result.outcomes["reward_model/correct"] == 2 and result.outcomes["math/correct"] == 3


def test_length_truncation_breakdown_and_greedy_off():
    result, engine = run_eval(greedy=False)
    # one token per character: A 10 + 12 + 10 + 9, B 9 + 9 + 9 + 9 -> 77 / 8
    assert result.mean_length == 77 / 8 and result.truncated == 1 / 8
    assert result.greedy is None and 0.0 not in engine.calls
    by_op = result.breakdown["op"]
    assert set(by_op) == {"*", "+"} and by_op["*"].problems == 1 and by_op["*"].pass_at[1] == 0.5
    assert by_op["*"].maj_at[4] == 1.0 and by_op["+"].maj_at[4] == 0.0
    assert result.breakdown["level"]["1"].problems == 2


def test_json_keys_are_flat_and_plot_ready():
    result, _ = run_eval()
    data = json.loads(json.dumps(result.as_json()))
    for key in ("pass@1", "pass@2", "pass@4", "maj@4", "best_of_4", "mean_length", "truncated", "greedy"):
        assert isinstance(data[key], float), key
    assert data["breakdown"]["op"]["+"]["pass@1"] == 0.25 and data["breakdown"]["level"]["1"]["problems"] == 2
    assert result.metrics()["eval/maj@4"] == 0.5 and "eval/breakdown" not in result.metrics()
    assert "maj@4 0.500" in result.summary()


def test_no_majority_vote_without_an_answer_extractor():
    engine = ScriptedEngine()
    only_format = Rewarder({"answer_format": (AnswerLineVerifier(), 1.0)})
    result = evaluate(engine, only_format, [A], EvalConfig(samples=4, greedy=False), max_new_tokens=16)
    assert result.maj_at_k == {} and "maj@4" not in result.as_json()
    assert result.pass_at_1 == 0.75  # three of A's four completions end with an 'Answer:' line


def test_evaluate_model_on_a_tiny_model(tiny_model_dir):
    config = load_config(None, ["eval.size=3", "eval.samples=2", "eval.ks=[1,2,4]", "rollout.max_new_tokens=8",
                                "eval.greedy=false"])
    result = evaluate_model(config, str(tiny_model_dir))
    data = result.as_json()
    assert data["problems"] == 3 and data["samples_per_problem"] == 2 and data["greedy"] is None
    assert {"pass@1", "pass@2", "maj@2", "best_of_2"} <= set(data) and "pass@4" not in data
    assert 1.0 <= data["mean_length"] <= 8.0
    assert set(data["breakdown"]) == {"level", "op", "set"}  # arithmetic's "set": level and phrasing
    assert set(data["breakdown"]["set"]) == {"L1 symbols"}
    assert config.model.name_or_path != str(tiny_model_dir)  # the caller's config is not modified


def test_eval_command_json_table_and_file(tiny_model_dir, tmp_path, capsys):
    output = tmp_path / "e.json"
    code = main(["eval", str(tiny_model_dir), "rollout.max_new_tokens=6", "--n", "2", "--size", "2", "--k", "1,2",
                 "--no-greedy", "--output", str(output)])
    out, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads(out)
    assert data == json.loads(output.read_text()) and data["greedy"] is None and data["problems"] == 2
    assert {"pass@2", "maj@2", "best_of_2", "mean_length", "breakdown"} <= set(data) and "pass@4" not in data
    assert "pass@k" in err and "pass@1 by op" in err


# ---------------------------------------------------------------- sets, per-value greedy, reasoning
def test_each_breakdown_value_has_its_greedy_and_its_problems_pass_rates():
    result, _ = run_eval()
    data = json.loads(json.dumps(result.as_json()))
    # A (op *): samples T T F F -> 0.5, greedy 56 right; B (op +): F F T F -> 0.25, greedy 9 wrong
    # mutation caught: Summary.greedy left None (or read from the first problem only: level 1 would say 1.0)
    assert data["breakdown"]["op"]["*"]["greedy"] == 1.0 and data["breakdown"]["op"]["+"]["greedy"] == 0.0
    assert data["breakdown"]["level"]["1"]["greedy"] == 0.5 and data["greedy"] == 0.5
    # prompt order kept (A before B). mutation caught: sorting the pass rates ([0.25, 0.5])
    assert data["breakdown"]["level"]["1"]["per_problem_pass@1"] == [0.5, 0.25]
    assert data["breakdown"]["op"]["+"]["per_problem_pass@1"] == [0.25] and data["per_problem_pass@1"] == [0.5, 0.25]
    off, _ = run_eval(greedy=False)
    assert off.breakdown["level"]["1"].greedy is None and off.as_json()["breakdown"]["op"]["*"]["greedy"] is None


C = Prompt("t/c", ({"role": "user", "content": "What is 47 * 6?"},), "282", {"level": 2, "op": "*"})
THOUGHT = {"t/c": ["<think>47 * 6 = 240 + 42 = 282</think> Answer: 282",  # 9 think words, 2 steps right
                   "<think>wait, 47 * 6 = 272</think> Answer: 272",  # 6 words, reflection, 1 step wrong
                   "Answer: 282",  # no think section, no step
                   "<think>I know it</think> Answer: 282"]}  # 3 words, no step


def test_reasoning_measures_per_summary_by_hand():
    engine = ScriptedEngine(THOUGHT, {"t/c": "Answer: 282"})
    math_only = Rewarder({"math": (MathVerifier(), 1.0)})
    result = evaluate(engine, math_only, [C], EvalConfig(samples=4, ks=[1]), max_new_tokens=64)
    # think words (9 + 6 + 0 + 3) / 4 = 4.5; reflection 1/4 ("wait,"); stated samples 1 and 2 -> 2/4;
    # right: sample 1 only -> 1/4 of all samples, 1/2 of those stating a step
    expected = {"think_words": 4.5, "reflection_rate": 0.25, "steps_stated": 0.5, "steps_right": 0.25,
                "steps_right_given_stated": 0.5}
    data = result.as_json()
    # mutation caught: steps_right over the stated samples only (0.5), or reflection read in the think text of
    # sample 1 only; the per-level value must carry the same numbers
    assert {key: data[key] for key in expected} == expected
    assert {key: data["breakdown"]["level"]["2"][key] for key in expected} == expected
    assert "think 4.5 words" in result.summary() and "steps right 0.250" in result.summary()
    # "know" and "wait" as phrases: samples 2 and 4 reflect -> 2/4. mutation caught: phrases not passed to collect
    known = evaluate(engine, math_only, [C], EvalConfig(samples=4, ks=[1], greedy=False), max_new_tokens=64,
                     reflection_phrases=["know", "wait"])
    assert known.reasoning.reflection_rate == 0.5


def test_eval_sets_tag_prompts_with_their_label_in_order():
    from rlvr.evaluation.sets import evaluation_prompts

    config = load_config(None, ["task.level=3", "eval.size=2",
                                "eval.sets=[{level: 1}, {level: 2, one_shot: false}, {}]"])
    prompts = evaluation_prompts(config)
    # two of each set, set after set; {} is task itself (level 3). mutation caught: labels from the last set only
    assert [(p.columns["level"], p.columns["set"]) for p in prompts] == [
        (1, "level=1"), (1, "level=1"), (2, "level=2 one_shot=False"), (2, "level=2 one_shot=False"),
        (3, "task"), (3, "task")]
    assert len({p.id for p in prompts}) == 6
    assert len(prompts[2].messages) < len(prompts[0].messages)  # one_shot off: no solved example turn
    plain = load_config(None, ["eval.size=2"])
    # no sets: the task's own prompts, untouched (arithmetic writes its own "level phrasing" set column)
    assert evaluation_prompts(plain)[0].columns["set"] == "L1 symbols"


def test_a_set_label_replaces_the_tasks_own_set_column(monkeypatch):
    from rlvr.config.rules import REGISTERED_TASKS
    from rlvr.evaluation.sets import evaluation_prompts
    from rlvr.tasks import TASKS

    class Tagged:  # a task that writes its own "set" column
        name = "tagged"

        def __init__(self, task):
            self.level = task.level

        def eval_prompts(self, size):
            return [Prompt(f"tagged-l{self.level}/{i}", (), "1", {"set": "own"}) for i in range(size)]

    monkeypatch.setitem(TASKS, "tagged", Tagged)
    monkeypatch.setitem(REGISTERED_TASKS, "tagged", False)
    config = load_config(None, ["task.name=tagged", "eval.size=1", "eval.sets=[{level: 2}]"])
    # mutation caught: merging {"set": label, **columns} (the task's "own" would win)
    assert evaluation_prompts(config)[0].columns == {"set": "level=2"}


def test_bad_eval_sets_are_config_errors_before_any_model_loads():
    # mutation caught: dropping _eval_set_problems from run_config_problems (the typo would pass silently)
    with pytest.raises(ConfigError, match=r"eval.sets\[1\]: unknown task key\(s\) \['levl'\] \(did you mean 'level'"):
        load_config(None, ["eval.sets=[{level: 2}, {levl: 3}]"])
    with pytest.raises(ConfigError, match=r"eval.sets\[0\]: \['verifiers'\] cannot vary per set"):
        load_config(None, ["eval.sets=[{verifiers: {math: 1.0}}]"])
    with pytest.raises(ConfigError, match=r"eval.sets\[0\]: level: Input should be less than or equal to 4"):
        load_config(None, ["eval.sets=[{level: 7}]"])
    twice = load_config(None, ["eval.size=2", "eval.sets=[{level: 2}, {level: 2}]"])
    # the same level twice: same prompt ids. A model path that does not exist proves no model was loaded first
    # (mutation caught: building the prompts after load_tokenizer raises OSError instead)
    with pytest.raises(ConfigError, match=r"eval.sets\[1\] \(level=2\) holds prompt 'arithmetic-l2/eval/"):
        evaluate_model(twice, "/nonexistent/model")


def test_training_evaluation_reads_every_set(tmp_path):
    from types import SimpleNamespace

    from rlvr.grpo.loop import run_eval as loop_eval
    from rlvr.metrics.progress import SILENT
    from rlvr.tasks import build_task

    config = load_config(None, ["eval.size=2", "eval.samples=2", "eval.ks=[1]", "eval.greedy=false",
                                "eval.sets=[{level: 1}, {level: 2}]"])
    run = SimpleNamespace(config=config, feed=SimpleNamespace(engine=ScriptedEngine()), rewarder=rewarder(),
                          task=build_task(config.task), eval_prompts=None, run_dir=tmp_path,
                          logger=SimpleNamespace(progress=SILENT, message=lambda text: None),
                          ranks=SimpleNamespace(is_main=True))
    result = loop_eval(run, step=3)
    # 'Answer: 0' is wrong on every held-out problem: pass@1 0 in both sets, 2 problems each
    # mutation caught: run_eval reading run.task.eval_prompts (one set of 2 problems, no "set" breakdown)
    assert {value: s.problems for value, s in result.breakdown["set"].items()} == {"level=1": 2, "level=2": 2}
    written = json.loads((tmp_path / "eval.jsonl").read_text())
    assert written["step"] == 3 and set(written["breakdown"]["set"]) == {"level=1", "level=2"}


def test_evaluate_model_over_sets_on_a_tiny_model(tiny_model_dir):
    config = load_config(None, ["eval.size=2", "eval.samples=1", "eval.ks=[1]", "rollout.max_new_tokens=4",
                                "eval.greedy=false", "eval.sets=[{level: 1}, {level: 2}]"])
    data = evaluate_model(config, str(tiny_model_dir)).as_json()
    assert data["problems"] == 4 and set(data["breakdown"]["set"]) == {"level=1", "level=2"}
    assert data["breakdown"]["level"]["2"]["problems"] == 2 and len(data["per_problem_pass@1"]) == 4
    assert data["think_words"] == 0.0  # 4 one-character tokens cannot write "<think>" (7) nor "</think>" (8)


def test_a_config_file_after_the_model_is_the_base_of_the_evaluation_config(tmp_path):
    """`rlvr eval embedded configs/agents/calculator.yaml` evaluates the base model on the task a preset trains, as
    `rlvr train PRESET` reads it; overrides still apply on top; a run directory keeps its own config.yaml."""
    from rlvr.evaluation.target import InferenceInputError, resolve_target

    preset = tmp_path / "preset.yaml"
    preset.write_text("task: {name: calculator, level: 2}\nepisode: {max_turns: 3}\n")
    model, config = resolve_target("some/model", None, [str(preset), "episode.max_turns=2"])
    assert model == "some/model" and config.model.name_or_path == "some/model"
    assert (config.task.name, config.task.level, config.episode.max_turns) == ("calculator", 2, 2)
    with pytest.raises(InferenceInputError, match="does not exist"):
        resolve_target("some/model", None, [str(tmp_path / "missing.yaml")])
    with pytest.raises(InferenceInputError, match="not a dotted.key=value override"):
        resolve_target("some/model", None, ["task.level=2", str(preset)])  # a config file comes first
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("task: {name: arithmetic}\n")
    with pytest.raises(InferenceInputError, match="run directory: it is evaluated with its own config.yaml"):
        resolve_target(str(run), None, [str(preset)])


def test_problem_samples_a_cut_completion_votes_only_with_an_explicit_answer():
    # The same ramble twice, the first cut at max_new_tokens: in last_number mode the cut one abstains from maj@k
    #, the ended one votes "7"; a cut explicit answer still votes. Catches bool(cut) -> False.
    texts = ["3 + 4 = 7", "3 + 4 = 7", "So \\boxed{7}.\nCheck"]
    mask = torch.ones(len(texts), 4)
    batch = RolloutBatch(prompts=[B], group_size=3, prompt_ids=torch.zeros(1, 1), prompt_mask=torch.ones(1, 1),
                         completion_ids=mask.long(), completion_mask=mask, sampling_logprobs=torch.zeros(mask.shape),
                         completions=texts, truncated=torch.tensor([True, False, True]))
    rewards = Rewarder({"math": (MathVerifier("last_number"), 1.0)})
    (record,) = problem_samples(batch, rewards.score_rollout(batch), ["math"], "last_number")
    assert record.answers == (None, "7", "7") and record.truncated == (True, False, True)
    assert record.correct == (False, True, True)
