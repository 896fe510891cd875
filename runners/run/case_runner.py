"""Run one evaluation case through the harness and judge it against its expectations."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from harness.agent import AgentLoop, RunResult, run_diagnosis
from harness.config import HarnessConfig
from harness.context import CancellationToken, DeadlineClock, RunContext
from harness.contracts import (
    BudgetKind,
    GainProducer,
    InformationGain,
    InvocationStatus,
    RejectionReason,
    ReleaseOutcome,
)
from harness.models.base import ChatModel
from harness.prompts import DiagnosisTask, TaskContext
from harness.tools.base import BusinessTool, ToolExecutionError, ToolResult
from harness.trace import GainApplied, ModelCall, StopRequiredDelivered, ToolInvocation, ToolRequestRejected
from runners.domain.evalset import EvalCase, ExactCounts, ExpectedStop, FaultKind, ToolFault, db_tables
from runners.domain.prompt import BENCH_SYSTEM_PROMPT
from runners.domain.scripted import ScriptedChatModel
from runners.domain.tools.db_query import DatabaseQuery, case_input_model
from runners.domain.tools.kb_search import KnowledgeBaseSearch
from runners.domain.tools.log_search import LogSearch
from runners.domain.tools.recorded import RecordedAnswer, with_recorded


class _FaultyTool(BusinessTool[BaseModel]):
    """Wraps a real tool; its backend fails as the case's fault says (tool_failures family)."""

    inner: BusinessTool[Any]
    fault: ToolFault

    def __init__(self, inner: BusinessTool[Any], fault: ToolFault) -> None:
        self.inner = inner
        self.fault = fault
        self.calls = 0

    def normalize_scope(self, parsed: BaseModel) -> str:
        return self.inner.normalize_scope(parsed)

    def run(self, parsed: BaseModel) -> ToolResult:
        self.calls += 1
        if self.calls > self.fault.after_calls:
            if self.fault.kind is FaultKind.TIMEOUT:
                raise TimeoutError(f"{self.inner.name} backend timed out: {self.fault.message}")
            raise ToolExecutionError(f"{self.inner.name} backend error: {self.fault.message}")
        return self.inner.run(parsed)


def _faulty(inner: BusinessTool[Any], fault: ToolFault) -> BusinessTool[Any]:
    cls = type(
        f"Faulty_{inner.name}",
        (_FaultyTool,),
        {"name": inner.name, "description": inner.description, "input_model": inner.input_model},
    )
    tool: BusinessTool[Any] = cls(inner, fault)
    return tool


def build_tools(case: EvalCase) -> list[BusinessTool[Any]]:
    """The case's three tools on their fixtures (real BM25 and DuckDB), a captured case's recorded results served
    first, faults applied."""
    fx = case.fixtures
    tools: list[BusinessTool[Any]] = [KnowledgeBaseSearch(fx.kb), LogSearch(fx.logs), DatabaseQuery(fx.tables)]
    if fx.recorded or fx.named_tables:  # a captured case (runners/domain/tools/recorded.py)
        widened = case_input_model(db_tables(fx)) if fx.named_tables else None
        tools = [with_recorded(t, _answers(case, t.name), widened if t.name == "db_query" else None) for t in tools]
    faults = {f.tool: f for f in fx.faults}
    return [_faulty(t, faults[t.name]) if t.name in faults else t for t in tools]


def _answers(case: EvalCase, tool: str) -> list[RecordedAnswer]:
    return [
        RecordedAnswer(dict(r.input), ToolResult(r.evidence_status, r.count, dict(r.scope),
                                                 tuple(dict(x) for x in r.records), r.truncated, tuple(r.relevance)),
                       r.error)
        for r in case.fixtures.recorded if r.tool == tool
    ]  # fmt: skip


def task_of(case: EvalCase) -> DiagnosisTask:
    """The DiagnosisTask for a case."""
    c = case.context
    return DiagnosisTask(case.question, TaskContext(c.tenant, c.service, c.time_start, c.time_end))


@dataclass(frozen=True, slots=True)
class CaseMetrics:
    """Counts derived from one run's trace (the same numbers land in DuckDB)."""

    model_calls: int
    """Diagnosis model call attempts."""
    guard_calls: int
    """SemanticGuard calls."""
    tool_invocations: int
    """Backend invocations."""
    failed_invocations: int
    """Backend invocations that failed."""
    tool_rejections: int
    """Requests rejected before the backend."""
    duplicate_scope_rejections: int
    """Rejections for a duplicate scope."""
    protocol_violations: int
    """Rejections for a protocol violation."""
    no_gain_count: int
    """NO_GAIN applications (Harness and Agent)."""
    gained_count: int
    """GAINED applications."""
    stop_required_delivered: bool
    """Whether STOP_REQUIRED went out."""
    stop_required_deliveries: int
    """How many STOP_REQUIRED observations went out (the contract allows one)."""
    rejections: dict[RejectionReason, int]
    """Rejections before the backend, by reason (reasons with none are absent)."""
    awaiting_rejections: int
    """Calls queued in a message behind a same-message pending call (not violations)."""
    observation_bytes: int
    """Observation bytes handed to the model over the run."""
    budget_hit: BudgetKind | None
    """The hard budget that stopped the run, if one did."""
    distinct_scopes_executed: int
    """Distinct tool+scope pairs that reached the backend."""
    wasted_invocations: int
    """Backend invocations after the first NO_GAIN."""
    input_tokens: int
    """Prompt tokens."""
    output_tokens: int
    """Completion tokens."""
    text_tool_calls: int = 0
    """Tool calls the model wrote as text and the client read from it (`--tool-call-format json`)."""


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


@dataclass(frozen=True, slots=True)
class CaseRun:
    """One case run: the harness result, its metrics and the verdict."""

    case: EvalCase
    """The case."""
    result: RunResult
    """What the harness produced."""
    metrics: CaseMetrics
    """Counts from the trace."""
    failures: tuple[str, ...]
    """Unmet expectations."""

    @property
    def passed(self) -> bool:
        """True when every expectation held."""
        return not self.failures


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
