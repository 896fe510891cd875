"""`pytest -m eval`: one test per built-in case (test id = case id), scripted model, default config."""

from __future__ import annotations

import pytest

from runners.domain.evalset import EvalCase, load_cases
from runners.run.case_runner import run_case

CASES = load_cases()


@pytest.mark.eval
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case_meets_its_expectations(case: EvalCase) -> None:
    run = run_case(case)
    assert run.passed, f"{case.id} ({case.family.value}): " + "; ".join(run.failures)
    released = [e for e in run.result.events if e.kind.value == "RELEASED"]
    assert len(released) == 1
