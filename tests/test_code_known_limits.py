"""Honest solutions the code verifier still refuses, pinned
so that docs/verifiers.md's known limits stay true, and the two it now accepts (a fence indented in a Markdown list,
a fence tagged "Python 3")."""
from __future__ import annotations

import json

import pytest

from rlvr.types import Outcome
from rlvr.verifiers.code.sandbox import SandboxConfig

pytestmark = pytest.mark.sandbox


@pytest.fixture(scope="module")
def verifier():
    from rlvr.verifiers.code.verifier import CodeVerifier
    return CodeVerifier(sandbox=SandboxConfig())


NEST = "def nest(n):\n    r = []\n    for _ in range(n):\n        r = [r]\n    return r\n"
LISTNODE = "class ListNode:\n    def __init__(self, val=0, next=None):\n        self.val, self.next = val, next\n"


@pytest.mark.parametrize("code,reference,detail", [
    ("def f(k):\n    return 3 + 4j\n", {"asserts": ["assert f(0).real == 3"], "entry": "f"},
     "is not evaluated on a complex"),
    ("def f(k):\n    return 'abc'\n", {"asserts": ["assert f(5).zfill(5) == '00abc'"], "entry": "f"},
     "is not evaluated on a str"),
    (NEST, {"asserts": ["assert len(nest(150)) == 1"], "entry": "nest"}, "too deep"),
    (LISTNODE + "def length(head):\n    n = 0\n    while head:\n        n += 1\n        head = head.next\n"
     "    return n\n", {"check": LISTNODE + "def check(candidate):\n    assert candidate(ListNode(1)) == 1\n",
                       "entry": "length"}, "cannot pass a ListNode"),
    ("def f(g, x):\n    return g(x)\n",
     {"check": "def check(candidate):\n    assert candidate(lambda v: v + 1, 3) == 4\n", "entry": "f"},
     "cannot pass a function"),
    ("def grow(a, b):\n    a.append(0)\n    return len(b)\n",
     {"check": "def check(candidate):\n    x = [1, 2]\n    assert candidate(x, x) == 3\n", "entry": "grow"}, ""),
    ("import numpy as np\ndef f(xs):\n    return int(np.sum(xs))\n", {"asserts": ["assert f([1, 2]) == 3"],
                                                                     "entry": "f"}, "No module named 'numpy'"),
    ("import sys\nsys.stdout.write('1234567\\n' * 150000)\n", {"io": [{"input": "", "output": "1234567\n" * 150000}]},
     "io case 0"),
], ids=["attribute_on_result", "method_on_result", "nested_150", "listnode_argument", "lambda_argument",
        "aliased_arguments", "numpy", "io_output_over_1_mib"])
def test_honest_solutions_the_verifier_still_refuses(verifier, code, reference, detail):
    verdict = verifier.verify(f"```python\n{code}```", json.dumps(reference))
    assert verdict.score == 0.0 and detail in verdict.detail, verdict


@pytest.mark.parametrize("completion", [
    "Here is the solution:\n\n1. Define the function:\n   ```python\n   def add(a, b):\n       return a + b\n   ```\n",
    "```Python 3\ndef add(a, b):\n    return a + b\n```\n",
], ids=["fence_in_a_markdown_list", "python_3_tag"])
def test_fences_an_honest_completion_writes_are_read(verifier, completion):
    verdict = verifier.verify(completion, json.dumps({"asserts": ["assert add(1, 2) == 3"], "entry": "add"}))
    assert verdict.outcome is Outcome.CORRECT, verdict
