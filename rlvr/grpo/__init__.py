"""The GRPO training loop: a per-step plan decided once from the config, the stages of one step
(rollouts -> rewards -> advantages -> loss -> update -> sync) and the run around them."""
