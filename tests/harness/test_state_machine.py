"""Stateful property test over interceptor + tracker (hypothesis RuleBasedStateMachine).

Invariants: STOP_REQUIRED at most once; no backend call for a duplicate scope or while saturated;
rejections never counted as invocations or as NO_GAIN (a duplicate's Harness NO_GAIN is the
seed's one exception, and is checked as such); GAINED resets the NO_GAIN count; exactly one
terminal outcome per run.
"""

from __future__ import annotations

import json

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from harness.config import HarnessConfig
from harness.context import RunContext
from harness.contracts import CollectionState, RejectionReason
from harness.interceptor import BudgetLimitReached, DiagnosisCollectionStopped, HarnessToolInterceptor
from harness.models.base import ToolCallRequest
from harness.release import release
from harness.trace import EventKind, Released, StopRequiredDelivered, ToolInvocation
from runners.domain.scripted import ScriptedChatModel, Trajectory
from tests.conftest import LINES, LookupTool

QUERIES = ["timeout", "pool", "TIMEOUT ", "nothing", "absent", "tenant=t1", "order created"]
PREV = ["none", "pending", "wrong", "bad_value"]


class InterceptorMachine(RuleBasedStateMachine):
    @initialize(ng=st.integers(1, 4), pv=st.integers(1, 3), budget=st.integers(1, 8), fail=st.booleans())
    def setup(self, ng: int, pv: int, budget: int, fail: bool) -> None:
        self.ctx = RunContext.create(
            HarnessConfig(no_gain_threshold=ng, protocol_violation_threshold=pv, max_tool_invocations=budget)
        )
        self.tool = LookupTool(LINES, fail=fail)
        self.icp = HarnessToolInterceptor(self.ctx, {"lookup": self.tool})
        self.turn = 1
        self.n = 0
        self.ended = False
        self.saturated_at_calls: int | None = None

    def _send(self, req: ToolCallRequest) -> None:
        calls_before = self.tool.calls
        inv_before = self.ctx.usage.tool_invocations
        no_gain_before = self.ctx.tracker.consecutive_no_gain
        violations_before = self.ctx.tracker.consecutive_violations
        pending_before = self.ctx.tracker.pending
        n_events = len(self.ctx.trace)
        was_saturated = self.ctx.tracker.state is CollectionState.SATURATED
        try:
            out = self.icp.handle(req, self.turn)
        except (DiagnosisCollectionStopped, BudgetLimitReached):
            self.ended = True
            assert self.tool.calls == calls_before
            return
        new = self.ctx.trace.events[n_events:]
        rejected = [e for e in new if e.kind is EventKind.TOOL_REQUEST_REJECTED]
        body = json.loads(out.observation.text)
        if rejected:
            assert self.tool.calls == calls_before, "a rejected request reached the backend"
            assert self.ctx.usage.tool_invocations == inv_before, "a rejection counted as an invocation"
            (rej,) = rejected
            if rej.rejection is RejectionReason.PROTOCOL_VIOLATION:
                assert self.ctx.tracker.consecutive_no_gain == no_gain_before, "a violation counted as NO_GAIN"
            if rej.rejection is RejectionReason.AWAITING_EVALUATION:
                # queued behind a same-message pending call: no violation, no gain, nothing changes
                assert self.ctx.tracker.consecutive_no_gain == no_gain_before
                assert self.ctx.tracker.consecutive_violations == violations_before
                assert self.ctx.tracker.pending == pending_before is not None
            if rej.rejection is RejectionReason.DUPLICATE_SCOPE:
                harness_gains = [e for e in new if e.kind is EventKind.GAIN_APPLIED and e.tool_call_id == req.id]
                assert len(harness_gains) == 1
            assert body["status"] == "REJECTED"
        else:
            assert self.tool.calls == calls_before + 1
            assert self.ctx.usage.tool_invocations == inv_before + 1
            assert not was_saturated, "backend called while saturated"
        gained = [e for e in new if e.kind is EventKind.GAIN_APPLIED and e.gain and e.gain.value == "GAINED"]
        if gained and not rejected and body.get("evidence_status") == "EVIDENCE":
            assert self.ctx.tracker.consecutive_no_gain == 0, "GAINED did not reset the NO_GAIN count"

    def _prev(self, kind: str, gain: str) -> dict[str, str] | None:
        pending = self.ctx.tracker.pending
        if kind == "pending" and pending:
            return {"tool_call_id": pending, "information_gain": gain}
        if kind == "wrong":
            return {"tool_call_id": "call_nope", "information_gain": gain}
        if kind == "bad_value":
            return {"tool_call_id": pending or "x", "information_gain": "LOW"}
        return None

    @precondition(lambda self: not self.ended)
    @rule(
        q=st.sampled_from(QUERIES),
        prev=st.sampled_from(PREV),
        gain=st.sampled_from(["GAINED", "NO_GAIN"]),
        new_turn=st.booleans(),
    )
    def tool_call(self, q: str, prev: str, gain: str, new_turn: bool) -> None:
        self.turn += int(new_turn)
        self.n += 1
        envelope: dict[str, object] = {"input": {"query": q}}
        p = self._prev(prev, gain)
        if p is not None:
            envelope["previous_observation"] = p
        self._send(ToolCallRequest(f"c{self.n}", "lookup", json.dumps(envelope)))

    @precondition(lambda self: not self.ended)
    @rule(raw=st.sampled_from(['{"input": ', "[]", '{"q": 1}', "", '{"input": {"query": ""}}']), unknown=st.booleans())
    def garbage(self, raw: str, unknown: bool) -> None:
        self.n += 1
        self.turn += 1
        self._send(ToolCallRequest(f"c{self.n}", "nope" if unknown else "lookup", raw))

    @precondition(lambda self: not self.ended)
    @rule(
        queries=st.lists(st.sampled_from(QUERIES), min_size=2, max_size=4),
        prev=st.sampled_from(PREV),
        gain=st.sampled_from(["GAINED", "NO_GAIN"]),
    )
    def multi_call_message(self, queries: list[str], prev: str, gain: str) -> None:
        """Parallel tool calls: one message, each call echoing the same evaluation."""
        self.turn += 1
        p = self._prev(prev, gain)
        calls = []
        for q in queries:
            self.n += 1
            envelope: dict[str, object] = {"input": {"query": q}}
            if p is not None:
                envelope["previous_observation"] = p
            calls.append(ToolCallRequest(f"c{self.n}", "lookup", json.dumps(envelope)))
        calls_before, n_events = self.tool.calls, len(self.ctx.trace)
        result = self.icp.handle_turn(calls, self.turn)
        self.ended = self.ended or result.ended
        assert [a.tool_call_id for a in result.answers] == [c.id for c in calls], "one answer per call, in order"
        new = self.ctx.trace.events[n_events:]
        fates = [e.tool_call_id for e in new if e.kind in (EventKind.TOOL_INVOCATION, EventKind.TOOL_REQUEST_REJECTED)]
        assert sorted(fates) == sorted(c.id for c in calls), "every call is traced exactly once"
        executed = [e for e in new if e.kind is EventKind.TOOL_INVOCATION]
        assert self.tool.calls - calls_before == len(executed)
        # one pending window at a time: nothing runs after a call of this message became pending
        pending_at = next(
            (i for i, e in enumerate(new) if e.kind is EventKind.TOOL_INVOCATION and e.evidence_status
             and e.evidence_status.value == "EVIDENCE"), None,
        )  # fmt: skip
        if pending_at is not None:
            assert not [e for e in new[pending_at + 1 :] if e.kind is EventKind.TOOL_INVOCATION]

    @precondition(lambda self: self.ended)
    @rule(q=st.sampled_from(QUERIES))
    def request_after_the_end(self, q: str) -> None:
        """The loop is over; even if a request slipped through, no backend may run."""
        self.n += 1
        self.turn += 1
        before = self.tool.calls
        try:
            self.icp.handle(ToolCallRequest(f"c{self.n}", "lookup", json.dumps({"input": {"query": q}})), self.turn)
        except (DiagnosisCollectionStopped, BudgetLimitReached):
            pass
        assert self.tool.calls == before

    @invariant()
    def stop_required_at_most_once(self) -> None:
        if hasattr(self, "ctx"):
            delivered = self.ctx.trace.of(StopRequiredDelivered)
            assert len(delivered) <= 1
            assert bool(delivered) == self.ctx.tracker.stop_required_delivered

    @invariant()
    def no_backend_call_after_saturation(self) -> None:
        if not hasattr(self, "ctx"):
            return
        if self.ctx.tracker.state is CollectionState.SATURATED:
            if self.saturated_at_calls is None:
                self.saturated_at_calls = self.tool.calls
            assert self.tool.calls == self.saturated_at_calls

    @invariant()
    def invocations_match_backend(self) -> None:
        if hasattr(self, "ctx"):
            assert len(self.ctx.trace.of(ToolInvocation)) == self.tool.calls == self.ctx.usage.tool_invocations

    def teardown(self) -> None:
        if not hasattr(self, "ctx"):
            return
        guard = ScriptedChatModel(Trajectory())
        release(self.ctx, question="q", parsed=None, guard_model=guard)
        assert len(self.ctx.trace.of(Released)) == 1


InterceptorMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=25, deadline=None)
TestInterceptorMachine = InterceptorMachine.TestCase
