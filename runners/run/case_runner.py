"""Run one evaluation case through the harness and judge it (runners/run/verdict.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from harness import (
    AgentLoop,
    BusinessTool,
    CancellationToken,
    ChatModel,
    DeadlineClock,
    EvidenceStatus,
    GainApplied,
    GainProducer,
    HarnessConfig,
    HarnessControl,
    InformationGain,
    InvocationStatus,
    ModelCall,
    RejectionReason,
    RunContext,
    RunLimits,
    RunResult,
    StopRequiredDelivered,
    ToolInvocation,
    ToolRequestRejected,
    run_diagnosis,
)
from runners.domain.case_run import CaseMetrics as CaseMetrics
from runners.domain.case_run import CaseRun as CaseRun
from runners.domain.case_setup import build_tools, task_of
from runners.domain.evalset import EvalCase
from runners.domain.evidence_marks import carries_evidence, evidence_marks
from runners.domain.prompt import case_system_prompt
from runners.domain.scripted import ScriptedChatModel
from runners.plan.bench_config import request_checks
from runners.run.verdict import loop_invariant_failures, trajectory_applies, verdicts


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
    judge_trajectory: bool | None = None,
    judge_invariants: bool = True,
) -> CaseRun:
    """Run a case (scripted reference model by default) and judge it. `cancellation`: a token shared
    with the caller (the bench's one Ctrl-C/SIGTERM flag); once set, the run ends CANCELLED.
    `deadline_clock`: how the run reads its deadline (a cassette's, to record or replay the readings);
    `loop`: the agent loop (the native one, or an agent framework's through its adapter); `judge_trajectory`:
    whether the trajectory verdict applies (default: the scripted reference model at the default settings);
    `judge_invariants`: whether the Harness's invariants are (False for the plain loop, which has none: the
    invariants any loop keeps, `loop_invariant_failures`, are judged instead)."""
    chat = model or ScriptedChatModel(case.trajectory)
    if judge_trajectory is None:
        judge_trajectory = trajectory_applies(config or HarnessConfig(), scripted=isinstance(chat, ScriptedChatModel))
    backends = tools if tools is not None else build_tools(case)
    # the deadline starts here, as before
    ctx = RunContext.create(config, cancellation=cancellation, deadline_clock=deadline_clock,
                            request_checks=request_checks(config or HarnessConfig()))  # fmt: skip
    result = loop(
        task_of(case), backends, chat, ctx=ctx, guard_model=guard_model, system_prompt=case_system_prompt(case)
    )
    metrics = metrics_of(result)
    repeats = (config or HarnessConfig()).ablate is HarnessControl.DUPLICATE_REJECTION
    judged = verdicts(case, result, metrics, judge_trajectory=judge_trajectory, judge_invariants=judge_invariants,
                      real_model=not isinstance(chat, ScriptedChatModel), repeats_allowed=repeats)  # fmt: skip
    if not judge_invariants:  # no Harness, no Harness's invariants: the ones any loop keeps are judged instead
        kept = loop_invariant_failures(result, RunLimits.of(config or HarnessConfig()))
        judged = replace(judged, outcome_failures=(*judged.outcome_failures, *kept))
    return CaseRun(case, result, metrics, judged, evidence_calls(case, result, ctx))


def evidence_calls(case: EvalCase, result: RunResult, ctx: RunContext) -> frozenset[str]:
    """The completed calls whose canonical records carry the case's evidence (runners/domain/evidence_marks.py)."""
    marks = evidence_marks(case)
    out: set[str] = set()
    for e in result.events:
        if not isinstance(e, ToolInvocation) or e.evidence_status is not EvidenceStatus.EVIDENCE:
            continue
        record = ctx.store.read(e.tool_call_id).record
        if record is not None and record.result is not None and carries_evidence(e.tool, record.result.records, marks):
            out.add(e.tool_call_id)
    return frozenset(out)
