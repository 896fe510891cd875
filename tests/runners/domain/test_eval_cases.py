"""`pytest -m eval`: one test per case (test id = case id), scripted model, default config — the built-in cases, or
a suite's with `pytest -m eval --evalset DIR` (repeatable; a file, a folder or a built-in family, as `run` takes)."""

from __future__ import annotations

import pytest

from runners.domain.evalset import EvalCase, load_cases
from runners.run.case_runner import run_case


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "case" in metafunc.fixturenames:
        cases = load_cases(metafunc.config.getoption("evalset") or ())
        metafunc.parametrize("case", cases, ids=[c.id for c in cases])


@pytest.mark.eval
def test_case_meets_its_expectations(case: EvalCase) -> None:
    run = run_case(case)
    assert run.passed, f"{case.id} ({case.family}): " + "; ".join(run.failures)
    released = [e for e in run.result.events if e.kind.value == "RELEASED"]
    assert len(released) == 1
