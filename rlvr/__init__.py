"""rlvr: reinforcement learning on verifiable rewards (GRPO and family)."""
__version__ = "0.1.0"
