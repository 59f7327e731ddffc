"""The episode driver's budgets and cuts (rlvr/agents/episodes.py): where each row of a
group is cut, that a trajectory ends with a sampled token, which cut turns are kept as finished, and how the tools
reach the prompt."""
from __future__ import annotations

import copy
import json
import math
import random

import pytest
import torch

from rlvr.agents.chat import EnvironmentTurn, Rendering
from rlvr.agents.episodes import EpisodeRunner, after_last_call
from rlvr.agents.protocol import Budgets, ModelTurn, Observation, ToolSpec
from rlvr.agents.tool_calls import CLOSE, run_calls
from rlvr.rollout.base import SampledTurn, SamplingParams
from rlvr.types import Outcome, Prompt, Verdict

ECHO = ToolSpec("echo", "repeat a text", {"type": "object", "properties": {"text": {"type": "string"}},
                                          "required": ["text"], "additionalProperties": False})
PROMPT = Prompt("echo/0", ({"role": "user", "content": "Echo it."},), "1")


class EchoEpisode:
    def respond(self, turn: ModelTurn) -> Observation:
        return run_calls(turn, {"echo": lambda text: text}, 1.0)

    def final_state(self) -> str:
        return ""


class EchoEnvironment:
    name, tools, scores_state = "echo", (ECHO,), False

    def start(self, prompt: Prompt) -> EchoEpisode:
        return EchoEpisode()

    def score_state(self, final_state: str, prompt: Prompt) -> Verdict:
        return Verdict(Outcome.CORRECT, 1.0)


class ScriptedEngine:
    """continue_tokens returns the scripted turns in order, one list per call (row by row), cut at the sampling's
    max_new_tokens and stopped when the turn ends with the end-of-turn token within it, as an engine does."""

    def __init__(self, eos: int, calls: list[list[list[int]]]):
        self.eos, self.calls, self.seen = eos, list(calls), []

    def continue_tokens(self, contexts, group_size, sampling):
        self.seen.append(([list(c) for c in contexts], group_size, sampling.max_new_tokens))
        room = sampling.max_new_tokens
        return [SampledTurn(ids[:room], [-0.5] * len(ids[:room]), ids[-1] == self.eos and len(ids) <= room)
                for ids in self.calls.pop(0)]


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


def chars(tokenizer, text: str) -> list[int]:
    """One id per character (the tiny tokenizer is character-level)."""
    return [tokenizer.convert_tokens_to_ids(c) for c in text]


def call_ids(tokenizer, text: str, stop: bool = True) -> list[int]:
    call = '<tool_call>{"name": "echo", "arguments": {"text": "' + text + '"}}</tool_call>'
    return chars(tokenizer, call) + [tokenizer.eos_token_id] * stop


def play(tokenizer, turns, budgets: Budgets, group_size: int = 1, rendering: Rendering | None = None):
    engine = ScriptedEngine(tokenizer.eos_token_id, turns)
    batch = EpisodeRunner(engine, tokenizer, EchoEnvironment(), budgets, rendering).generate(
        [PROMPT], group_size, SamplingParams())
    return batch, engine


def length(batch, row: int) -> int:
    """The row's completion length: up to its last sampled or environment token (padding is the EOS id)."""
    return int((batch.turns.turn_of_token[row] != -1).nonzero().max()) + 1


def test_each_row_of_a_group_is_cut_at_its_own_episode_budget(tokenizer):
    """The engine samples a group's turn with the room of its roomiest row; a row with less room left is cut at
    its own budget (`tokens_per_episode` counts every token after the prompt). Row 0 echoes a text 2 characters
    longer than row 1's, in its call and in the environment's answer, so it has 4 tokens less left; the second
    turn's answer (11 tokens with its end-of-turn token) fits row 1 and not row 0, which is cut mid-turn after 7
    tokens: truncated, by the episode budget, not by the turn budget, and never past tokens_per_episode."""
    long, short = call_ids(tokenizer, "xxx"), call_ids(tokenizer, "x")
    env = EnvironmentTurn.of(tokenizer).ids(tokenizer, "x")  # the environment turn after the short call
    answer = chars(tokenizer, "Answer: 1.") + [tokenizer.eos_token_id]
    episode = len(short) + len(env) + len(answer)  # row 1 fits exactly
    batch, engine = play(tokenizer, [[long, short], [answer, answer]], Budgets(3, 200, episode), group_size=2)
    assert engine.seen[1][2] == len(answer)  # the turn was sampled with row 1's room
    cut, fits = batch.turns.records
    assert (fits.stop_reason, bool(batch.truncated[1]), batch.completions[1]) == ("answered", False, "Answer: 1.")
    assert length(batch, 1) == episode
    assert (cut.stop_reason, bool(batch.truncated[0])) == ("episode_tokens", True)
    assert length(batch, 0) == episode  # cut at the budget: the answer's last 4 tokens dropped
    assert cut.messages[-1] == {"role": "assistant", "content": "Answer:"}  # 11 - 4 = 7 tokens


def test_a_call_in_the_last_turn_ends_the_episode_on_the_sampled_call(tokenizer):
    """The module docstring: the trajectory always ends with a sampled token. A call in the last allowed turn is
    not answered (no turn is left to read it): the episode is cut there, without the environment's turn."""
    call = call_ids(tokenizer, "x")
    batch, _ = play(tokenizer, [[call], [call]], Budgets(2, 200, 400))
    record = batch.turns.records[0]
    assert (record.stop_reason, bool(batch.truncated[0])) == ("max_turns", True)
    assert [m["role"] for m in record.messages] == ["assistant", "tool", "assistant"]
    assert record.turn_rewards == [0.0, 0.0]  # tool results carry no step reward: the environment gives none
    env = EnvironmentTurn.of(tokenizer).ids(tokenizer, "x")
    assert length(batch, 0) == 2 * len(call) + len(env)  # ends with the second call's last sampled token
    assert batch.completion_mask[0, length(batch, 0) - 1] == 1


def test_an_environment_turn_that_fills_the_episode_budget_ends_it(tokenizer):
    """An environment turn ends the episode when no model turn fits after it. With exactly the call and the
    environment's turn in the budget, no sampled token fits: cut after the call, without the environment's turn
    (the trajectory ends with a sampled token). One token more, and the model gets a 1-token turn."""
    call = call_ids(tokenizer, "x")
    env = EnvironmentTurn.of(tokenizer).ids(tokenizer, "x")
    answer = chars(tokenizer, "Answer: 1") + [tokenizer.eos_token_id]
    batch, engine = play(tokenizer, [[call], [answer]], Budgets(3, 200, len(call) + len(env)))
    record = batch.turns.records[0]
    assert (record.stop_reason, bool(batch.truncated[0]), length(batch, 0)) == ("episode_tokens", True, len(call))
    assert [m["role"] for m in record.messages] == ["assistant"] and len(engine.seen) == 1
    batch, engine = play(tokenizer, [[call], [answer]], Budgets(3, 200, len(call) + len(env) + 1))
    assert engine.seen[1][2] == 1 and length(batch, 0) == len(call) + len(env) + 1
    assert batch.turns.records[0].stop_reason == "episode_tokens"


def test_the_stop_reason_names_the_budget_that_cut_the_turn(tokenizer):
    """A turn cut at tokens_per_turn is "turn_tokens"; one cut earlier by what the episode has left is
    "episode_tokens" (the views and metrics count them apart)."""
    call = call_ids(tokenizer, "x", stop=False)
    batch, _ = play(tokenizer, [[call]], Budgets(3, 20, 400))
    assert batch.turns.records[0].stop_reason == "turn_tokens" and length(batch, 0) == 20
    assert batch.turns.records[0].turn_rewards == [0.0]  # one reward per model turn; a cut turn earns none
    batch, _ = play(tokenizer, [[call]], Budgets(3, 30, 20))  # the turn's room is the episode's 20
    assert batch.turns.records[0].stop_reason == "episode_tokens" and length(batch, 0) == 20


def test_a_turn_cut_inside_reasoning_or_with_a_stray_close_tag_is_truncated_not_finished(tokenizer):
    """A turn out of tokens ends after its last call only when parse_turn reads a call in it (a
    </tool_call> inside an unclosed <think>, or in prose, made the cut turn count as finished: no truncation, so
    mask_truncated and the overlong handling were skipped, and the text was scored as a final answer)."""
    call = call_ids(tokenizer, "x", stop=False)
    thinking = chars(tokenizer, "<think>maybe ") + call + chars(tokenizer, " and on and on")
    prose = chars(tokenizer, "I never write </tool_call> tags, I just talk and talk")
    for turn in (thinking, prose):
        batch, _ = play(tokenizer, [[turn]], Budgets(3, len(turn), 400))
        record = batch.turns.records[0]
        assert (record.stop_reason, bool(batch.truncated[0]), record.valid_calls) == ("turn_tokens", True, 0)
        assert length(batch, 0) == len(turn)
    # the call after the reasoning is read: the turn ends after it, the call runs
    turn = chars(tokenizer, "<think>hmm</think>") + call + chars(tokenizer, " and on")
    batch, _ = play(tokenizer, [[turn], [chars(tokenizer, "ok") + [tokenizer.eos_token_id]]],
                    Budgets(3, len(turn), 400))
    record = batch.turns.records[0]
    assert (record.stop_reason, record.valid_calls, record.messages[0]["content"]) == (
        "answered", 1, "<think>hmm</think>" + tokenizer.decode(call))


class PieceTokenizer:
    """A tokenizer whose tokens are text pieces of several characters (as BPE's are: one may hold the end of a
    closing tag and what follows it); counts its decode calls."""

    def __init__(self):
        self.pieces: list[str] = []
        self.special: set[int] = set()  # ids that skip_special_tokens drops
        self.decodes = 0

    def ids(self, text: str, rng: random.Random) -> list[int]:
        ids, at = [], 0
        while at < len(text):
            step = rng.randint(1, 5)
            self.pieces.append(text[at:at + step])
            ids.append(len(self.pieces) - 1)
            at += step
        return ids

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        self.decodes += 1
        return "".join(self.pieces[i] for i in ids if not (skip_special_tokens and i in self.special))


def old_after_last_call(tokenizer, ids: list[int]) -> int | None:
    """The earlier cut: the first k whose text holds every </tool_call> of the turn (one decode per k)."""
    count = tokenizer.decode(ids).count(CLOSE)
    if not count:
        return None
    return next(k for k in range(1, len(ids) + 1) if tokenizer.decode(ids[:k]).count(CLOSE) == count)


def test_after_last_call_cuts_ordinary_turns_where_it_did_with_a_logarithmic_number_of_decodes():
    """On ordinary turns (calls and prose, no reasoning, no stray tags) the cut is the one the old search found:
    the fewest ids whose text holds every call, even where a token holds the tag's end and the text after it.
    It decodes about log2(n) times, where the old search decoded once per candidate length: 4097 decodes of up to
    4096 tokens at 4096 tokens (2.3 s a row with SmolLM2's tokenizer)."""
    rng = random.Random(0)
    tokenizer = PieceTokenizer()
    pieces = ['<tool_call>{"name": "echo", "arguments": {"text": "x"}}</tool_call>', "Let me see. ", "then ",
              "<tool_call>{bad}</tool_call>", "the result will be 5 "]
    for _ in range(200):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 6)))
        ids = tokenizer.ids(text, rng)
        assert after_last_call(tokenizer, ids) == old_after_last_call(tokenizer, ids), text
    for calls_before, prose in ((1, 200), (40, 16000)):  # about 60 and 4100 tokens of 1 to 5 characters
        text = pieces[0] * calls_before + "the result is " * (prose // 14)
        ids = tokenizer.ids(text, rng)
        tokenizer.decodes = 0
        cut = after_last_call(tokenizer, ids)
        assert tokenizer.decode(ids[:cut]).startswith(pieces[0] * calls_before)
        assert not tokenizer.decode(ids[:cut - 1]).startswith(pieces[0] * calls_before)
        assert tokenizer.decodes - 2 <= 1 + math.ceil(math.log2(len(ids))), (len(ids), tokenizer.decodes)
    assert len(ids) > 4000
    ids = tokenizer.ids("Let me. " + pieces[0], rng)  # out of tokens right after the call: all of it is kept
    assert after_last_call(tokenizer, ids) == len(ids)


def test_after_last_call_reads_the_text_parse_turn_reads_with_special_tokens_skipped():
    """The driver hands parse_turn the turn decoded without special tokens; the cut is found in that same text. A
    special token whose text is "<think>" is no reasoning there: the call after it is read, and the turn ends
    after it."""
    rng = random.Random(1)
    tokenizer = PieceTokenizer()
    think = tokenizer.ids("<think>", rng)
    tokenizer.special.update(think)
    call = tokenizer.ids('<tool_call>{"name": "echo", "arguments": {"text": "x"}}</tool_call>', rng)
    ids = think + call + tokenizer.ids(" and so on", rng)
    assert after_last_call(tokenizer, ids) == len(think + call)
    assert after_last_call(tokenizer, tokenizer.ids("<think>", rng) + call + tokenizer.ids(" on", rng)) is None


def test_list_tools_false_leaves_the_tools_out_of_the_prompt_and_the_default_lists_them(tokenizer):
    """episode.list_tools=false: the tools are left to the task's worked examples (docs/agents.md: small models); the
    default declares them (the tiny template ignores tools=, so as a system message)."""
    answer = [[chars(tokenizer, "ok") + [tokenizer.eos_token_id]]]
    listing = "You can use these tools:\n" + json.dumps(ECHO.as_openai(), sort_keys=True)
    for rendering, listed in ((None, True), (Rendering(), True), (Rendering(list_tools=False), False)):
        _, engine = play(tokenizer, [list(t) for t in answer], Budgets(2, 20, 40), rendering=rendering)
        prompt = tokenizer.decode(engine.seen[0][0][0])
        assert (listing in prompt) == listed and prompt.endswith("<|im_start|>assistant\n"), rendering


def test_an_episode_answered_at_once_has_no_step(tokenizer):
    """The final answer is no step (the outcome scores it): an episode that answers in its first turn has no
    step at all, so its turn_mask is all False; a record without model turns counts none either, never -1."""
    from rlvr.agents.protocol import EpisodeRecord

    batch, _ = play(tokenizer, [[chars(tokenizer, "Answer: 1") + [tokenizer.eos_token_id]]], Budgets(3, 20, 40))
    record = batch.turns.records[0]
    assert record.stop_reason == "answered" and record.step_count() == 0
    assert batch.turns.turn_mask[0].tolist() == [False, False, False]
    assert EpisodeRecord().step_count() == 0 and EpisodeRecord(stop_reason="max_turns").step_count() == 0


def test_the_group_shares_one_prefill_of_its_prompt_and_later_turns_continue_each_row(tokenizer):
    """Turn 0 hands the engine each prompt once with the group size (one prefill for the G rows); later turns
    hand it each live row's own ids, one sample each."""
    call, answer = call_ids(tokenizer, "x"), chars(tokenizer, "ok") + [tokenizer.eos_token_id]
    second = Prompt("echo/1", ({"role": "user", "content": "Again."},), "1")
    engine = ScriptedEngine(tokenizer.eos_token_id, [[call, answer, answer, answer], [answer]])
    runner = EpisodeRunner(engine, tokenizer, EchoEnvironment(), Budgets(3, 200, 400))
    batch = runner.generate([PROMPT, second], 2, SamplingParams())
    (first_contexts, first_group, _), (later_contexts, later_group, _) = engine.seen
    assert first_group == 2 and len(first_contexts) == 2 and first_contexts[0] != first_contexts[1]
    assert later_group == 1 and len(later_contexts) == 1  # only row 0 called a tool
    env = EnvironmentTurn.of(tokenizer).ids(tokenizer, "x")
    assert later_contexts[0] == first_contexts[0] + call + env
    assert [r.stop_reason for r in batch.turns.records] == ["answered"] * 4
    # the rows that answered at once are padded to row 0's length: padding belongs to no turn, as environment
    # tokens do, and is no sampled token
    padding = batch.turns.turn_of_token[1:, len(answer):]
    assert padding.numel() > 0 and (padding == -1).all() and (batch.completion_mask[1:, len(answer):] == 0).all()
    assert (batch.sampling_logprobs[1:, len(answer):] == 0).all()  # 0 where nothing was sampled


def test_the_prompt_is_encoded_as_the_template_writes_it_without_an_added_bos(tokenizer):
    """The chat template writes the special tokens a prompt needs; encoding its text must add none (as the
    single-turn engine encodes it, rlvr/rollout/hf.py), or a BOS-adding tokenizer gives every episode prompt a
    token the model never saw there."""
    from tokenizers import processors

    from rlvr.agents.chat import render_prompt

    tokenizer = copy.deepcopy(tokenizer)
    tokenizer.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{tokenizer.bos_token} $A", special_tokens=[(tokenizer.bos_token, tokenizer.bos_token_id)])
    text = render_prompt(tokenizer, PROMPT, (ECHO,))
    plain = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer(text)["input_ids"] == [tokenizer.bos_token_id] + plain  # the premise: this tokenizer adds BOS
    _, engine = play(tokenizer, [[chars(tokenizer, "ok") + [tokenizer.eos_token_id]]], Budgets(2, 20, 40))
    assert engine.seen[0][0][0] == plain


def test_turn_seeds_of_different_calls_differ():
    """Later turns draw their seeds from the call's seed over a wide range: 200 calls with different seeds give
    200 different turn-1 seeds (a narrow range would make different steps replay one another's draws), each one
    the sampling generator accepts."""
    from rlvr.agents.episodes import _turn_seeds

    seeds = {_turn_seeds(SamplingParams(seed=seed), 2)[1] for seed in range(200)}
    assert len(seeds) == 200
    for seed in seeds:  # and each is a seed the engines' torch generators take (below 2**64)
        torch.Generator().manual_seed(seed)


def test_the_runner_forwards_weight_sync_and_close_to_its_engine_and_nothing_else(tokenizer):
    """Weight sync, the agreement check and close are the wrapped engine's; a single-turn `submit` is not
    forwarded (it would sample plain completions for an episode task). A runner not yet set up (no engine in it,
    as while unpickling) answers AttributeError, not a recursion."""
    class Engine(ScriptedEngine):
        def sync_weights(self, model, version):
            return "synced"

        def teacher_forced_logprobs(self, rollouts, temperature):
            return "logprobs"

        def close(self):
            return "closed"

        def submit(self, prompts, group_size, sampling):
            raise AssertionError("never forwarded")

    runner = EpisodeRunner(Engine(tokenizer.eos_token_id, []), tokenizer, EchoEnvironment(), Budgets())
    assert (runner.sync_weights(None, 1), runner.teacher_forced_logprobs(None, 1.0), runner.close()) == (
        "synced", "logprobs", "closed")
    assert not hasattr(runner, "submit") and not hasattr(runner, "stop_ids")
    with pytest.raises(AttributeError, match="close"):
        getattr(EpisodeRunner.__new__(EpisodeRunner), "close")


def test_no_turn_allowed_means_every_episode_is_cut_unplayed(tokenizer):
    """max_turns 0 (only the Python API allows it; episode.max_turns is at least 1): no turn is sampled, seeded or
    not, and every row is cut by max_turns, never reported as answered (a finished answer the outcome would
    score)."""
    from rlvr.agents.episodes import _turn_seeds

    assert _turn_seeds(SamplingParams(seed=3), 0) == [] and _turn_seeds(SamplingParams(seed=3), 1) == [3]
    for seed in (None, 3):
        engine = ScriptedEngine(tokenizer.eos_token_id, [])
        batch = EpisodeRunner(engine, tokenizer, EchoEnvironment(), Budgets(0, 20, 40)).generate(
            [PROMPT], 2, SamplingParams(seed=seed))
        assert engine.seen == [] and batch.truncated.tolist() == [True, True]
        assert [r.stop_reason for r in batch.turns.records] == ["max_turns", "max_turns"]
        # still a well-formed batch: one padding column (the forwards need one), typed as any batch
        assert batch.completion_ids.shape == (2, 1) and batch.completion_mask.tolist() == [[0], [0]]
        assert batch.turns.turn_mask.shape == (2, 0) and batch.turns.turn_mask.dtype == torch.bool


class ScriptedEnvironment:
    """Answers every turn with the same observation (a game's reply, say)."""
    name, tools, scores_state = "scripted", (), False

    def __init__(self, observation: Observation):
        self.observation = observation

    def start(self, prompt: Prompt) -> ScriptedEnvironment:
        return self

    def respond(self, turn: ModelTurn) -> Observation:
        return self.observation

    def final_state(self) -> str:
        return ""

    def score_state(self, final_state: str, prompt: Prompt) -> None:
        return None


@pytest.mark.parametrize("observation, reason", [
    (Observation("You won.", done=True, reward=1.0), "env_done"),  # the environment ends it: its text is not shown
    (Observation(None, done=True), "answered"),  # run_calls' answer to a turn without calls
    (Observation(None), "answered"),  # nothing to say: the model's turn was its final answer
])
def test_an_environment_that_says_done_ends_the_episode_without_showing_its_text(tokenizer, observation, reason):
    """Observation.done: the episode ends here and the text, if any, is not shown to the model: no environment
    turn follows, the trajectory ends with the sampled move, and the episode is finished, not truncated."""
    move = chars(tokenizer, "e2e4") + [tokenizer.eos_token_id]
    engine = ScriptedEngine(tokenizer.eos_token_id, [[move]])
    batch = EpisodeRunner(engine, tokenizer, ScriptedEnvironment(observation), Budgets(3, 20, 60)).generate(
        [PROMPT], 1, SamplingParams())
    record = batch.turns.records[0]
    assert (record.stop_reason, bool(batch.truncated[0]), length(batch, 0)) == (reason, False, len(move))
    assert [m["role"] for m in record.messages] == ["assistant"] and len(engine.seen) == 1
    assert record.turn_rewards == [observation.reward]
    assert batch.turns.turn_rewards[0].tolist() == [observation.reward, 0.0, 0.0]  # turns not played earn nothing


def test_the_batch_is_made_on_the_engine_s_device(tokenizer):
    """The batch's tensors are made where the policy is: the in-process engine's model, or the device an engine in
    another process (hf_process) names (here the meta device, which holds no data, stands for a GPU)."""
    class RemoteEngine(ScriptedEngine):
        device = "meta"

    class InProcessEngine(ScriptedEngine):
        model = torch.nn.Linear(1, 1, device="meta")

    for kind in (RemoteEngine, InProcessEngine):
        engine = kind(tokenizer.eos_token_id, [[chars(tokenizer, "ok") + [tokenizer.eos_token_id]]])
        batch = EpisodeRunner(engine, tokenizer, EchoEnvironment(), Budgets(2, 20, 40)).generate(
            [PROMPT], 1, SamplingParams())
        tensors = [batch.completion_ids, batch.completion_mask, batch.sampling_logprobs, batch.truncated,
                   batch.prompt_ids, batch.turns.turn_of_token, batch.turns.turn_rewards, batch.turns.turn_mask]
        assert {t.device.type for t in tensors} == {"meta"}, kind
