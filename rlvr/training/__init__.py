"""One optimisation step of the policy (and of the PPO critic), with its guards (skipped steps, out of memory)."""
