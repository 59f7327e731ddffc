"""The episode driver: token-in token-out trajectories, masks, budgets, and the
sampled log-probs of an in-process engine against the trainer's forward over a trajectory with holes."""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass

import pytest
import torch

from rlvr.agents.episodes import EpisodeEngineError, EpisodeRunner
from rlvr.agents.protocol import Budgets, ModelTurn, Observation, ToolSpec
from rlvr.agents.tool_calls import run_calls
from rlvr.algorithms.correction import CorrectionSettings
from rlvr.algorithms.loss import LossSpec
from rlvr.algorithms.objectives import ClipRange
from rlvr.model.logprobs import batched_logprobs
from rlvr.rollout.base import SampledTurn, SamplingParams
from rlvr.training.update import UpdateSettings, train_step
from rlvr.types import Outcome, Prompt, TrainBatch, Verdict, row_extent

ECHO = ToolSpec("echo", "repeat a text", {"type": "object", "properties": {"text": {"type": "string"}},
                                          "required": ["text"], "additionalProperties": False})


@dataclass
class EchoEpisode:
    calls: int = 0
    replies_left: int | None = None  # a talking environment: answers every turn this many times, then done

    def respond(self, turn: ModelTurn) -> Observation:
        if self.replies_left is not None:
            self.replies_left -= 1
            return Observation(None, done=True, reward=0.5) if self.replies_left < 0 else Observation("ok", reward=1.0)
        observation = run_calls(turn, {"echo": lambda text: text}, 1.0)
        self.calls += observation.valid_calls
        return observation

    def final_state(self) -> str:
        return json.dumps({"calls": self.calls})


class EchoEnvironment:
    name, tools, scores_state = "echo", (ECHO,), True

    def __init__(self, replies: int | None = None):
        self.replies = replies

    def start(self, prompt: Prompt) -> EchoEpisode:
        return EchoEpisode(replies_left=self.replies)

    def score_state(self, final_state: str, prompt: Prompt) -> Verdict:
        ok = json.loads(final_state)["calls"] == int(prompt.reference)
        return Verdict(Outcome.CORRECT if ok else Outcome.WRONG, float(ok))


class ScriptedEngine:
    """continue_tokens returns the scripted turns in order, one list per call (row by row)."""

    def __init__(self, calls: list[list[list[int]]]):
        self.calls, self.seen = list(calls), []

    def continue_tokens(self, contexts, group_size, sampling):
        self.seen.append(([list(c) for c in contexts], group_size, sampling.max_new_tokens))
        turns = self.calls.pop(0)
        return [SampledTurn(ids[:sampling.max_new_tokens], [-0.5] * len(ids[:sampling.max_new_tokens]),
                            ids[-1] == EOS and len(ids) <= sampling.max_new_tokens) for ids in turns]


EOS = None  # set from the tokenizer below


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    global EOS
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    EOS = tok.eos_token_id
    return tok


def chars(tokenizer, text: str) -> list[int]:
    """One id per character, as a character-level sampler could emit them, special-token text included."""
    return [tokenizer.convert_tokens_to_ids(c) for c in text]


PROMPT = Prompt("echo/0", ({"role": "user", "content": "Echo it."},), "1")


def test_sampled_ids_are_kept_as_sampled_even_where_decode_then_encode_differs(tokenizer):
    call = chars(tokenizer, '<tool_call>{"name": "echo", "arguments": {"text": "<|im_end|>"}}</tool_call>') + [EOS]
    answer = chars(tokenizer, "Answer: 1") + [EOS]
    # the premise: re-encoding the decoded turn gives other ids (the text "<|im_end|>" becomes the control token)
    assert tokenizer(tokenizer.decode(call), add_special_tokens=False)["input_ids"] != call
    engine = ScriptedEngine([[call], [answer]])
    batch = EpisodeRunner(engine, tokenizer, EchoEnvironment(), Budgets(4, 200, 400)).generate(
        [PROMPT], 1, SamplingParams(seed=3))
    ids, mask = batch.completion_ids[0].tolist(), batch.completion_mask[0].tolist()
    env = ids[len(call):len(ids) - len(answer)]
    assert ids[:len(call)] == call and ids[len(ids) - len(answer):] == answer
    assert mask == [1] * len(call) + [0] * len(env) + [1] * len(answer)
    # the second turn continued the exact ids of prompt + first turn + environment turn
    assert engine.seen[1][0][0] == engine.seen[0][0][0] + call + env
    # the echoed "<|im_end|>" is plain characters in the environment turn: only the template's own end token is EOS
    assert env.count(EOS) == 1 and "<|im_end|>" in tokenizer.decode(env)
    assert batch.turns.turn_of_token[0].tolist() == [0] * len(call) + [-1] * len(env) + [1] * len(answer)
    assert batch.sampling_logprobs[0].tolist() == [-0.5] * len(call) + [0.0] * len(env) + [-0.5] * len(answer)
    record = batch.turns.records[0]
    assert (record.stop_reason, record.valid_calls, record.invalid_calls) == ("answered", 1, 0)
    assert [m["role"] for m in record.messages] == ["assistant", "tool", "assistant"]
    assert batch.completions == ["Answer: 1"] and not batch.truncated[0]
    assert json.loads(record.final_state) == {"calls": 1}
    # the call turn is a step; the final answer is not (the outcome scores it): with it a step of reward 0, the
    # group normalisation made answering look worse than calling again
    assert batch.turns.turn_mask[0].tolist() == [True, False, False, False]


def test_malformed_and_unknown_calls_are_counted_errors_not_exceptions(tokenizer):
    bad = chars(tokenizer, '<tool_call>{"name": "nope", "arguments": {}}</tool_call><tool_call>{oops</tool_call>')
    engine = ScriptedEngine([[bad + [EOS]], [chars(tokenizer, "done") + [EOS]]])
    batch = EpisodeRunner(engine, tokenizer, EchoEnvironment(), Budgets(3, 200, 400)).generate(
        [PROMPT], 1, SamplingParams(seed=0))
    record = batch.turns.records[0]
    assert (record.valid_calls, record.invalid_calls, record.stop_reason) == (0, 2, "answered")
    assert "unknown tool 'nope'" in record.messages[1]["content"] and "malformed" in record.messages[1]["content"]


def test_a_call_with_keys_besides_name_and_arguments_is_a_counted_error():
    """docs/agents.md: extra keys are one counted error told back to the model (an "id" key was accepted)."""
    from rlvr.agents.tool_calls import parse_turn

    call = '{"name": "echo", "arguments": {"text": "x"}}'
    assert [c.arguments for c in parse_turn(0, f"<tool_call>{call}</tool_call>", (ECHO,)).calls] == [{"text": "x"}]
    for extra in ('"id": "call_1"', '"type": "function"'):
        turn = parse_turn(0, f"<tool_call>{call[:-1]}, {extra}}}</tool_call>", (ECHO,))
        assert turn.calls == () and len(turn.errors) == 1 and "malformed tool call" in turn.errors[0], extra
    turn = parse_turn(0, '<tool_call>{"name": "echo"}</tool_call>', (ECHO,))  # a key missing is one error too
    assert turn.calls == () and len(turn.errors) == 1


def test_budgets_cut_episodes_and_mark_them_truncated(tokenizer):
    call = chars(tokenizer, '<tool_call>{"name": "echo", "arguments": {"text": "x"}}</tool_call>') + [EOS]
    # max_turns: the model calls a tool in its last turn, nobody reads the answer -> cut
    engine = ScriptedEngine([[call], [call]])
    batch = EpisodeRunner(engine, tokenizer, EchoEnvironment(), Budgets(2, 200, 400)).generate(
        [PROMPT], 1, SamplingParams())
    assert batch.turns.records[0].stop_reason == "max_turns" and bool(batch.truncated[0])
    assert int(batch.completion_mask[0].sum()) == 2 * len(call)  # the trajectory ends with the sampled call
    assert batch.turns.turn_mask[0].tolist() == [True, True]  # a cut episode's turns are all steps
    # tokens per turn: the turn is cut at 10 tokens, before its stop token
    engine = ScriptedEngine([[call]])
    batch = EpisodeRunner(engine, tokenizer, EchoEnvironment(), Budgets(4, 10, 400)).generate(
        [PROMPT], 1, SamplingParams())
    assert batch.turns.records[0].stop_reason == "turn_tokens" and bool(batch.truncated[0])
    assert batch.completion_ids.shape[1] == 10 and engine.seen[0][2] == 10
    # tokens per episode: the environment's answer would leave no room for another model turn
    engine = ScriptedEngine([[call]])
    batch = EpisodeRunner(engine, tokenizer, EchoEnvironment(), Budgets(4, 200, len(call) + 5)).generate(
        [PROMPT], 1, SamplingParams())
    assert batch.turns.records[0].stop_reason == "episode_tokens" and bool(batch.truncated[0])
    assert batch.completion_ids.shape[1] == len(call)


def test_an_engine_without_turns_is_refused_with_one_message(tokenizer):
    class SingleTurnOnly:
        def generate(self, prompts, group_size, sampling):
            raise AssertionError("never called")

    with pytest.raises(EpisodeEngineError, match="cannot run multi-turn episodes.*kind=hf or hf_process"):
        EpisodeRunner(SingleTurnOnly(), tokenizer, EchoEnvironment(), Budgets())


def test_turn_seeds_make_episodes_repeatable_and_seed_dependent(tiny_model_dir):
    engine, model = _talking_engine(tiny_model_dir)
    run = lambda seed: EpisodeRunner(engine, engine.tokenizer, EchoEnvironment(replies=2),  # noqa: E731
                                     Budgets(3, 6, 60)).generate([PROMPT], 2, SamplingParams(seed=seed))
    a, b, c = run(5), run(5), run(6)
    assert torch.equal(a.completion_ids, b.completion_ids) and not torch.equal(a.completion_ids, c.completion_ids)


def test_each_turn_samples_with_its_own_seed_drawn_from_the_call_s_seed(tokenizer):
    """Turn t of every episode gets seed t of a stream drawn from the call's seed: a resumed run replays the same
    episodes, and later turns are not the first turn's draw again (one seed for every turn passed the
    repeatability test above)."""
    from rlvr.agents.episodes import _turn_seeds

    class SeedRecorder(ScriptedEngine):
        def continue_tokens(self, contexts, group_size, sampling):
            self.seeds = getattr(self, "seeds", []) + [sampling.seed]
            return super().continue_tokens(contexts, group_size, sampling)

    call = chars(tokenizer, '<tool_call>{"name": "echo", "arguments": {"text": "x"}}</tool_call>') + [EOS]
    engine = SeedRecorder([[call], [call], [chars(tokenizer, "ok") + [EOS]]])
    EpisodeRunner(engine, tokenizer, EchoEnvironment(), Budgets(3, 200, 400)).generate([PROMPT], 1,
                                                                                      SamplingParams(seed=11))
    assert engine.seeds == _turn_seeds(SamplingParams(seed=11), 3) and engine.seeds[0] == 11
    assert len(set(engine.seeds)) == 3 and _turn_seeds(SamplingParams(seed=12), 3)[1:] != engine.seeds[1:]
    assert _turn_seeds(SamplingParams(seed=None), 3) == [None, None, None]  # unseeded stays unseeded


def _talking_engine(tiny_model_dir):
    """The tiny model, in-process, with stop ids widened to most characters so that its random turns end after a
    few tokens and the talking environment gets several turns in."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rlvr.rollout.hf import HFRolloutEngine

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).float().eval()
    engine = HFRolloutEngine(model, tokenizer)
    engine.stop_ids = sorted(set(range(3, len(tokenizer))) - set(chars(tokenizer, "abcdefgh")))
    return engine, model


def _episodes(tiny_model_dir):
    engine, model = _talking_engine(tiny_model_dir)
    runner = EpisodeRunner(engine, engine.tokenizer, EchoEnvironment(replies=2), Budgets(3, 6, 60))
    torch.manual_seed(0)
    return runner.generate([PROMPT, Prompt("echo/1", ({"role": "user", "content": "Again?"},), "0")], 3,
                           SamplingParams(temperature=1.0, seed=11)), model


def test_sampler_and_trainer_agree_per_sampled_token_across_environment_turns(tiny_model_dir):
    batch, model = _episodes(tiny_model_dir)
    inside = torch.arange(batch.completion_ids.shape[1]) < row_extent(batch.completion_mask)[:, None]
    holes = (batch.turns.turn_of_token == -1) & inside
    assert int(batch.turns.turn_of_token.amax(1).max()) == 2 and holes.any()  # real multi-turn rows with env tokens
    trainer = batched_logprobs(model, batch.prompt_ids, batch.prompt_mask, batch.prompt_index, batch.completion_ids,
                               batch.completion_mask, 1.0, 4)
    sampled = batch.completion_mask.bool()
    assert torch.allclose(trainer[sampled], batch.sampling_logprobs[sampled], atol=1e-4)
    assert (trainer[~sampled] == 0).all() and (batch.sampling_logprobs[~sampled] == 0).all()


def test_environment_tokens_get_no_gradient_and_their_sampling_logprobs_are_never_read(tiny_model_dir):
    batch, model = _episodes(tiny_model_dir)
    env = (batch.turns.turn_of_token == -1) & (batch.completion_mask == 0)
    advantages = torch.linspace(-1, 1, batch.size)
    spec = LossSpec("ppo_clip", ClipRange(0.2, 0.2), "token_mean", "k3", 0.0, 0.0)
    settings = UpdateSettings(spec, 1.0, 4, 1.0, 60, CorrectionSettings("tis", "token", 2.0, None))

    def updated(behaviour: torch.Tensor) -> torch.nn.Module:
        policy = copy.deepcopy(model).train()
        train = TrainBatch(batch.prompt_ids, batch.prompt_mask, batch.prompt_index, batch.completion_ids,
                           batch.completion_mask.float(), advantages, None, None, behaviour)
        train_step(policy, train, torch.optim.SGD(policy.parameters(), lr=1.0), settings)
        return policy

    clean = updated(batch.sampling_logprobs)
    garbage = updated(batch.sampling_logprobs.masked_fill(env, 7.0))  # nonsense at environment positions only
    before = torch.cat([p.flatten() for p in model.parameters()])
    after = [torch.cat([p.flatten() for p in m.parameters()]) for m in (clean, garbage)]
    assert not torch.allclose(after[0], before)  # the update moved the weights
    assert torch.equal(after[0], after[1])  # and nothing read the environment positions' sampling log-probs
    # the loss's gradient with respect to each position's log-prob is zero at environment positions
    from rlvr.algorithms.loss import policy_loss

    logprobs = batch.sampling_logprobs.clone().requires_grad_(True)
    terms = policy_loss(logprobs, logprobs.detach(), None, advantages, batch.completion_mask.float(), spec,
                        float(batch.completion_mask.sum()))
    (grad,) = torch.autograd.grad(terms.loss, logprobs)
    assert grad[env].abs().max() == 0 and grad[batch.completion_mask.bool()].abs().min() > 0


def test_a_trajectory_with_holes_is_packed_and_matches_the_padded_forward_with_gradients(tiny_model_dir, monkeypatch):
    import rlvr.model.logprobs as lp

    batch, model = _episodes(tiny_model_dir)
    args = (batch.prompt_ids, batch.prompt_mask, batch.prompt_index, batch.completion_ids, batch.completion_mask, 0.9)
    sampled = batch.completion_mask.bool()
    assert not lp.is_prefix_mask(batch.completion_mask)  # the premise: holes

    def grads(fn):
        model.zero_grad()
        values = fn(model, *args)[0]
        (values[sampled] * torch.linspace(0.5, 1.5, int(sampled.sum()))).sum().backward()
        return values.detach(), [p.grad.clone() for p in model.parameters()]

    padded, padded_grads = grads(lp.padded_completion_logprobs)
    monkeypatch.setattr(lp, "padded_completion_logprobs", None)  # the packed path must not fall back to it
    packed, packed_grads = grads(lp.completion_logprobs)
    torch.testing.assert_close(packed[sampled], padded[sampled], rtol=0, atol=1e-5)
    assert (packed[~sampled] == 0).all()
    for a, b in zip(packed_grads, padded_grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_evaluation_over_episodes_counts_pass_at_k_and_tool_use(tokenizer):
    from rlvr.agents.scoring import EpisodeRewarder
    from rlvr.config.run import EvalConfig
    from rlvr.evaluation.evaluate import evaluate

    call = chars(tokenizer, '<tool_call>{"name": "echo", "arguments": {"text": "x"}}</tool_call>') + [EOS]
    answer = chars(tokenizer, "Answer: 1") + [EOS]
    # one prompt, n = 2: row 0 calls once then answers (state: 1 call = the reference, correct); row 1 answers at
    # once (0 calls, wrong). Turn 2 only continues row 0.
    engine = ScriptedEngine([[call, answer], [answer]])
    result = evaluate(EpisodeRunner(engine, tokenizer, EchoEnvironment(), Budgets(3, 200, 400)),
                      EpisodeRewarder(None, EchoEnvironment(), 1.0), [PROMPT],
                      EvalConfig(samples=2, greedy=False, ks=[1, 2]), max_new_tokens=8)
    # pass@1 = 1/2; pass@2 = 1 - C(1, 2) / C(2, 2) = 1; one call, valid: share 1.0, 0.5 per episode; turns (2 + 1) / 2
    assert (result.pass_at_1, result.pass_at_k[2]) == (0.5, 1.0)
    assert result.episodes == {"valid_call_share": 1.0, "calls_per_episode": 0.5, "valid_calls_per_episode": 0.5,
                               "turns_per_episode": 1.5, "stop_answered": 1.0}
    assert result.as_json()["episode/valid_call_share"] == 1.0 and "valid calls 1.000" in result.summary()


def test_rendering_lists_tools_when_the_template_ignores_them_and_writes_observations_in_the_chosen_role(tokenizer):
    from rlvr.agents.chat import EnvironmentTurn, render_prompt

    shot = Prompt("p", ({"role": "user", "content": "Q1"}, {"role": "assistant", "content": "call"},
                        {"role": "tool", "content": "R1"}, {"role": "user", "content": "Q2"}), "1")
    listed = render_prompt(tokenizer, shot, (ECHO,))  # the tiny template ignores tools=: a system message lists it
    assert listed.startswith("<|im_start|>system\nYou can use these tools:\n") and '"name": "echo"' in listed
    assert "<|im_start|>tool\nR1<|im_end|>" in listed
    as_user = render_prompt(tokenizer, shot, (), role="user")
    assert "system" not in as_user and "<|im_start|>user\nR1<|im_end|>" in as_user
    assert as_user.endswith("<|im_start|>assistant\n")
    turn = EnvironmentTurn.of(tokenizer, "user")
    assert (turn.before, turn.after, turn.role) == ("\n<|im_start|>user\n", "<|im_end|>\n<|im_start|>assistant\n",
                                                    "user")


def test_a_turn_out_of_tokens_after_its_calls_ends_after_the_last_call_closed_by_the_template(tokenizer):
    call = chars(tokenizer, '<tool_call>{"name": "echo", "arguments": {"text": "x"}}</tool_call>')
    rambling = call + call + chars(tokenizer, "result is 5")  # two calls, then no stop token within the budget
    answer = chars(tokenizer, "Answer: 1") + [EOS]
    engine = ScriptedEngine([[rambling], [answer]])
    batch = EpisodeRunner(engine, tokenizer, EchoEnvironment(), Budgets(3, len(rambling), 400)).generate(
        [PROMPT], 1, SamplingParams())
    ids, mask = batch.completion_ids[0].tolist(), batch.completion_mask[0].tolist()
    kept = 2 * len(call)
    assert ids[:kept] == call + call and mask[:kept] == [1] * kept  # the calls as sampled; the made-up rest dropped
    assert ids[kept] == EOS and mask[kept] == 0  # the turn closed by the template, not by the model
    record = batch.turns.records[0]
    assert (record.stop_reason, record.valid_calls, batch.completions[0]) == ("answered", 2, "Answer: 1")
    assert engine.seen[1][0][0][-(len(ids) - len(answer)):] == ids[:-len(answer)]  # turn 2 saw exactly that
    # out of tokens inside a call (no call closed): the episode is cut, as before
    engine = ScriptedEngine([[call[:-3]]])
    batch = EpisodeRunner(engine, tokenizer, EchoEnvironment(), Budgets(3, len(call) - 3, 400)).generate(
        [PROMPT], 1, SamplingParams())
    assert batch.turns.records[0].stop_reason == "turn_tokens" and bool(batch.truncated[0])
