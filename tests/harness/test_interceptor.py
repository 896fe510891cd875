"""HarnessToolInterceptorTest (docs/architecture.md §14 row 2): the gate in front of every backend."""

from __future__ import annotations

import json

import pytest

from harness.config import HarnessConfig
from harness.context import RunContext
from harness.contracts import (
    ControlSignal,
    EvidenceStatus,
    InvocationStatus,
    RejectionReason,
    StopReason,
)
from harness.interceptor import BudgetLimitReached, DiagnosisCollectionStopped, HarnessToolInterceptor
from harness.trace import (
    CollectionStopped,
    GainApplied,
    StopRequiredDelivered,
    ToolInvocation,
    ToolRequestRejected,
)
from tests.conftest import LINES, LookupTool, call


def _setup(tool: LookupTool, **cfg: int) -> tuple[RunContext, HarnessToolInterceptor]:
    ctx = RunContext.create(HarnessConfig(**cfg))
    return ctx, HarnessToolInterceptor(ctx, {tool.name: tool})


def test_business_tool_never_sees_control_fields(lookup: LookupTool) -> None:
    _, icp = _setup(lookup)
    icp.handle(call("c1", "timeout"), 1)
    icp.handle(call("c2", "pool", prev=("c1", "GAINED")), 2)
    assert lookup.seen_inputs == [{"query": "timeout", "tenant": None}, {"query": "pool", "tenant": None}]
    assert all("previous_observation" not in i for i in lookup.seen_inputs)


def test_duplicate_scope_rejected_before_backend(lookup: LookupTool) -> None:
    ctx, icp = _setup(lookup, no_gain_threshold=5)
    icp.handle(call("c1", "nothing-here"), 1)
    out = icp.handle(call("c2", "  NOTHING-here "), 2)
    body = json.loads(out.observation.text)
    assert body["reason"] == "DUPLICATE_SCOPE" and body["duplicate_of"] == "c1" and body["backend_called"] is False
    assert lookup.calls == 1
    rejected = ctx.trace.of(ToolRequestRejected)
    assert [e.rejection for e in rejected] == [RejectionReason.DUPLICATE_SCOPE]
    assert len(ctx.trace.of(ToolInvocation)) == 1
    assert ctx.usage.tool_invocations == 1


def test_non_empty_result_requires_evaluation_and_marks_observation(lookup: LookupTool) -> None:
    ctx, icp = _setup(lookup)
    out = icp.handle(call("c1", "tenant=t1"), 1)
    body = json.loads(out.observation.text)
    assert body["evidence_status"] == "EVIDENCE" and body["evaluation_required"] is True
    assert body["next_call_must_include"]["previous_observation"]["tool_call_id"] == "c1"
    assert ctx.tracker.pending == "c1"


def test_no_evidence_saturation_rides_on_the_observation(lookup: LookupTool) -> None:
    ctx, icp = _setup(lookup)
    first = icp.handle(call("c1", "zzz"), 1)
    assert first.control is None
    second = icp.handle(call("c2", "yyy"), 2)
    body = json.loads(second.observation.text)
    assert second.control is ControlSignal.STOP_REQUIRED
    assert body["control"] == "STOP_REQUIRED" and body["stop_reason"] == "INFORMATION_SATURATED"
    assert body["evidence_status"] == "NO_EVIDENCE", "the empty result itself is still reported"
    assert len(ctx.trace.of(StopRequiredDelivered)) == 1
    with pytest.raises(DiagnosisCollectionStopped) as stopped:
        icp.handle(call("c3", "xxx"), 3)
    assert stopped.value.stop_reason is StopReason.INFORMATION_SATURATED
    assert lookup.calls == 2, "no backend call after saturation"
    assert len(ctx.trace.of(CollectionStopped)) == 1


def test_failing_tool_is_a_failed_invocation_never_no_gain() -> None:
    tool = LookupTool(LINES, fail=True)
    ctx, icp = _setup(tool, no_gain_threshold=1)
    out = icp.handle(call("c1", "timeout"), 1)
    body = json.loads(out.observation.text)
    assert body["status"] == "FAILED" and "backend exploded" in body["error"]
    inv = ctx.trace.of(ToolInvocation)
    assert [e.invocation_status for e in inv] == [InvocationStatus.FAILED]
    assert ctx.trace.of(GainApplied) == []
    assert ctx.tracker.consecutive_no_gain == 0
    assert ctx.store.read("c1").record is not None and ctx.store.read("c1").record.status is InvocationStatus.FAILED
    # the same scope may be tried again: a failure is not a completed identity
    icp.handle(call("c2", "timeout"), 2)
    assert tool.calls == 2


def test_tool_budget_stops_without_backend_call(lookup: LookupTool) -> None:
    ctx, icp = _setup(lookup, max_tool_invocations=1, no_gain_threshold=9)
    icp.handle(call("c1", "aaa"), 1)
    with pytest.raises(BudgetLimitReached):
        icp.handle(call("c2", "bbb"), 2)
    assert lookup.calls == 1
    assert ctx.tracker.stop_reason is StopReason.BUDGET_LIMIT_REACHED
    assert [e.rejection for e in ctx.trace.of(ToolRequestRejected)] == [RejectionReason.BUDGET]


def test_observation_is_bounded_and_canonical_record_is_complete() -> None:
    lines = [f"ERROR gateway timeout number {i} " + "x" * 200 for i in range(60)]
    tool = LookupTool(lines)
    ctx, icp = _setup(tool, max_observation_bytes=1024)
    out = icp.handle(call("c1", "timeout"), 1)
    assert out.observation.bytes <= 1024
    body = json.loads(out.observation.text)
    assert body["truncated"] is True and body["count"] == 60 and len(body["records"]) < 60
    rec = ctx.store.read("c1").record
    assert rec is not None and rec.result is not None and len(rec.result.records) == 60
    assert rec.result.evidence_status is EvidenceStatus.EVIDENCE
    inv = ctx.trace.of(ToolInvocation)[0]
    assert inv.truncated is True and inv.observation_bytes == out.observation.bytes
