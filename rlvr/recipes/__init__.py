"""Kept for old imports only: see rlvr/recipes/grpo.py."""
