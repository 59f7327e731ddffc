"""SIGTERM / SIGINT during training: finish the step, checkpoint, exit 0.

Preemptible machines send SIGTERM and then, after a grace period, SIGKILL; none of TRL, verl or torchtune
checkpoints on it. The first signal only sets a flag, which the loop reads between steps. A second signal
means "now": the process exits at once, and since checkpoints are written atomically (store.py) whatever
save was under way is never picked up by a resume. Reward workers run in their own session
(rewards/service.py), so a terminal's Ctrl-C reaches only the trainer and the step in flight completes.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
from types import FrameType

_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class GracefulStop:
    """Context manager; `requested` turns True at the first SIGTERM/SIGINT. Only in the main thread (Python
    delivers signals there); elsewhere it installs nothing and never requests a stop."""

    def __init__(self, say=lambda text: print(text, file=sys.stderr, flush=True)):
        self.requested, self.signal_name, self.say = False, "", say
        self._previous: dict[int, object] = {}

    def __enter__(self) -> "GracefulStop":
        if threading.current_thread() is threading.main_thread():
            for sig in _SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.requested:
            self.say(f"rlvr: second {name}: exiting now; the last complete checkpoint is kept")
            os._exit(128 + signum)
        self.requested, self.signal_name = True, name
        self.say(f"rlvr: {name} received: finishing this step, then saving a checkpoint "
                 "(send it again to exit at once)")

