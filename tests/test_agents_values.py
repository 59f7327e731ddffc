"""The episode machinery's types (rlvr/agents/*.py): its value objects are immutable, so what the driver hands to
an environment (user code) and the settings a runner is built with cannot be changed behind the driver's back; the
protocols can be checked with isinstance."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from rlvr.agents.chat import EnvironmentTurn, Rendering
from rlvr.agents.process_reward import StepScores
from rlvr.agents.protocol import Budgets, Deadline, Environment, Episode, ModelTurn, Observation, ToolCall, ToolSpec
from rlvr.agents.wiring import EpisodeParts

SPEC = ToolSpec("echo", "repeat a text", {"type": "object"})
VALUES = [
    # handed to Episode.respond: an environment that rewrote the turn would change what the driver records
    ModelTurn(0, "text", (ToolCall("echo", {"text": "x"}),), ()),
    ToolCall("echo", {"text": "x"}),
    SPEC,
    Observation("ok", valid_calls=1),  # returned by user code and then read for the counts
    Deadline(0.0, "why"),  # handed to the environment on each turn: its time cannot be extended from inside
    Budgets(), Rendering(), EnvironmentTurn("\n<|im_start|>tool\n", "<|im_end|>\n", "tool"),  # a runner's settings
    EpisodeParts(object(), Budgets(), 1.0, Rendering(), None),
    StepScores(torch.zeros(1, 1), 0),
]


@pytest.mark.parametrize("value", VALUES, ids=lambda value: type(value).__name__)
def test_value_objects_refuse_assignment(value):
    field = dataclasses.fields(value)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, field, getattr(value, field))



class Conforming:
    name, tools, scores_state = "mine", (), False

    def start(self, prompt):
        return self

    def score_state(self, final_state, prompt):
        return None

    def respond(self, turn):
        return Observation(None, done=True)

    def final_state(self):
        return ""


def test_a_user_s_environment_can_be_checked_against_the_protocols():
    """Environment and Episode are runtime-checkable protocols: a task author checks a class with isinstance, and
    one without the methods is told apart (the environment tests check each built-in environment so)."""
    assert isinstance(Conforming(), Environment) and isinstance(Conforming(), Episode)
    assert not isinstance(object(), Environment) and not isinstance(Budgets(), Episode)
