"""The invariants any agent loop keeps, judged on the plain loop's runs (runners/run/verdict.py,
`loop_invariant_failures`): tool invocations and model calls within their budgets, every backend call charged, no
backend call after a budget stop nor for the request the budget refused. A plain run keeps them; a loop that ignores
its tool budget, and forged results breaking each one, fail its outcome verdict."""

from __future__ import annotations

import dataclasses

import pytest

from harness import BudgetExhausted, BudgetKind, HarnessConfig, RunContext, RunLimits, RunResult, ToolInvocation
from runners.domain.evalset import BUILTIN_DIR, EvalCase, load_cases
from runners.run.case_runner import run_case
from runners.run.plain_loop import plain_loop
from runners.run.verdict import loop_invariant_failures

CASE = "diagnosable_duplicate_settlement_batch_rerun_shop42"
TIGHT = HarnessConfig(max_tool_invocations=1, max_model_calls=3)


@pytest.fixture(scope="module")
def cases() -> dict[str, EvalCase]:
    return {c.id: c for c in load_cases([str(BUILTIN_DIR)])}


@pytest.mark.parametrize("config", [HarnessConfig(), TIGHT, HarnessConfig(max_model_calls=1)])
def test_plain_runs_keep_the_invariants_of_any_loop(cases: dict[str, EvalCase], config: HarnessConfig) -> None:
    for case in list(cases.values())[:12]:
        run = run_case(case, loop=plain_loop, config=config, judge_invariants=False)
        assert loop_invariant_failures(run.result, RunLimits.of(config)) == [], case.id
        assert not [f for f in run.verdicts.outcome_failures if "budget" in f], (case.id, run.verdicts)


def test_a_loop_that_ignores_its_tool_budget_fails_its_verdict(
    cases: dict[str, EvalCase], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check is wired into the plain loop's verdict: with the tool budget never consulted, the run calls the
    backend past it and its outcome verdict says so."""
    monkeypatch.setattr(RunContext, "tool_budget_exhausted", lambda self: None)
    run = run_case(cases[CASE], loop=plain_loop, config=TIGHT, judge_invariants=False)
    assert run.metrics.tool_invocations > 1
    assert f"tool invocations {run.metrics.tool_invocations} > the tool budget 1" in run.verdicts.outcome_failures
    assert not run.verdicts.passed


def _forged(result: RunResult, **changes: object) -> RunResult:
    return dataclasses.replace(result, **changes)  # type: ignore[arg-type]


def test_each_invariant_is_checked(cases: dict[str, EvalCase]) -> None:
    run = run_case(cases[CASE], loop=plain_loop, config=TIGHT, judge_invariants=False)
    result, limits = run.result, RunLimits.of(TIGHT)
    stop = next(e for e in result.events if isinstance(e, BudgetExhausted))
    ran = next(e for e in result.events if isinstance(e, ToolInvocation))
    assert stop.budget is BudgetKind.TOOL_INVOCATIONS and loop_invariant_failures(result, limits) == []

    late = dataclasses.replace(ran, seq=stop.seq + 1, tool_call_id="call-late")
    found = loop_invariant_failures(_forged(result, events=(*result.events, late)), limits)
    assert "tool invocations 2 > the tool budget 1" in found
    assert any(f.startswith("backend called after the budget stop (TOOL_INVOCATIONS): ['call-late']") for f in found)
    assert any(f.startswith("tool budget charged 1 for 2 invocations") for f in found)

    refused = dataclasses.replace(stop, tool_call_id=ran.tool_call_id)
    events = tuple(refused if e is stop else e for e in result.events)
    found = loop_invariant_failures(_forged(result, events=events), limits)
    assert found == [f"backend called for a request the budget refused: ['{ran.tool_call_id}']"]

    usage = dataclasses.replace(result.usage, model_calls=3, guard_calls=1)
    assert loop_invariant_failures(_forged(result, usage=usage), limits) == ["model calls 4 > the model-call budget 3"]
