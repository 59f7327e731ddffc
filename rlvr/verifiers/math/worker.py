"""The math-verify worker program, with guards against math-verify's known false positives.

rlvr.verifiers.math.verifier.MathVerifyWorker runs this file's text with `python -c` in a fresh interpreter: it
imports only math_verify (no torch, no user __main__, which 'spawn' would re-import) and answers one JSON
request per line. Library output goes to stderr so stray prints cannot corrupt the protocol on stdout. The
parent enforces the wall-clock budget (math-verify's own signal.alarm timeouts only work in the main
thread: verl PR#5635), and this process caps its own CPU time and address space as a backstop.

Guards applied on top of `math_verify.verify` (cases from Math-Verify issue #14 and our probes of 0.9):
1. Decimals are exact: each Float literal becomes the Rational it spells before comparing. math-verify
   rounds floats to 6 places (float_rounding=6), so it finds 0.0000001 == 0.0000002 and
   pi == 3.14159265358979 (tolerance bait). Here a decimal approximation of pi, e or sqrt(2) is WRONG.
2. Tiny values: math-verify compares non-literal numbers with evalf(chop=True), which rounds small values
   to 0, so it finds 1/2^99 == 1/2^98, e^{-50} == e^{-60} and (2^2005+1)/(3*2^2006) == 1/(3*2^2006).
   An 'equal' between closed-form numbers is re-checked at 50 digits with a relative tolerance of 1e-15
   (exact rationals compare exactly: the tolerance only absorbs evalf noise of irrational values).
3. Equations: a value answer given as an equation counts only when it is an assignment ('x = 7') or a true
   numeric identity ('3 + 4 = 7'); math-verify takes the right side of any equation, so '5 = 7' and
   '2x + 3 = 7' would match a reference of 7. Assignments to different variables (x=2 vs y=2) and
   different right sides (x=2 vs x=3) are already different in math-verify.
4. Undefined values (zoo, nan: '\\frac{1}{0}', '12:00') never equal anything.
5. A side math-verify reads only as a string (its LaTeX failed to parse) is unparseable: its string is a
   truncated prefix ('1 - \\frac{1}{' for '1 - \\frac{1}{\\mathrm{e}}'), equal to other truncated prefixes.
A reading added before the comparison: an inequality in one unknown answers an interval reference as the
set it describes ('x > 3' == '(3, \\infty)'; as_interval).
"""
from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time

try:
    import resource
except ImportError:  # not on Windows
    resource = None

RELATIVE_TOLERANCE = 1e-15  # for closed-form numbers evaluated at DIGITS significant digits
DIGITS = 50


def cap_resources(cpu_s: float) -> None:
    """Kernel-enforced backstops for when the parent cannot kill us (it died): a CPU-time limit per request
    (SIGXCPU terminates even while sympy holds the GIL in C code) and an address-space cap so a runaway
    expansion raises MemoryError instead of taking the host's memory."""
    if resource is None:
        return
    try:
        hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
        soft = int(time.process_time() + cpu_s) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        cap = 4 << 30
        resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))
    except (ValueError, OSError):
        pass


def exact_decimals(expr):
    """`expr` with each Float replaced by the exact decimal it was written as (0.1 -> 1/10)."""
    from sympy import Basic, Float, Rational

    if not isinstance(expr, Basic):
        return expr
    floats = expr.atoms(Float)
    return expr.xreplace({f: Rational(str(f)) for f in floats}) if floats else expr


def _undefined(expr) -> bool:
    from sympy import Basic, nan, zoo

    return isinstance(expr, Basic) and (expr.has(zoo) or expr.has(nan))


def numbers(expr) -> list | None:
    """The closed-form numbers an answer stands for, in a canonical order (a set's sorted by value, an
    interval's endpoints, an assignment's right side); None when it is not made of numbers only."""
    from sympy import Eq, Expr, FiniteSet, Interval, Symbol, Tuple, im, re

    if isinstance(expr, Eq) and isinstance(expr.lhs, Symbol):
        return numbers(expr.rhs)
    if isinstance(expr, Expr) and not expr.free_symbols:
        return [expr]
    if isinstance(expr, (Tuple, FiniteSet, Interval)):
        parts = [numbers(arg) for arg in (expr.args[:2] if isinstance(expr, Interval) else expr.args)]
        if any(part is None or len(part) != 1 for part in parts):
            return None
        values = [part[0] for part in parts]
        if isinstance(expr, FiniteSet):  # sympy Floats: no overflow for 10^500, unlike complex()
            values.sort(key=lambda v: (re(v).evalf(DIGITS), im(v).evalf(DIGITS)))
        return values
    return None


def close(a, b) -> bool:
    """a == b exactly, or (irrational values) within RELATIVE_TOLERANCE at DIGITS digits; never absolute."""
    from sympy import oo, zoo

    if a == b:
        return True
    x, y = a.evalf(DIGITS), b.evalf(DIGITS)
    if any(v.has(oo, -oo, zoo) for v in (x, y)) or not (x.is_number and y.is_number):
        return x == y
    return bool(abs(x - y) <= RELATIVE_TOLERANCE * max(abs(x), abs(y)))


def equation_problem(gold, pred) -> str | None:
    """Why an equation given for a value reference is not an answer (guard 3); None when it is fine."""
    from math_verify.grader import is_assignment_relation
    from sympy import And, Eq
    from sympy.core.relational import Relational

    relations = list(getattr(pred, "_unsorted_args", pred.args)) if isinstance(pred, And) else [pred]
    if isinstance(gold, (Relational, And)) or not all(isinstance(r, Eq) for r in relations):
        return None
    # every link of a chain without unknowns must hold, also after an assignment: 'x = 3 = 4' is no value
    # (math-verify took its last side, 4), 'x = 3 + 4 = 7' is 7
    if any(not r.free_symbols and not close(r.lhs, r.rhs) for r in relations):
        return "a false equation is not a value"
    if is_assignment_relation(pred):
        return None
    if any(r.free_symbols for r in relations):
        return "an equation is not a value (only 'x = value' is read as one)"
    return None


def guard(gold, pred) -> str | None:
    """Why math-verify's 'equal' for these parsed answers is a false positive; None when it stands."""
    if _undefined(gold) or _undefined(pred):
        return "undefined value (division by zero) equals nothing"
    problem = equation_problem(gold, pred)
    if problem:
        return problem
    gold_values, pred_values = numbers(gold), numbers(pred)
    if gold_values is None or pred_values is None or len(gold_values) != len(pred_values):
        return None
    if all(close(g, p) for g, p in zip(gold_values, pred_values)):
        return None
    return f"values differ beyond a relative {RELATIVE_TOLERANCE:g} (math-verify rounds tiny values to 0)"


def as_interval(pred, gold):
    """`pred` as the set it describes when the reference is an interval and `pred` an inequality in one unknown:
    'x > 3' for '(3, \\infty)' (math-verify matches them only the other way round). Unchanged
    otherwise; sympy decides the set, so 'x^2 > 9' is not '(3, \\infty)'."""
    from sympy import And, Interval, Union
    from sympy.core.relational import Eq, Ne, Relational

    relations = pred.args if isinstance(pred, And) else (pred,)
    if not isinstance(gold, (Interval, Union)) or len(getattr(pred, "free_symbols", ())) != 1:
        return pred
    if not all(isinstance(r, Relational) and not isinstance(r, (Eq, Ne)) for r in relations):
        return pred
    try:
        return pred.as_set()
    except Exception:  # sympy cannot solve it: compare as written
        return pred


def parsed(latex: str) -> list:
    """math-verify's reading of one answer, sympy objects only (see guard 5)."""
    from math_verify import parse
    from sympy import Basic
    from sympy.matrices import MatrixBase

    return [x for x in parse("\\boxed{" + latex + "}", parsing_timeout=None) if isinstance(x, (Basic, MatrixBase))]


def check(gold_text: str, pred_text: str) -> dict:
    """{'status': 'equal' | 'different' | 'gold_unparseable' | 'pred_unparseable', 'detail'?: why}"""
    from math_verify import verify

    gold = [exact_decimals(x) for x in parsed(gold_text)]
    if not gold:
        return {"status": "gold_unparseable"}
    pred = [as_interval(exact_decimals(x), gold[0]) for x in parsed(pred_text)]
    if not pred:
        return {"status": "pred_unparseable"}
    if not verify(gold, pred, timeout_seconds=None):
        return {"status": "different"}
    try:
        problem = guard(gold[0], pred[0])
    except Exception as err:  # fail closed: an 'equal' the guards cannot confirm earns nothing
        problem = f"guard could not confirm math-verify's 'equal': {type(err).__name__}"
    return {"status": "different", "detail": problem} if problem else {"status": "equal"}


def main() -> None:
    logging.disable(logging.WARNING)  # math-verify warns that its signal timeout is off; the parent has one
    out, sys.stdout = sys.stdout, sys.stderr
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it kills us at exit
    check("\\frac{x}{2}", "(0, 1]")  # import and warm the parser first: start-up is not charged to a budget
    out.write("ready\n")
    out.flush()
    for line in sys.stdin:
        request = json.loads(line)
        cap_resources(request.get("cpu_s", 60.0))
        try:
            reply = check(request["gold"], request["pred"])
        except Exception as err:  # MemoryError and RecursionError included: a reply, never a dead worker
            reply = {"status": "error", "detail": f"{type(err).__name__}: {str(err)[:200]}"}
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:  # the parent exited before reading a reply ('ready' at its exit): nothing to tell it
        os._exit(0)
