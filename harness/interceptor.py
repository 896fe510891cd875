"""HarnessToolInterceptor: the only way a model's tool request reaches a backend.

Order (issue 2, seed 000 §4): envelope validation → gain application → duplicate-scope rejection
→ saturation and budget gate → business tool → canonical record → bounded observation.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass

from pydantic import BaseModel

from harness import observation as obs
from harness.context import RunContext
from harness.contracts import (
    BudgetKind,
    ControlSignal,
    InvocationStatus,
    JsonObject,
    RejectionReason,
    StopReason,
    ViolationKind,
)
from harness.envelope import parse_envelope
from harness.models.base import ToolCallRequest
from harness.progress import Admission, AdmissionKind, Violation
from harness.tools.base import BusinessTool, ToolExecutionError, ToolInputError, ToolResult
from harness.trace import EventKind

_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _tool_pool() -> ThreadPoolExecutor:
    """Process-wide worker threads for backend calls (shared infrastructure, not run state)."""
    global _POOL
    if _POOL is None:
        with _POOL_LOCK:
            if _POOL is None:
                _POOL = ThreadPoolExecutor(max_workers=32, thread_name_prefix="harness-tool")
    return _POOL


class DiagnosisCollectionStopped(Exception):
    """Controlled stop: a tool request after STOP_REQUIRED. Ends the loop, never a generic error."""

    def __init__(self, stop_reason: StopReason | None) -> None:
        super().__init__(f"collection stopped ({stop_reason})")
        self.stop_reason = stop_reason


class BudgetLimitReached(Exception):
    """A hard budget ran out; the loop ends with no extra model call."""

    def __init__(self, budget: BudgetKind) -> None:
        super().__init__(f"budget limit reached: {budget}")
        self.budget = budget


@dataclass(frozen=True, slots=True)
class InterceptedCall:
    """What the interceptor returns for one request."""

    observation: obs.Observation
    """The tool message for the model."""
    control: ControlSignal | None
    """STOP_REQUIRED when this observation delivers it."""


class HarnessToolInterceptor:
    """Validates, gates, executes and records tool requests for one run."""

    def __init__(self, ctx: RunContext, tools: Mapping[str, BusinessTool[BaseModel]]) -> None:
        self._ctx = ctx
        self._tools = dict(tools)

    def handle(self, call: ToolCallRequest, turn: int) -> InterceptedCall:
        """Process one tool request. Raises DiagnosisCollectionStopped or BudgetLimitReached."""
        ctx = self._ctx
        cfg = ctx.config
        envelope = parse_envelope(call.arguments, cfg.max_argument_bytes)
        structural = envelope.violation
        tool = self._tools.get(call.name)
        if structural is None and tool is None:
            structural = Violation(
                ViolationKind.UNKNOWN_TOOL,
                f"unknown tool {call.name!r}; available tools are {sorted(self._tools)}",
            )
        parsed: BaseModel | None = None
        scope: str | None = None
        input_problem: Violation | None = None
        if structural is None and tool is not None:
            try:
                parsed = tool.parse_input(envelope.input)
                scope = tool.normalize_scope(parsed)
            except ToolInputError as exc:
                input_problem = Violation(ViolationKind.INVALID_INPUT, str(exc))
        admission = ctx.tracker.admit(
            call.id,
            call.name if tool is not None else None,
            scope,
            envelope.previous,
            structural=structural,
            input_problem=input_problem,
            turn=turn,
        )
        self._trace_gains(admission)
        kind = admission.kind
        if kind is AdmissionKind.EXECUTE:
            assert tool is not None and parsed is not None and scope is not None
            return self._execute(call, tool, parsed, scope, envelope.input, turn)
        if kind is AdmissionKind.STOPPED:
            self._reject(call, scope, RejectionReason.SATURATED, None)
            ctx.trace.emit(EventKind.COLLECTION_STOPPED, tool_call_id=call.id, stop_reason=admission.stop_reason)
            raise DiagnosisCollectionStopped(admission.stop_reason)
        if kind is AdmissionKind.REJECT_VIOLATION:
            assert admission.violation is not None
            self._reject(call, scope, RejectionReason.PROTOCOL_VIOLATION, admission.violation)
            return InterceptedCall(obs.violation(call.id, admission.violation, admission.expected_pending), None)
        if kind is AdmissionKind.REJECT_DUPLICATE:
            self._reject(call, scope, RejectionReason.DUPLICATE_SCOPE, None)
            return InterceptedCall(obs.duplicate(call.id, admission.duplicate_of or ""), None)
        if kind is AdmissionKind.REJECT_SATURATED:
            self._reject(call, scope, RejectionReason.SATURATED, None)
            return InterceptedCall(obs.saturated(call.id, admission.stop_reason), None)
        # STOP_REQUIRED: the request itself is rejected (for the reason that saturated the run).
        return self._stop_required(call, scope, admission)

    # -- helpers ----------------------------------------------------------------------------
    def _execute(
        self,
        call: ToolCallRequest,
        tool: BusinessTool[BaseModel],
        parsed: BaseModel,
        scope: str,
        business_input: JsonObject,
        turn: int,
    ) -> InterceptedCall:
        ctx = self._ctx
        exhausted = ctx.tool_budget_exhausted()
        if exhausted is not None:
            self._reject(call, scope, RejectionReason.BUDGET, None)
            ctx.tracker.stop_for_budget()
            ctx.trace.emit(
                EventKind.BUDGET_EXHAUSTED,
                tool_call_id=call.id,
                budget=exhausted,
                stop_reason=StopReason.BUDGET_LIMIT_REACHED,
            )
            raise BudgetLimitReached(exhausted)
        ctx.usage.tool_invocations += 1
        clock = ctx.store.clock
        started = clock()
        t0 = time.perf_counter()
        # The backend runs on a worker thread so that a hanging tool cannot hold the loop past the
        # deadline: the call is abandoned, recorded as failed, and the run is stopped and released.
        timeout = max(min(ctx.config.tool_timeout_seconds, ctx.remaining_seconds()), 0.001)
        future: Future[ToolResult] | None = None
        try:
            if tool.runs_inline:  # bounded by the tool itself: skip the ~25 µs worker hand-off
                result = tool.run(parsed)
            else:
                future = _tool_pool().submit(tool.run, parsed)
                result = future.result(timeout=timeout)
            if not isinstance(result, ToolResult) or not isinstance(result.records, tuple):
                raise ToolExecutionError(f"malformed tool payload: {type(result).__name__} is not a ToolResult")
        except Exception as exc:
            # (the tool may raise TimeoutError itself, which *is* FutureTimeout since 3.11)
            timed_out = future is not None and isinstance(exc, FutureTimeout) and not future.done()
            if timed_out and future is not None:
                future.cancel()
            message = f"timed out after {timeout:.2f}s" if timed_out else f"{type(exc).__name__}: {exc}"
            ctx.store.put(
                tool_call_id=call.id, tool=call.name, scope=scope, input=business_input,
                status=InvocationStatus.FAILED, result=None, error=message, started_at=started,
            )  # fmt: skip
            ctx.tracker.complete(call.id, call.name, scope, None, turn=turn)
            observation = obs.failed(call.id, call.name, message)
            ctx.trace.emit(
                EventKind.TOOL_INVOCATION, tool_call_id=call.id, tool=call.name, scope=scope,
                invocation_status=InvocationStatus.FAILED, observation_bytes=observation.bytes,
                latency_ms=round((time.perf_counter() - t0) * 1000, 3), detail=message[:200],
            )  # fmt: skip
            if timed_out and ctx.remaining_seconds() <= 0.05:
                ctx.tracker.stop_for_budget()
                ctx.trace.emit(EventKind.BUDGET_EXHAUSTED, tool_call_id=call.id, budget=BudgetKind.DEADLINE,
                               stop_reason=StopReason.BUDGET_LIMIT_REACHED)  # fmt: skip
                raise BudgetLimitReached(BudgetKind.DEADLINE) from None
            return InterceptedCall(observation, None)
        latency = round((time.perf_counter() - t0) * 1000, 3)
        ctx.store.put(
            tool_call_id=call.id,
            tool=call.name,
            scope=scope,
            input=business_input,
            status=InvocationStatus.COMPLETED,
            result=result,
            error=None,
            started_at=started,
        )
        done = ctx.tracker.complete(call.id, call.name, scope, result.evidence_status, turn=turn)
        observation = obs.project_result(
            call.id,
            call.name,
            result,
            ctx.config.max_observation_bytes,
            evaluation_required=done.pending,
            stop_reason=done.stop_reason,
        )
        ctx.trace.emit(
            EventKind.TOOL_INVOCATION,
            tool_call_id=call.id,
            tool=call.name,
            scope=scope,
            invocation_status=InvocationStatus.COMPLETED,
            evidence_status=result.evidence_status,
            count=result.count,
            truncated=observation.truncated,
            observation_bytes=observation.bytes,
            latency_ms=latency,
        )
        if done.gain is not None:
            ctx.trace.emit(
                EventKind.GAIN_APPLIED, tool_call_id=call.id, gain=done.gain.gain, producer=done.gain.producer
            )
        if done.stop_required:
            ctx.trace.emit(EventKind.STOP_REQUIRED_DELIVERED, tool_call_id=call.id, stop_reason=done.stop_reason)
            return InterceptedCall(observation, ControlSignal.STOP_REQUIRED)
        return InterceptedCall(observation, None)

    def _stop_required(self, call: ToolCallRequest, scope: str | None, admission: Admission) -> InterceptedCall:
        ctx = self._ctx
        reason = admission.stop_reason or StopReason.INFORMATION_SATURATED
        if admission.trigger is AdmissionKind.REJECT_VIOLATION:
            self._reject(call, scope, RejectionReason.PROTOCOL_VIOLATION, admission.violation)
        elif admission.trigger is AdmissionKind.REJECT_DUPLICATE:
            self._reject(call, scope, RejectionReason.DUPLICATE_SCOPE, None)
        else:
            self._reject(call, scope, RejectionReason.SATURATED, None)
        ctx.trace.emit(EventKind.STOP_REQUIRED_DELIVERED, tool_call_id=call.id, stop_reason=reason)
        return InterceptedCall(obs.stop_required(call.id, reason, admission.violation), ControlSignal.STOP_REQUIRED)

    def _reject(
        self, call: ToolCallRequest, scope: str | None, reason: RejectionReason, violation: Violation | None
    ) -> None:
        self._ctx.trace.emit(
            EventKind.TOOL_REQUEST_REJECTED,
            tool_call_id=call.id,
            tool=call.name[:100],
            scope=scope,
            invocation_status=InvocationStatus.REJECTED,
            rejection=reason,
            violation=violation.kind if violation else None,
            detail=violation.message[:300] if violation else None,
        )

    def _trace_gains(self, admission: Admission) -> None:
        for g in admission.gains:
            self._ctx.trace.emit(EventKind.GAIN_APPLIED, tool_call_id=g.tool_call_id, gain=g.gain, producer=g.producer)
