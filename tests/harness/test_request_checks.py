"""Request checks: an embedder's stop rule is consulted before each tool request is admitted, rejected requests
included; it only says why, and the Harness stops the run as at a hard budget — the request refused (STOP_RULE), the
stop recorded once (BUDGET_EXHAUSTED / STOP_RULE with the reason), no further model call, the outcome from what was
verified. Without checks nothing is kept and nothing changes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from harness import (
    AssistantMessage,
    BudgetExhausted,
    BudgetKind,
    ChatRequest,
    HarnessConfig,
    ModelPurpose,
    ModelResponse,
    RejectionReason,
    ReleaseOutcome,
    RunContext,
    RunResult,
    StopReason,
    ToolCallRequest,
    ToolRequestRejected,
    Usage,
    run_diagnosis,
)
from harness.prompts import DiagnosisTask
from harness.request_checks import SeenRequest
from tests.conftest import LINES, LookupTool, call


@dataclass
class _Canned:
    turns: list[AssistantMessage]
    name: str = "canned"
    diagnosis_calls: int = 0

    def complete(self, request: ChatRequest) -> ModelResponse:
        if request.purpose is ModelPurpose.SEMANTIC_GUARD:
            return ModelResponse(AssistantMessage('{"verdict": "SUPPORTED", "reason": "ok"}'))
        self.diagnosis_calls += 1
        return ModelResponse(self.turns.pop(0), Usage(10, 1))


@dataclass
class _StopAt:
    """Stops before the request with id `at`; records what it was shown."""

    at: str
    shown: list[tuple[tuple[SeenRequest, ...], SeenRequest]] = field(default_factory=list)

    def stop_before(self, seen: Sequence[SeenRequest], request: SeenRequest) -> str | None:
        self.shown.append((tuple(seen), request))
        return f"{request.tool_call_id} is one too many" if request.tool_call_id == self.at else None


def _run(turns: Sequence[AssistantMessage], check: _StopAt | None, tool: LookupTool | None = None,
         ) -> tuple[RunResult, _Canned, RunContext]:  # fmt: skip
    ctx = RunContext.create(HarnessConfig(), request_checks=() if check is None else (check,))
    model = _Canned(list(turns))
    return run_diagnosis(DiagnosisTask("why?"), [tool or LookupTool(LINES)], model, ctx=ctx), model, ctx


TURNS = (
    AssistantMessage(None, (call("c1", "pool"),)),
    AssistantMessage(None, (ToolCallRequest("c2", "lookup", "{broken"),)),  # malformed: rejected, still seen
    AssistantMessage(None, (call("c3", "timeout", prev=("c1", "GAINED")), call("c4", "order"))),
    AssistantMessage('{"conclusion": null, "missing_info": ["time window"]}'),
)


def test_a_check_stops_the_run_as_a_budget_does_and_sees_every_request_before() -> None:
    check = _StopAt("c3")
    result, model, _ = _run(TURNS, check)
    assert [(tuple(r.tool_call_id for r in seen), req.tool_call_id) for seen, req in check.shown] == [
        ((), "c1"), (("c1",), "c2"), (("c1", "c2"), "c3")]  # fmt: skip
    assert check.shown[1][1].scope is None, "a malformed request has no scope"
    refused = [e for e in result.events if isinstance(e, ToolRequestRejected)]
    assert [(e.tool_call_id, e.rejection) for e in refused][-2:] == [
        ("c3", RejectionReason.STOP_RULE), ("c4", RejectionReason.BUDGET)]  # fmt: skip
    (stop,) = [e for e in result.events if isinstance(e, BudgetExhausted)]
    assert (stop.budget, stop.tool_call_id, stop.detail) == (BudgetKind.STOP_RULE, "c3", "c3 is one too many")
    assert model.diagnosis_calls == 3, "no model call after the stop"
    assert result.usage.budget_hit is BudgetKind.STOP_RULE and result.usage.tool_invocations == 1
    d = result.decision
    assert d.outcome is ReleaseOutcome.FALLBACK and d.stop_reason is StopReason.BUDGET_LIMIT_REACHED


def test_a_failed_backend_call_is_seen_as_failed() -> None:
    check = _StopAt("never")
    turns = (AssistantMessage(None, (call("c1", "pool"),)), AssistantMessage(None, (call("c2", "pool"),)),
             AssistantMessage('{"conclusion": null, "missing_info": ["x"]}'))  # fmt: skip
    _run(turns, check, LookupTool(LINES, fail=True))
    seen, last = check.shown[-1]
    assert [(r.tool_call_id, r.failed) for r in seen] == [("c1", True)] and last.tool_call_id == "c2"


def test_without_checks_nothing_is_kept_and_the_run_is_the_same() -> None:
    with_check, _, _ = _run(TURNS, _StopAt("never"))
    without, _, ctx = _run(TURNS, None)
    assert ctx.seen_requests == []
    strip = [(type(e).__name__, getattr(e, "tool_call_id", None)) for e in without.events]
    assert strip == [(type(e).__name__, getattr(e, "tool_call_id", None)) for e in with_check.events]
    assert without.decision.outcome is with_check.decision.outcome is ReleaseOutcome.FALLBACK
