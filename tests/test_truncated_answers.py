"""A completion cut at max_new_tokens is never scored by a fallback reading: only an explicit final
answer (\\boxed{}, 'Answer:', '####', <answer>) counts in it, in the verifier and on every path the flag travels
(Rewarder, the reward service's worker processes and in-process transport, `rlvr verify`)."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from rlvr.cli.main import main
from rlvr.cluster.ray_rewards import VerifierActor
from rlvr.config.run import TaskConfig
from rlvr.evaluation.voting import extracted_answer
from rlvr.grpo.step_log import sample_rows
from rlvr.rewards.rewarder import Rewarder
from rlvr.rewards.service import RewardService
from rlvr.types import Outcome, Prompt, RolloutBatch, Verdict
from rlvr.verifiers.base import safe_verify
from rlvr.verifiers.math.cut import cut_mid_answer
from rlvr.verifiers.math.extract import EXPLICIT_KINDS, final_answer
from rlvr.verifiers.math.verifier import MathVerifier

# A word problem's ramble that stops on the reference number: the latex fallback reads its last number, 42.
RAMBLE = "Each box holds 6 rows of 7 eggs, so there are 6 * 7 = 42 eggs in the first box, and the second box has 42"


@pytest.mark.parametrize("mode", ["latex", "last_number"])
def test_a_truncated_ramble_ending_in_the_reference_scores_zero(mode: str) -> None:
    verifier = MathVerifier(mode=mode)
    assert verifier.verify(RAMBLE, "42").outcome is Outcome.CORRECT  # not truncated: as before, the fallback reads 42
    cut = verifier.verify(RAMBLE, "42", truncated=True)
    assert (cut.outcome, cut.score) == (Outcome.UNPARSEABLE, 0.0)
    assert cut.detail.startswith("cut at max_new_tokens without an explicit final answer")
    assert "'42'" in cut.detail


@pytest.mark.parametrize("ending", ["Answer: 42\n", "so the total is \\boxed{42}", "#### 42\nCheck",
                                    "<answer>42</answer>", "The answer is 42. So", "Answer: 42 eggs.",
                                    "\\boxed{42}. I hope this answer helps"])
def test_an_explicit_final_answer_still_counts_when_truncated(ending: str) -> None:
    verdict = MathVerifier(mode="latex").verify(f"{RAMBLE} eggs.\n{ending}", "42", truncated=True)
    assert (verdict.outcome, verdict.score) == (Outcome.CORRECT, 1.0)


def test_a_truncated_bare_number_is_a_fallback_too() -> None:
    # strict mode reads a completion that is only a number; cut, it may be the start of a longer one
    assert MathVerifier(mode="strict").verify("42", "42").outcome is Outcome.CORRECT
    assert MathVerifier(mode="strict").verify("42", "42", truncated=True).outcome is Outcome.UNPARSEABLE


def test_safe_verify_hands_the_flag_only_to_verifiers_that_read_it() -> None:
    class TwoArguments:  # a user's verifier written against the two-argument contract
        name = "mine"

        def verify(self, completion: str, reference: str) -> Verdict:
            return Verdict(Outcome.CORRECT, 1.0)

    assert safe_verify(TwoArguments(), RAMBLE, "42", truncated=True).outcome is Outcome.CORRECT  # not an ERROR
    assert safe_verify(MathVerifier(mode="latex"), RAMBLE, "42", truncated=True).outcome is Outcome.UNPARSEABLE


def batch(completions: list[str], truncated: list[bool]) -> RolloutBatch:
    n, zeros = len(completions), torch.zeros(len(completions), 3, dtype=torch.long)
    return RolloutBatch(prompts=[Prompt("p", ({"role": "user", "content": "q"},), "42")], group_size=n,
                        prompt_ids=zeros[:1], prompt_mask=zeros[:1], completion_ids=zeros, completion_mask=zeros,
                        sampling_logprobs=zeros.float(), completions=completions,
                        truncated=torch.tensor(truncated, dtype=torch.bool))


# one prompt, G = 3: the same ramble cut and not cut, and a cut completion with an explicit answer: rewards [0, 1, 1]
ROWS = batch([RAMBLE, RAMBLE, f"{RAMBLE}.\nAnswer: 42\n"], [True, False, True])
LATEX = TaskConfig(name="qa", answer_mode="latex")


def test_the_rewarder_reads_the_rollouts_truncation() -> None:
    assert Rewarder.from_task(LATEX).score_rollout(ROWS).rewards.tolist() == [0.0, 1.0, 1.0]


@pytest.mark.parametrize("workers", [0, 1])  # in the trainer's process, and in a worker process
def test_the_reward_service_reads_the_rollouts_truncation(workers: int) -> None:
    with RewardService.start(LATEX, workers=workers) as service:
        scored = service.submit_rollout(ROWS).result()
    assert scored.rewards.tolist() == [0.0, 1.0, 1.0]
    assert scored.verdicts["math"][0].detail.startswith("cut at max_new_tokens")


@pytest.mark.parametrize("workers", [0, 1])
def test_the_services_blocking_score_takes_the_flag_as_the_rewarders_does(workers: int) -> None:
    # score() stands in for Rewarder.score (evaluate() takes either): it took no `truncated` before, so a caller
    # passing the flag got a TypeError. Catches score() dropping the flag on its way to submit (rewards [1, 1, 1]).
    prompts = [ROWS.prompt_of(row) for row in range(ROWS.size)]
    with RewardService.start(LATEX, workers=workers) as service:
        scored = service.score(prompts, ROWS.completions, truncated=ROWS.truncated.tolist())
    assert scored.rewards.tolist() == [0.0, 1.0, 1.0]


def test_rlvr_verify_reads_a_lines_truncated_field(tmp_path: Path, capsys) -> None:
    path = tmp_path / "in.jsonl"
    lines = [{"completion": RAMBLE, "reference": "42", "truncated": True}, {"completion": RAMBLE, "reference": "42"},
             {"completion": RAMBLE, "reference": "42", "finish_reason": "length"},  # vLLM's / OpenAI's word for it
             {"completion": RAMBLE, "reference": "42", "finish_reason": "stop"}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert main(["verify", "task.answer_mode=latex", "--verifier", "math", "--input", str(path)]) == 0
    outcomes = [json.loads(line)["outcome"] for line in capsys.readouterr().out.splitlines()]
    assert outcomes == ["unparseable", "correct", "unparseable", "correct"]


@pytest.mark.parametrize("workers", [0, 1])
def test_a_plain_submit_without_the_flag_is_not_truncated(workers: int) -> None:
    # `submit` (evaluation, sampling: no RolloutBatch) without `truncated`: every completion ended, so the ramble's
    # fallback reading still counts there as before
    prompt = Prompt("p", ({"role": "user", "content": "q"},), "42")
    with RewardService.start(LATEX, workers=workers) as service:
        scored = service.submit([prompt], [RAMBLE]).result()
    assert scored.rewards.tolist() == [1.0]


@pytest.mark.parametrize(("ending", "reference"), [("Answer: 1", "1"), ("Answer: 0.", "0"), ("#### 42", "42"),
                                                   ("The answer is 42.", "42"), ("Answer: 42 ", "42"),
                                                   ("Answer: 42\nSo the answer is 42", "42"),
                                                   ("Answer: 4 hund", "4"), ("Answer: 4 doz", "4"),
                                                   ("Answer: 42 eggs", "42")])
def test_a_cut_answer_line_running_to_the_end_may_be_cut_mid_value(ending: str, reference: str) -> None:
    # "Answer: 1" cut could have been 12, "Answer: 0." 0.5, "Answer: 4 hund" 400: with nothing after the value before
    # the cut (no line break, no whole word after a space) it does not count. Catches dropping the cut_mid_answer
    # check in the verifier, and a word cut mid-way read as ending the value (_ENDED's '\w+\W').
    completion = f"{RAMBLE} eggs.\n{ending}"
    assert MathVerifier().verify(completion, reference).outcome is Outcome.CORRECT  # ended by the model: counts
    cut = MathVerifier().verify(completion, reference, truncated=True)
    assert (cut.outcome, cut.score) == (Outcome.UNPARSEABLE, 0.0) and "may have been cut" in cut.detail
    assert extracted_answer(completion, "strict", truncated=True) is None  # nor votes (catches it in voting)
    assert extracted_answer(completion, "strict") == reference


def test_an_unclosed_box_or_answer_tag_is_no_answer_when_cut() -> None:
    for ending in ("\\boxed{4", "<answer>4"):
        verdict = MathVerifier().verify(f"{RAMBLE} eggs.\n{ending}", "42", truncated=True)
        assert verdict.outcome is Outcome.UNPARSEABLE


def test_a_prose_correction_is_not_an_explicit_answer() -> None:
    # "\boxed{3}. Wait... the total is 4" is read as the correction 4; cut, that is the ramble's last word, not an
    # answer the model stated. Catches adding "correction" to EXPLICIT_KINDS.
    completion = "\\boxed{3}. Wait, the total is 4"
    assert final_answer(completion, "strict").kind == "correction" and "correction" not in EXPLICIT_KINDS
    assert MathVerifier().verify(completion, "4").outcome is Outcome.CORRECT
    assert MathVerifier().verify(completion, "4", truncated=True).outcome is Outcome.UNPARSEABLE
    assert extracted_answer(completion, "strict", truncated=True) is None


@pytest.mark.parametrize("value", ['"true"', "1", '"yes"', "null", "0"])
def test_rlvr_verify_a_mistyped_truncated_field_is_that_lines_error(tmp_path: Path, capsys, value: str) -> None:
    # only JSON true/false counts; "true" was read as not truncated, so the cut ramble scored 1. Catches dropping the
    # type check in parse_line (the line would then come out "correct").
    path = tmp_path / "in.jsonl"
    path.write_text(f'{{"completion": {json.dumps(RAMBLE)}, "reference": "42", "truncated": {value}}}\n'
                    f'{{"completion": {json.dumps(RAMBLE)}, "reference": "42", "truncated": false}}\n')
    main(["verify", "task.answer_mode=latex", "--verifier", "math", "--input", str(path)])
    first, second = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert first["outcome"] == "error" and "field 'truncated' must be true or false" in first["detail"]
    assert second["outcome"] == "correct"


def test_samples_jsonl_rows_record_truncation_and_verify_rechecks_them(tmp_path: Path, capsys) -> None:
    # the rows the trainer writes to samples.jsonl carry the flag, so `rlvr verify` re-scores them as training did:
    # [0, 1, 1]. Catches dropping the "truncated" key in step_log.sample_rows (every row would re-check as ended).
    rows = sample_rows(3, ROWS, Rewarder.from_task(LATEX).score_rollout(ROWS), limit=3)
    assert [row["truncated"] for row in rows] == [True, False, True]
    path = tmp_path / "samples.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert main(["verify", "task.answer_mode=latex", "--verifier", "math", "--input", str(path)]) == 0
    outcomes = [json.loads(line)["outcome"] for line in capsys.readouterr().out.splitlines()]
    assert outcomes == ["unparseable", "correct", "correct"]


def test_the_ray_verifier_actor_passes_the_flag_on() -> None:
    # VerifierActor is a plain class (Ray wraps it with ray.remote): called directly, no cluster. Catches dropping
    # `truncated` from its safe_verify call (the cut ramble would score 1).
    actor = VerifierActor(LATEX)
    assert [v.outcome for v in actor.verify(RAMBLE, "42", True)] == [Outcome.UNPARSEABLE]
    assert [v.outcome for v in actor.verify(RAMBLE, "42")] == [Outcome.CORRECT]


def cut(completion: str, text: str, written: str | None = None) -> bool:
    return cut_mid_answer(completion, SimpleNamespace(kind="answer_line", text=text, written=written or text))


def test_cut_mid_answer_reads_the_last_line_and_what_follows_the_value() -> None:
    # Each case decided by hand from the rule: the value may be a prefix of what the model was writing only when
    # nothing (no line break, no text after a space) follows it before the cut. A mutation each case catches:
    assert cut("Work.\nAnswer: 5\n", "5") is False  # a line break ends it (the last line taken 2 chars early: True)
    assert cut("Answer: 5\nthen 5", "5") is False  # stated on an earlier line (`span not in head`: True)
    assert cut("5 is 5", "5") is False  # text follows its first place on the line (search from 1: the second, True)
    assert cut("Answer: 0.5", "0.5", written="1/2") is True  # the written form is absent: the value runs to the cut
    # (taking a span found nowhere, start -1, reads 'swer: 0.5' after it: False)
    assert cut("Answer: 5\nI hope this answer helps", "5") is False  # 'answer' in prose, no 5 after it: stated
    # earlier (`not any(span not in head)`: True)
    assert cut("Answer: 5\nAnswer: x", "5") is True  # a new answer begun after it
    assert cut("Work.\nAnswer: 12", "12") is True  # runs to the cut: may be 120


def test_two_unrecordable_functions_keep_two_names() -> None:
    from rlvr.rewards.functions import sort_passed

    first, second = (lambda completions, **_: [0.0]), (lambda completions, **_: [1.0])
    names = list(sort_passed([first, second]).unrecorded)
    # "<module>:<lambda>" then "#2" (a count from the other side, '#0', would read as a first of something)
    assert len(names) == 2 and names[1] == names[0] + "#2"
    assert names[0].endswith(":test_two_unrecordable_functions_keep_two_names.<locals>.<lambda>")


@pytest.mark.parametrize("ending", ["\\boxed{42}\n\nWait, let me recheck. Actually the answer is",
                                    "\\boxed{42}\n\nHmm, no. Answer:", "\\boxed{42}\n\\boxed{5",
                                    "\\boxed{42}. \\boxed{", "#### 42\n####", "<answer>42</answer>\n<answer>",
                                    "Answer: 42\nFinal answer", "\\boxed{42} so the answer would be"])
def test_an_earlier_answer_does_not_count_while_a_new_one_was_being_written(ending: str) -> None:
    # cut after a new answer marker, the model was stating another answer: the earlier one may not be its final one
    # (the whole text, 'Actually the answer is 5.', is wrong). Catches dropping _next_answer_started.
    completion = f"{RAMBLE} eggs.\n{ending}"
    cut = MathVerifier(mode="latex").verify(completion, "42", truncated=True)
    assert (cut.outcome, cut.score) == (Outcome.UNPARSEABLE, 0.0), cut
    assert extracted_answer(completion, "latex", truncated=True) is None
