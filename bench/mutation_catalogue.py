"""The one-line mutations bench/mutations.py applies, one at a time (issue 24, part 1).

Each names the README claim it attacks, the line (stripped; it must occur exactly once in the file), its
broken replacement, and the tests that must fail. Add one whenever README gains a claim that a test protects.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutation:
    name: str  # the claim, in a few words (--only matches on it)
    path: str  # relative to the repository root
    original: str  # the line as it stands, stripped
    replacement: str  # the broken line (re-indented like the original)
    tests: tuple[str, ...]  # pytest ids, run from the repository root


def _m(name: str, path: str, original: str, replacement: str, *tests: str) -> Mutation:
    return Mutation(name, path, original, replacement, tests)


# --- the math: advantages, objectives, KL, aggregation, pass@k (README "Algorithms") ------------------------
MATH = [
    _m("advantage sign", "rlvr/algorithms/advantages.py",
       "return torch.where(keep, (grouped - mean) / (std + eps), 0.0).view(-1)",
       "return torch.where(keep, (mean - grouped) / (std + eps), 0.0).view(-1)",
       "tests/test_advantages.py::test_two_groups_by_hand"),
    _m("advantage std is Bessel's", "rlvr/algorithms/advantages.py",
       "var = torch.where(ok, (grouped - mean) ** 2, 0.0).sum(dim=1, keepdim=True) / (count - 1).clamp(min=1)",
       "var = torch.where(ok, (grouped - mean) ** 2, 0.0).sum(dim=1, keepdim=True) / count.clamp(min=1)",
       "tests/test_advantages.py::test_two_groups_by_hand"),
    _m("rloo leave-one-out scale", "rlvr/algorithms/advantages.py",
       "scale = count / (count - 1).clamp(min=1)", "scale = 1.0",
       "tests/test_family_advantages.py::test_two_groups_by_hand"),
    _m("tied groups get no advantage", "rlvr/algorithms/advantages.py",
       "return ~((high > low) & (ok.sum(dim=1) > 1))", "return ~(ok.sum(dim=1) > 1)",
       "tests/test_advantages.py::test_tied_group_is_exactly_zero"),
    _m("ppo clip: pessimistic min", "rlvr/algorithms/objectives.py",
       "return Surrogate(-torch.minimum(unclipped, clipped), binds, binds & (ratio > 1.0))",
       "return Surrogate(-torch.maximum(unclipped, clipped), binds, binds & (ratio > 1.0))",
       "tests/test_loss.py::test_ppo_clip_each_region"),
    _m("ppo clip: the clamp", "rlvr/algorithms/objectives.py",
       "clipped = torch.clamp(ratio, 1.0 - clip.low, 1.0 + clip.high) * adv",
       "clipped = ratio * adv",
       "tests/test_loss.py::test_ppo_clip_each_region"),
    _m("ratio is pi / pi_old", "rlvr/algorithms/objectives.py",
       "return _clipped_surrogate(torch.exp(logprobs - old_logprobs), _per_token(advantages), clip)",
       "return _clipped_surrogate(torch.exp(old_logprobs - logprobs), _per_token(advantages), clip)",
       "tests/test_loss.py::test_ppo_clip_each_region"),
    _m("kl k3 formula", "rlvr/algorithms/loss.py",
       "return torch.exp(delta) - delta - 1.0", "return torch.exp(delta) - 1.0",
       "tests/test_loss.py::test_kl_k3_by_hand"),
    _m("kl k3 direction", "rlvr/algorithms/loss.py",
       "delta = ref_logprobs - logprobs", "delta = logprobs - ref_logprobs",
       "tests/test_loss.py::test_kl_k3_by_hand"),
    _m("kl penalty sign in the loss", "rlvr/algorithms/loss.py",
       "loss = policy + spec.beta * kl - spec.entropy_coef * mean_entropy",
       "loss = policy - spec.beta * kl - spec.entropy_coef * mean_entropy",
       "tests/test_loss.py::test_grpo_loss_by_hand"),
    _m("sequence_mean averages per sequence", "rlvr/algorithms/loss.py",
       "return (values * mask).sum(dim=-1) / mask.sum(dim=-1).clamp(min=1.0)",
       "return (values * mask).sum(dim=-1)",
       "tests/test_loss.py::test_sequence_mean_by_hand"),
    _m("pass@k unbiased estimator", "rlvr/evaluation/voting.py",
       "return float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))  # exact, then one rounding",
       "return float(Fraction(c, n))",
       "tests/test_voting.py::test_pass_at_k_hand_values"),
    _m("gradient clipping", "rlvr/training/update.py",
       "if not bool(full <= max_norm):  # NaN included: the step is then skipped, as with clip_grad_norm_",
       "if False:",
       "tests/test_update.py::test_grad_clipping_scheduler_and_zero_grad"),
]

# --- runs that survive: resume, RNG, the lock, OOM retry, pipeline stages (README "Runs that survive") ---------
RESUME = [
    _m("resume restores the weights", "rlvr/checkpoint/resume.py",
       "load_policy_weights(parts.policy, checkpoint.path / MODEL_DIR)", "pass",
       "tests/test_resume.py::test_sigterm_then_resume_is_bit_exact"),
    _m("resume restores AdamW", "rlvr/checkpoint/resume.py",
       "parts.optimizer.load_state_dict(state.optimizer)", "pass",
       "tests/test_resume.py::test_sigterm_then_resume_is_bit_exact"),
    _m("resume restores the critic", "rlvr/checkpoint/resume.py",
       "parts.critic.load_state_dict(state.critic)", "pass",
       "tests/test_resume.py::test_stateful_variants_resume_bit_exact"),
    _m("resume restores the RNG", "rlvr/checkpoint/resume.py",
       "restore_rng(rng)  # last: loading models and replaying the stream must not shift it", "pass",
       "tests/test_resume.py::test_sigterm_then_resume_is_bit_exact"),
    _m("resume restores numpy's RNG", "rlvr/checkpoint/state.py",
       'numpy.random.set_state(state["numpy"])', "pass",
       "tests/test_resume.py::test_rng_state_round_trip_includes_numpy"),
    _m("the run-directory lock", "rlvr/checkpoint/resume.py",
       "fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)", "fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)",
       "tests/test_resume.py::test_a_second_trainer_on_a_running_run_is_refused_and_the_first_goes_on"),
    _m("resume refuses another thread count", "rlvr/checkpoint/state.py",
       '"reward.deadline_s", "reward.retries", "samples_per_step")',
       '"reward.deadline_s", "reward.retries", "samples_per_step", "threads")',
       "tests/test_resume.py::test_resume_with_another_thread_count_is_one_clear_error"),
    _m("oom retry keeps the halved micro-batch", "rlvr/grpo/step.py",
       "optim.update_settings = replace(optim.update_settings, micro_batch_size=used)", "pass",
       "tests/test_oom_guard.py::test_the_halved_micro_batch_is_kept_for_the_next_steps"),
    _m("a full disk under torch.save is one clear error", "rlvr/errors.py",
       "WRITE_FAILURES = (OSError, RuntimeError)", "WRITE_FAILURES = (OSError,)",
       "tests/test_checkpoint_store.py::test_torch_save_on_a_full_disk_is_one_line_with_the_free_space"),
    _m("a full disk under safetensors is one clear error", "rlvr/errors.py",
       'return isinstance(err, WRITE_FAILURES) or type(err).__name__ == "SafetensorError"',
       "return isinstance(err, WRITE_FAILURES)",
       "tests/test_checkpoint_store.py::test_saving_a_model_on_a_full_disk_keeps_the_saved_one"),
    _m("pipeline stage resumes from its checkpoint", "rlvr/pipeline/runner.py",
       'if directory.exists() and latest_good(directory / "checkpoints", log=say) is None:',
       "if directory.exists():",
       "tests/test_pipeline.py::test_interrupted_model_stage_with_a_checkpoint_continues_in_its_own_directory"),
    _m("fsdp2 resume loads the shards", "rlvr/checkpoint/resume.py",
       "load_into_shards(parts.policy, parts.optimizer, checkpoint.path / MODEL_DIR, state.optimizer)", "pass",
       "tests/test_distributed.py::test_torchrun_fsdp2_resume_continues_the_run_exactly"),
    _m("cold start keeps the chat template", "rlvr/model/load.py",
       "if not tokenizer.chat_template:", "if tokenizer.chat_template:",
       "tests/test_cold_start.py::test_token_lengths_fit_short_rollouts"),
]

# --- the math verifier's guards (README "Verifiers", issue 24 part 3) -----------------------------------------
MATH_VERIFIER = [
    _m("math: a rounded decimal is no fraction", "rlvr/verifiers/math/forms.py",
       "MACHINE_DIGITS = 15  # significant digits a double always prints correctly (DBL_DIG)",
       "MACHINE_DIGITS = 10  # significant digits a double always prints correctly (DBL_DIG)",
       "tests/test_math_attacks.py::test_math_attack_scores_zero"),
    _m("math: double-precision rounding rule", "rlvr/verifiers/math/forms.py",
       "return abs(Fraction(decimal.strip()) - exact) < Fraction(1, 10 ** len(match.group(2)))", "return True",
       "tests/test_math_forms.py::test_machine_rounding_rule"),
    _m("math: two percents compare as written", "rlvr/verifiers/math/numbers.py",
       "return _percent_value(gold) == _percent_value(pred)", "return bool(gold_values & pred_values)",
       "tests/test_math_attacks.py::test_math_attack_scores_zero"),
    _m("math: value-changing words are no unit", "rlvr/verifiers/math/forms.py",
       "return not (VALUE_WORDS.intersection(words) or words[0] in _FIRST_ONLY)", "return True",
       "tests/test_math_attacks.py::test_math_attack_scores_zero"),
    _m("math: arrows are no value", "rlvr/verifiers/math/forms.py",
       "if arrow and not _ARROW.search(gold):", "if False:",
       "tests/test_math_attacks.py::test_math_attack_scores_zero"),
    _m("math: chains x = 3 = 4 are checked", "rlvr/verifiers/math/worker.py",
       "if any(not r.free_symbols and not close(r.lhs, r.rhs) for r in relations):", "if False:",
       "tests/test_math_forms.py::test_worker_reads_chains_and_inequalities"),
    _m("math: an inequality against an interval", "rlvr/verifiers/math/worker.py",
       "pred = [as_interval(exact_decimals(x), gold[0]) for x in parsed(pred_text)]",
       "pred = [exact_decimals(x) for x in parsed(pred_text)]",
       "tests/test_math_forms.py::test_worker_reads_chains_and_inequalities"),
    _m("math: a thin space before a unit", "rlvr/verifiers/math/extract.py",
       "if ch in \",;\" and i and text[i - 1] == \"\\\\\":"
       "  # '\\\\,' '\\\\;' are spacing ('12\\\\,\\\\text{cm}', issue 24)",
       "if False:", "tests/test_math_forms.py::test_equivalent_forms_are_correct"),
    _m("math: bounded scans of long completions", "rlvr/verifiers/math/scan.py",
       "FALLBACK_CHARS = 16_384  # the tail read by the fallbacks; a final sentence or paragraph is far shorter",
       "FALLBACK_CHARS = 10**7", "tests/test_math_attacks.py::test_adversarial_completions_cost_little_parent_cpu"),
]

# --- the code verifier decides in the parent, as Python would (README "Verifiers", issue 24 part 2) -----------
CODE_VERIFIER = [
    _m("code: floats compare exactly", "rlvr/verifiers/code/values.py",
       "return bool(got == want)", "return _close(got, want, 1e-9, [0])",
       "tests/test_code_semantics.py::test_forged_pass_is_wrong"),
    _m("code: a fresh NaN per decoded value", "rlvr/verifiers/code/wire.py",
       "value = json.loads(text, object_hook=self._object, parse_constant=lambda name: _CONSTANTS[name]())",
       "value = json.loads(text, object_hook=self._object)",
       "tests/test_code_semantics.py::test_what_python_calls_equal_passes"),
    _m("code: OrderedDict keeps its order", "rlvr/verifiers/code/harness.py",
       "if issubclass(t, OrderedDict):"
       "  # before dict: Python compares two OrderedDicts by order (C items: no overrides)",
       "if False:", "tests/test_code_semantics.py::test_forged_pass_is_wrong"),
    _m("code: no candidate names on the expected side", "rlvr/verifiers/code/reference.py",
       "if entry is None and name not in tested:  # issue #24: the candidate could define it to match", "if False:",
       "tests/test_code_semantics.py::test_form_the_parent_cannot_evaluate_is_unscorable"),
    _m("code: Fraction is the parent's", "rlvr/verifiers/code/values.py",
       'NAMES: dict[str, Any] = {**BUILTINS, "Counter": Counter, "OrderedDict": OrderedDict, "Fraction": Fraction}',
       'NAMES: dict[str, Any] = {**BUILTINS, "Counter": Counter, "OrderedDict": OrderedDict}',
       "tests/test_code_semantics.py::test_forged_pass_is_wrong"),
    _m("code: a speculative call gets its own bound", "rlvr/verifiers/code/verifier.py",
       "cut_after=(SPECULATIVE_MARK, config.time_limit_s * SPECULATIVE_SHARE))", "cut_after=None)",
       "tests/test_code_semantics.py::test_untaken_branch_that_hangs_costs_no_later_assert"),
    _m("code: an unanswered speculative call is dropped", "rlvr/verifiers/code/reference.py",
       "if i >= self.needed and i not in results:", "if False:",
       "tests/test_code_budget.py::test_speculative_call_without_an_answer_is_dropped_not_failed"),
    _m("code: the parent's CPU budget", "rlvr/verifiers/code/budget.py",
       "if time.thread_time() + cost_s > self.deadline:", "if False:",
       "tests/test_code_budget.py::test_the_budget_stops_the_parent"),
    _m("code: sum is budgeted", "rlvr/verifiers/code/values.py",
       "return sum(guarded(iterable), start)", "return sum(iterable, start)",
       "tests/test_code_budget.py::test_the_budget_stops_the_parent"),
    _m("code: a stream over its cap is closed", "rlvr/verifiers/code/sandbox_io.py",
       "if chunk:  # over the cap: close our end now (EOF just stops reading; the run closes it)", "if False:",
       "tests/test_sandbox.py::test_stream_over_its_cap_is_closed"),
]

# --- Ray: weights reach the actors; each rank keeps its own RNG (README "Ray") -------------------------------
RAY = [
    _m("ray weight sync sends the weights", "rlvr/cluster/ray_backend.py",
       'named = [(name, p.detach().to("cpu", copy=True)) for name, p in synced_parameters(model)]', "named = []",
       "tests/test_ray.py::test_weight_sync_reaches_the_actor_and_a_dead_actor_is_one_clear_error"),
    _m("each rank resumes its own RNG", "rlvr/distributed/state.py",
       'return extra["rank_rng"][ctx.rank] if ctx.enabled else default',
       'return extra["rank_rng"][0] if ctx.enabled else default',
       "tests/test_ray_trainers.py::test_sigterm_stops_the_ranks_at_a_checkpoint_and_resume_continues"),
]

# --- same seed, same weights (README "Exactness promised", issue 28) -------------------------------------------
DETERMINISM = [
    _m("packed states read in one order", "rlvr/model/logprobs.py",
       "return out.last_hidden_state[0].index_select(0, packed.state_index)",
       "return out.last_hidden_state[0, packed.state_index]",
       "tests/test_determinism.py::test_packed_backward_sums_a_groups_shared_state_in_one_order"),
    _m("fused head sums embedding grads in one order", "rlvr/model/fused_head.py",
       "weight.grad.index_add_(0, ids, rows)", "weight.grad.index_put_((ids,), rows, accumulate=True)",
       "tests/test_determinism.py::test_packed_backward_sums_a_groups_shared_state_in_one_order"),
    _m("verdicts placed by row, not arrival", "rlvr/rewards/pool.py",
       "self._verdicts[row] = verdicts", "self._verdicts[len(self._verdicts) - self._missing] = verdicts",
       "tests/test_determinism.py::test_late_verifier_workers_change_nothing"),
    _m("the run is seeded", "rlvr/seeding.py",
       "torch.manual_seed(seed)", "torch.seed()",
       "tests/test_determinism.py::test_two_runs_of_one_seed_are_bit_identical"),
]

# --- data parallel: the full-batch gradient is the sum of the ranks' (README "Scale-out") -------------------
DISTRIBUTED = [
    _m("ddp gradient sum", "rlvr/distributed/wrap.py",
       "return dist.all_reduce(bucket.buffer(), async_op=True).get_future().then(lambda fut: fut.value()[0])",
       "return dist.all_reduce(bucket.buffer().div_(dist.get_world_size()), async_op=True).get_future().then("
       "lambda fut: fut.value()[0])",
       "tests/test_distributed.py::test_two_ranks_match_one_process_after_three_steps"),
    _m("fsdp2 gradient sum", "rlvr/distributed/wrap.py",
       "module.set_gradient_divide_factor(1.0)", "pass",
       "tests/test_distributed.py::test_two_ranks_match_one_process_after_three_steps"),
    _m("ddp uses the summing hook", "rlvr/distributed/wrap.py",
       "ddp.register_comm_hook(None, _sum_allreduce_hook)", "pass",
       "tests/test_distributed.py::test_two_ranks_match_one_process_after_three_steps"),
]

# --- the console's notes fit the run (README "What the log says", issue 24 part 4) ----------------------------
NOTES = [
    _m("converged is not collapsed", "rlvr/metrics/diagnostics.py", "CONVERGED = 0.75", "CONVERGED = 0.95",
       "tests/test_signals.py::test_the_measured_default_run_gets_no_advice_to_change_a_default"),
    _m("kl note needs two high steps", "rlvr/metrics/diagnostics.py",
       'PERSIST = {"kl": 2, "tied": 2, "entropy": 2}', 'PERSIST = {"kl": 1, "tied": 2, "entropy": 2}',
       "tests/test_signals.py::test_kl_alarm_needs_two_steps_and_names_the_largest_token"),
    _m("one tied step is no pattern", "rlvr/metrics/diagnostics.py",
       "found = {name: text for name, text in seen.items() if self.streak[name] >= PERSIST.get(name, 1)}",
       "found = seen", "tests/test_signals.py::test_tied_groups_are_explained_when_they_persist_and_only_at_onset"),
    _m("entropy note needs ties", "rlvr/metrics/diagnostics.py",
       "if _finite(entropy) and entropy < ENTROPY_FLOOR and _losing_signal(r) and not solved >= CONVERGED:",
       "if _finite(entropy) and entropy < ENTROPY_FLOOR and not solved >= CONVERGED:",
       "tests/test_signals.py::test_entropy_note_needs_low_entropy_and_ties_on_an_unsolved_task"),
    _m("tied advice knows dynamic sampling is on", "rlvr/metrics/diagnostics.py",
       "if not facts.dynamic_sampling:", "if True:",
       "tests/test_signals.py::test_tied_advice_knows_what_the_run_does"),
]

# --- multi-turn episodes (README "Agents that act", issue 26) --------------------------------------------------
AGENTS = [
    _m("environment tokens carry no loss", "rlvr/agents/episodes.py",
       "self.sampled += [int(logprobs is not None)] * len(ids)", "self.sampled += [1] * len(ids)",
       "tests/test_episodes.py::test_sampled_ids_are_kept_as_sampled_even_where_decode_then_encode_differs",
       "tests/test_episodes.py::test_environment_tokens_get_no_gradient_and_their_sampling_logprobs_are_never_read"),
    _m("a tool's text cannot forge a control token", "rlvr/agents/chat.py",
       "return encode(self.before, False) + encode(observation, True) + encode(self.after, False)",
       "return encode(self.before, False) + encode(observation, False) + encode(self.after, False)",
       "tests/test_episodes.py::test_sampled_ids_are_kept_as_sampled_even_where_decode_then_encode_differs"),
    _m("trajectories with holes are packed over their span", "rlvr/model/logprobs.py",
       "span = completion_mask if is_prefix_mask(completion_mask) else prefix_mask(completion_mask)",
       "span = completion_mask",
       "tests/test_episodes.py::test_sampler_and_trainer_agree_per_sampled_token_across_environment_turns"),
    _m("GAE steps over environment tokens", "rlvr/algorithms/gae.py",
       "running = torch.where(real[:, t], delta + gamma * lam * running, running)",
       "running = torch.where(real[:, t], delta + gamma * lam * running, 0.0)",
       "tests/test_gae.py::test_gae_steps_over_environment_tokens_of_an_episode"),
    _m("process credit: unscorable episodes learn nothing", "rlvr/grpo/estimators.py",
       "process = self.weight * process * valid[:, None]  # unscorable rows learn nothing, as in the outcome term",
       "process = self.weight * process",
       "tests/test_turn_credit.py::test_an_unscorable_episode_gets_no_process_credit_either"),
    _m("dynamic sampling keeps groups whose step rewards differ", "rlvr/grpo/dynamic_sampling.py",
       "return (outcome & steps).tolist()", "return outcome.tolist()",
       "tests/test_dynamic_sampling.py::test_with_step_credit_a_group_whose_step_rewards_differ_is_kept"),
    _m("a final answer is no step", "rlvr/agents/protocol.py",
       'return max(0, turns - (self.stop_reason == "answered"))', "return turns",
       "tests/test_episodes.py::test_sampled_ids_are_kept_as_sampled_even_where_decode_then_encode_differs",
       "tests/test_process_reward.py::test_a_final_answer_is_no_step_and_is_not_scored"),
    _m("a calculator step is paid once", "rlvr/agents/envs/calculator.py",
       "self.unreached -= new", "pass",
       "tests/test_env_calculator.py::test_episode_driven_by_parsed_turns"),
    _m("a filesystem step back and forth is paid once", "rlvr/agents/envs/filesystem.py",
       "progress, self.fewest_wrong = wrong < self.fewest_wrong, min(wrong, self.fewest_wrong)",
       "progress, self.fewest_wrong = wrong < self.fewest_wrong, wrong",
       "tests/test_env_filesystem.py::test_episode_driven_by_parsed_turns"),
    _m("a call the tool cannot carry out is a failed call", "rlvr/agents/tool_calls.py",
       "return str(text[:MAX_RESULT_CHARS]), not isinstance(value, ToolFailure)",
       "return str(text[:MAX_RESULT_CHARS]), True",
       "tests/test_env_calculator.py::test_episode_driven_by_parsed_turns",
       "tests/test_env_filesystem.py::test_episode_driven_by_parsed_turns"),
    _m("a level mix draws levels uniformly", "rlvr/tasks/levels.py",
       "yield next(streams[order[pick.randrange(len(order))]])", "yield next(streams[order[-1]])",
       "tests/test_task_levels.py::test_levels_are_drawn_uniformly_not_by_split_size"),
]

# --- speed paths that must not change the result (README "How one step works") ----------------------------
SPEED = [
    _m("rows skipped only without a KL term", "rlvr/algorithms/loss.py",
       "if spec.beta > 0 or spec.entropy_coef != 0:", "if spec.entropy_coef != 0:",
       "tests/test_update_skip.py::test_rows_with_gradient_by_hand",
       "tests/test_update_skip.py::test_with_a_kl_term_every_row_runs"),
    _m("an update with no row left still moves AdamW", "rlvr/training/update.py",
       "_zero_gradients(policy)  # step count move on, as they would after a backward of exact zeros)",
       "pass",
       "tests/test_update_skip.py::test_all_tied_batch_runs_nothing_but_adam_moves_as_after_zero_gradients"),
    _m("shared-opening prefill continues each row's positions", "rlvr/rollout/prefill.py",
       "positions = position_ids_from_mask(full)[:, shared.ids.shape[1]:]",
       "positions = position_ids_from_mask(mask)",
       "tests/test_prefill.py::test_prefill_with_shared_openings_equals_the_whole_contexts"),
    _m("shared-opening prefill gathers each row's own opening", "rlvr/rollout/prefill.py",
       "cache.batch_select_indices(shared.rows)", "cache.batch_select_indices(torch.sort(shared.rows).values.flip(0))",
       "tests/test_prefill.py::test_prefill_with_shared_openings_equals_the_whole_contexts"),
]

# issue 27: the recipe's data, its gates and its tables
RECIPE = [
    _m("a focused stream lets every prompt through", "rlvr/tasks/focus.py",
       "if prompt.id in ids:", "if prompt.id in ids or True:",
       "tests/test_task_focus.py::test_focused_stream_draws_only_the_listed_prompts_and_all_of_them"),
    _m("misses keep only prompts with no correct sample", "rlvr/sampling/run.py",
       "if selection.correct < len(done[prompt.id].candidates):", "if selection.correct == 0:",
       "tests/test_sampling_run.py::test_misses_list_the_prompts_not_every_sample_solved"),
    _m("a stated step is never wrong", "rlvr/verifiers/steps.py",
       "wrong += left != right", "wrong += 0",
       "tests/test_reasoning_metrics.py::test_check_steps_by_hand"),
    _m("a fall beyond 2 SE is not marked", "rlvr/pipeline/set_tables.py",
       'mark = " ▼" if mean + 2 * standard_error < 0 else ""', 'mark = ""',
       "tests/test_pipeline_summary.py::test_per_set_tables_pair_each_set_and_mark_a_fall_beyond_noise"),
    _m("generate's shared opening skipped", "rlvr/rollout/hf.py",
       "split = split_contexts(rows) if len(rows) > 1 else None", "split = None",
       "tests/test_prefill.py::test_first_turn_prompts_share_their_opening_and_sample_the_same_tokens"),
    _m("shared_prefix cuts a row one token late (its first target becomes prompt)", "rlvr/sft/batching.py",
       "firsts = [int(e.target_mask.nonzero()[0]) for e in examples]",
       "firsts = [int(e.target_mask.nonzero()[0]) + 1 for e in examples]",
       "tests/test_sft.py::test_shared_prefix_equals_length_grouped"),
    _m("shared_prefix drops each row's last target", "rlvr/sft/batching.py",
       "lasts = [int(e.target_mask.nonzero()[-1]) + 1 for e in examples]",
       "lasts = [int(e.target_mask.nonzero()[-1]) for e in examples]",
       "tests/test_sft.py::test_shared_prefix_equals_length_grouped"),
    _m("the greedy table pairs pass rates instead of greedy verdicts", "rlvr/pipeline/set_tables.py",
       'greedy.append([name, *(_with_change(evaluation, previous, label, "greedy", PER_PROBLEM_GREEDY)',
       'greedy.append([name, *(_with_change(evaluation, previous, label, "greedy", PER_PROBLEM)',
       "tests/test_pipeline_summary.py::test_greedy_per_set_is_paired_too_and_marked_when_it_falls_beyond_noise"),
    _m("greedy verdicts not kept per problem", "rlvr/evaluation/evaluate.py",
       "per_problem_greedy=[] if None in greedy else [float(x) for x in greedy])", "per_problem_greedy=[])",
       "tests/test_pipeline_summary.py::test_evaluation_keeps_each_problems_greedy_verdict"),
    _m("level 2 derives again instead of stating its result", "rlvr/tasks/cold_start.py",
       'return list(dict.fromkeys([f"{canonical} = {result}.", *derive(a, b)]))',
       'return list(dict.fromkeys([*derive(a, b), f"{canonical} = {result}."]))',
       "tests/test_cold_start.py::test_level_two_states_its_result_and_level_three_its_steps"),
    _m("a focus file found in part is trained on silently", "rlvr/tasks/focus.py",
       "if len(prompts) < len(self.ids):", "if False:",
       "tests/test_task_focus.py::test_ids_found_only_in_part_are_said"),
]

CATALOGUE: list[Mutation] = (MATH + RESUME + DETERMINISM + RAY + DISTRIBUTED + NOTES + MATH_VERIFIER + CODE_VERIFIER
                             + AGENTS + SPEED + RECIPE)
