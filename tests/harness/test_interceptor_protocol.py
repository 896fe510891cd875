"""Interceptor protocol focused cases (docs/architecture.md §14 row 3): missing, out-of-order, unexpected echo,
bad gain value, malformed envelope, unknown tool — each rejected before the backend with a
corrective observation, never counted as NO_GAIN or as an invocation."""

from __future__ import annotations

import json

import pytest

from harness.config import HarnessConfig
from harness.context import RunContext
from harness.contracts import RejectionReason, ViolationKind
from harness.interceptor import HarnessToolInterceptor
from harness.models.base import ToolCallRequest
from harness.trace import ToolInvocation, ToolRequestRejected
from tests.conftest import LookupTool, call


def _pending_run(tool: LookupTool) -> tuple[RunContext, HarnessToolInterceptor]:
    ctx = RunContext.create(HarnessConfig(protocol_violation_threshold=5))
    icp = HarnessToolInterceptor(ctx, {tool.name: tool})
    icp.handle(call("c1", "tenant=t1"), 1)  # non-empty: c1 is pending
    assert ctx.tracker.pending == "c1"
    return ctx, icp


CASES: list[tuple[str, ToolCallRequest, ViolationKind, str | None]] = [
    ("missing", call("c2", "pool"), ViolationKind.MISSING_PREVIOUS_OBSERVATION, "previous_observation"),
    ("out_of_order", call("c2", "pool", prev=("c0", "GAINED")), ViolationKind.WRONG_TOOL_CALL_ID, None),
    ("bad_gain", call("c2", "pool", prev=("c1", "HIGH")), ViolationKind.INVALID_GAIN_VALUE, None),
    ("not_json", call("c2", raw='{"input": {"query": '), ViolationKind.MALFORMED_ENVELOPE, None),
    (
        "no_input",
        call("c2", raw='{"previous_observation": {"tool_call_id": "c1", "information_gain": "GAINED"}}'),
        ViolationKind.MALFORMED_ENVELOPE,
        "input",
    ),
    ("flat_args", call("c2", raw='{"query": "pool"}'), ViolationKind.MALFORMED_ENVELOPE, None),
    ("array", call("c2", raw="[1, 2]"), ViolationKind.MALFORMED_ENVELOPE, None),
    ("huge", call("c2", raw=json.dumps({"input": {"query": "x" * 20_000}})), ViolationKind.MALFORMED_ENVELOPE, None),
    ("unknown_tool", call("c2", "pool", prev=("c1", "GAINED"), name="rm_rf"), ViolationKind.UNKNOWN_TOOL, None),
    ("invalid_input", call("c2", None, prev=("c1", "GAINED"), bogus=1), ViolationKind.INVALID_INPUT, None),
    ("reused_id", call("c1", "pool", prev=("c1", "GAINED")), ViolationKind.REUSED_TOOL_CALL_ID, None),
]


@pytest.mark.parametrize(("label", "request_", "kind", "missing"), CASES, ids=[c[0] for c in CASES])
def test_violation_rejected_before_backend_with_correction(
    lookup: LookupTool, label: str, request_: ToolCallRequest, kind: ViolationKind, missing: str | None
) -> None:
    ctx, icp = _pending_run(lookup)
    out = icp.handle(request_, 2)
    body = json.loads(out.observation.text)
    assert body["status"] == "REJECTED" and body["violation"] == kind.value
    assert body["backend_called"] is False
    assert body["expected_previous_tool_call_id"] == "c1"
    assert body["allowed_information_gain"] == ["GAINED", "NO_GAIN"]
    if missing:
        assert body["missing_field"] == missing
    assert lookup.calls == 1, "the backend must not run for a protocol violation"
    assert ctx.usage.tool_invocations == 1
    assert ctx.tracker.consecutive_no_gain == 0, "a violation is never NO_GAIN"
    assert ctx.tracker.pending == "c1"
    rejected = ctx.trace.of(ToolRequestRejected)
    assert [(e.rejection, e.violation) for e in rejected] == [(RejectionReason.PROTOCOL_VIOLATION, kind)]
    assert len(ctx.trace.of(ToolInvocation)) == 1


def test_unexpected_echo_when_nothing_is_pending(lookup: LookupTool) -> None:
    ctx = RunContext.create(HarnessConfig())
    icp = HarnessToolInterceptor(ctx, {lookup.name: lookup})
    out = icp.handle(call("c1", "timeout", prev=("c0", "GAINED")), 1)
    body = json.loads(out.observation.text)
    assert body["violation"] == ViolationKind.UNEXPECTED_PREVIOUS_OBSERVATION.value
    assert body["expected_previous_tool_call_id"] is None
    assert lookup.calls == 0


def test_corrected_call_resets_violation_counter_and_executes(lookup: LookupTool) -> None:
    ctx, icp = _pending_run(lookup)
    icp.handle(call("c2", "pool"), 2)
    assert ctx.tracker.consecutive_violations == 1
    out = icp.handle(call("c3", "pool", prev=("c1", "GAINED")), 3)
    assert json.loads(out.observation.text)["status"] == "COMPLETED"
    assert ctx.tracker.consecutive_violations == 0
    assert lookup.calls == 2
