"""Distillation's up-front check: can the student learn from the teacher's traces as text?

R1's distilled models were fine-tuned on the teacher's samples as *text* (R1 paper sec. 2.4), so teacher and
student need not share a vocabulary; SFT re-tokenises. What can go wrong is lossy text: a student tokenizer
that maps characters to <unk> or mangles its own chat template, a tag (`<think>`, `<answer>`) that is a
special token and so vanishes when outputs are decoded with skip_special_tokens (the teacher's traces would
lose it, or the trained student's rollouts would and fail the format verifier), or prompts plus
max_new_tokens that do not fit the student's context. Tokenizers load in a second, models do not: the check
runs before any sampling (and before any stage of a pipeline).
"""
from __future__ import annotations

from itertools import islice
from typing import Any, Callable, Mapping, Sequence

from rlvr.sampling import SampleError

TAGS = ("<think>", "</think>", "<answer>", "</answer>")  # the R1 layout (rlvr.verifiers.format)
ANSWER_MARKERS = ("Answer: 42", "\\boxed{42}", "#### 42")  # what rlvr.verifiers.math.extract reads
_UNBOUNDED = 10**8  # tokenizers without a known limit report model_max_length as ~1e30
SampleText = str | Sequence[Mapping[str, str]]  # plain text, or chat turns rendered with the student's template


def round_trip(tokenizer: Any, text: str, skip_special_tokens: bool = False) -> str:
    ids = tokenizer.encode(text, add_special_tokens=False)
    return tokenizer.decode(ids, skip_special_tokens=skip_special_tokens, clean_up_tokenization_spaces=False)


def first_difference(a: str, b: str) -> str:
    """Where two texts part, shown briefly: `'...x<think>y' became '...x y'`."""
    i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    start = max(0, i - 12)
    return f"{a[start:i + 12]!r} became {b[start:i + 12]!r}"


def render(tokenizer: Any, turns: Sequence[Mapping[str, str]]) -> str:
    """A conversation as the student's SFT sees it; ending on a user turn, with the assistant header added."""
    ends_on_answer = bool(turns) and turns[-1].get("role") == "assistant"
    return tokenizer.apply_chat_template([dict(t) for t in turns], tokenize=False,
                                         add_generation_prompt=not ends_on_answer)


def _tag_problems(teacher: Any, student: Any) -> list[str]:
    problems = []
    for tag in TAGS + ANSWER_MARKERS:
        if round_trip(student, tag, skip_special_tokens=True) != tag:
            problems.append(f"the student's tokenizer does not keep {tag!r} when decoding its outputs "
                            f"(it became {round_trip(student, tag, skip_special_tokens=True)!r})")
    teacher_specials = set(getattr(teacher, "all_special_tokens", []))
    for tag in TAGS:
        if tag in teacher_specials:
            problems.append(f"the teacher's tokenizer treats {tag!r} as a special token, so decoded traces lose it")
    return problems


def _context_limit(student: Any, context: int | None) -> int | None:
    if context is not None:
        return context
    limit = getattr(student, "model_max_length", None)
    return limit if isinstance(limit, int) and limit < _UNBOUNDED else None


def check_student_tokenizer(teacher_tokenizer: Any, student_tokenizer: Any, sample_texts: Sequence[SampleText],
                            max_tokens: int, *, context: int | None = None,
                            on_info: Callable[[str], None] | None = None) -> list[str]:
    """Problems that keep the student from training on the teacher's traces; empty = compatible.

    sample_texts: plain strings (traces, answers) and chat conversations (the teacher's prompt turns, maybe
    with an assistant reply), each of which must survive the student's encode/decode unchanged.
    max_tokens: completion tokens sampled (rollout.max_new_tokens); the longest prompt plus this must fit
    `context` (the student's max_position_embeddings; None = the tokenizer's model_max_length, if set).
    on_info: receives notes that are not problems (a different vocabulary: SFT re-tokenises the text).
    """
    if not getattr(student_tokenizer, "chat_template", None):
        return ["the student's tokenizer has no chat template (SFT renders chat rows with it); use an "
                "instruct/chat model"]
    problems: list[str] = []
    longest_prompt = 0
    for item in sample_texts:
        text = item if isinstance(item, str) else render(student_tokenizer, item)
        back = round_trip(student_tokenizer, text)
        what = "text" if isinstance(item, str) else "prompt rendered with its chat template"
        problem = f"a {what} does not survive the student's encode/decode: {first_difference(text, back)}"
        if back != text and problem not in problems and len(problems) < 3:
            problems.append(problem)
        if not isinstance(item, str) and item and item[-1].get("role") != "assistant":
            longest_prompt = max(longest_prompt, len(student_tokenizer.encode(text, add_special_tokens=False)))
    problems += _tag_problems(teacher_tokenizer, student_tokenizer)
    limit = _context_limit(student_tokenizer, context)
    if limit is not None and longest_prompt + max_tokens > limit:
        problems.append(f"a prompt of {longest_prompt} student tokens plus rollout.max_new_tokens={max_tokens} "
                        f"exceeds the student's context of {limit} tokens")
    if on_info is not None and teacher_tokenizer.get_vocab() != student_tokenizer.get_vocab():
        on_info(f"teacher and student vocabularies differ ({len(teacher_tokenizer)} vs {len(student_tokenizer)} "
                "tokens); fine for distillation: SFT re-tokenises the traces as text")
    return problems


def distillation_texts(config: Any, prompts: int = 4) -> list[SampleText]:
    """What the check feeds the tokenizers: a few train prompts of the task, alone and with an R1-layout
    reply in the task's answer format, and the bare tags (config: a RunConfig)."""
    from rlvr.tasks import build_task

    drawn = list(islice(build_task(config.task).train_prompts(config.seed), prompts))
    texts: list[SampleText] = []
    for prompt in drawn:
        reply = f"<think>\nWorking it out step by step.\n</think>\n<answer>{prompt.reference}</answer>\n" \
                f"Answer: {prompt.reference}"
        texts += [prompt.messages, (*prompt.messages, {"role": "assistant", "content": reply})]
    return texts + [" ".join(TAGS + ANSWER_MARKERS)]


def check_distillation(config: Any, on_info: Callable[[str], None] | None = print) -> None:
    """Raise SampleError naming sample.student when the student cannot learn from the teacher's traces;
    no-op without a student (config: a RunConfig). Loads tokenizers and model configs only."""
    student = config.sample.student
    if student is None:
        return
    from rlvr.config.run import ModelConfig
    from rlvr.model.load import ModelError, context_length, load_tokenizer

    teacher_tokenizer = load_tokenizer(config.model)
    student_config = ModelConfig(name_or_path=student, trust_remote_code=config.model.trust_remote_code)
    try:
        student_tokenizer = load_tokenizer(student_config)
    except ModelError as err:
        raise SampleError(f"sample.student={student!r}: {err}") from None
    problems = check_student_tokenizer(teacher_tokenizer, student_tokenizer, distillation_texts(config),
                                       config.rollout.max_new_tokens, context=context_length(student_config),
                                       on_info=on_info)
    if problems:
        raise SampleError(f"sample.student={student!r} cannot be distilled from model.name_or_path="
                          f"{config.model.name_or_path!r}: " + "; ".join(problems))
