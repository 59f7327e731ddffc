"""Inference-time scaling: thinking budgets (budget.py), best-of-N and majority vote from
Python (generate.py: `generate`), `rlvr eval --scaling` (scaling.py) and the `eval`/`generate` commands.
Nothing is imported here, so `rlvr --help` stays torch-free."""
