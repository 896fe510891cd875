"""Exact-run trace (docs/architecture.md §14 row 7): rejections audited apart from invocations; metadata only."""

from __future__ import annotations

import dataclasses

from harness.agent import run_diagnosis
from harness.contracts import InvocationStatus, RejectionReason
from harness.prompts import DiagnosisTask
from harness.trace import EventKind
from runners.domain.scripted import ScriptedChatModel, Trajectory
from tests.conftest import LINES, LookupTool


def test_rejections_and_invocations_are_separate_and_counts_agree() -> None:
    traj = Trajectory.model_validate(
        {
            "steps": [
                {"tool": "lookup", "input": {"query": "tenant=t1"}},
                {"tool": "lookup", "input": {"query": "pool"}, "mistake": "wrong_tool_call_id"},
                {"tool": "lookup", "input": {"query": "TENANT=T1"}, "gain": "GAINED"},
                {"tool": "lookup", "input": {"query": "pool"}},
            ],
            "draft": {"conclusion": None},
        }
    )
    tool = LookupTool(LINES)
    r = run_diagnosis(DiagnosisTask("q"), [tool], ScriptedChatModel(traj))
    inv = [e for e in r.events if e.kind is EventKind.TOOL_INVOCATION]
    rej = [e for e in r.events if e.kind is EventKind.TOOL_REQUEST_REJECTED]
    assert len(inv) == tool.calls == r.usage.tool_invocations == 2
    assert all(e.invocation_status is InvocationStatus.COMPLETED for e in inv)
    # wrong id (protocol), TENANT=T1 == tenant=t1 (duplicate), pool again (duplicate -> saturates)
    assert [e.rejection for e in rej] == [
        RejectionReason.PROTOCOL_VIOLATION,
        RejectionReason.DUPLICATE_SCOPE,
        RejectionReason.DUPLICATE_SCOPE,
    ]
    assert all(e.invocation_status is InvocationStatus.REJECTED for e in rej)
    assert {e.tool_call_id for e in inv}.isdisjoint({e.tool_call_id for e in rej})
    seqs = [e.seq for e in r.events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


def test_trace_holds_no_raw_payload() -> None:
    secret_line = "card 4111-1111-1111-1111 declined by issuer for tenant t9"
    traj = Trajectory.model_validate(
        {"steps": [{"tool": "lookup", "input": {"query": "declined"}}], "draft": {"conclusion": None}}
    )
    r = run_diagnosis(DiagnosisTask("q"), [LookupTool([secret_line])], ScriptedChatModel(traj))
    for event in r.events:
        for value in dataclasses.asdict(event).values():
            assert "4111-1111" not in str(value)
