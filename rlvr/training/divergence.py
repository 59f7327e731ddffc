"""Temporary (issue 25): check_skips moved to rlvr/training/guards.py. Only rlvr/grpo/loop.py still imports this
name, and that file is another helper's to edit; delete this module together with that one import line."""
from rlvr.training.guards import check_skips

__all__ = ["check_skips"]
