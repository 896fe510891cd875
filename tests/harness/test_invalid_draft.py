"""DiagnosisChatExecutorTest (docs/architecture.md §14 row 6): an invalid Draft degrades only with safe progress."""

from __future__ import annotations

import pytest

from harness.agent import run_diagnosis
from harness.contracts import FallbackKind, ReleaseOutcome
from harness.draft import parse_draft
from harness.prompts import DiagnosisTask
from runners.domain.scripted import ScriptedChatModel, Trajectory
from tests.conftest import LINES, LookupTool

TASK = DiagnosisTask("why?")


@pytest.mark.parametrize(
    "text",
    ["not json at all", "[1,2]", '{"conclusion": 3}', '{"conclusion": "x", "claims": "nope"}', "", '{"verdict": 1}'],
)
def test_invalid_drafts_are_reported_not_raised(text: str) -> None:
    parsed = parse_draft(text)
    assert parsed.draft is None and parsed.error


def test_fenced_json_draft_is_accepted() -> None:
    parsed = parse_draft('```json\n{"conclusion": null, "missing_info": ["tenant"]}\n```')
    assert parsed.draft is not None and parsed.draft.missing_info == ["tenant"]


def test_invalid_draft_with_safe_progress_degrades_to_fallback() -> None:
    traj = Trajectory.model_validate({"steps": [{"tool": "lookup", "input": {"query": "pool"}}], "draft_text": "oops"})
    r = run_diagnosis(TASK, [LookupTool(LINES)], ScriptedChatModel(traj))
    assert r.decision.outcome is ReleaseOutcome.FALLBACK
    assert r.decision.fallback_kind is FallbackKind.INSUFFICIENT_EVIDENCE
    assert r.draft_error == "the final message is not JSON"
    assert r.decision.reason.startswith("invalid Draft")


def test_invalid_draft_without_safe_progress_fails_closed() -> None:
    traj = Trajectory.model_validate({"steps": [], "draft_text": '{"conclusion": ["not", "a", "string"]}'})
    r = run_diagnosis(TASK, [LookupTool(LINES)], ScriptedChatModel(traj))
    assert r.decision.outcome is ReleaseOutcome.FAILED
    assert "invalid Draft at conclusion" in r.decision.reason
