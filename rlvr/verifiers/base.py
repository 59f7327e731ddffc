"""The Verifier contract (docs/design.md principle 7): small, pure, total.

`verify(completion, reference) -> Verdict` never raises. Anything that goes wrong inside becomes
Outcome.ERROR with score 0 and a detail saying what, so one bad sample cannot stop a training step and
a verifier bug can never hand out reward. `safe_verify` enforces that at the call site as well, for
verifiers written by users that forget to.

This module stays free of torch at import time (verifier worker processes and `rlvr verify` import
`rlvr.verifiers` without it), so the record types are imported inside the helpers.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, Sequence, runtime_checkable

if TYPE_CHECKING:
    from rlvr.types import Verdict


@runtime_checkable
class Verifier(Protocol):
    """Checks one completion against one reference answer."""

    name: str  # registry name, e.g. "math"; also the key in ScoredBatch.verdicts

    def verify(self, completion: str, reference: str) -> Verdict:
        """Return a Verdict; must never raise (errors -> Outcome.ERROR, score 0)."""
        ...


def error_verdict(what: str, err: BaseException | None = None, *, scorable: bool = True) -> Verdict:
    """An ERROR verdict (score 0) whose detail names the failure; scorable=False blames the reference."""
    from rlvr.types import Outcome, Verdict

    detail = what if err is None else f"{what}: {type(err).__name__}: {err}"
    return Verdict(Outcome.ERROR, 0.0, detail[:500], scorable=scorable)


def safe_verify(verifier: Verifier, completion: str, reference: str, truncated: bool = False) -> Verdict:
    """Call `verifier.verify`, turning an exception or a non-Verdict return into an ERROR verdict. `truncated` (the
    completion was cut at max_new_tokens) reaches a verifier that declares `reads_truncation` (the math verifier); the
    others keep the two-argument call."""
    from rlvr.types import Verdict

    name = getattr(verifier, "name", type(verifier).__name__)
    try:
        if truncated and getattr(verifier, "reads_truncation", False):
            verdict = verifier.verify(completion, reference, truncated=True)  # type: ignore[call-arg]
        else:
            verdict = verifier.verify(completion, reference)
    except Exception as err:  # the contract says never raise; a user verifier may still do so
        return error_verdict(f"verifier {name!r} raised", err)
    if not isinstance(verdict, Verdict):
        return error_verdict(f"verifier {name!r} returned {type(verdict).__name__}, not a Verdict")
    return verdict


def verify_many(verifier: Verifier, completions: Sequence[str], references: Sequence[str],
                truncated: Sequence[bool] | None = None) -> list[Verdict]:
    """Verify completion i against reference i (truncated[i]: cut at max_new_tokens); raises only if the lists
    differ in length."""
    cut = [False] * len(completions) if truncated is None else list(truncated)
    if not len(completions) == len(references) == len(cut):
        raise ValueError(f"{len(completions)} completions but {len(references)} references, "
                         f"{len(cut)} truncation flags")
    return [safe_verify(verifier, c, r, t) for c, r, t in zip(completions, references, cut)]
