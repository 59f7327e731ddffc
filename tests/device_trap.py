"""The device trap: run rlvr on a CPU-only machine as if the policy lived on a GPU, and fail at the first
op that would mix devices there ("Expected all tensors to be on the same device").

CI has no GPU, so every tensor of a test is on the one CPU device and a tensor made without `device=` silently
lands where the policy is. The trap tells the two apart without a GPU:
- the policy's device is spelled `cpu:0` (`model.device=cpu:0`, POLICY_DEVICE): a tensor made or moved with a
  device argument of `cpu:0` (or cuda) is a POLICY tensor; one made with no device or a plain `cpu` (a factory call,
  `.cpu()`, `.to("cpu")`, a tokenizer's or numpy's tensors) is a HOST tensor, marked `t._trap_host = True`;
- reading `t.device` answers `cpu:0` for a policy tensor and `cpu` for a host one, so `torch.zeros(n,
  device=x.device)` follows x;
- every other op's output is on the policy if any input is, else on the host; `.to(other)` follows other,
  `*_like` / `new_*` follow self;
- CUDA's rules: a host tensor of one or more dimensions combined with a policy tensor raises DeviceMixError (a
  0-dim host tensor may combine: CUDA moves CPU scalars); indexing a policy tensor with host indices is allowed,
  a host tensor with policy indices is not; `copy_` and slice assignment copy across devices; `.numpy()` of a
  policy tensor raises; a generator must be on the device of what it samples; a gradient on its tensor's device.
- `nn.Parameter(data)` takes data's mark and `from_pretrained` (no device_map) gives host weights, so a module is on
  the host until `.to(device)` moves it (Module._apply's `param.data = ...` carries the mark over).
Other tensors that torch makes in C++ unseen by this process's Python (autograd's gradients) count as policy
tensors, and the inputs of a custom autograd Function's `apply` are not checked.

Out of scope: other processes (the hf_process engine, reward workers, torchrun ranks, Ray actors) run without the
trap, and what they send back counts as host here; branches taken on the device's type (`x.device.type == "cpu"`,
`model.device.startswith("cuda")`) take their CPU side.
"""
from __future__ import annotations

import contextlib
import itertools
import traceback

import torch
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree

POLICY_DEVICE = "cpu:0"  # model.device=POLICY_DEVICE in a trapped run
_POLICY, _HOST = torch.device("cpu", 0), torch.device("cpu")
_MARK = "_trap_host"
_DEVICE_ATTR = torch._C.TensorBase.__dict__["device"]
_DATA_ATTR = torch._C.TensorBase.__dict__["data"]
_GRAD_ATTR = torch._C.TensorBase.__dict__["grad"]
# ops that read several tensors' metadata and compute nothing with their data (Module._apply asks the first)
_METADATA_ONLY = frozenset({torch._has_compatible_shallow_copy_type, torch.is_same_size, torch.result_type})
_Tensor = torch.Tensor


class DeviceMixError(RuntimeError):
    """What CUDA would raise; also recorded in DeviceTrap.violations, so an `except` in rlvr cannot hide it."""


def on_host(t) -> bool:
    return bool(getattr(t, _MARK, False))


def _mark(t, host: bool) -> None:
    try:
        setattr(t, _MARK, host)
    except (AttributeError, TypeError):  # a tensor subclass without a __dict__
        pass


def placement(device) -> bool | None:
    """True = host, False = policy, None = not a device. `cpu:0` and every accelerator are the policy's."""
    if isinstance(device, int) and not isinstance(device, bool):
        return False  # a CUDA ordinal
    if isinstance(device, str):
        try:
            device = torch.device(device)
        except RuntimeError:
            return None
    if not isinstance(device, torch.device):
        return None
    if device.type in ("cpu", "meta"):
        return device.index is None
    return False


def _tensors(tree) -> list[torch.Tensor]:
    return [x for x in pytree.tree_leaves(tree) if isinstance(x, torch.Tensor)]


def _name(func) -> str:
    owner = getattr(func, "__self__", None)
    base = getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))
    return f"{getattr(owner, '__name__', '')}.{base}" if owner is not None and hasattr(owner, "__name__") else base


def _caller() -> str:
    """The innermost frame outside torch and this file: where in rlvr (or a library) the bad op was called."""
    for frame in reversed(traceback.extract_stack()[:-3]):
        if "/torch/" not in frame.filename and frame.filename != __file__:
            return f"{frame.filename}:{frame.lineno}"
    return "?"


def _shapes(ts) -> str:
    return ", ".join(f"{'host' if on_host(t) else 'policy'} {tuple(t.shape)}" for t in ts)


class _TrapGenerator(torch.Generator):
    """torch.Generator while the trap is on: remembers whether it was made for the host or the policy."""

    def __init__(self, device="cpu"):
        _mark(self, bool(placement(device)))


class DeviceTrap(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.violations: list[str] = []
        self.ops = 0

    def fail(self, func, why: str):
        message = f"{_name(func)} at {_caller()}: {why}"
        self.violations.append(message)
        raise DeviceMixError(message)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.ops += 1
        owner = getattr(func, "__self__", None)
        if owner is _DEVICE_ATTR and func.__name__ == "__get__":
            device = func(*args, **kwargs)
            return (_HOST if on_host(args[0]) else _POLICY) if device.type == "cpu" else device
        if owner is _DATA_ATTR and func.__name__ == "__set__":  # param.data = t (Module.to): param follows t
            func(*args, **kwargs)
            _mark(args[0], on_host(args[1]))
            return None
        if owner is _GRAD_ATTR and func.__name__ == "__set__" and args[1] is not None \
                and on_host(args[0]) != on_host(args[1]):
            self.fail(func, f"a gradient on another device than its tensor ({_shapes(args[:2])})")
        if func in _METADATA_ONLY:
            return func(*args, **kwargs)
        special = _SPECIAL.get(func)
        if special is not None:
            return special(self, func, args, kwargs)
        return self.generic(func, args, kwargs)

    def check_mix(self, func, tensors: list[torch.Tensor]) -> None:
        hosts = [t for t in tensors if on_host(t) and t.dim() > 0]
        policy = [t for t in tensors if not on_host(t)]
        if hosts and policy:
            self.fail(func, f"host tensors combined with policy tensors ({_shapes(hosts + policy)})")

    def generic(self, func, args, kwargs):
        tensors = _tensors((args, kwargs))
        device = _device_argument(args, kwargs)
        if device is None and tensors:
            self.check_mix(func, tensors)
        out = func(*args, **kwargs)
        host = device if device is not None else all(on_host(t) for t in tensors)  # no tensors: a factory
        self.check_generator(func, kwargs.get("generator"), host)
        _mark_outputs(out, host, tensors)
        return out

    def check_generator(self, func, generator, host: bool) -> None:
        if generator is not None and hasattr(generator, _MARK) and on_host(generator) != host:
            side = lambda h: "host" if h else "policy"  # noqa: E731
            self.fail(func, f"a {side(on_host(generator))} generator samples a {side(host)} tensor")


def _device_argument(args, kwargs) -> bool | None:
    if kwargs.get("device") is not None:
        return placement(kwargs["device"])
    for arg in args:
        if isinstance(arg, torch.device):
            return placement(arg)
    return None


def _mark_outputs(out, host: bool, inputs: list[torch.Tensor]) -> None:
    """Every new tensor of the output gets the placement; an input returned as is (in-place ops) keeps its own."""
    same = {id(t) for t in inputs}
    for t in _tensors(out):
        if id(t) not in same:
            _mark(t, host)


def _to(trap: DeviceTrap, func, args, kwargs):
    self = args[0]
    out = func(*args, **kwargs)
    if func is _Tensor.cpu:
        host = True
    elif func is _Tensor.cuda:
        host = False
    else:
        host = _to_target(args[1:], kwargs)
        host = on_host(self) if host is None else host
    if out is self and host != on_host(self):  # CUDA would copy; an alias keeps self's own mark
        out = out.view_as(out)
    _mark(out, host)
    return out


def _to_target(args, kwargs) -> bool | None:
    """.to(device), .to(other), .to(dtype): the placement asked for, None when only the dtype changes."""
    for arg in (*args, kwargs.get("device"), kwargs.get("other")):
        if isinstance(arg, torch.Tensor):
            return on_host(arg)
        found = placement(arg) if arg is not None and not isinstance(arg, torch.dtype) else None
        if found is not None:
            return found
    return None


def _copy(trap: DeviceTrap, func, args, kwargs):
    """copy_ and the explicit conversions (torch.tensor(t), x.new_tensor(t)) cross devices on CUDA."""
    out = func(*args, **kwargs)
    if func is not _Tensor.copy_:
        device = _device_argument(args[1:] if func is _Tensor.new_tensor else (), kwargs)
        source = args[0] if func is _Tensor.new_tensor or isinstance(args[0], torch.Tensor) else None
        _mark(out, device if device is not None else on_host(source) if source is not None else True)
    return out


def _policy_indices(index) -> list[torch.Tensor]:
    return [t for t in _tensors(index) if not on_host(t) and t.dim() > 0]


def _advanced(index) -> bool:
    """Does x[index] index with tensors or lists (index_put on CUDA), rather than ints and slices (a view)?"""
    parts = index if isinstance(index, tuple) else (index,)
    return any(isinstance(p, list) or isinstance(p, torch.Tensor) and (p.dim() > 0 or p.dtype == torch.bool)
               or type(p).__name__ == "ndarray" for p in parts)


def _getitem(trap: DeviceTrap, func, args, kwargs):
    self, index = args[0], args[1]
    if on_host(self) and _policy_indices(index):
        trap.fail(func, f"a host tensor {tuple(self.shape)} indexed by policy indices")
    out = func(*args, **kwargs)
    _mark_outputs(out, on_host(self), [self])
    return out


def _put(trap: DeviceTrap, func, args, kwargs):
    """x[index] = value and index_put(_): host indices are fine on a policy tensor; with advanced indexing (a
    tensor index) the values must be on self's device unless 0-dim; a slice assignment is a copy_."""
    self, index = args[0], args[1]
    value = args[2] if len(args) > 2 else kwargs.get("values")
    advanced = func is not _Tensor.__setitem__ or _advanced(index)
    if on_host(self) and _policy_indices(index):
        trap.fail(func, f"a host tensor {tuple(self.shape)} indexed by policy indices")
    if isinstance(value, torch.Tensor) and advanced and value.dim() > 0 and on_host(value) != on_host(self):
        trap.fail(func, f"values on another device than the tensor put into ({_shapes([self, value])})")
    out = func(*args, **kwargs)
    _mark_outputs(out, on_host(self), [self])
    return out


def _numpy(trap: DeviceTrap, func, args, kwargs):
    if not on_host(args[0]):
        trap.fail(func, f"numpy of a policy tensor {tuple(args[0].shape)} (CUDA: call .cpu() first)")
    return func(*args, **kwargs)


_SPECIAL = {
    _Tensor.to: _to, _Tensor.cpu: _to, _Tensor.cuda: _to,
    _Tensor.copy_: _copy, _Tensor.new_tensor: _copy, torch.tensor: _copy, torch.as_tensor: _copy,
    torch.asarray: _copy,
    _Tensor.__getitem__: _getitem, _Tensor.__setitem__: _put, _Tensor.index_put_: _put, _Tensor.index_put: _put,
    _Tensor.numpy: _numpy, _Tensor.__array__: _numpy,
}


def _host_factory(original):
    def made_on_host(*args, **kwargs):  # torch.from_numpy / frombuffer bypass TorchFunctionMode
        out = original(*args, **kwargs)
        _mark(out, True)
        return out
    return made_on_host


def _parameter_new(original):
    """nn.Parameter(data) is a new tensor object that TorchFunctionMode never sees made: it takes data's mark
    (nn.Linear(...)'s weights are host tensors until the module is moved, as on a GPU machine)."""
    def __new__(cls, data=None, requires_grad=True):
        param = original(cls, data, requires_grad)
        _mark(param, True if data is None else on_host(data))
        return param
    return staticmethod(__new__)


def _loaded_on_host(original):
    """from_pretrained without a device_map loads into host memory (in worker threads the trap does not see)."""
    def from_pretrained(cls, *args, **kwargs):
        loaded = original(cls, *args, **kwargs)
        model = loaded[0] if isinstance(loaded, tuple) else loaded  # output_loading_info=True: (model, info)
        if kwargs.get("device_map") is None:
            for t in itertools.chain(model.parameters(), model.buffers()):
                _mark(t, True)
        return loaded
    return classmethod(from_pretrained)


def _patches() -> list[tuple[object, str, object]]:
    from transformers import PreTrainedModel

    return [(torch, "from_numpy", _host_factory(torch.from_numpy)),
            (torch, "frombuffer", _host_factory(torch.frombuffer)),
            (torch, "Generator", _TrapGenerator),
            (torch.nn.Parameter, "__new__", _parameter_new(torch.nn.Parameter.__new__)),
            (PreTrainedModel, "from_pretrained", _loaded_on_host(PreTrainedModel.from_pretrained.__func__))]


@contextlib.contextmanager
def device_trap():
    """`with device_trap() as trap:` run code whose policy is on POLICY_DEVICE; trap.violations lists what would
    have failed on a GPU (each also raised DeviceMixError at the op)."""
    patches = _patches()
    saved = [(owner, name, owner.__dict__[name]) for owner, name, _ in patches]  # the descriptors themselves
    for owner, name, value in patches:
        setattr(owner, name, value)
    trap = DeviceTrap()
    try:
        with trap:
            yield trap
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)
