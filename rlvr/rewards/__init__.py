"""Rewards from verifiers: the rewarder (verdicts -> scalar rewards), the reward service (pool.py, the verifier
pool; service.py, its worker processes) and a learned reward model for tasks without a verifier."""
