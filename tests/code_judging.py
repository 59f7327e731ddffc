"""Shared by the code verifier's tests: a candidate stood in by a Python function, or by the harness's own code run
in this process, so the parent's judging (check programs, assert rounds) runs without a sandbox."""
from __future__ import annotations

import json
import textwrap

from rlvr.verifiers.code import harness_main
from rlvr.verifiers.code.budget import Budget
from rlvr.verifiers.code.chains import CandidateCall
from rlvr.verifiers.code.check_program import parse_check, run_check
from rlvr.verifiers.code.evaluate import CallResult
from rlvr.verifiers.code.harness import read_reply, request
from rlvr.verifiers.code.reference import judge_asserts, parse_reference
from rlvr.verifiers.code.wire import decode, encode


def resolver(function):
    """resolve(call) for a single-call chain: `function` called on the decoded arguments, its result through the
    wire (as the sandbox would send it), a raise as the failed call the harness reports."""
    def resolve(call: CandidateCall) -> CallResult:
        args = [decode(a) for a in call.ops[0][1]]
        try:
            return CallResult(True, decode(encode(function(*args))), 1)
        except Exception as err:
            return CallResult(False, f"raised {type(err).__name__}: {err}", 0, type(err).__name__)
    return resolve


def program(body: str, helpers: str = "") -> str:
    """A check(candidate) program whose body is `body`, after the module-level `helpers`."""
    return textwrap.dedent(helpers) + "def check(candidate):\n" + textwrap.indent(textwrap.dedent(body), "    ")


def run_program(source: str, function, budget_s: float = 10.0) -> tuple[bool, str]:
    """run_check's (passed, why not) with `function` as the candidate's entry `f`."""
    with Budget(budget_s):
        return run_check(parse_check(source, "f"), "f", resolver(function))


def judge_function(asserts: list[str], function) -> list[tuple[bool, str]]:
    """judge_asserts' (passed, why not) per assert, with `function` as the candidate's `f` (single-call chains)."""
    with Budget(10.0):
        return judge_asserts(parse_reference(json.dumps({"asserts": asserts})), resolver(function))


def in_process(code: str) -> tuple[object, list[dict]]:
    """(resolve, the request lines sent): the harness's decoder, runner and answerer on `code`'s namespace, as the
    sandbox would run them."""
    ns, chains = {}, {"kept": {}}
    exec(code, ns)  # noqa: S102 - the tests' own code
    decode_arg = harness_main._decoder(chains)
    chains["run"] = run = harness_main._runner(ns, decode_arg, chains["kept"])
    answer = harness_main._answerer(run, harness_main._encoder(), chains["kept"])
    sent: list[dict] = []

    def resolve(call):
        line = request(call)
        sent.append(json.loads(line))
        reply = json.dumps(answer(line.rstrip(b"\n"), len(sent) - 1)).encode()
        return read_reply(reply, len(sent) - 1, call)
    return resolve, sent


def judge_code(code: str, *asserts: str, **extra) -> tuple[list[bool], list[dict]]:
    """Each assert's verdict and the requests sent, the candidate being `code` run by the harness in process."""
    resolve, sent = in_process(code)
    with Budget(10.0):
        outcomes = judge_asserts(parse_reference(json.dumps({"asserts": list(asserts), **extra})), resolve)
    return [ok for ok, _ in outcomes], sent
