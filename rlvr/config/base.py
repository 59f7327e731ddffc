"""The base every config section shares, and the config error (split from config.py so that section modules
such as config/sections.py can build on it without an import circle)."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from rlvr.errors import UserFacingError


class ConfigError(UserFacingError, ValueError):
    """A configuration problem, phrased for the user (no traceback needed)."""


class _Section(BaseModel):
    # inf/nan in a learning rate or temperature would train silently on garbage: refuse them here.
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)
