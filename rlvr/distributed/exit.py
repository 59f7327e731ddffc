"""How a torchrun rank ends: everything a normal exit does for the run, then no interpreter teardown.

Why not let Python finish on its own (seen in CI, then reproduced: 4 of 80 two-rank FSDP2 runs on
2 busy cores, each after the run had saved its final weights and passed the closing barrier): torch's DTensor
caches keep the process group alive after destroy_process_group, so gloo's worker threads outlive `main`. A
worker that drops a finished collective (a barrier holds the all-gathers queued before it) frees FSDP's tensors,
which needs the GIL. Once the interpreter is tearing down, Python ends any thread that asks for the GIL, and the
C++ destructor it ends inside turns that into std::terminate: the rank dies with SIGABRT, torchrun stops the
other one and reports the whole run as failed. The core dump showed exactly that stack (runLoop ->
~AsyncBarrierWork -> ~AsyncAllgatherWork -> decref_pyobject -> take_gil -> pthread_exit -> terminate).

Clearing torch's caches and collecting did not free the group (more private holders), so the rank skips the
teardown instead. Nothing the run writes depends on it: checkpoints, metrics and logs are closed by the loop;
here the rest of what Python's exit does is done first, in its order.
"""
from __future__ import annotations

import atexit
import os
import sys
import threading
from collections.abc import Mapping
from typing import NoReturn


def is_torchrun_rank(env: Mapping[str, str] | None = None) -> bool:
    """Started by torchrun on more than one rank (a malformed WORLD_SIZE is reported elsewhere, by from_env)."""
    world = (os.environ if env is None else env).get("WORLD_SIZE", "1")
    return world.isdigit() and int(world) > 1


def exit_rank(code: int) -> NoReturn:
    """What Python's own exit does before teardown, in its order, then end the process with `code`: wait for the
    non-daemon threads (after telling executors' workers to stop, as threading's exit hooks do), run the atexit
    callbacks (W&B, logging, temporary directories, compile workers), flush the streams. Both calls are private
    names of the standard library, the very functions Py_FinalizeEx calls; call this from the main thread."""
    threading._shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken pipe: nothing more can reach the reader anyway
            pass
    os._exit(code)
