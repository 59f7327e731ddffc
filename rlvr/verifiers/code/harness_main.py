"""The program the sandbox runs for asserts and check programs (code/harness.py sends it as harness.py).

It runs under Debian's python3 (rlvr imports it only in tests, to stand in for the sandbox). It loads the
candidate's code, then answers the parent's calls one at a time, in the order the parent makes them (a
function that keeps state between calls sees the calls in the order the asserts make them): a request line on
stdin, a result line on the channel (argv[1]).
Everything it needs is bound (default arguments, closures) before the candidate runs; the candidate can still
tamper with all of it, but can only ever report values its functions could have returned (code/reference.py's
threat model).

Results are encoded by exact type (code/wire.py lists the tags). An instance of a subclass of one of those types
is sent as {"sub": its base type's content}, read with the base type's own C methods, so the parent sees that the
class is not the base (`type(x) is list` is False for a list subclass) and never runs the subclass's methods: in
a call chain too, an attribute the base type has is left to the parent, on its copy (before, `f(1)
.copy()` ran a list subclass's own copy). The parent never asks for `candidate`: it asks for the entry by its
name, so a completion's own function `candidate` is not the entry.
"""
import json
import os
import sys
from collections import Counter, OrderedDict, defaultdict, deque
from decimal import Decimal
from fractions import Fraction

_NONE = type(None)
_VIEWS = ((type({}.keys()), "vk"), (type({}.values()), "vv"), (type({}.items()), "vi"),
          (type(OrderedDict().keys()), "ovk"), (type(OrderedDict().values()), "ovv"),
          (type(OrderedDict().items()), "ovi"))
# default_factory values the parent rebuilds by name (its own builtins); other factories send one value they made
_FACTORIES = (int, float, complex, str, bytes, bytearray, list, tuple, dict, set, frozenset, bool, Counter,
              OrderedDict, deque, Fraction, Decimal)
_IMMUTABLE = (_NONE, bool, int, float, complex, str, bytes, Fraction, Decimal)
_MUTABLE = (list, dict, set, bytearray, deque, OrderedDict, Counter, defaultdict)  # arguments written back if changed
class Undefined(NameError):
    """The code defines no such name: not an exception the candidate raised (a check program cannot catch it)."""


_PLAIN = (_NONE, bool, int, float, complex, str, bytes, bytearray, list, tuple, dict, set, frozenset, range, deque,
          Fraction, Decimal) + tuple(view for view, _ in _VIEWS)
# A subclass's content, read through the base type's own C methods (no override of the subclass runs)
_BASES = (
    (OrderedDict, lambda x, OrderedDict=OrderedDict: OrderedDict(OrderedDict.items(x))),
    (Counter, lambda x, Counter=Counter, dict=dict: Counter(dict(dict.items(x)))),
    (defaultdict, lambda x, dd=defaultdict, dict=dict: dd(dd.default_factory.__get__(x), dict.items(x))),
    (dict, lambda x, dict=dict: dict(dict.items(x))), (int, lambda x, int=int: int.__add__(x, 0)),
    (float, lambda x, float=float: float.__mul__(x, 1.0)),
    (complex, lambda x, complex=complex: complex(complex.real.__get__(x), complex.imag.__get__(x))),
    (str, lambda x, str=str, s=slice(None): str.__getitem__(x, s)),
    (bytes, lambda x, bytes=bytes, s=slice(None): bytes.__getitem__(x, s)),
    (bytearray, lambda x, bytearray=bytearray, s=slice(None): bytearray(bytearray.__getitem__(x, s))),
    (list, lambda x, list=list, s=slice(None): list.__getitem__(x, s)),
    (tuple, lambda x, tuple=tuple, s=slice(None): tuple.__getitem__(x, s)),
    (frozenset, lambda x, frozenset=frozenset: frozenset(frozenset.__iter__(x))),
    (set, lambda x, set=set: set(set.__iter__(x))),
    (deque, lambda x, deque=deque: deque(deque.__iter__(x), deque.maxlen.__get__(x))),
    (Fraction, lambda x, Fraction=Fraction: Fraction(Fraction.numerator.fget(x), Fraction.denominator.fget(x))),
    (Decimal, lambda x, Decimal=Decimal: Decimal(Decimal.__str__(x))))


def _decoder(chains, type=type, list=list, dict=dict, int=int, bytes=bytes, bytearray=bytearray, complex=complex,
             range=range, deque=deque, Decimal=Decimal, Fraction=Fraction, OrderedDict=OrderedDict,
             Counter=Counter, defaultdict=defaultdict, tuple=tuple, set=set, frozenset=frozenset, iter=iter,
             enumerate=enumerate, map=map, FACTORIES=_FACTORIES):
    """decode(wire value) for the arguments the parent sends; `chains["run"]` runs a nested candidate chain."""
    def factory_of(spec):
        if type(spec) is list:  # ["=", value]: a factory that returns this immutable value
            made = decode(spec[1])
            return lambda: made
        return None if spec is None else {f.__name__: f for f in FACTORIES}[spec]

    def decode(x):
        if type(x) is list:
            return [decode(v) for v in x]
        if type(x) is not dict:
            return x
        (tag, v), = x.items()
        if tag == "call":  # a candidate chain nested in another call's arguments: its value, whatever it is
            return chains["run"](v["root"], v["ops"], False)[0]
        if tag == "ref":  # the value an earlier request kept here (a chain the parent had run before this call)
            return chains["kept"].pop(v)
        if tag == "i":
            return int(v, 16)
        if tag in ("b", "ba"):
            return (bytes if tag == "b" else bytearray).fromhex(v)
        if tag in ("d", "o", "k", "dd"):
            pairs = [(decode(k), decode(val)) for k, val in (v[1] if tag == "dd" else v)]
            if tag == "dd":
                return defaultdict(factory_of(v[0]), pairs)
            return {"d": dict, "o": OrderedDict, "k": lambda p: Counter(dict(p))}[tag](pairs)
        if tag in ("c", "q", "r", "dq", "dec"):
            return {"c": lambda: complex(*v), "q": lambda: Fraction(decode(v[0]), decode(v[1])),
                    "r": lambda: range(*[decode(e) for e in v]), "dq": lambda: deque(decode(v[0]), v[1]),
                    "dec": lambda: Decimal(v)}[tag]()
        if tag in ("vk", "vv", "vi", "ovk", "ovv", "ovi"):
            items = decode(v)
            kind = OrderedDict if tag[0] == "o" else dict
            if tag.endswith("k"):
                return kind.fromkeys(items).keys()
            return kind(enumerate(items)).values() if tag.endswith("v") else kind(map(tuple, items)).items()
        return {"t": tuple, "s": set, "f": frozenset, "it": iter}[tag]([decode(e) for e in v])
    return decode


def _runner(ns, decode, kept, type=type, getattr=getattr, hasattr=hasattr, issubclass=issubclass,
            Undefined=Undefined, PLAIN=_PLAIN, CARRIED=tuple(base for base, _ in _BASES)):
    def parent_applies(value, op):
        """The parent applies `op` itself: to plain data, and, on an instance of a subclass of a carried type, an
        attribute its base type has (the parent's copy runs the base's method; the override never runs there)."""
        t = type(value)
        if t in PLAIN:
            return True
        if op[0] == "attr":
            for base in CARRIED:
                if issubclass(t, base):
                    return hasattr(base, op[1])
        return False

    def run(root, ops, stop_at_plain, ref=None, record=None):
        """Walk a chain from the candidate's name (or from the value request `ref` kept); the outermost chain stops
        where the parent applies the rest, a nested one hands its value on as it is. `record` collects each
        call's decoded arguments: the parent writes back what the call mutated."""
        if ref is not None:
            value = kept.pop(ref)
        elif root not in ns:
            raise Undefined("name %r is not defined by the code" % root)
        else:
            value = ns[root]
        done = 0
        for op in ops:
            if stop_at_plain and parent_applies(value, op):
                break
            if op[0] == "attr":
                value = getattr(value, op[1])
            else:
                args, kwargs = [decode(a) for a in op[1]], {k: decode(w) for k, w in op[2]}
                if record is not None:
                    record.append((done, args, kwargs))
                value = value(*args, **kwargs)
            done += 1
        return value, done
    return run


def _encoder(type=type, hex=hex, len=len, issubclass=issubclass, getattr=getattr, ValueError=ValueError,
             TypeError=TypeError, BaseException=BaseException, str=str, OrderedDict=OrderedDict, dict=dict,
             FACTORIES=_FACTORIES, IMMUTABLE=_IMMUTABLE, VIEWS=_VIEWS, BASES=_BASES):
    """encode(result, depth) -> wire value; TypeError for a type the wire does not carry."""
    def items(values, d):
        return [encode(v, d + 1) for v in values]

    def pairs(kv, d):
        return [[encode(k, d + 1), encode(v, d + 1)] for k, v in kv]

    def factory_spec(f, d):
        for known in FACTORIES:
            if f is known:
                return known.__name__
        if f is None:
            return None
        try:
            made = f()
        except BaseException:
            return "?"
        return ["=", encode(made, d + 1)] if type(made) in IMMUTABLE else "?"

    exact = {
        list: items, tuple: lambda x, d: {"t": items(x, d)}, dict: lambda x, d: {"d": pairs(x.items(), d)},
        set: lambda x, d: {"s": items(x, d)}, frozenset: lambda x, d: {"f": items(x, d)},
        bytes: lambda x, d: {"b": x.hex()}, bytearray: lambda x, d: {"ba": x.hex()},
        complex: lambda x, d: {"c": [x.real, x.imag]},
        Fraction: lambda x, d: {"q": [encode(x.numerator, d + 1), encode(x.denominator, d + 1)]},
        OrderedDict: lambda x, d: {"o": pairs(OrderedDict.items(x), d)},
        Counter: lambda x, d: {"k": pairs(dict.items(x), d)},
        defaultdict: lambda x, d: {"dd": [factory_spec(x.default_factory, d), pairs(dict.items(x), d)]},
        range: lambda x, d: {"r": [encode(x.start, d + 1), encode(x.stop, d + 1), encode(x.step, d + 1)]},
        deque: lambda x, d: {"dq": [items(x, d), x.maxlen]}, Decimal: lambda x, d: {"dec": str(x)},
    }
    for view, tag in VIEWS:
        exact[view] = lambda x, d, tag=tag: {tag: pairs(x, d) if tag.endswith("i") else items(x, d)}

    def encode(x, depth):
        t = type(x)
        if x is None or t is bool or t is str or t is float:
            return x
        if t is int:
            return x if -(1 << 53) < x < (1 << 53) else {"i": hex(x)}  # hex: no int/str digit limit
        if depth > 100:
            raise ValueError("too deep")
        how = exact.get(t)
        if how is not None:
            return how(x, depth)
        for base, content in BASES:
            if issubclass(t, base):
                return {"sub": encode(content(x), depth + 1)}
        if getattr(t, "__next__", None) is not None:  # a generator or other iterator: drain it, bounded
            drained = []
            for v in x:
                if len(drained) >= 100000:
                    raise ValueError("iterator longer than 100000 items")
                drained.append(v)
            return {"it": items(drained, depth)}
        raise TypeError("unserialisable")
    return encode


def _describe(err, str=str, type=type, BaseException=BaseException):
    try:
        return str(type(err).__name__)[:80] + ": " + str(err)[:200]
    except BaseException:
        return "exception"


def _builtin_class(err, str=str, type=type, getattr=getattr, BaseException=BaseException, Undefined=Undefined):
    """The first built-in exception class of the error's: a check program's `except ValueError` catches it. ""
    for a name the code never defined: in Python the test would not even have reached the call."""
    if type(err) is Undefined:
        return ""
    try:
        for cls in type(err).__mro__:
            if getattr(cls, "__module__", "") == "builtins":
                return str(cls.__name__)[:40]
    except BaseException:
        pass
    return "Exception"


def _answerer(run, encode, kept, loads=json.loads, type=type, BaseException=BaseException, describe=_describe,
              builtin_class=_builtin_class, PLAIN=_PLAIN, MUTABLE=_MUTABLE):
    """answer(request line, n) -> the reply. "keep": "prefix" keeps a value that is not plain data here (the parent
    goes on from it), "handle" keeps whatever the chain made (a value passed on to another call by reference)."""
    def mutated(record, ops):
        """[op, argument, wire value] for each plain container argument a call changed: the parent's copy becomes
        it, as a caller's object would in Python."""
        after = []
        for index, args, kwargs in record:
            sent = [*enumerate(op for op in ops[index][1]), *ops[index][2]]
            for (key, wire), value in zip(sent, [*args, *kwargs.values()]):
                if type(value) in MUTABLE and not (type(wire) is dict and ("call" in wire or "ref" in wire)):
                    now = encode(value, 0)
                    if now != wire:
                        after.append([index, key, now])
        return after

    def answer(line, n):
        record, ops = [], []
        try:
            call = loads(line)
            ops, mode = call["ops"], call.get("keep", "")
            value, done = run(call["root"], ops, mode != "handle", call.get("ref"), record)
        except BaseException as err:
            reply = {"n": n, "ok": False, "error": "raised " + describe(err), "exc": builtin_class(err)}
        else:
            if mode == "handle" or (mode == "prefix" and type(value) not in PLAIN):
                kept[n] = value
                reply = {"n": n, "ok": True, "kept": True, "done": done}
            else:
                try:
                    reply = {"n": n, "ok": True, "value": encode(value, 0), "done": done}
                except BaseException as err:
                    reply = {"n": n, "ok": False, "error": "unserialisable result (only built-in and standard-"
                                                           "library value types count): " + describe(err)}
        try:
            after = mutated(record, ops)
        except BaseException as err:
            return {"n": n, "ok": False, "error": "an argument the call changed is unserialisable: " + describe(err)}
        if after:
            reply["after"] = after
        return reply
    return answer


def _serve(requests, send, answer, read=os.read, bytes=bytes, bytearray=bytearray, exit=os._exit):
    """Answer request lines until the parent closes them: one result line per request, numbered in order."""
    pending, n = bytearray(), 0
    while True:
        while b"\n" not in pending:
            chunk = read(requests, 1 << 16)
            if not chunk:
                exit(0)  # the parent is done: skip atexit handlers and finalizers the candidate registered
            pending += chunk
        end = pending.index(b"\n")
        line = bytes(pending[:end])
        del pending[:end + 1]
        send(answer(line, n))
        n += 1


def main(dumps=json.dumps, write=os.write, BaseException=BaseException, type=type):
    out = int(sys.argv[1])

    def send(obj):
        data = (dumps(obj) + "\n").encode()
        while data:
            data = data[write(out, data):]

    with open("payload.json", encoding="utf-8") as f:
        payload = json.load(f)
    send({"ready": True})
    requests = os.dup(0)  # the parent's calls; the candidate's stdin is /dev/null, so input() sees an empty file
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the candidate's prints cost the trainer nothing
        os.dup2(null, fd)
    os.close(null)
    module = type(sys)("solution")  # a real module, so pickle (multiprocessing) can find its functions
    sys.modules["solution"] = module
    ns, chains = module.__dict__, {"kept": {}}
    decode = _decoder(chains)
    chains["run"] = run = _runner(ns, decode, chains["kept"])
    answer = _answerer(run, _encoder(), chains["kept"])  # everything bound before the candidate's code runs
    try:
        exec(compile(payload["code"], "solution.py", "exec"), ns)
    except BaseException as err:
        send({"load": _describe(err)})
        os._exit(0)
    send({"loaded": True})  # `candidate` is the parent's name for the entry: it asks for the entry by its name
    _serve(requests, send, answer)


if __name__ == "__main__":
    main()
