"""Rewards from verifiers: the rewarder (verdicts -> scalar rewards), the reward service (pool.py, the verifier
pool; service.py, its worker processes), a learned reward model for tasks without a verifier, your own TRL-style
reward functions (functions.py) and the control runs' rewards (control.py)."""
