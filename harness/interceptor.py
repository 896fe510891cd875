"""HarnessToolInterceptor: the only way a model's tool request reaches a backend.

Order (docs/architecture.md §4.2): envelope validation → the run's request checks, if any
(`harness.request_checks`) → gain application → duplicate-scope rejection → saturation and budget gate → business
tool → canonical record → bounded observation.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass

from pydantic import BaseModel

from harness import observation as obs
from harness.context import RunContext
from harness.contracts import (
    BudgetKind,
    ControlSignal,
    HarnessControl,
    InvocationStatus,
    JsonObject,
    RejectionReason,
    StopReason,
    ViolationKind,
)
from harness.envelope import parse_envelope, parse_plain
from harness.models.base import ToolCallRequest
from harness.tools.base import BusinessTool, ToolExecutionError, ToolInputError, ToolResult
from harness.trace import (
    CollectionStopped,
    GainApplied,
    StopRequiredDelivered,
    ToolInvocation,
    ToolRequestRejected,
)
from harness.tracker import Admission, AdmissionKind, Violation

DEADLINE_SLACK_SECONDS = 0.05
"""A tool timeout with at most this much of the deadline left is the deadline's stop, not a tool failure."""

_INLINE_BOUND_SECONDS = 2.0
"""Below this much time left, even self-bounded tools run on a worker capped by the deadline."""

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


class RunCancelled(Exception):
    """The run's cancellation token was set (Ctrl-C, SIGTERM): no new backend call starts, and a
    backend interrupted by it is not a tool failure."""


@dataclass(frozen=True, slots=True)
class InterceptedCall:
    """What the interceptor returns for one request."""

    observation: obs.Observation
    """The tool message for the model."""
    control: ControlSignal | None
    """STOP_REQUIRED when this observation delivers it."""


@dataclass(frozen=True, slots=True)
class ToolAnswer:
    """The one tool message a tool_call_id gets."""

    tool_call_id: str
    """The call answered."""
    observation: obs.Observation
    """What the model reads."""


@dataclass(frozen=True, slots=True)
class TurnResult:
    """Every call of one assistant message, answered in order, and whether the loop must end."""

    answers: tuple[ToolAnswer, ...]
    """Exactly one answer per tool_call_id of the message, in the message's order."""
    ended: bool
    """True after a controlled stop, a hard budget or a cancellation: no further model call."""


class HarnessToolInterceptor:
    """Validates, gates, executes and records tool requests for one run."""

    def __init__(self, ctx: RunContext, tools: Mapping[str, BusinessTool[BaseModel]]) -> None:
        self._ctx = ctx
        self._tools = dict(tools)

    def handle_turn(self, calls: Sequence[ToolCallRequest], turn: int) -> TurnResult:
        """Process every call of one assistant message in order (one pending call at a time).

        A call queued behind a call that became pending in this message is answered "not executed:
        evaluate X first" (AWAITING_EVALUATION: no violation, no gain, no budget). When the loop must
        end, the calls left in the message are answered too, so every tool_call_id gets exactly one
        tool message and one trace record.
        """
        answers: list[ToolAnswer] = []
        for i, call in enumerate(calls):
            try:
                handled = self.handle(call, turn)
            except DiagnosisCollectionStopped as stop:
                why = f"the Harness stopped the collection ({stop.stop_reason}); nothing more runs"
                answers += self._unexecuted(calls[i:], RejectionReason.SATURATED, why, first_traced=True)
                return TurnResult(tuple(answers), True)
            except BudgetLimitReached as budget:
                why = f"budget limit reached ({budget.budget}); nothing more runs"
                answers += self._unexecuted(calls[i:], RejectionReason.BUDGET, why, first_traced=True)
                return TurnResult(tuple(answers), True)
            except RunCancelled:
                answers += self._unexecuted(
                    calls[i:], RejectionReason.CANCELLED, "the run was cancelled", first_traced=False
                )
                return TurnResult(tuple(answers), True)
            answers.append(ToolAnswer(call.id, handled.observation))
        return TurnResult(tuple(answers), False)

    def answer_unexecuted(
        self, calls: Sequence[ToolCallRequest], reason: RejectionReason, detail: str
    ) -> list[ToolAnswer]:
        """Answer and trace calls the loop will not run (e.g. the token budget ran out with the message)."""
        return self._unexecuted(calls, reason, detail, first_traced=False)

    def _unexecuted(
        self, calls: Sequence[ToolCallRequest], reason: RejectionReason, detail: str, *, first_traced: bool
    ) -> list[ToolAnswer]:
        """Answer (and trace, unless already traced) calls left after the loop ended."""
        cap = self._ctx.result_observation_cap()
        out: list[ToolAnswer] = []
        for j, call in enumerate(calls):
            if j > 0 or not first_traced:
                self._reject(call, None, reason, None)
            out.append(ToolAnswer(call.id, obs.not_executed(call.id, reason, detail, cap)))
        return out

    def handle(self, call: ToolCallRequest, turn: int) -> InterceptedCall:
        """Process one tool request. Raises DiagnosisCollectionStopped, BudgetLimitReached or RunCancelled."""
        handled = self._handle(call, turn)
        self._ctx.usage.observation_bytes += handled.observation.bytes
        return handled

    def _handle(self, call: ToolCallRequest, turn: int) -> InterceptedCall:
        ctx = self._ctx
        cfg = ctx.config
        cap = ctx.result_observation_cap()  # rejection answers are bounded by what is left of the run's budget too
        if ctx.cancellation.cancelled:
            raise RunCancelled()
        parse = parse_plain if cfg.ablate is HarnessControl.ENVELOPE else parse_envelope
        envelope = parse(call.arguments, cfg.max_argument_bytes)
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
        why = ctx.check_request(call.id, call.name[:100], scope)
        if why is not None:  # a request check's reason: the Harness stops the run here, as at a budget
            self._reject(call, scope, RejectionReason.STOP_RULE, None)
            ctx.record_budget_stop(BudgetKind.STOP_RULE, why[:300], tool_call_id=call.id)
            raise BudgetLimitReached(BudgetKind.STOP_RULE)
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
            ctx.trace.emit(CollectionStopped(tool_call_id=call.id, stop_reason=admission.stop_reason))
            raise DiagnosisCollectionStopped(admission.stop_reason)
        if kind is AdmissionKind.REJECT_VIOLATION:
            assert admission.violation is not None
            self._reject(call, scope, RejectionReason.PROTOCOL_VIOLATION, admission.violation)
            return InterceptedCall(obs.violation(call.id, admission.violation, admission.expected_pending, cap), None)
        if kind is AdmissionKind.REJECT_AWAITING:
            assert admission.expected_pending is not None
            self._reject(call, scope, RejectionReason.AWAITING_EVALUATION, None)
            return InterceptedCall(obs.awaiting(call.id, admission.expected_pending, cap), None)
        if kind is AdmissionKind.REJECT_DUPLICATE:
            self._reject(call, scope, RejectionReason.DUPLICATE_SCOPE, None)
            return InterceptedCall(obs.duplicate(call.id, admission.duplicate_of or "", cap), None)
        if kind is AdmissionKind.REJECT_SATURATED:
            self._reject(call, scope, RejectionReason.SATURATED, None)
            return InterceptedCall(obs.saturated(call.id, admission.stop_reason, cap), None)
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
            ctx.record_budget_stop(exhausted, tool_call_id=call.id)
            raise BudgetLimitReached(exhausted)
        clock = ctx.store.clock
        started = clock()
        t0 = time.perf_counter()
        # The backend runs on a worker thread so that a hanging tool cannot hold the loop past the
        # deadline: the call is abandoned, recorded as failed, and the run is stopped and released.
        # Inline tools bound their own latency (~1.5 s at most), so near the deadline they go through
        # the worker too.
        remaining = ctx.remaining_seconds()
        timeout = max(min(ctx.config.tool_timeout_seconds, remaining), 0.001)
        inline = tool.runs_inline and remaining > _INLINE_BOUND_SECONDS
        future: Future[ToolResult] | None = None
        try:
            if inline:  # bounded by the tool itself: skip the worker hand-off
                result = tool.run(parsed)
            else:
                future = _tool_pool().submit(tool.run, parsed)
                result = future.result(timeout=timeout)
            if not isinstance(result, ToolResult) or not isinstance(result.records, tuple):
                raise ToolExecutionError(f"malformed tool payload: {type(result).__name__} is not a ToolResult")
        except Exception as exc:
            if ctx.cancellation.cancelled:
                # Interrupted by Ctrl-C/SIGTERM (DuckDB turns the signal into "Query interrupted"):
                # the run is cancelled, the tool did not fail.
                raise RunCancelled() from exc
            ctx.usage.tool_invocations += 1
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
            ctx.request_failed(call.id)
            observation = obs.failed(call.id, call.name, message, ctx.result_observation_cap())
            ctx.trace.emit(ToolInvocation(
                tool_call_id=call.id, tool=call.name, scope=scope, invocation_status=InvocationStatus.FAILED,
                observation_bytes=observation.bytes, latency_ms=round((time.perf_counter() - t0) * 1000, 3),
                detail=message[:200],
            ))  # fmt: skip
            if timed_out and ctx.remaining_seconds() <= DEADLINE_SLACK_SECONDS:
                ctx.record_budget_stop(BudgetKind.DEADLINE, tool_call_id=call.id)
                raise BudgetLimitReached(BudgetKind.DEADLINE) from None
            return InterceptedCall(observation, None)
        ctx.usage.tool_invocations += 1
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
            ctx.result_observation_cap(),
            evaluation_required=done.pending,
            stop_reason=done.stop_reason,
        )
        ctx.trace.emit(
            ToolInvocation(
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
        )
        if done.gain is not None:
            ctx.trace.emit(GainApplied(tool_call_id=call.id, gain=done.gain.gain, producer=done.gain.producer))
        if done.stop_required:
            stop = done.stop_reason or StopReason.INFORMATION_SATURATED
            ctx.trace.emit(StopRequiredDelivered(tool_call_id=call.id, stop_reason=stop))
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
        ctx.trace.emit(StopRequiredDelivered(tool_call_id=call.id, stop_reason=reason))
        return InterceptedCall(
            obs.stop_required(call.id, reason, admission.violation, ctx.result_observation_cap()),
            ControlSignal.STOP_REQUIRED,
        )

    def _reject(
        self, call: ToolCallRequest, scope: str | None, reason: RejectionReason, violation: Violation | None
    ) -> None:
        self._ctx.trace.emit(
            ToolRequestRejected(
                tool_call_id=call.id,
                tool=call.name[:100],
                scope=scope,
                rejection=reason,
                violation=violation.kind if violation else None,
                detail=violation.message[:300] if violation else None,
            )
        )

    def _trace_gains(self, admission: Admission) -> None:
        for g in admission.gains:
            self._ctx.trace.emit(GainApplied(tool_call_id=g.tool_call_id, gain=g.gain, producer=g.producer))
