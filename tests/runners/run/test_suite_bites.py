"""The evaluation suite must catch a broken Harness, not only pass a correct one.

Each mutation below breaks one clause of the stop contract; the built-in cases, run with the
scripted reference model, must fail on it — and the multi-call-turn cases, whose expectations pin
exact counts, must be among the ones that catch it. (Before those cases existed, each mutation passed
all 81 cases.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from harness.interceptor import HarnessToolInterceptor
from harness.tracker import Admission, AdmissionKind, DiagnosisProgressTracker
from runners.domain.evalset import load_cases
from runners.run.case_runner import run_case

CASES = load_cases()


@contextmanager
def _patched(obj: Any, name: str, make: Callable[[Any], Any]) -> Iterator[None]:
    original = getattr(obj, name)
    setattr(obj, name, make(original))
    try:
        yield
    finally:
        setattr(obj, name, original)


def _same_turn_call_after_stop_reaches_backend(orig: Any) -> Any:
    def admit(self: DiagnosisProgressTracker, *args: Any, **kwargs: Any) -> Admission:
        adm: Admission = orig(self, *args, **kwargs)
        return Admission(AdmissionKind.EXECUTE) if adm.kind is AdmissionKind.REJECT_SATURATED else adm

    return admit


def _stop_required_delivered_twice(orig: Any) -> Any:
    def admit(self: DiagnosisProgressTracker, *args: Any, **kwargs: Any) -> Admission:
        adm: Admission = orig(self, *args, **kwargs)
        if adm.kind is AdmissionKind.REJECT_SATURATED:
            return Admission(AdmissionKind.STOP_REQUIRED, stop_reason=adm.stop_reason)
        return adm

    return admit


def _rejections_charged_to_tool_budget(orig: Any) -> Any:
    def reject(self: HarnessToolInterceptor, *args: Any, **kwargs: Any) -> None:
        self._ctx.usage.tool_invocations += 1
        orig(self, *args, **kwargs)

    return reject


MUTATIONS = {
    "same-turn call after STOP_REQUIRED reaches the backend": (
        DiagnosisProgressTracker, "admit", _same_turn_call_after_stop_reaches_backend,
    ),
    "STOP_REQUIRED delivered twice": (DiagnosisProgressTracker, "admit", _stop_required_delivered_twice),
    "rejections charged to the tool budget": (HarnessToolInterceptor, "_reject", _rejections_charged_to_tool_budget),
}  # fmt: skip


def _failing() -> set[str]:
    return {c.id for c in CASES if not run_case(c).passed}


def test_the_unmutated_harness_passes_every_case() -> None:
    assert _failing() == set()


@pytest.mark.parametrize("mutation", list(MUTATIONS))
def test_each_contract_mutation_fails_cases(mutation: str) -> None:
    obj, name, make = MUTATIONS[mutation]
    with _patched(obj, name, make):
        failing = _failing()
    assert failing, f"mutation '{mutation}' passed every built-in case"
    assert any(c.startswith("multi_call_turns_") for c in failing), sorted(failing)
