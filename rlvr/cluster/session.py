"""Joining or starting the Ray cluster the actors run on. The engine and the reward
service each hold the cluster while they live; the last one to close shuts it down, and only if this process
started it (a cluster joined with `ray.address`, or initialised by the caller, is left running)."""
from __future__ import annotations

import os
import threading
from typing import Any, Callable, TypeVar

import rlvr
from rlvr.errors import UserFacingError

T = TypeVar("T")
_PACKAGE_DIR = os.path.dirname(os.path.abspath(rlvr.__file__))


class RayBackendError(UserFacingError, RuntimeError):
    """A Ray actor died, timed out or could not be placed: one clear message, never a hang."""


class _Holders:
    count = 0
    started = False  # this process called ray.init: its ray.shutdown() stops a cluster it started, and only
    # disconnects from one it joined (ray.address)
    lock = threading.Lock()


def import_ray() -> Any:
    try:
        import ray
    except ImportError as err:
        raise RayBackendError("ray.enabled=true needs Ray: pip install 'rlvr[ray]'") from err
    return ray


def runtime_env(address: str | None) -> dict[str, Any] | None:
    """On another machine the actors import the driver's copy of rlvr, shipped by Ray (its dependencies, torch
    and transformers, must be installed on every node). A local cluster imports it as the driver does
    (`pip install -e .`, or the current directory, which Ray adds to the workers' path)."""
    if address is None:
        return None
    return {"py_modules": [_PACKAGE_DIR], "excludes": ["__pycache__", "*.pyc"]}


def acquire(address: str | None) -> Any:
    """Make sure Ray is initialised (joining `address`, or a local cluster with this machine's CPUs and GPUs);
    returns the ray module. Pair every call with `release()`."""
    ray = import_ray()
    with _Holders.lock:
        if not ray.is_initialized():
            try:
                if address is None:
                    ray.init(include_dashboard=False, log_to_driver=True)
                else:
                    ray.init(address=address, runtime_env=runtime_env(address), include_dashboard=False)
            except Exception as err:  # ConnectionError, a bad address, a cluster of another Ray version
                where = f"the Ray cluster at ray.address={address}" if address else "a local Ray cluster"
                raise RayBackendError(f"cannot start or join {where}: {type(err).__name__}: {err}") from err
            _Holders.started = True
        _Holders.count += 1
    return ray


def release() -> None:
    ray = import_ray()
    with _Holders.lock:
        _Holders.count = max(0, _Holders.count - 1)
        if _Holders.count == 0 and _Holders.started:
            _Holders.started = False
            ray.shutdown()


def check_resources(ray: Any, needs: dict[str, float], what: str,
                    settings: str = "ray.engine_cpus / engine_gpus") -> None:
    """Refuse at once what the cluster can never place (an actor asking for a GPU on a CPU-only cluster would
    otherwise wait for one forever)."""
    have = ray.cluster_resources()
    missing = {k: v for k, v in needs.items() if v > 0 and have.get(k, 0.0) < v}
    if missing:
        raise RayBackendError(f"{what} needs {missing} but the Ray cluster has only "
                              f"{ {k: have.get(k, 0.0) for k in missing} } in all ({settings})")


def get(ray: Any, ref: Any, timeout_s: float, what: str, on_error: Callable[[], None] | None = None) -> T:
    """`ray.get` with a deadline; a dead actor, a timeout or an error raised inside the actor becomes one
    RayBackendError naming `what` (`on_error` runs first, e.g. to stop the actor that timed out)."""
    from ray import exceptions as rex

    try:
        return ray.get(ref, timeout=timeout_s)
    except rex.GetTimeoutError as err:
        reason = f"no answer within {timeout_s:g}s"
        error: BaseException = err
    except rex.RayActorError as err:  # died: killed, out of memory, a segfault, its node lost
        reason, error = f"the actor died ({type(err).__name__}: {_first_line(err)})", err
    except rex.RayTaskError as err:  # raised inside the actor: report the original exception
        cause = err.cause if getattr(err, "cause", None) is not None else err
        reason, error = f"it raised {type(cause).__name__}: {_first_line(cause)}", err
    if on_error is not None:
        on_error()
    raise RayBackendError(f"{what}: {reason}") from error


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
