"""The program the sandbox runs for asserts and check programs (code/harness.py sends it as harness.py).

It runs under Debian's python3, never imported by rlvr. It loads the candidate's code, then answers the parent's
calls one at a time, in the order the parent makes them (issue 43: a function that keeps state between calls sees
the calls in the order the asserts make them): a request line on stdin, a result line on the channel (argv[1]).
Everything it needs is bound before the candidate runs; the candidate can still tamper with all of it, but can
only ever report values its functions could have returned (code/reference.py's threat model).

Results are encoded by exact type (code/wire.py lists the tags). An instance of a subclass of one of those types
is sent as {"sub": its base type's content}, read with the base type's own C methods, so the parent sees that the
class is not the base (`type(x) is list` is False for a list subclass) and never runs the subclass's methods.
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


def main(type=type, hex=hex, dumps=json.dumps, loads=json.loads, write=os.write, read=os.read,
         BaseException=BaseException, issubclass=issubclass, getattr=getattr, len=len, slice=slice, dict=dict,
         list=list, tuple=tuple, set=set, frozenset=frozenset, int=int, float=float, complex=complex, str=str,
         bytes=bytes, bytearray=bytearray, iter=iter, range=range, Counter=Counter, OrderedDict=OrderedDict,
         defaultdict=defaultdict, deque=deque, Decimal=Decimal, Fraction=Fraction, NONE=_NONE, VIEWS=_VIEWS,
         FACTORIES=_FACTORIES, IMMUTABLE=_IMMUTABLE):
    out = int(sys.argv[1])
    plain = (NONE, bool, int, float, complex, str, bytes, bytearray, list, tuple, dict, set, frozenset, range,
             deque, Fraction, Decimal) + tuple(view for view, _ in VIEWS)

    def send(obj):
        data = (dumps(obj) + "\n").encode()
        while data:
            data = data[write(out, data):]

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
            return run(v["root"], v["ops"], False)[0]
        if tag == "i":
            return int(v, 16)
        if tag in ("b", "ba"):
            return (bytes if tag == "b" else bytearray).fromhex(v)
        if tag in ("d", "o", "k", "dd"):
            pairs = [(decode(k), decode(val)) for k, val in (v[1] if tag == "dd" else v)]
            if tag == "dd":
                return defaultdict(factory_of(v[0]), pairs)
            return {"d": dict, "o": OrderedDict, "k": lambda p: Counter(dict(p))}[tag](pairs)
        if tag == "c":
            return complex(*v)
        if tag == "q":
            return Fraction(decode(v[0]), decode(v[1]))
        if tag == "r":
            return range(*[decode(e) for e in v])
        if tag == "dq":
            return deque(decode(v[0]), v[1])
        if tag == "dec":
            return Decimal(v)
        if tag in ("vk", "vv", "vi", "ovk", "ovv", "ovi"):
            items = decode(v)
            kind = OrderedDict if tag[0] == "o" else dict
            if tag.endswith("k"):
                return kind.fromkeys(items).keys()
            return kind(enumerate(items)).values() if tag.endswith("v") else kind(map(tuple, items)).items()
        return {"t": tuple, "s": set, "f": frozenset, "it": iter}[tag]([decode(e) for e in v])

    def run(root, ops, stop_at_plain):
        """Walk a chain from the candidate's name; the outermost chain stops at plain data (the parent applies
        the rest), a nested one hands its value on as it is."""
        if root not in ns:
            raise NameError("name %r is not defined by the code" % root)
        value, done = ns[root], 0
        for op in ops:
            if stop_at_plain and type(value) in plain:
                break
            if op[0] == "attr":
                value = getattr(value, op[1])
            else:
                value = value(*[decode(a) for a in op[1]], **{k: decode(w) for k, w in op[2]})
            done += 1
        return value, done

    def factory_spec(f, depth):
        if f is None:
            return None
        for known in FACTORIES:
            if f is known:
                return known.__name__
        try:
            made = f()
        except BaseException:
            return "?"
        return ["=", encode(made, depth + 1)] if type(made) in IMMUTABLE else "?"

    def pairs(items, depth):
        return [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in items]

    def items(values, depth):
        return [encode(v, depth + 1) for v in values]

    exact = {
        list: lambda x, d: items(x, d), tuple: lambda x, d: {"t": items(x, d)},
        dict: lambda x, d: {"d": pairs(x.items(), d)}, set: lambda x, d: {"s": items(x, d)},
        frozenset: lambda x, d: {"f": items(x, d)}, bytes: lambda x, d: {"b": x.hex()},
        bytearray: lambda x, d: {"ba": x.hex()}, complex: lambda x, d: {"c": [x.real, x.imag]},
        Fraction: lambda x, d: {"q": [encode(x.numerator, d + 1), encode(x.denominator, d + 1)]},
        OrderedDict: lambda x, d: {"o": pairs(OrderedDict.items(x), d)},
        Counter: lambda x, d: {"k": pairs(dict.items(x), d)},
        defaultdict: lambda x, d: {"dd": [factory_spec(x.default_factory, d), pairs(dict.items(x), d)]},
        range: lambda x, d: {"r": [encode(x.start, d + 1), encode(x.stop, d + 1), encode(x.step, d + 1)]},
        deque: lambda x, d: {"dq": [items(x, d), x.maxlen]}, Decimal: lambda x, d: {"dec": str(x)},
    }
    for view, tag in VIEWS:
        exact[view] = lambda x, d, tag=tag: {tag: pairs(x, d) if tag.endswith("i") else items(x, d)}
    # A subclass's content, read through the base type's own C methods (no override of the subclass runs)
    bases = (
        (OrderedDict, lambda x: OrderedDict(OrderedDict.items(x))), (Counter, lambda x: Counter(dict(dict.items(x)))),
        (defaultdict, lambda x: defaultdict(defaultdict.default_factory.__get__(x), dict.items(x))),
        (dict, lambda x: dict(dict.items(x))), (int, lambda x: int.__add__(x, 0)),
        (float, lambda x: float.__mul__(x, 1.0)),
        (complex, lambda x: complex(complex.real.__get__(x), complex.imag.__get__(x))),
        (str, lambda x: str.__getitem__(x, slice(None))), (bytes, lambda x: bytes.__getitem__(x, slice(None))),
        (bytearray, lambda x: bytearray(bytearray.__getitem__(x, slice(None)))),
        (list, lambda x: list.__getitem__(x, slice(None))), (tuple, lambda x: tuple.__getitem__(x, slice(None))),
        (frozenset, lambda x: frozenset(frozenset.__iter__(x))), (set, lambda x: set(set.__iter__(x))),
        (deque, lambda x: deque(deque.__iter__(x), deque.maxlen.__get__(x))),
        (Fraction, lambda x: Fraction(Fraction.numerator.fget(x), Fraction.denominator.fget(x))),
        (Decimal, lambda x: Decimal(Decimal.__str__(x))))

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
        for base, content in bases:
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

    def describe(err):
        try:
            return str(type(err).__name__)[:80] + ": " + str(err)[:200]
        except BaseException:
            return "exception"

    def builtin_class(err):
        """The first built-in exception class of the error's: a check program's `except ValueError` catches it."""
        try:
            for cls in type(err).__mro__:
                if getattr(cls, "__module__", "") == "builtins":
                    return str(cls.__name__)[:40]
        except BaseException:
            pass
        return "Exception"

    with open("payload.json", encoding="utf-8") as f:
        payload = json.load(f)
    send({"ready": True})
    requests = os.dup(0)  # the parent's calls; the candidate's stdin is /dev/null, so input() sees an empty file
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the candidate's prints cost the trainer nothing (issue #24)
        os.dup2(null, fd)
    os.close(null)
    module = type(sys)("solution")  # a real module, so pickle (multiprocessing) can find its functions
    sys.modules["solution"] = module
    ns = module.__dict__  # run() reads it through its closure
    try:
        exec(compile(payload["code"], "solution.py", "exec"), ns)
    except BaseException as err:
        send({"load": describe(err)})
        os._exit(0)
    if payload.get("entry") in ns:
        ns["candidate"] = ns[payload["entry"]]
    send({"loaded": True})
    pending, n = bytearray(), 0
    while True:
        while b"\n" not in pending:
            chunk = read(requests, 1 << 16)
            if not chunk:
                os._exit(0)  # the parent is done: skip atexit handlers and finalizers the candidate registered
            pending += chunk
        end = pending.index(b"\n")
        line = bytes(pending[:end])
        del pending[:end + 1]
        try:
            call = loads(line)
            value, done = run(call["root"], call["ops"], True)
        except BaseException as err:
            send({"n": n, "ok": False, "error": "raised " + describe(err), "exc": builtin_class(err)})
        else:
            try:
                reply = {"n": n, "ok": True, "value": encode(value, 0), "done": done}
            except BaseException as err:
                reply = {"n": n, "ok": False, "error": "unserialisable result (only built-in and standard-library "
                                                       "value types count): " + describe(err)}
            send(reply)
        n += 1


if __name__ == "__main__":
    main()
