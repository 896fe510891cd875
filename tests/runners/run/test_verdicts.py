"""The two verdicts of a case run: the outcome verdict (any agent: outcome, fallback kind, the judge on the root cause
or the clean outcome of a mistake case, and the Harness's invariants) and the trajectory verdict (the reference
trajectory's bounds, for a scripted run at the default settings only)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from harness import HarnessConfig, InvocationStatus, ReleaseOutcome, StopRequiredDelivered, ToolInvocation
from runners.domain.case_model import OutcomeExpectation
from runners.domain.evalset import BUILTIN_DIR, EvalCase, load_cases
from runners.domain.root_cause import RootCause, RootCauseFact
from runners.run.case_runner import run_case
from runners.run.verdict import (
    invariant_failures,
    outcome_failures,
    trajectory_applies,
    verdicts,
)

SUCCESS_CASE = "diagnosable_gateway_risk_pool_exhausted_t1"


@pytest.fixture(scope="module")
def cases() -> dict[str, EvalCase]:
    return {c.id: c for c in load_cases([str(BUILTIN_DIR)])}


def test_the_trajectory_verdict_applies_to_a_scripted_run_at_the_default_settings_only() -> None:
    assert trajectory_applies(HarnessConfig(), scripted=True)
    assert trajectory_applies(HarnessConfig(deadline_seconds=5, model_timeout_seconds=1), scripted=True)
    assert not trajectory_applies(HarnessConfig(no_gain_threshold=3), scripted=True)
    assert not trajectory_applies(HarnessConfig(max_tool_invocations=4), scripted=True)
    assert not trajectory_applies(HarnessConfig(), scripted=False)


def test_a_scripted_run_off_the_defaults_is_judged_on_its_outcome_alone(cases: dict[str, EvalCase]) -> None:
    """At threshold 1 the reference trajectory of a saturating case stops earlier than its bounds say: no trajectory
    verdict, and the outcome verdict is what `passed` means."""
    case = cases["empty_logs_gateway_timeout_t1"]
    at_default = run_case(case)
    at_one = run_case(case, config=HarnessConfig(no_gain_threshold=1))
    assert at_default.verdicts.trajectory_passed is True and at_default.passed
    assert at_one.verdicts.trajectory_failures is None and at_one.verdicts.trajectory_passed is None
    assert at_one.passed == at_one.verdicts.outcome_passed
    assert all(f.startswith("[outcome]") for f in at_one.failures)


def test_a_failure_names_its_verdict(cases: dict[str, EvalCase]) -> None:
    case = cases[SUCCESS_CASE]
    strict = case.model_copy(update={"expect": case.expect.model_copy(update={"max_model_calls": 1})})
    run = run_case(strict)
    assert run.verdicts.outcome_passed and run.verdicts.trajectory_passed is False and not run.passed
    assert run.failures == ("[trajectory] model calls 2 > max 1",)


def _cause(*variants: str) -> RootCause:
    return RootCause(statement="a root cause for the test", facts=[RootCauseFact(variants=list(variants))])


def test_a_mistake_case_accepts_what_a_model_without_the_mistake_publishes(cases: dict[str, EvalCase]) -> None:
    """The reference of a SUCCESS case judged against an expectation of FALLBACK fails, unless the case says a model
    without its mistake should publish SUCCESS with the root cause the run's conclusion states."""
    case = cases[SUCCESS_CASE]
    result = run_case(case).result
    fallback = case.expect.model_copy(update={"outcome": ReleaseOutcome.FALLBACK, "root_cause": None,
                                              "fallback_kind": "INSUFFICIENT_EVIDENCE"})  # fmt: skip
    as_mistake = case.model_copy(update={"expect": fallback})
    assert outcome_failures(as_mistake, result)[0].startswith("outcome SUCCESS != expected FALLBACK")
    clean = OutcomeExpectation(outcome=ReleaseOutcome.SUCCESS, root_cause=_cause("pool*"))
    with_clean = as_mistake.model_copy(update={"expect": fallback.model_copy(update={"without_mistake": clean})})
    assert outcome_failures(with_clean, result) == []
    wrong_words = OutcomeExpectation(outcome=ReleaseOutcome.SUCCESS, root_cause=_cause("certificate"))
    with_wrong = as_mistake.model_copy(update={"expect": fallback.model_copy(update={"without_mistake": wrong_words})})
    assert "nor what a model without the case's mistake should publish" in outcome_failures(with_wrong, result)[-1]


def test_every_invariant_bites(cases: dict[str, EvalCase]) -> None:
    """A trace that breaks each of the Harness's invariants fails the outcome verdict, whatever was published."""
    run = run_case(cases["empty_logs_gateway_timeout_t1"])
    result, metrics = run.result, run.metrics
    assert invariant_failures(result, metrics) == []
    stop = next(e for e in result.events if isinstance(e, StopRequiredDelivered))
    first = next(e for e in result.events if isinstance(e, ToolInvocation))
    late = replace(first, seq=stop.seq + 1, tool_call_id="late", scope="another")
    twice = replace(stop, seq=stop.seq + 2)
    again = replace(first, seq=first.seq + 1, tool_call_id="again")
    planted = {
        "backend called after STOP_REQUIRED": replace(result, events=(*result.events, late)),
        "STOP_REQUIRED delivered 2 times": replace(result, events=(*result.events, twice)),
        "ran again after it completed": replace(result, events=(*result.events, again)),
        "tool budget charged": replace(result, usage=replace(result.usage, tool_invocations=99)),
    }
    for text, broken in planted.items():
        found = invariant_failures(broken, metrics)
        assert any(text in f for f in found), (text, found)
        assert not verdicts(run.case, broken, metrics, judge_trajectory=False).outcome_passed
    assert first.invocation_status is InvocationStatus.COMPLETED


def test_published_facts_must_come_from_this_runs_calls(cases: dict[str, EvalCase]) -> None:
    run = run_case(cases[SUCCESS_CASE])
    draft = run.result.decision.draft
    assert draft is not None
    claim = draft.claims[0]
    cite = claim.citations[0].model_copy(update={"tool_call_id": "call_99"})
    forged = draft.model_copy(update={"claims": [claim.model_copy(update={"citations": [cite]})]})
    broken = replace(run.result, decision=replace(run.result.decision, draft=forged))
    assert any("not from this run's completed calls: ['call_99']" in f for f in invariant_failures(broken, run.metrics))
