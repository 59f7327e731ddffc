"""Chat rows -> token ids with a mask of the tokens the loss is taken on: assistant tokens only.

Where the assistant's tokens are is found with the chat template itself, not by searching for role markers:
for a trained assistant turn i the template renders
    prompt  = turns[:i] + the generation prompt  ("...<|im_start|>assistant\\n")
    through = turns[:i + 1]                      ("...<|im_start|>assistant\\nTEXT<|im_end|>\\n")
and both must be text prefixes of the whole conversation. The turn's characters are through[len(prompt):],
minus trailing whitespace: the end-of-turn token (<|im_end|>) is kept, so the model learns to stop, while the
newline the template writes after it is context (generation stops at the end-of-turn token and never emits
it). The whole conversation is tokenised once and a token is trained on when its first character lies in
such a span (fast tokenizers' offset mapping), so BPE merges at a boundary cannot shift the mask. This works
for templates without `{% generation %}` markers, such as SmolLM2's, where `return_assistant_tokens_mask`
cannot. A template that renders earlier turns differently once later ones follow (some strip old reasoning)
fails the prefix check, and the row is reported instead of being trained on a wrong mask.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from rlvr.sft.data import BadRow, ChatRow, Turn


@dataclass(frozen=True)
class Example:
    row_id: str
    input_ids: torch.Tensor  # [T] int64: the whole chat-formatted conversation
    target_mask: torch.Tensor  # [T] bool: token t is trained on (predicted from tokens < t); never position 0

    @property
    def length(self) -> int:
        return int(self.input_ids.numel())

    @property
    def targets(self) -> int:
        return int(self.target_mask.sum())


def render(tokenizer: Any, turns: tuple[Turn, ...], add_generation_prompt: bool = False) -> str:
    return tokenizer.apply_chat_template([t.as_message() for t in turns], tokenize=False,
                                         add_generation_prompt=add_generation_prompt)


def trained_turns(turns: tuple[Turn, ...], train_on: str) -> list[int]:
    """Indices of the assistant turns in the loss: the last one (earlier ones, like a task's one-shot
    example, are context) or every one."""
    assistant = [i for i, t in enumerate(turns) if t.role == "assistant"]
    return assistant if train_on == "assistant" else assistant[-1:]


def assistant_spans(tokenizer: Any, turns: tuple[Turn, ...], train_on: str) -> tuple[str, list[tuple[int, int]]]:
    """(whole rendered conversation, [start, end) character spans of the trained assistant turns)."""
    full = render(tokenizer, turns)
    spans = []
    for i in trained_turns(turns, train_on):
        prompt, through = render(tokenizer, turns[:i], add_generation_prompt=True), render(tokenizer, turns[:i + 1])
        if not (through.startswith(prompt) and full.startswith(through)):
            raise BadRow("chat template mismatch", f"turn {i} renders differently inside the conversation than "
                                                   "on its own, so its tokens cannot be located")
        end = len(through.rstrip())
        if end <= len(prompt):
            raise BadRow("empty content", f"assistant turn {i} renders as no text")
        spans.append((len(prompt), end))
    return full, spans


def _offsets(tokenizer: Any, text: str) -> tuple[list[int], list[tuple[int, int]]] | None:
    try:
        encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    except NotImplementedError:  # slow (python) tokenizers have no offset mapping
        return None
    return list(encoded["input_ids"]), [tuple(o) for o in encoded["offset_mapping"]]


def _ids(tokenizer: Any, text: str) -> list[int]:
    # The template writes its own special tokens (BOS included, where it has one), as the rollout engine
    # encodes prompts: add_special_tokens=False.
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def token_mask(tokenizer: Any, full: str, spans: list[tuple[int, int]]) -> tuple[list[int], list[bool]]:
    """Token ids of `full` and, per token, whether its first character lies in one of the spans."""
    found = _offsets(tokenizer, full)
    if found is not None:
        ids, offsets = found
        mask = [any(start <= first < end for start, end in spans) and last > first for first, last in offsets]
        return ids, mask
    # Without offsets: token counts of text prefixes (exact when the template separates turns with special
    # tokens, as chat templates do).
    ids = _ids(tokenizer, full)
    mask = [False] * len(ids)
    for start, end in spans:
        for t in range(len(_ids(tokenizer, full[:start])), min(len(_ids(tokenizer, full[:end])), len(ids))):
            mask[t] = True
    return ids, mask


def encode_row(tokenizer: Any, row: ChatRow, train_on: str, max_length: int) -> Example:
    """One row as token ids and its loss mask; raises BadRow when too long or its mask cannot be found."""
    full, spans = assistant_spans(tokenizer, row.turns, train_on)
    ids, mask = token_mask(tokenizer, full, spans)
    if len(ids) > max_length:
        raise BadRow("longer than max_length", f"{len(ids)} tokens > {max_length}")
    target = torch.tensor(mask, dtype=torch.bool)  # host: an Example; the micro-batch .to() moves batches
    target[0] = False  # the first token has nothing before it to be predicted from
    if not target.any():
        raise BadRow("no assistant tokens", "the assistant text maps to no token")
    return Example(row.row_id, torch.tensor(ids, dtype=torch.long), target)  # host: as target
