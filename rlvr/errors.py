"""The one base of the errors a user can act on (issue 25: one class instead of a `user_facing` flag per class).

`rlvr.cli.main` prints a UserFacingError as one `rlvr: error: MESSAGE` line and exits with 2, never a
traceback: its message names the setting, file or limit to change. A subclass keeps its builtin base
(ValueError, RuntimeError) where callers catch that. Torch-free: the CLI and the config import it."""
from __future__ import annotations


class UserFacingError(Exception):
    """An expected failure, phrased for the user; the CLI prints the message alone (exit code 2)."""
