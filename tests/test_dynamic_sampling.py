"""DAPO dynamic sampling: keep drawing until the batch holds the requested number of groups with reward
spread, within a cap on extra prompts; group selection and concatenation keep every row's data together."""
from __future__ import annotations

import pytest
import torch

from rlvr.grpo.dynamic_sampling import draw_informative_groups, next_request, select_groups
from rlvr.types import Outcome, Prompt, RolloutBatch, ScoredBatch, Verdict, concat_groups

G = 2


def fake_draw(reward_plan: list[list[float]], prompt_len: int = 3, completion_len: int = 4):
    """draw(n) returns the next n groups; group k has rewards reward_plan[k] and distinct token ids (= k)."""
    state = {"next": 0, "calls": []}

    def draw(n: int) -> tuple[RolloutBatch, ScoredBatch]:
        first = state["next"]
        state["next"] += n
        state["calls"].append(n)
        groups = list(range(first, first + n))
        # widths vary between calls so that concatenation has to re-pad
        P, C = prompt_len + len(state["calls"]), completion_len + len(state["calls"])
        rewards = torch.tensor([r for k in groups for r in reward_plan[k]])
        rollouts = RolloutBatch(
            prompts=[Prompt(f"p{k}", ({"role": "user", "content": str(k)},), str(k)) for k in groups],
            group_size=G, prompt_ids=torch.tensor([[k + 100] * P for k in groups]),
            prompt_mask=torch.ones(n, P, dtype=torch.long),
            completion_ids=torch.tensor([[k] * C for k in groups for _ in range(G)]),
            completion_mask=torch.ones(n * G, C, dtype=torch.long),
            sampling_logprobs=torch.full((n * G, C), -1.0), completions=[f"c{k}" for k in groups for _ in range(G)],
            truncated=torch.zeros(n * G, dtype=torch.bool))
        verdicts = [Verdict(Outcome.CORRECT if r > 0 else Outcome.WRONG, float(r)) for r in rewards.tolist()]
        scored = ScoredBatch(rewards, torch.ones(n * G, dtype=torch.bool), {"math": verdicts}, {"math": rewards})
        return rollouts, scored

    return draw, state


def spread(scored: ScoredBatch) -> list[bool]:
    pairs = scored.rewards.view(-1, G)
    return (pairs[:, 0] != pairs[:, 1]).tolist()


def test_draws_until_enough_informative_groups() -> None:
    # groups 0,1: tied (both wrong / both right); 2: spread; 3-9: tied; 10, 11: spread; 12, 13: tied
    plan = [[0, 0], [1, 1], [1, 0]] + [[0, 0]] * 7 + [[0, 1], [1, 0], [1, 1], [0, 0]]
    draw, state = fake_draw(plan)
    rollouts, scored, stats = draw_informative_groups(draw, wanted=2, max_extra_prompts=12)
    # call 1: groups 0,1, none informative -> share (0+1)/(2+2) = 1/4 -> ask ceil(2 / (1/4)) = 8 (cap left 12)
    # call 2: groups 2..9, one informative -> share (1+1)/(10+2) = 1/6 -> ask ceil(1 / (1/6)) = 6, cap left 12-8 = 4
    # call 3: groups 10..13 -> group 10 is the second informative one
    assert state["calls"] == [2, 8, 4]
    assert stats.extra_prompts == 12 and stats.rounds == 3
    assert stats.informative_groups == 2 and stats.topped_up == 0
    assert [p.id for p in rollouts.prompts] == ["p2", "p10"]
    assert spread(scored) == [True, True]  # never an all-tied batch when the cap allows


def test_next_request_follows_the_informative_share_within_the_cap() -> None:
    # share (3+1)/(6+2) = 1/2: 2 missing -> 4 prompts
    assert next_request(missing=2, informative=3, drawn=6, cap_left=10) == 4
    # share (0+1)/(4+2) = 1/6: 4 missing -> 24, capped at 12
    assert next_request(missing=4, informative=0, drawn=4, cap_left=12) == 12
    # share (9+1)/(10+2) = 5/6: 1 missing -> ceil(1.2) = 2
    assert next_request(missing=1, informative=9, drawn=10, cap_left=5) == 2


def test_cap_reached_tops_up_with_tied_groups_and_counts_them() -> None:
    plan = [[0, 0], [1, 1], [0, 0], [1, 0], [1, 0], [1, 0]]
    draw, state = fake_draw(plan)
    rollouts, scored, stats = draw_informative_groups(draw, wanted=2, max_extra_prompts=2)
    # call 1: groups 0,1 tied -> ask 8, capped at 2 -> call 2: groups 2 (tied), 3 (spread) -> cap reached
    assert state["calls"] == [2, 2]
    assert stats.extra_prompts == 2 and stats.informative_groups == 1 and stats.topped_up == 1
    assert [p.id for p in rollouts.prompts] == ["p3", "p0"]  # informative first, then the first tied group
    assert rollouts.size == 4 and scored.rewards.tolist() == [1.0, 0.0, 0.0, 0.0]


def test_no_extra_draw_when_first_batch_is_informative_or_cap_is_zero() -> None:
    draw, state = fake_draw([[1, 0], [0, 1], [1, 1]])
    _, _, stats = draw_informative_groups(draw, wanted=2, max_extra_prompts=5)
    assert state["calls"] == [2] and stats.extra_prompts == 0
    draw, state = fake_draw([[1, 1], [0, 0], [1, 0]])
    _, scored, stats = draw_informative_groups(draw, wanted=2, max_extra_prompts=0)
    assert state["calls"] == [2] and stats.topped_up == 2 and spread(scored) == [False, False]


def test_concatenated_rows_keep_their_tokens_and_padding_is_masked() -> None:
    plan = [[0, 0], [1, 0], [0, 1]]
    draw, _ = fake_draw(plan)
    first, second = draw(1), draw(2)  # widths P 4 / 5, C 5 / 6
    rollouts, scored = concat_groups([first, second])
    assert rollouts.prompt_ids.shape == (3, 5) and rollouts.completion_ids.shape == (6, 6)
    # the first group's prompt is left-padded by one column, its completions right-padded by one
    assert rollouts.prompt_mask[0].tolist() == [0, 1, 1, 1, 1]
    assert rollouts.prompt_ids[0, 1:].tolist() == [100] * 4
    assert rollouts.completion_mask[0].tolist() == [1, 1, 1, 1, 1, 0]
    assert rollouts.completion_ids[2].tolist() == [1] * 6  # group 1's completions keep their own tokens
    assert rollouts.sampling_logprobs[0, -1] == 0 and rollouts.sampling_logprobs[0, 0] == -1
    assert scored.rewards.tolist() == [0.0, 0.0, 1.0, 0.0, 0.0, 1.0]
    assert [v.score for v in scored.verdicts["math"]] == scored.rewards.tolist()
    assert rollouts.completions == ["c0", "c0", "c1", "c1", "c2", "c2"]


def test_select_groups_picks_rows_of_each_group() -> None:
    draw, _ = fake_draw([[0, 0], [1, 0], [0, 1]])
    rollouts, scored = select_groups(*draw(3), [2, 0])
    assert [p.id for p in rollouts.prompts] == ["p2", "p0"]
    assert rollouts.completion_ids[:, 0].tolist() == [2, 2, 0, 0]
    assert rollouts.prompt_ids[:, 0].tolist() == [102, 100]
    assert scored.rewards.tolist() == [0.0, 1.0, 0.0, 0.0]


# --- "auto": the default run samples until groups carry signal, where that applies ---

def _auto_config(*overrides: str):
    from rlvr.config.run import load_config

    return load_config(None, list(overrides))


@pytest.mark.parametrize("overrides, world_size, expected", [
    ((), 1, True),  # the default run: one process, synchronous, GRPO's group baseline
    ((), 2, False),  # torchrun ranks pick prompts from rank-local rewards: off, not an error
    (("ray.enabled=true", "ray.trainer_ranks=2"), 1, False),  # Ray trainer ranks, the same reason
    (("rollout.engine.kind=hf_process", "rollout.engine.max_staleness=1"), 1, False),  # next prompts before rewards
    (("algorithm.advantage=reinforce_pp",), 1, False),  # a batch baseline: tied groups still carry signal
    (("rollout.dynamic_sampling.enabled=false",), 1, False),  # explicit settings win
    (("rollout.dynamic_sampling.enabled=true",), 2, True),  # (and the rank checks then refuse it, loudly)
], ids=["default", "ranks", "ray-ranks", "async", "batch-baseline", "off", "on"])
def test_auto_is_on_only_where_dynamic_sampling_applies(overrides, world_size, expected):
    from rlvr.config.rules import dynamic_sampling_applies, with_dynamic_sampling_decided

    config = _auto_config(*overrides)
    assert dynamic_sampling_applies(config, world_size) is expected
    decided = with_dynamic_sampling_decided(config, world_size)
    assert decided.rollout.dynamic_sampling.enabled is expected
    assert decided.rollout.group_size == config.rollout.group_size  # the rest of the config is untouched


def test_auto_is_not_an_error_where_an_explicit_true_is():
    from rlvr.config.base import ConfigError

    _auto_config("algorithm.advantage=reinforce_pp")  # auto: quietly off
    with pytest.raises(ConfigError, match="dynamic_sampling"):
        _auto_config("algorithm.advantage=reinforce_pp", "rollout.dynamic_sampling.enabled=true")


def _episode_part(turn_of_token: list[list[int]], turn_rewards: list[list[float]], tag: str):
    """One prompt of G = 2 episodes, its tokens all sampled (only `turns` matters here)."""
    from rlvr.agents.protocol import EpisodeRecord
    from rlvr.types import Turns

    C = len(turn_of_token[0])
    rewards = torch.tensor([1.0, 0.0])
    rollouts = RolloutBatch([Prompt(tag, ({"role": "user", "content": tag},), "1")], G, torch.ones(1, 1),
                            torch.ones(1, 1), torch.zeros(G, C), torch.ones(G, C), torch.zeros(G, C), ["a", "b"],
                            torch.zeros(G, dtype=torch.bool),
                            Turns(torch.tensor(turn_of_token), torch.tensor(turn_rewards),
                                  torch.tensor([[True] * len(turn_rewards[0])] * G),
                                  [EpisodeRecord(final_state=f"{tag}{j}") for j in range(G)]))
    return rollouts, ScoredBatch(rewards, torch.ones(G, dtype=torch.bool), {"math": [Verdict(Outcome.CORRECT, 1.0),
                                 Verdict(Outcome.WRONG, 0.0)]}, {"math": rewards})


def test_selection_and_concatenation_keep_the_episodes_turns() -> None:
    """Concat_groups and select_groups once dropped RolloutBatch.turns, so that an episode batch came out
    of dynamic sampling as a single-turn one (no process credit, no episode logs)."""
    short = _episode_part([[0, -1, 1], [0, 0, -1]], [[0.5, 1.0], [0.0, 0.0]], "s")  # C = 3, T = 2
    long = _episode_part([[0, 0, -1, -1, 1], [0, -1, 1, -1, 2]], [[1.0, 0.0, 0.0], [0.0, 0.5, 1.0]], "l")  # 5, 3
    joined, _ = concat_groups([short, long])
    turns = joined.turns
    # the short part padded: -1 (no model turn) to width 5, turn rewards 0 and turn mask False to 3 turns
    assert turns.turn_of_token.tolist() == [[0, -1, 1, -1, -1], [0, 0, -1, -1, -1], [0, 0, -1, -1, 1],
                                            [0, -1, 1, -1, 2]]
    assert turns.turn_rewards.tolist() == [[0.5, 1.0, 0.0], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.5, 1.0]]
    assert turns.turn_mask.tolist() == [[True, True, False]] * 2 + [[True, True, True]] * 2
    assert [r.final_state for r in turns.records] == ["s0", "s1", "l0", "l1"]
    picked, _ = select_groups(joined, concat_groups([short, long])[1], [1])  # the second prompt's group
    assert picked.turns.turn_of_token.tolist() == turns.turn_of_token[2:].tolist()
    assert [r.final_state for r in picked.turns.records] == ["l0", "l1"]
    single = (short[0], short[1])
    single[0].turns = None
    with pytest.raises(ValueError, match="cannot be joined with single-turn batches"):
        concat_groups([single, long])


def _outcome_tied(turn_rewards: list[list[float]], tag: str):
    """An episode group whose two outcomes tie (both 0) and whose turns earned `turn_rewards`."""
    rollouts, _ = _episode_part([[0, -1, 1], [0, 0, -1]], turn_rewards, tag)
    zero = torch.zeros(G)
    return rollouts, ScoredBatch(zero, torch.ones(G, dtype=torch.bool), {"math": [Verdict(Outcome.WRONG, 0.0)] * G},
                                 {"math": zero})


def test_with_step_credit_a_group_whose_step_rewards_differ_is_kept() -> None:
    """episode.credit=process: outcomes 0, 0 tie, but step rewards (1, 0) vs (0, 0) do not, and the
    process term gives that group nonzero advantages; judged on outcomes alone it was dropped."""
    from rlvr.grpo.dynamic_sampling import tied_mask

    parts = [_outcome_tied([[0.0, 0.0], [0.0, 0.0]], "flat"), _outcome_tied([[1.0, 0.0], [0.0, 0.0]], "steps"),
             _outcome_tied([[1.0, 1.0], [1.0, 1.0]], "all-paid")]
    calls = []

    def draw(n: int):
        part = parts[len(calls)]
        calls.append(n)
        return part

    rollouts, _, stats = draw_informative_groups(draw, wanted=1, max_extra_prompts=2, step_credit=True)
    # round 1: "flat" is tied -> share (0+1)/(1+2) -> asks min(cap 2, ceil(1 * 3)) = 2; the fake answers "steps"
    assert [p.id for p in rollouts.prompts] == ["steps"] and stats.topped_up == 0 and calls == [1, 2]
    assert tied_mask(*parts[1], step_credit=True) == [False]
    assert tied_mask(*parts[1], step_credit=False) == [True]  # outcome credit: the step rewards are never read
    assert tied_mask(*parts[2], step_credit=True) == [True]  # every step paid alike: nothing to tell apart
    assert tied_mask(*_episode_part([[0, -1, 1], [0, 0, -1]], [[0.0, 0.0], [0.0, 0.0]], "o"), step_credit=True) == [
        False]  # outcomes 1 vs 0 differ whatever the steps


def test_auto_is_off_with_a_process_scorer_and_an_explicit_true_is_refused():
    from rlvr.config.base import ConfigError
    from rlvr.config.rules import dynamic_sampling_applies

    scorer = ("task.name=calculator", "episode.credit=process", "episode.process_reward=mod:fn")
    assert dynamic_sampling_applies(_auto_config(*scorer), 1) is False  # its scores come after the draw
    assert dynamic_sampling_applies(_auto_config(*scorer[:2]), 1) is True
    with pytest.raises(ConfigError, match="before episode.process_reward scores"):
        _auto_config(*scorer, "rollout.dynamic_sampling.enabled=true")
