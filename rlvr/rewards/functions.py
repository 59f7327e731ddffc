"""Your own reward functions: `reward.functions: {"module:function": weight}` in the config, or
`train(config, reward_funcs=[...])` in Python.

A function is TRL's reward-function contract (GRPOTrainer's `reward_funcs`): called by keyword with `prompts`,
`completions`, `completion_ids` (when the token ids are known) and every extra dataset column, it returns one float or
None per completion (None: this function does not score that row). Any sign and any size up to 1e15 (past that,
float32 group statistics overflow: rewarder.MAX_REWARD): the group baseline and its standard deviation
(advantages.py) take any such reward, so nothing is clamped.

Where they run: in the trainer process, on the whole batch, after the verifier workers' verdicts are in
(pool.ScoreFuture.result), as TRL calls them. The workers exist to bound one sample's check in time and to survive a
verifier that crashes its process (sympy, the code sandbox); a user function is one call per batch that may hold
state (a tokenizer, a model), needs the whole batch (TRL hands over lists), and need not be picklable (lambdas,
closures), which a worker process would require. Its time is the step's: a slow function slows the step.

What a run records: config.yaml's reward.functions holds each function's import string, so a resume and
`rlvr eval RUN` import the same functions again. A callable given to train() is recorded as
"module:qualified_name" when importing that gives back the very same object; a lambda, a local function or one
defined in the script being run (__main__) cannot be, so its run warns once that a resume and `rlvr eval` will not
have it (pass it to train() again when resuming).
"""
from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping, Sequence

from rlvr.config.run import ConfigError, RunConfig, validate_config
from rlvr.errors import UserFacingError

RewardFuncs = Sequence[Callable[..., Any]] | Mapping[Callable[..., Any], float]  # train(reward_funcs=...)


class RewardFunctionError(UserFacingError, ValueError):
    """A reward function raised, or returned something other than one number or None per completion."""


@dataclass(frozen=True)
class UserFunction:
    """One of reward.functions (or of train's reward_funcs), as a Rewarder component."""

    name: str  # "module:function" as config.yaml records it; a callable that cannot be recorded: "module:<qualname>"
    function: Callable[..., Any]
    conversational: bool = False  # reward.function_format=conversational: TRL's message-list format
    # held-out correctness stays the verifiers' (evaluate.gated_names, sampling): a function's value is a preference
    # or a shaping term, not a check, and a length penalty would otherwise make every sample wrong
    gates_correctness: ClassVar[bool] = False

    @property
    def __name__(self) -> str:  # what rewarder.call_reward_function names in its errors
        return self.name

    def __call__(self, **arguments: Any) -> Any:
        return self.function(**arguments)


def load_reward_function(spec: str) -> Callable[..., Any]:
    """"package.module:function" or "path/to/file.py:function" (the attribute may be dotted: "Class.method") -> the
    callable. Every failure is one ConfigError naming the spec."""
    target, _, attribute = spec.rpartition(":")
    try:
        module = _module_from_file(target) if target.endswith(".py") else _import_module(target)
    except ConfigError:
        raise
    except Exception as err:  # the user's module: anything it raises on import is its problem, said in one line
        hint = (" (run from the directory that holds it, or add that directory to PYTHONPATH)"
                if isinstance(err, ModuleNotFoundError) else "")
        raise ConfigError(f"reward.functions: cannot import {spec!r}: {type(err).__name__}: {err}{hint}") from None
    try:
        found = functools.reduce(getattr, attribute.split("."), module)
    except AttributeError:
        raise ConfigError(f"reward.functions: {spec!r}: {target} has no attribute {attribute!r}") from None
    if not callable(found):
        kind = type(found).__name__
        raise ConfigError(f"reward.functions: {spec!r} is {'an' if kind[0] in 'aeiou' else 'a'} {kind}, not a function")
    return found


def _import_module(name: str):
    # `rlvr` is a console script: sys.path holds its own directory, not the working directory that `python -m`
    # would add. Appended, so a module of the working directory never shadows an installed package.
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    return importlib.import_module(name)


def _module_from_file(path: str):
    file = Path(path).expanduser()
    if not file.is_file():
        raise ConfigError(f"reward.functions: {path!r} does not exist (relative paths start at the working "
                          f"directory {os.getcwd()})")
    # one module per file, loaded once: the same file named twice (two functions of it) shares its module state
    name = f"rlvr_reward_{file.stem}_{hashlib.sha1(str(file.resolve()).encode()).hexdigest()[:8]}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def recorded_name(function: Callable[..., Any]) -> str | None:
    """"module:qualified_name" when importing it gives back this very object, else None (a lambda, a local
    function, a partial, a callable object, anything defined in __main__)."""
    module, qualname = getattr(function, "__module__", None), getattr(function, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or module == "__main__" or "<" in qualname:
        return None
    spec = f"{module}:{qualname}"
    try:
        return spec if load_reward_function(spec) is function else None
    except ConfigError:
        return None


@dataclass(frozen=True)
class PassedFunctions:
    """train(reward_funcs=...) sorted: the recordable ones go into config.yaml, the others are handed on as objects."""

    recorded: dict[str, float]  # "module:function" -> weight
    unrecorded: dict[str, tuple[Callable[..., Any], float]]  # name -> (callable, weight)

    def warning(self) -> str | None:
        """The one line a run with unrecordable functions prints at its start."""
        if not self.unrecorded:
            return None
        return (f"WARNING: reward function(s) {', '.join(self.unrecorded)} given to train() cannot be recorded in "
                "config.yaml (a lambda, a local function or one defined in __main__): a resume and `rlvr eval` of "
                "this run will not have them unless they are passed again; define them at module level in an "
                "importable module (or list them in reward.functions) to record them")


def sort_passed(reward_funcs: RewardFuncs | None) -> PassedFunctions:
    """A list (weight 1.0 each, TRL's default reward_weights) or a mapping callable -> weight."""
    if reward_funcs is None:
        return PassedFunctions({}, {})
    pairs = list(reward_funcs.items()) if isinstance(reward_funcs, Mapping) else [(f, 1.0) for f in reward_funcs]
    recorded: dict[str, float] = {}
    unrecorded: dict[str, tuple[Callable[..., Any], float]] = {}
    for function, weight in pairs:
        if not callable(function):
            raise ConfigError(f"train(reward_funcs=...): {function!r} is not callable")
        if not isinstance(weight, (int, float)) or weight != weight or abs(weight) == float("inf"):
            raise ConfigError(f"train(reward_funcs=...): the weight of {function!r} must be a finite number, "
                              f"got {weight!r}")
        name = recorded_name(function)
        if name is not None:  # one function given twice counts twice, as TRL sums its reward_funcs
            recorded[name] = recorded.get(name, 0.0) + float(weight)
            continue
        base = f"{getattr(function, '__module__', '?')}:{getattr(function, '__qualname__', type(function).__name__)}"
        name = base if base not in unrecorded else f"{base}#{len(unrecorded) + 1}"  # two lambdas stay two
        unrecorded[name] = (function, float(weight))
    return PassedFunctions(recorded, unrecorded)


def user_components(functions: Mapping[str, float], passed: Mapping[str, tuple[Callable[..., Any], float]],
                    conversational: bool) -> dict[str, tuple[UserFunction, float]]:
    """reward.functions imported, plus the unrecorded callables of train(), as named Rewarder components (their
    names hold a ':', which no verifier's does, so they never clash with one)."""
    out = {spec: (UserFunction(spec, load_reward_function(spec), conversational), weight)
           for spec, weight in functions.items()}
    out.update({name: (UserFunction(name, function, conversational), weight)
                for name, (function, weight) in passed.items()})
    return out


def with_functions(config: RunConfig, recorded: Mapping[str, float]) -> RunConfig:
    """The config with train()'s recordable functions added to reward.functions (a weight given to train() wins
    over the config's), so that config.yaml, a resume's config comparison and `rlvr eval RUN` see them."""
    if not recorded:
        return config
    data = config.model_dump()
    data["reward"]["functions"] = {**config.reward.functions, **recorded}
    return validate_config(data)
