"""Chat-template pieces of an episode: the prompt with its tools, and the ids of an environment turn.

Token-in, token-out: the model's turns are never re-rendered or re-encoded. What the template is asked for is
only the text AROUND an environment message: after the assistant's end-of-turn token, the template's opening of a
`tool` turn, then its closing and the next assistant header. It is found once by rendering a conversation with
sentinel contents and cutting at them. The observation itself is tokenized on its own with special tokens split:
a tool that echoes "<|im_end|>" (a file the model wrote, say) gives those characters, never the control token,
and lone surrogates and control characters are escaped first (rlvr/agents/text_safety.py).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Sequence

from rlvr.agents.protocol import ToolSpec
from rlvr.agents.text_safety import shown
from rlvr.errors import UserFacingError
from rlvr.types import Prompt

_ANSWER, _OBSERVATION = "\u2063rlvr-assistant\u2063", "\u2063rlvr-observation\u2063"  # sentinels: never in a template
CALL_FORMAT = ('To call a tool, write <tool_call>{"name": <tool name>, "arguments": {<arguments>}}</tool_call> '
               'and wait for its result. Answer without a tool call when you are done.')


class TemplateError(UserFacingError):
    """The tokenizer's chat template cannot render an episode's turns."""


def tools_system_text(tools: Sequence[ToolSpec]) -> str:
    """The tools listed for templates that ignore `tools=`: the same OpenAI form, one JSON object per line."""
    lines = [json.dumps(tool.as_openai(), sort_keys=True) for tool in tools]
    return "You can use these tools:\n" + "\n".join(lines) + "\n" + CALL_FORMAT


@dataclass(frozen=True)
class Rendering:
    """How episodes are written for the model (episode.observation_role, episode.list_tools)."""

    observation_role: str = "tool"  # role of environment turns, and of the tool turns in a task's examples
    list_tools: bool = True  # declare the tools (tools= or a system message); False: the task's examples show them


def render_prompt(tokenizer, prompt: Prompt, tools: Sequence[ToolSpec], role: str = "tool") -> str:
    """The prompt text the first model turn continues. The tools go to the template as `tools=`; a template that
    renders nothing of them (no tool name shows more often than without `tools=`: a worked example of the prompt
    may name them) gets them as a system message instead (SmolLM2's does so). Tool turns of the prompt (a task's
    worked example) are written in `role`, as the episode's own will be."""
    messages = [{**m, "role": role} if m.get("role") == "tool" else m for m in prompt.messages]
    render = lambda ms, **kw: tokenizer.apply_chat_template(ms, tokenize=False, add_generation_prompt=True, **kw)  # noqa: E731
    if not tools:
        return render(messages)
    with_tools, without = render(messages, tools=[tool.as_openai() for tool in tools]), render(messages)
    # the names the template added: a prompt's worked examples may name the tools already
    if any(with_tools.count(tool.name) > without.count(tool.name) for tool in tools):
        return with_tools
    listing = tools_system_text(tools)
    if messages and messages[0].get("role") == "system":
        messages[0] = {**messages[0], "content": messages[0]["content"] + "\n\n" + listing}
    else:
        messages.insert(0, {"role": "system", "content": listing})
    return render(messages)


@dataclass(frozen=True)
class EnvironmentTurn:
    """The template's text around an observation, after the assistant's end-of-turn token."""

    before: str  # e.g. "\n<|im_start|>tool\n"
    after: str  # e.g. "<|im_end|>\n<|im_start|>assistant\n"
    role: str  # "tool", or "user" for templates that have no tool role

    @classmethod
    def of(cls, tokenizer, role: str = "tool") -> "EnvironmentTurn":
        """The pieces for `role`; a template that cannot render a tool turn falls back to a user turn."""
        errors = []
        for tried in dict.fromkeys((role, "user")):
            try:
                return cls._cut(tokenizer, tried)
            except Exception as err:  # noqa: BLE001 - jinja raises its own errors for roles a template refuses
                errors.append(f"{tried}: {err}")
        raise TemplateError("the chat template cannot render an environment turn after an assistant turn ("
                            + "; ".join(errors) + "); multi-turn episodes need a template with a tool or user role")

    @classmethod
    def _cut(cls, tokenizer, role: str) -> "EnvironmentTurn":
        messages = [{"role": "user", "content": "?"}, {"role": "assistant", "content": _ANSWER},
                    {"role": role, "content": _OBSERVATION}]
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        if text.count(_ANSWER) != 1 or text.count(_OBSERVATION) != 1:
            raise ValueError("the template does not render message contents verbatim")
        between = text[text.index(_ANSWER) + len(_ANSWER):]
        eos = tokenizer.eos_token or ""
        if eos and not between.startswith(eos):  # the sampled turn ends with this token; the template must too
            raise ValueError(f"the assistant turn does not end with the end-of-sequence token {eos!r}")
        before, after = between[len(eos):].split(_OBSERVATION)
        return cls(before, after, role)

    def ids(self, tokenizer, observation: str) -> list[int]:
        """The environment turn's token ids: template pieces with their special tokens, the observation with
        special-token text split into plain characters and shown as text_safety.shown writes it (lone surrogates
        and control characters escaped). Never raises on any str: a lone surrogate made the fast tokenizer raise
        TypeError and ended a training run."""
        encode = lambda text, split: tokenizer(text, add_special_tokens=False,  # noqa: E731
                                               split_special_tokens=split)["input_ids"]
        return encode(self.before, False) + encode(shown(observation), True) + encode(self.after, False)
