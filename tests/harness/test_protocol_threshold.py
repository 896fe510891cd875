"""Protocol threshold (docs/architecture.md §14 row 4): consecutive violations reach the threshold and
STOP_REQUIRED is delivered exactly once (tracker + interceptor, through the agent loop)."""

from __future__ import annotations

import pytest

from harness.agent import run_diagnosis
from harness.config import HarnessConfig
from harness.contracts import RejectionReason
from harness.prompts import DiagnosisTask
from harness.trace import EventKind
from runners.domain.scripted import ScriptedChatModel
from tests.conftest import LINES, LookupTool
from tests.harness.test_seed_incident import _incident


@pytest.mark.parametrize("threshold", [1, 2, 3, 5])
def test_protocol_threshold_delivers_a_single_stop_required(threshold: int) -> None:
    """Tracker + Interceptor (docs/architecture.md §14 row 4) at several thresholds."""
    tool = LookupTool(LINES)
    traj = _incident(True)
    r = run_diagnosis(
        DiagnosisTask("q"),
        [tool],
        ScriptedChatModel(traj),
        config=HarnessConfig(protocol_violation_threshold=threshold),
    )
    rejected = [e for e in r.events if e.kind is EventKind.TOOL_REQUEST_REJECTED]
    assert sum(e.rejection is RejectionReason.PROTOCOL_VIOLATION for e in rejected) == threshold
    assert [e.kind for e in r.events].count(EventKind.STOP_REQUIRED_DELIVERED) == 1
    assert r.usage.model_calls == threshold + 2
    assert r.usage.tool_invocations == 1
