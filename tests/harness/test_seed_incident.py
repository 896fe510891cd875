"""The incident behind the protocol threshold (docs/architecture.md §13 row 5): 9 INVALID_PROGRESS_PROTOCOL
rejections and 13 model turns.

A model that keeps calling tools without previous_observation must now end, at the default
config, with PROGRESS_PROTOCOL_VIOLATED after at most protocol_violation_threshold + 2 model calls.
"""

from __future__ import annotations

import pytest

from harness.agent import run_diagnosis
from harness.config import HarnessConfig
from harness.contracts import InvocationStatus, RejectionReason, ReleaseOutcome, StopReason
from harness.prompts import DiagnosisTask
from harness.trace import EventKind
from runners.domain.scripted import ScriptedChatModel, Trajectory
from tests.conftest import LINES, LookupTool


def _incident(start_with_valid_call: bool) -> Trajectory:
    steps = [{"tool": "lookup", "input": {"query": "tenant=t1"}}] if start_with_valid_call else []
    steps += [
        {"tool": "lookup", "input": {"query": f"retry {i}"}, "mistake": "missing_previous_observation"}
        for i in range(12)
    ]
    if not start_with_valid_call:
        steps = [{"tool": "lookup", "input": {"query": "x"}, "mistake": "unexpected_previous_observation"}] * 12
    return Trajectory.model_validate(
        {"steps": steps, "on_rejection": "repeat", "on_stop_required": "ignore", "draft": {"conclusion": "never"}}
    )


@pytest.mark.parametrize("start_with_valid_call", [True, False])
def test_seed_incident_ends_with_protocol_violated(start_with_valid_call: bool) -> None:
    cfg = HarnessConfig()
    tool = LookupTool(LINES)
    r = run_diagnosis(
        DiagnosisTask("why did payments time out?"),
        [tool],
        ScriptedChatModel(_incident(start_with_valid_call)),
        config=cfg,
    )
    events = r.events
    assert r.decision.stop_reason is StopReason.PROGRESS_PROTOCOL_VIOLATED
    assert r.usage.model_calls <= cfg.protocol_violation_threshold + 2
    assert tool.calls == (1 if start_with_valid_call else 0), "zero backend calls for rejected requests"
    assert [e.kind for e in events].count(EventKind.STOP_REQUIRED_DELIVERED) == 1
    assert [e.kind for e in events].count(EventKind.COLLECTION_STOPPED) == 1
    assert [e.kind for e in events].count(EventKind.RELEASED) == 1
    protocol = [
        e
        for e in events
        if e.kind is EventKind.TOOL_REQUEST_REJECTED and e.rejection is RejectionReason.PROTOCOL_VIOLATION
    ]
    assert len(protocol) == cfg.protocol_violation_threshold
    assert all(e.invocation_status is InvocationStatus.REJECTED for e in protocol)
    assert not [e for e in events if e.kind is EventKind.GAIN_APPLIED], "violations are never NO_GAIN"
    expected = ReleaseOutcome.FALLBACK if start_with_valid_call else ReleaseOutcome.FAILED
    assert r.decision.outcome is expected


def test_model_that_obeys_stop_required_writes_its_draft() -> None:
    traj = Trajectory.model_validate(
        {
            "steps": [{"tool": "lookup", "input": {"query": "tenant=t1"}}]
            + [{"tool": "lookup", "input": {"query": "again"}, "mistake": "missing_previous_observation"}] * 5,
            "on_rejection": "repeat",
            "draft": {"conclusion": None, "next_steps": ["page the settlement on-call"]},
        }
    )
    r = run_diagnosis(DiagnosisTask("q"), [LookupTool(LINES)], ScriptedChatModel(traj))
    assert r.decision.stop_reason is StopReason.PROGRESS_PROTOCOL_VIOLATED
    assert [e.kind for e in r.events].count(EventKind.COLLECTION_STOPPED) == 0
    assert r.decision.outcome is ReleaseOutcome.FALLBACK
    assert r.decision.fallback is not None and r.decision.fallback.next_steps == ("page the settlement on-call",)
