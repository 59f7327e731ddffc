"""Rejection sampling's pure parts: which samples are kept, general-data mixing, the progress
file, prompt drawing, and the distillation tokenizer check on tiny character-level tokenizers."""
from __future__ import annotations

import json
import string
from itertools import count

import pytest

from rlvr.errors import UserFacingError
from rlvr.sampling import SampleError
from rlvr.sampling.mix import general_count, plan_mix, read_general_rows, row_problem, shuffled
from rlvr.sampling.records import (
    PROGRESS,
    PromptRecord,
    append_progress,
    batch_seed,
    draw_distinct,
    load_progress,
    model_step,
)
from rlvr.sampling.select import Candidate, is_correct, normalise_text, select_best
from rlvr.sampling.tokenizers import check_student_tokenizer
from rlvr.tasks.base import sample_forever
from rlvr.types import Outcome, Prompt

C, W = Outcome.CORRECT, Outcome.WRONG
MATH = {"math": 1.0}


def cand(index, length, reward=1.0, text=None, verdicts=None, scorable=True, ended=True) -> Candidate:
    return Candidate(index=index, text=text if text is not None else f"answer {index}", length=length,
                     reward=reward, verdicts=verdicts if verdicts is not None else {"math": C}, scorable=scorable,
                     ended=ended)


# --- correctness ---------------------------------------------------------------------------------------

def test_correct_needs_every_positive_weight_verifier_but_not_the_reward_model():
    weights = {"math": 1.0, "format": 0.5, "tag_count": 0.0, "reward_model": 1.0}
    ok = cand(0, 3, verdicts={"math": C, "format": C, "tag_count": W, "reward_model": W})
    bad_format = cand(1, 3, verdicts={"math": C, "format": W, "tag_count": C, "reward_model": C})
    assert is_correct(ok, weights)  # tag_count has weight 0, the reward model is not a verifier
    assert not is_correct(bad_format, weights)


def test_unscorable_or_ungated_is_never_correct():
    assert not is_correct(cand(0, 3, scorable=False), MATH)  # the reference could not be read
    assert not is_correct(cand(0, 3, verdicts={"reward_model": C}), {"reward_model": 1.0})  # nothing verifies


def test_a_candidate_built_without_an_end_counts_as_ended():
    # older callers build candidates without `ended`: they keep their meaning
    assert Candidate(index=0, text="4", length=2, reward=1.0, verdicts={"math": C}).ended is True
    assert is_correct(Candidate(index=0, text="4", length=2, reward=1.0, verdicts={"math": C}), MATH)


def test_a_completion_cut_by_the_token_budget_is_never_kept():
    # trained on with an end-of-turn token after it, a cut text would teach stopping mid-text
    cut, whole = cand(0, 2, ended=False), cand(1, 9)
    assert not is_correct(cut, MATH) and is_correct(whole, MATH)
    selection = select_best([cut, whole], keep=1, rule="shortest", weights=MATH)
    assert selection.kept == (whole,) and selection.correct == 1  # the shorter cut one is neither kept nor counted


# --- selection -------------------------------------------------------------------------------------------

def test_shortest_breaks_length_ties_by_reward_then_order():
    # lengths 5, 3, 3, 7, 3 with rewards 1, 1.2, 1.5, 2, 1.5: the three of length 3 come first; of those,
    # reward 1.5 (indices 2 and 4, tied -> sample order 2, 4) before 1.2 (index 1)
    samples = [cand(0, 5, 1.0), cand(1, 3, 1.2), cand(2, 3, 1.5), cand(3, 7, 2.0), cand(4, 3, 1.5)]
    picked = select_best(samples, 3, "shortest", MATH)
    assert [c.index for c in picked.kept] == [2, 4, 1]
    assert (picked.correct, picked.distinct) == (5, 5)


def test_reward_breaks_reward_ties_by_length_then_order():
    # rewards 1.5, 2, 2, 1, 2 with lengths 4, 9, 6, 2, 6: reward 2 first (indices 1, 2, 4); of those the
    # shorter 6 (indices 2, 4 -> order) before 9 (index 1)
    samples = [cand(0, 4, 1.5), cand(1, 9, 2.0), cand(2, 6, 2.0), cand(3, 2, 1.0), cand(4, 6, 2.0)]
    assert [c.index for c in select_best(samples, 4, "reward", MATH).kept] == [2, 4, 1, 0]


def test_wrong_samples_are_never_kept_even_when_shortest():
    samples = [cand(0, 1, 0.0, verdicts={"math": W}), cand(1, 9), cand(2, 2, verdicts={"math": Outcome.TIMEOUT})]
    picked = select_best(samples, 2, "shortest", MATH)
    assert [c.index for c in picked.kept] == [1]  # k = 2 wanted, only one correct exists
    assert picked.correct == 1


def test_duplicates_up_to_whitespace_count_once_and_the_best_copy_stands():
    # "x = 1\n\nAnswer: 1" and " x = 1 Answer:  1 " normalise to the same text; the copy with length 4 ranks
    # before the one with length 6 under "shortest", so index 2 stands for it; then index 1 ("other")
    samples = [cand(0, 6, text="x = 1\n\nAnswer: 1"), cand(1, 5, text="other"), cand(2, 4, text=" x = 1 Answer:  1 ")]
    picked = select_best(samples, 3, "shortest", MATH)
    assert [c.index for c in picked.kept] == [2, 1]
    assert (picked.correct, picked.distinct) == (3, 2)
    assert normalise_text(" a \n\t b ") == "a b"


def test_keep_must_be_positive():
    with pytest.raises(ValueError, match="keep"):
        select_best([cand(0, 1)], 0, "shortest", MATH)


# --- mixing ----------------------------------------------------------------------------------------------

def chat(i: int) -> dict:
    return {"id": f"g{i}", "messages": [{"role": "user", "content": f"hi {i}"},
                                        {"role": "assistant", "content": f"hello {i}"}]}


def test_general_count_makes_the_ratio():
    # g / (kept + g) = ratio -> g = kept * ratio / (1 - ratio): 9 * 0.25 / 0.75 = 3, 10 * 0.5 / 0.5 = 10,
    # 7 * 0.1 / 0.9 = 0.78 -> 1, and ratio 0 adds nothing
    counts = [general_count(9, 0.25), general_count(10, 0.5), general_count(7, 0.1), general_count(5, 0.0)]
    assert counts == [3, 10, 1, 0]


def test_plan_mix_is_seeded_and_uses_replacement_only_when_short():
    rows = [chat(i) for i in range(5)]
    plan = plan_mix(rows, kept=6, ratio=0.25, seed=3)  # 6 * 0.25 / 0.75 = 2 rows
    assert len(plan.rows) == 2 and not plan.with_replacement
    assert len({r["id"] for r in plan.rows}) == 2 and all(r["source"] == "general" for r in plan.rows)
    assert plan == plan_mix(rows, kept=6, ratio=0.25, seed=3)
    short = plan_mix(rows, kept=9, ratio=0.5, seed=3)  # 9 wanted, 5 available
    assert len(short.rows) == 9 and short.with_replacement and short.available == 5
    assert shuffled(list(range(10)), 1) == shuffled(list(range(10)), 1) != list(range(10))


@pytest.mark.parametrize("line, message", [
    ("{not json", "line 2: not JSON"),
    ('{"text": "hi"}', "line 2: no 'messages'"),
    ('{"messages": [{"role": "bot", "content": "x"}]}', "role 'bot'"),
    ('{"messages": [{"role": "user", "content": "x"}]}', "no assistant turn"),
    ('{"messages": [{"role": "user", "content": 3}]}', "string 'content'"),
])
def test_bad_general_file_is_one_clear_error(tmp_path, line, message):
    path = tmp_path / "general.jsonl"
    path.write_text(json.dumps(chat(0)) + "\n" + line + "\n")
    with pytest.raises(SampleError, match="sample.mix_path") as err:
        read_general_rows(path)
    assert message in str(err.value)
    assert isinstance(err.value, UserFacingError)


def test_general_file_missing_or_empty(tmp_path):
    with pytest.raises(SampleError, match="does not exist"):
        read_general_rows(tmp_path / "nope.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(SampleError, match="no rows"):
        read_general_rows(tmp_path / "empty.jsonl")
    assert row_problem(chat(1)) is None


# --- prompts, seeds, progress --------------------------------------------------------------------------

def prompt(i: int) -> Prompt:
    return Prompt(id=f"p{i}", messages=({"role": "user", "content": f"q{i}"},), reference=str(i))


def test_draw_distinct_keeps_first_occurrence_order():
    stream = iter([prompt(i) for i in (3, 1, 3, 2, 1, 5)])
    drawn = draw_distinct(stream, 3)
    assert [p.id for p in drawn.prompts] == ["p3", "p1", "p2"] and drawn.draws == 4 and not drawn.exhausted


def test_draw_distinct_stops_when_the_split_is_smaller():
    drawn = draw_distinct(sample_forever([prompt(i) for i in range(5)], seed=0), 50)
    assert sorted(p.id for p in drawn.prompts) == [f"p{i}" for i in range(5)] and drawn.exhausted
    # after the 5th new prompt, 20 x 5 = 100 repeats in a row end the draw
    assert drawn.draws >= 100


def test_batch_seed_depends_on_seed_and_batch_only():
    assert batch_seed(0, 1) == batch_seed(0, 1)
    assert len({batch_seed(0, 0), batch_seed(0, 1), batch_seed(1, 0)}) == 3
    assert 0 <= batch_seed(7, 3) < 2**63


def test_progress_round_trip_and_torn_line(tmp_path):
    record = PromptRecord("p1", 0, (cand(0, 3, 1.5, verdicts={"math": C, "format": W}), cand(1, 4, scorable=False),
                                    cand(2, 5, ended=False)))
    append_progress(tmp_path, [record])
    (tmp_path / PROGRESS).open("a").write('{"id": "p2", "batch": 1, "cand')  # killed mid-write
    done = load_progress(tmp_path)
    assert list(done) == ["p1"] and done["p1"] == record
    assert (tmp_path / PROGRESS).read_text().count("\n") == 1 and "p2" not in (tmp_path / PROGRESS).read_text()


def test_progress_written_before_candidates_had_an_end_reads_them_as_ended(tmp_path):
    line = {"id": "p1", "batch": 0, "candidates": [{"text": "4", "length": 2, "reward": 1.0, "scorable": True,
                                                    "verdicts": {"math": "correct"}}]}
    (tmp_path / PROGRESS).write_text(json.dumps(line) + "\n")
    assert load_progress(tmp_path)["p1"].candidates[0].ended is True


def test_model_step_reads_checkpoints_and_final(tmp_path):
    checkpoint = tmp_path / "run" / "checkpoints" / "step-000012"
    (checkpoint / "model").mkdir(parents=True)
    (checkpoint / "manifest.json").write_text(json.dumps({"format": 1, "step": 12, "files": []}))
    (tmp_path / "run" / "final").mkdir()
    (tmp_path / "run" / "metrics.jsonl").write_text('{"step": 1}\n{"step": 2}\n{"step": 20}\n')
    assert model_step(str(checkpoint / "model")) == 12
    assert model_step(str(tmp_path / "run" / "final")) == 20
    assert model_step(str(tmp_path)) is None and model_step("HuggingFaceTB/SmolLM2-135M-Instruct") is None


# --- distillation tokenizer check ------------------------------------------------------------------------

TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
TURNS = ({"role": "user", "content": "What is 2 + 3? End with 'Answer: <number>'."},)
TEXTS = [TURNS, (*TURNS, {"role": "assistant", "content": "<think>\n2 + 3 = 5\n</think>\nAnswer: 5"}), "Answer: 5"]


def char_tokenizer(alphabet: str = string.printable, specials: tuple[str, ...] = (), template: str | None = TEMPLATE,
                   max_length: int = 512):
    """One token per character, as tests/conftest.py builds it; `specials` become special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    base = ["<unk>", "<|im_start|>", "<|im_end|>"]
    vocab = {tok: i for i, tok in zip(count(), base + list(dict.fromkeys(alphabet)))}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    backend.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="<|im_end|>",
                                        model_max_length=max_length)
    tokenizer.add_special_tokens({"additional_special_tokens": base[1:] + list(specials)})
    tokenizer.chat_template = template
    return tokenizer


def test_same_tokenizer_is_compatible_without_notes():
    notes: list[str] = []
    tokenizer = char_tokenizer()
    assert check_student_tokenizer(tokenizer, tokenizer, TEXTS, 32, on_info=notes.append) == []
    assert notes == []


def test_different_vocabulary_is_only_a_note():
    notes: list[str] = []
    teacher, student = char_tokenizer(), char_tokenizer(string.printable[::-1])  # same characters, other ids
    assert check_student_tokenizer(teacher, student, TEXTS, 32, on_info=notes.append) == []
    assert len(notes) == 1 and "vocabularies differ" in notes[0]


def test_student_without_chat_template():
    problems = check_student_tokenizer(char_tokenizer(), char_tokenizer(template=None), TEXTS, 32)
    assert len(problems) == 1 and "no chat template" in problems[0]


def test_lossy_student_and_lost_tags_are_problems():
    # no '?' in the student's alphabet: the question's '?' becomes <unk>; reported once, where it happens
    lossy = char_tokenizer(string.printable.replace("?", ""))
    problems = check_student_tokenizer(char_tokenizer(), lossy, TEXTS, 32)
    assert problems == ["a prompt rendered with its chat template does not survive the student's encode/decode: "
                        "\"hat is 2 + 3? End with '\" became 'hat is 2 + 3<unk> End wi'"]
    # <think> as a special token: skip_special_tokens drops it from the student's decoded outputs
    special = char_tokenizer(specials=("<think>", "</think>"))
    problems = check_student_tokenizer(char_tokenizer(), special, TEXTS, 32)
    assert sum("does not keep" in p for p in problems) == 2
    problems = check_student_tokenizer(special, char_tokenizer(), TEXTS, 32)  # the teacher's traces lose it
    assert sum("teacher's tokenizer treats" in p for p in problems) == 2


def test_prompt_plus_completion_must_fit_the_student_context():
    # one token per character (and per chat marker): the limit is exactly prompt tokens + max_tokens = 512
    student = char_tokenizer()
    prompt_tokens = len(student.encode(student.apply_chat_template(list(TURNS), tokenize=False,
                                                                   add_generation_prompt=True),
                                       add_special_tokens=False))
    assert check_student_tokenizer(student, student, TEXTS, 512 - prompt_tokens, context=512) == []
    problems = check_student_tokenizer(student, student, TEXTS, 513 - prompt_tokens, context=512)
    assert len(problems) == 1 and "exceeds the student's context of 512" in problems[0]
    assert check_student_tokenizer(student, student, TEXTS, 513 - prompt_tokens)  # model_max_length 512 is used
