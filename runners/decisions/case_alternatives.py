"""What a model without its case's mistake publishes (a case's `expect.without_mistake`), for stored runs: a stored
case run keeps its case's primary expected outcome only, so a counterfactual that changes a run's outcome reads the
alternative from the built-in case of the same id — when that case still expects what the run was judged against
(a run of another evaluation file with the same id keeps its primary expectation alone)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from runners.store.replayable_runs import ReplayableRun

__all__ = ["with_alternatives"]


def with_alternatives(runs: Sequence[ReplayableRun]) -> tuple[ReplayableRun, ...]:
    """`runs`, each with its built-in case's `without_mistake` outcome where the case has one and still expects
    the stored primary outcome."""
    from runners.domain.evalset import load_cases  # lazy: the evaluation set is heavy to load

    ids = {r.case_id for r in runs if r.expected_outcome is not None}
    if not ids:
        return tuple(runs)
    cases = {c.id: c.expect for c in load_cases() if c.id in ids}
    out: list[ReplayableRun] = []
    for run in runs:
        expect = cases.get(run.case_id)
        kind = None if expect is None or expect.fallback_kind is None else expect.fallback_kind.value
        if (
            expect is None
            or expect.without_mistake is None
            or (expect.outcome.value, kind) != (run.expected_outcome, run.expected_fallback_kind)
        ):
            out.append(run)
            continue
        alt = expect.without_mistake
        out.append(dataclasses.replace(run, alternative_outcome=alt.outcome.value,
                                       alternative_fallback_kind=alt.fallback_kind.value if alt.fallback_kind
                                       else None))  # fmt: skip
    return tuple(out)
