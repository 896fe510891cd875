"""The two verdicts of one case run.

- The **outcome verdict** holds for any agent, scripted or real: the published outcome and fallback kind, whether a
  SUCCESS conclusion states the case's root cause as the judge reads it (`runners/domain/judge.py`; the rule judge by
  default) (or what the case accepts instead: what a model that does not make its mistake should publish, what a run
  that completed a call should publish, for a real model an honest FALLBACK where the script's mistake earns FAILED),
  and the Harness's invariants — nothing reaches a backend after STOP_REQUIRED, each scope completes at most once,
  rejections are never charged to the tool budget, STOP_REQUIRED is delivered at most once, and what is published
  cites only this run's canonical records.
- The **trajectory verdict** describes the scripted reference trajectory: exact counts, call bounds, the stop reason
  that follows from the script. It judges a scripted run at the settings the bounds were written for (the default
  thresholds and budgets) and no other run: at another threshold, or for a real model, it does not apply (None).

A failure names its verdict (`[outcome] …`, `[trajectory] …`), so a reader sees which one a run failed.

A run that ended because a model call failed on the endpoint or the machine — timed out (a loaded machine), refused,
5xx, a 2xx that is no completion, a cassette miss — after the Harness's retries is **the bench's failure, not the
model's** (`bench_failure`, the one place this is decided): neither verdict judges it (`Verdicts.bench_failure`
holds the reason; `passed` and `outcome_passed` are None), and every pass and recall figure leaves it out and counts it
apart. A reply the model got wrong (BAD_RESPONSE) is the model's, and a call the run's own deadline or budget cut is a
budget stop, judged as any other.
"""

from __future__ import annotations

from harness import (
    BudgetExhausted,
    FallbackKind,
    HarnessConfig,
    HarnessControl,
    InvocationStatus,
    ModelCall,
    RejectionReason,
    ReleaseOutcome,
    RunLimits,
    RunResult,
    StopRequiredDelivered,
    ToolInvocation,
)
from runners.domain.case_model import EvalCase, ExactCounts, ExpectedStop, OutcomeExpectation
from runners.domain.case_run import CaseMetrics, Verdicts
from runners.domain.judge import Judge
from runners.plan.bench_config import BenchHarnessConfig
from runners.run.rule_judge import RULE_JUDGE

__all__ = [
    "bench_failure",
    "invariant_failures",
    "loop_invariant_failures",
    "outcome_failures",
    "trajectory_applies",
    "trajectory_failures",
    "verdicts",
]

_DEFAULT_LIMITS = RunLimits.of(HarnessConfig())


def trajectory_applies(config: HarnessConfig, *, scripted: bool) -> bool:
    """Whether a run is judged on the trajectory's bounds: a scripted model at the thresholds and budgets the bounds
    were written for (the defaults, no stop rule; timeouts and the deadline do not change a scripted trajectory)."""
    # read from the config itself, not by asking the planner: the run path never re-enters plan/ once it runs
    stop_rule = config.stop_rule if isinstance(config, BenchHarnessConfig) else None
    whole = config.ablate is HarnessControl.NONE  # a control switched off changes what the trajectory's bounds count
    return scripted and RunLimits.of(config) == _DEFAULT_LIMITS and stop_rule is None and whole


def verdicts(
    case: EvalCase,
    result: RunResult,
    metrics: CaseMetrics,
    *,
    judge_trajectory: bool,
    judge_invariants: bool = True,
    judge: Judge = RULE_JUDGE,
    real_model: bool = False,
    repeats_allowed: bool = False,
) -> Verdicts:
    """Both verdicts of `result` against `case` (`judge_trajectory`: see `trajectory_applies`; `judge_invariants`:
    False for a run no Harness drove: the plain loop, whose repeats and unguarded answers are what it is measured
    on; `judge`: who reads a SUCCESS conclusion; `real_model`: not the scripted reference model, see
    `outcome_failures`; `repeats_allowed`: a completed scope may run again, the Harness's duplicate rejection being
    switched off)."""
    invariants = invariant_failures(result, metrics, repeats_allowed=repeats_allowed) if judge_invariants else []
    bench = bench_failure(result)
    if bench is not None:  # unjudged; a broken invariant is the Harness's and stays listed
        return Verdicts(tuple(invariants), None, bench_failure=bench)
    outcome = [*outcome_failures(case, result, judge=judge, real_model=real_model), *invariants]
    trajectory = trajectory_failures(case, result, metrics) if judge_trajectory else None
    return Verdicts(tuple(outcome), None if trajectory is None else tuple(trajectory))


def bench_failure(result: RunResult) -> str | None:
    """Why `result` measures the bench and not the model: the run ended on a model call (the agent's or the
    SemanticGuard's) that failed on the endpoint or the machine after the Harness's retries (None: judge the run)."""
    kind = result.error_kind
    if kind is None or not kind.infrastructure:
        return None
    attempts = sum(isinstance(e, ModelCall) and e.error_kind is not None for e in result.events)
    detail = next(iter((result.error or result.decision.call_error or "").splitlines()), "")[:160]
    return (f"the bench's failure, not the model's: a model call failed with {kind.value} after {attempts} failed "
            f"attempt(s) ({detail})")  # fmt: skip


def _against(want: OutcomeExpectation, result: RunResult, question: str, judge: Judge) -> list[str]:
    d = result.decision
    out: list[str] = []
    if d.outcome is not want.outcome:
        out.append(f"outcome {d.outcome.value} != expected {want.outcome.value} ({d.reason})")
    if want.fallback_kind is not None and d.fallback_kind is not want.fallback_kind:
        got = d.fallback_kind.value if d.fallback_kind else None
        out.append(f"fallback_kind {got} != expected {want.fallback_kind.value}")
    if d.outcome is ReleaseOutcome.SUCCESS and want.root_cause is not None:
        conclusion = (d.draft.conclusion if d.draft else "") or ""
        verdict = judge.judge(want.root_cause, conclusion, question=question)
        if not verdict.states_root_cause:
            out.append(f"conclusion does not state the root cause ({judge.name} judge: {verdict.reason})")
    return out


_HONEST_FALLBACK = OutcomeExpectation(outcome=ReleaseOutcome.FALLBACK, fallback_kind=FallbackKind.INSUFFICIENT_EVIDENCE)


def _completed_a_call(result: RunResult) -> bool:
    return any(isinstance(e, ToolInvocation) and e.invocation_status is InvocationStatus.COMPLETED
               for e in result.events)  # fmt: skip


def outcome_failures(
    case: EvalCase, result: RunResult, *, judge: Judge = RULE_JUDGE, real_model: bool = False
) -> list[str]:
    """How the published outcome differs from the case's expectation (empty when it holds, or one the case accepts
    instead: what a model that does not make the case's mistake should publish; after a completed call, what such a
    run should publish; for a real model where the scripted model's mistake makes FAILED, an honest FALLBACK); `judge`
    reads a SUCCESS conclusion."""
    exp = case.expect
    primary = OutcomeExpectation(outcome=exp.outcome, fallback_kind=exp.fallback_kind,
                                 root_cause=exp.root_cause,
                                 root_cause_statement=exp.root_cause_statement)  # fmt: skip
    failures = _against(primary, result, case.question, judge)
    if not failures:
        return []
    instead: list[tuple[str, OutcomeExpectation]] = []
    if exp.without_mistake is not None:
        instead.append(("what a model without the case's mistake should publish", exp.without_mistake))
    if exp.after_a_call is not None and _completed_a_call(result):
        instead.append(("what a run that completed a call should publish", exp.after_a_call))
    if real_model and exp.outcome is ReleaseOutcome.FAILED:
        # FAILED is what the scripted model's mistake earns; a real model that checked and said it cannot conclude
        # did better than the script, not worse
        instead.append(("an honest fallback (a real model need not make the scripted mistake)", _HONEST_FALLBACK))
    for why, other in instead:
        clean = _against(other, result, case.question, judge)
        if not clean:
            return []
        failures.append(f"nor {why}: {'; '.join(clean)}")
    return failures


def invariant_failures(result: RunResult, metrics: CaseMetrics, *, repeats_allowed: bool = False) -> list[str]:
    """The Harness's invariants, which hold for any agent: a failure here is a Harness bug, never the model's
    (`repeats_allowed`: not that a scope completes once, for a run with duplicate rejection switched off)."""
    out: list[str] = []
    invocations = [e for e in result.events if isinstance(e, ToolInvocation)]
    stops = [e for e in result.events if isinstance(e, StopRequiredDelivered)]
    if len(stops) > 1:
        out.append(f"STOP_REQUIRED delivered {len(stops)} times (at most once)")
    if stops and (late := [e.tool_call_id for e in invocations if e.seq > stops[0].seq]):
        out.append(f"backend called after STOP_REQUIRED: {late}")
    completed: set[tuple[str, str]] = set()
    for e in invocations:
        if (e.tool, e.scope) in completed and not repeats_allowed:
            out.append(f"scope of {e.tool_call_id} ran again after it completed ({e.tool})")
        if e.invocation_status is InvocationStatus.COMPLETED:
            completed.add((e.tool, e.scope))
    if result.usage.tool_invocations != len(invocations):
        out.append(f"tool budget charged {result.usage.tool_invocations} for {len(invocations)} invocations "
                   "(rejections are never charged)")  # fmt: skip
    ran = {e.tool_call_id for e in invocations if e.invocation_status is InvocationStatus.COMPLETED}
    d = result.decision
    cited = {c.tool_call_id for claim in (d.draft.claims if d.draft and d.outcome is ReleaseOutcome.SUCCESS else ())
             for c in claim.citations}  # fmt: skip
    facts = {f.tool_call_id for f in d.snapshot.observed_facts} if d.snapshot is not None else set()
    if foreign := sorted((cited | facts) - ran):
        out.append(f"published facts or citations not from this run's completed calls: {foreign}")
    return out


def loop_invariant_failures(result: RunResult, limits: RunLimits) -> list[str]:
    """The invariants any agent loop keeps, with or without a Harness (the plain loop's verdict judges these): the
    tool invocations and the model calls within their budgets, every backend call charged to the tool budget, no
    backend call after a budget stopped the run, and none for the request a budget or loop detector refused."""
    out: list[str] = []
    invocations = [e for e in result.events if isinstance(e, ToolInvocation)]
    budget_stops = [e for e in result.events if isinstance(e, BudgetExhausted)]
    if len(invocations) > limits.max_tool_invocations:
        out.append(f"tool invocations {len(invocations)} > the tool budget {limits.max_tool_invocations}")
    calls = result.usage.model_calls + result.usage.guard_calls
    if calls > limits.max_model_calls:
        out.append(f"model calls {calls} > the model-call budget {limits.max_model_calls}")
    if result.usage.tool_invocations != len(invocations):
        out.append(f"tool budget charged {result.usage.tool_invocations} for {len(invocations)} invocations")
    if budget_stops and (late := [e.tool_call_id for e in invocations if e.seq > budget_stops[0].seq]):
        out.append(f"backend called after the budget stop ({budget_stops[0].budget.value}): {late}")
    refused = {e.tool_call_id for e in budget_stops if e.tool_call_id is not None}
    if ran := sorted(refused & {e.tool_call_id for e in invocations}):
        out.append(f"backend called for a request the budget refused: {ran}")
    return out


def trajectory_failures(case: EvalCase, result: RunResult, metrics: CaseMetrics) -> list[str]:
    """Every way the run differs from the reference trajectory's bounds."""
    exp = case.expect
    d = result.decision
    out: list[str] = []
    if exp.stop_reason is not None:
        got_stop = d.stop_reason.value if d.stop_reason else ExpectedStop.NONE.value
        if got_stop != exp.stop_reason.value:
            out.append(f"stop_reason {got_stop} != expected {exp.stop_reason.value}")
    if exp.max_tool_invocations is not None and metrics.tool_invocations > exp.max_tool_invocations:
        out.append(f"tool invocations {metrics.tool_invocations} > max {exp.max_tool_invocations}")
    if exp.max_model_calls is not None and metrics.model_calls > exp.max_model_calls:
        out.append(f"model calls {metrics.model_calls} > max {exp.max_model_calls}")
    if exp.backend_calls_equal_distinct_scopes and metrics.tool_invocations != metrics.distinct_scopes_executed:
        out.append(f"backend calls {metrics.tool_invocations} != distinct scopes {metrics.distinct_scopes_executed}")
    if exp.min_duplicate_rejections is not None and metrics.duplicate_scope_rejections < exp.min_duplicate_rejections:
        out.append(f"duplicate rejections {metrics.duplicate_scope_rejections} < {exp.min_duplicate_rejections}")
    if exp.min_protocol_violations is not None and metrics.protocol_violations < exp.min_protocol_violations:
        out.append(f"protocol violations {metrics.protocol_violations} < {exp.min_protocol_violations}")
    if exp.stop_required_delivered is not None and metrics.stop_required_delivered != exp.stop_required_delivered:
        out.append(f"stop_required_delivered {metrics.stop_required_delivered} != {exp.stop_required_delivered}")
    if exp.exact is not None:
        out.extend(_check_exact(exp.exact, metrics))
    return out


def _check_exact(want: ExactCounts, m: CaseMetrics) -> list[str]:
    got_pairs = (
        ("backend_calls", want.backend_calls, m.tool_invocations),
        ("model_calls", want.model_calls, m.model_calls),
        ("stop_required_deliveries", want.stop_required_deliveries, m.stop_required_deliveries),
        ("no_gain", want.no_gain, m.no_gain_count),
        ("gained", want.gained, m.gained_count),
    )
    out = [f"exact {name} {got} != expected {expected}" for name, expected, got in got_pairs
           if expected is not None and got != expected]  # fmt: skip
    if want.rejections is not None:
        for reason in RejectionReason:
            expected, got = want.rejections.get(reason, 0), m.rejections.get(reason, 0)
            if got != expected:
                out.append(f"exact rejections[{reason.value}] {got} != expected {expected}")
    return out
