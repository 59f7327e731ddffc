"""Rejection sampling and distillation data (`rlvr sample`; DeepSeek-R1 stage 3).

select.py decides which sampled completions are kept (pure); tokenizers.py checks a distillation student up
front; mix.py adds general chat rows; records.py holds the progress file and the dataset rows; run.py runs it.
"""
from rlvr.errors import UserFacingError


class SampleError(UserFacingError, ValueError):
    """A bad `sample.*` setting or input file, phrased for the user (printed as one line by rlvr.cli.main)."""
