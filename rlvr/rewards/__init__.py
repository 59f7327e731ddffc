"""Rewards from verifiers: the rewarder (verdicts -> scalar rewards), the reward service (a worker pool) and a
learned reward model for tasks without a verifier."""
