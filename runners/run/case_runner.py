"""Run one evaluation case through the harness and judge it against its expectations."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from harness import (
    AgentLoop,
    BusinessTool,
    CancellationToken,
    ChatModel,
    DeadlineClock,
    GainApplied,
    GainProducer,
    HarnessConfig,
    InformationGain,
    InvocationStatus,
    ModelCall,
    RejectionReason,
    ReleaseOutcome,
    RunContext,
    RunResult,
    StopRequiredDelivered,
    ToolInvocation,
    ToolRequestRejected,
    run_diagnosis,
)
from runners.domain.case_run import CaseMetrics as CaseMetrics
from runners.domain.case_run import CaseRun as CaseRun
from runners.domain.case_setup import build_tools, task_of
from runners.domain.evalset import EvalCase, ExactCounts, ExpectedStop
from runners.domain.prompt import BENCH_SYSTEM_PROMPT
from runners.domain.scripted import ScriptedChatModel


def metrics_of(result: RunResult) -> CaseMetrics:
    """Derive the per-run counts from the trace."""
    inv = [e for e in result.events if isinstance(e, ToolInvocation)]
    rej = [e for e in result.events if isinstance(e, ToolRequestRejected)]
    gains = [e for e in result.events if isinstance(e, GainApplied)]
    stops = [e for e in result.events if isinstance(e, StopRequiredDelivered)]
    first_no_gain = next((e.seq for e in gains if e.gain is InformationGain.NO_GAIN), None)
    wasted = sum(1 for e in inv if first_no_gain is not None and e.seq > first_no_gain)
    return CaseMetrics(
        model_calls=result.usage.model_calls,
        guard_calls=result.usage.guard_calls,
        tool_invocations=len(inv),
        failed_invocations=sum(e.invocation_status is InvocationStatus.FAILED for e in inv),
        tool_rejections=len(rej),
        duplicate_scope_rejections=sum(e.rejection is RejectionReason.DUPLICATE_SCOPE for e in rej),
        protocol_violations=sum(e.rejection is RejectionReason.PROTOCOL_VIOLATION for e in rej),
        no_gain_count=sum(e.gain is InformationGain.NO_GAIN for e in gains),
        gained_count=sum(e.gain is InformationGain.GAINED and e.producer is GainProducer.AGENT for e in gains),
        stop_required_delivered=bool(stops),
        stop_required_deliveries=len(stops),
        rejections=dict(Counter(e.rejection for e in rej)),
        awaiting_rejections=sum(e.rejection is RejectionReason.AWAITING_EVALUATION for e in rej),
        observation_bytes=result.usage.observation_bytes,
        budget_hit=result.usage.budget_hit,
        distinct_scopes_executed=len({(e.tool, e.scope) for e in inv}),
        wasted_invocations=wasted,
        input_tokens=result.usage.input_tokens,
        output_tokens=result.usage.output_tokens,
        text_tool_calls=sum(e.text_tool_calls for e in result.events if isinstance(e, ModelCall)),
    )


def check_expectations(case: EvalCase, result: RunResult, metrics: CaseMetrics) -> list[str]:
    """Every way this run differs from the case's expectations (empty list = passed)."""
    exp = case.expect
    d = result.decision
    out: list[str] = []
    if d.outcome is not exp.outcome:
        out.append(f"outcome {d.outcome.value} != expected {exp.outcome.value} ({d.reason})")
    if exp.fallback_kind is not None and d.fallback_kind is not exp.fallback_kind:
        got = d.fallback_kind.value if d.fallback_kind else None
        out.append(f"fallback_kind {got} != expected {exp.fallback_kind.value}")
    if exp.stop_reason is not None:
        got_stop = d.stop_reason.value if d.stop_reason else ExpectedStop.NONE.value
        if got_stop != exp.stop_reason.value:
            out.append(f"stop_reason {got_stop} != expected {exp.stop_reason.value}")
    if d.outcome is ReleaseOutcome.SUCCESS and exp.root_cause_keywords:
        conclusion = (d.draft.conclusion if d.draft else "") or ""
        missing = [k for k in exp.root_cause_keywords if k.casefold() not in conclusion.casefold()]
        if missing:
            out.append(f"conclusion lacks root-cause keywords {missing}")
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


def run_case(
    case: EvalCase,
    model: ChatModel | None = None,
    *,
    config: HarnessConfig | None = None,
    guard_model: ChatModel | None = None,
    tools: Sequence[BusinessTool[Any]] | None = None,
    cancellation: CancellationToken | None = None,
    deadline_clock: DeadlineClock | None = None,
    loop: AgentLoop = run_diagnosis,
) -> CaseRun:
    """Run a case (scripted reference model by default) and judge it. `cancellation`: a token shared
    with the caller (the bench's one Ctrl-C/SIGTERM flag); once set, the run ends CANCELLED.
    `deadline_clock`: how the run reads its deadline (a cassette's, to record or replay the readings);
    `loop`: the agent loop (the native one, or an agent framework's through its adapter)."""
    chat = model or ScriptedChatModel(case.trajectory)
    backends = tools if tools is not None else build_tools(case)
    # the deadline starts here, as before
    ctx = RunContext.create(config, cancellation=cancellation, deadline_clock=deadline_clock)
    result = loop(task_of(case), backends, chat, ctx=ctx, guard_model=guard_model, system_prompt=BENCH_SYSTEM_PROMPT)
    metrics = metrics_of(result)
    return CaseRun(case, result, metrics, tuple(check_expectations(case, result, metrics)))
