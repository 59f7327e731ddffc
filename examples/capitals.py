import itertools  # a new environment in under 50 lines (docs/agents.md)
import json
import sys

from rlvr.agents.protocol import ToolSpec
from rlvr.agents.tool_calls import run_calls
from rlvr.cli.main import main
from rlvr.tasks import register_task
from rlvr.types import Outcome, Prompt, Verdict

CAPITALS = {"France": "Paris", "Japan": "Tokyo", "Kenya": "Nairobi", "Peru": "Lima", "Egypt": "Cairo", "Norway": "Oslo"}
LOOKUP = ToolSpec("capital", "The capital city of a country.", {"type": "object", "required": ["country"],
                  "properties": {"country": {"type": "string"}}, "additionalProperties": False})


class CapitalEpisode:
    def __init__(self):
        self.asked = []  # the state: the countries the model looked up

    def respond(self, turn):  # run the turn's tool calls; a turn without one is the final answer
        lookup = lambda country: self.asked.append(country) or CAPITALS.get(country, "unknown")  # noqa: E731
        return run_calls(turn, {"capital": lookup}, limit_s=1.0)

    def final_state(self):
        return json.dumps(self.asked)


class Capitals:  # the task (its prompts) and its environment (tools, episodes, the state check) in one
    name, tools, scores_state, answer_verifiers = "capitals", (LOOKUP,), True, {}  # {}: the state is the reward

    def __init__(self, config):
        self.rows = [Prompt(f"capitals/{country}", ({"role": "user", "content": f"The capital of {country}?"},),
                            city, {"country": country}) for country, city in CAPITALS.items()]
        self.environment = lambda episode_config: self  # the task is its own Environment
        self.start = lambda prompt: CapitalEpisode()  # a fresh episode per row

    def train_prompts(self, seed):  # endless; the last two rows are held out
        return itertools.cycle(self.rows[:4])

    def eval_prompts(self, size):
        return self.rows[4:4 + size]

    def score_state(self, final_state, prompt):  # did it look up the right country?
        ok = prompt.columns["country"] in json.loads(final_state)
        return Verdict(Outcome.CORRECT if ok else Outcome.WRONG, float(ok))


register_task("capitals", Capitals, episodes=True)
sys.exit(main(["train", "task.name=capitals", *sys.argv[1:]]))
