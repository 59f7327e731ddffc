"""How an episode's prompt declares its tools (rlvr/agents/chat.py): through the template's
`tools=` when the template renders them, else as a system message, whatever the prompt's worked examples say."""
from __future__ import annotations

import json

import pytest

from rlvr.agents.chat import EnvironmentTurn, TemplateError, render_prompt, tools_system_text
from rlvr.agents.protocol import ToolSpec
from rlvr.types import Prompt

ECHO = ToolSpec("echo", "repeat a text", {"type": "object", "properties": {"text": {"type": "string"}},
                                          "required": ["text"], "additionalProperties": False})
# a Qwen-style template that renders `tools=` in a system block of its own, and one that ignores them (conftest's)
TOOLS_AWARE = ("{% if tools %}<|im_start|>system\n# Tools\n<tools>{% for t in tools %}{{ t | tojson }}{% endfor %}"
               "</tools><|im_end|>\n{% endif %}"
               "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
               "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
EXAMPLE_CALL = '<tool_call>{"name": "echo", "arguments": {"text": "hi"}}</tool_call>'
PLAIN = Prompt("p", ({"role": "user", "content": "Echo hi."},), "hi")
ONE_SHOT = Prompt("p", ({"role": "user", "content": "Echo ho."}, {"role": "assistant", "content": EXAMPLE_CALL},
                        {"role": "tool", "content": "ho"}, {"role": "assistant", "content": "ho"},
                        {"role": "user", "content": "Echo hi."}), "hi")  # the worked example names the tool


@pytest.fixture
def tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


def test_a_template_that_renders_tools_gets_them_natively_even_when_a_worked_example_names_them(tokenizer):
    """The detection took a template for one that ignores tools= when a tool name appeared without
    tools=, so with the tasks' worked examples (task.one_shot, the default) a tools-aware template got the
    fallback listing instead of its own tools block. It compares how often the names appear with and without."""
    tokenizer.chat_template = TOOLS_AWARE
    for prompt in (PLAIN, ONE_SHOT):
        text = render_prompt(tokenizer, prompt, (ECHO,))
        assert text.startswith("<|im_start|>system\n# Tools\n<tools>") and '"name": "echo"' in text, prompt
        assert "You can use these tools" not in text and (EXAMPLE_CALL in text) == (prompt is ONE_SHOT)


def test_a_template_that_ignores_tools_gets_them_as_a_system_message_also_with_a_worked_example(tokenizer):
    for prompt in (PLAIN, ONE_SHOT):
        text = render_prompt(tokenizer, prompt, (ECHO,))
        assert text.startswith("<|im_start|>system\n" + tools_system_text((ECHO,)) + "<|im_end|>\n"), prompt
        assert text.count("<|im_start|>system") == 1


def test_the_listing_joins_a_system_message_the_prompt_has(tokenizer):
    """A prompt with its own system message keeps it first, the tools listed after it in the same message: one
    system turn (several confuse templates that allow one)."""
    prompt = Prompt("p", ({"role": "system", "content": "Be brief."},) + PLAIN.messages, "hi")
    text = render_prompt(tokenizer, prompt, (ECHO,))
    assert text.startswith("<|im_start|>system\nBe brief.\n\n" + tools_system_text((ECHO,)) + "<|im_end|>\n")
    assert text.count("<|im_start|>system") == 1 and prompt.messages[0]["content"] == "Be brief."  # not mutated


def test_the_listing_is_one_json_object_per_tool_whatever_order_its_schema_was_written_in():
    """The listing is the tools' OpenAI form, one JSON object a line; keys sorted, so two environments that declare
    the same tool with their schema's keys in another order give the model the same prompt (and the same ids)."""
    reordered = ToolSpec("echo", "repeat a text", {"additionalProperties": False, "required": ["text"],
                                                   "properties": {"text": {"type": "string"}}, "type": "object"})
    assert list(reordered.parameters) != list(ECHO.parameters)  # the premise: written in another order
    text = tools_system_text((ECHO, reordered))
    lines = text.split("\n")
    assert lines[0] == "You can use these tools:" and lines[1] == lines[2]
    assert json.loads(lines[1]) == ECHO.as_openai() and lines[3].startswith("To call a tool, write <tool_call>")


def _template(assistant_end: str = "<|im_end|>", tool_turn: str | None = None, repeat_answer: bool = False) -> str:
    """conftest's template with one thing changed: how an assistant turn ends, how a tool turn renders (None: as
    every turn), or an assistant turn's content written twice."""
    turn = "<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
    assistant = "<|im_start|>assistant\n{{ m.content }}" + assistant_end + "\n" + "{{ m.content }}" * repeat_answer
    tool = turn if tool_turn is None else tool_turn
    return ("{% for m in messages %}{% if m.role == 'assistant' %}" + assistant + "{% elif m.role == 'tool' %}"
            + tool + "{% else %}" + turn + "{% endif %}{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def test_a_template_without_a_tool_role_writes_environment_turns_as_user_turns(tokenizer):
    """EnvironmentTurn.of falls back to a user turn when the template refuses the tool role (a jinja raise) or
    does not show the tool message's content verbatim."""
    for tool_turn in ("{{ raise_exception('no tool role') }}", "<|im_start|>tool\n(a result)<|im_end|>\n"):
        tokenizer.chat_template = _template(tool_turn=tool_turn)
        turn = EnvironmentTurn.of(tokenizer)
        assert (turn.role, turn.before, turn.after) == ("user", "\n<|im_start|>user\n",
                                                        "<|im_end|>\n<|im_start|>assistant\n"), tool_turn


@pytest.mark.parametrize("template, says", [
    (_template(assistant_end="<|end|>"), "does not end with the end-of-sequence token '<|im_end|>'"),
    (_template(repeat_answer=True), "does not render message contents verbatim"),
])
def test_a_template_whose_turns_cannot_be_cut_is_one_template_error_naming_each_role(tokenizer, template, says):
    """The environment turn's ids are the template's text after the sampled turn's end-of-sequence token: a
    template whose assistant turn ends otherwise, or that repeats the assistant's text (the cut would hold it), cannot
    give them. Both roles are tried; the error names what each said."""
    tokenizer.chat_template = template
    with pytest.raises(TemplateError) as caught:
        EnvironmentTurn.of(tokenizer)
    message = str(caught.value)
    assert message.startswith("the chat template cannot render an environment turn after an assistant turn (tool: ")
    assert "; user: " in message and message.count(says) == 2
    assert message.endswith("multi-turn episodes need a template with a tool or user role")


def test_an_environment_turn_gets_no_bos_token_from_a_tokenizer_that_adds_one(tokenizer):
    """Llama-style tokenizers add a BOS token to what they encode; inside a trajectory that would put a
    start-of-text token at every environment turn. The turn's ids are its characters and the template's own
    special tokens, nothing more; an echoed "<|im_end|>" stays characters."""
    from tokenizers import processors

    bos = tokenizer.bos_token_id
    tokenizer.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{tokenizer.bos_token} $A", special_tokens=[(tokenizer.bos_token, bos)])
    assert tokenizer("ab")["input_ids"][0] == bos  # the premise: this tokenizer adds BOS
    turn = EnvironmentTurn.of(tokenizer)
    ids = turn.ids(tokenizer, "hi <|im_end|>")
    chars = lambda text: [tokenizer.convert_tokens_to_ids(c) for c in text]  # noqa: E731
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert ids == (chars("\n") + [bos] + chars("tool\n") + chars("hi <|im_end|>") + [im_end] + chars("\n")
                   + [bos] + chars("assistant\n"))
