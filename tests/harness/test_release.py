"""DiagnosisAgentUseCaseTest / DiagnosisReleaseUseCaseTest (docs/architecture.md §14 row 5): model stop,
saturation stop and budget stop all reach Release; guards decide SUCCESS; fallbacks are honest."""

from __future__ import annotations

from typing import Any

from harness.agent import RunResult, run_diagnosis
from harness.config import HarnessConfig
from harness.contracts import EvidenceCheck, FallbackKind, GuardName, ReleaseOutcome, SemanticVerdict, StopReason
from harness.prompts import DiagnosisTask
from harness.trace import EventKind, EvidenceChecked, GuardVerdict
from runners.domain.scripted import ScriptedChatModel, Trajectory
from tests.conftest import LINES, LookupTool

TASK = DiagnosisTask("Payments for tenant t1 timed out at 14:02, why?")
POOL_DRAFT = {
    "conclusion": "settlement DB connection pool exhausted",
    "claims": [
        {
            "statement": "pool exhausted",
            "citations": [{"tool_call_id": "@step1", "excerpt": "db connection pool exhausted"}],
        }
    ],
}


def run(traj: dict[str, Any], tool: LookupTool | None = None, **cfg: Any) -> tuple[RunResult, LookupTool]:
    tool = tool or LookupTool(LINES)
    result = run_diagnosis(
        TASK, [tool], ScriptedChatModel(Trajectory.model_validate(traj)), config=HarnessConfig(**cfg)
    )
    assert len([e for e in result.events if e.kind is EventKind.RELEASED]) == 1
    return result, tool


def test_model_stop_with_verified_conclusion_is_success() -> None:
    r, _ = run({"steps": [{"tool": "lookup", "input": {"query": "pool"}}], "draft": POOL_DRAFT})
    assert r.decision.outcome is ReleaseOutcome.SUCCESS and r.decision.stop_reason is None
    verdicts = [(e.kind, e.verdict) for e in r.events if isinstance(e, EvidenceChecked | GuardVerdict)]
    assert verdicts == [  # each guard in its own vocabulary
        (EventKind.EVIDENCE_CHECKED, EvidenceCheck.PASSED),
        (EventKind.GUARD_VERDICT, SemanticVerdict.SUPPORTED),
    ]
    assert r.decision.draft is not None and r.decision.draft.conclusion == POOL_DRAFT["conclusion"]


def test_saturation_stop_releases_insufficient_evidence_not_budget() -> None:
    traj = {
        "steps": [{"tool": "lookup", "input": {"query": f"nothing-{i}"}} for i in range(8)],
        "draft": {"conclusion": None, "next_steps": ["check the gateway dashboards"]},
    }
    r, tool = run(traj)
    assert r.decision.outcome is ReleaseOutcome.FALLBACK
    assert r.decision.fallback_kind is FallbackKind.INSUFFICIENT_EVIDENCE
    assert r.decision.stop_reason is StopReason.INFORMATION_SATURATED
    assert tool.calls == 2 and r.usage.model_calls == 3
    assert r.decision.fallback is not None and len(r.decision.fallback.checked) == 2
    assert "no records" in r.decision.fallback.checked[0]


def test_saturated_model_that_ignores_stop_required_is_stopped_and_released() -> None:
    traj = {
        "steps": [{"tool": "lookup", "input": {"query": f"nothing-{i}"}} for i in range(8)],
        "on_stop_required": "ignore",
    }
    r, tool = run(traj)
    assert tool.calls == 2
    assert [e.kind for e in r.events].count(EventKind.COLLECTION_STOPPED) == 1
    assert r.decision.outcome is ReleaseOutcome.FALLBACK
    assert r.decision.stop_reason is StopReason.INFORMATION_SATURATED
    assert r.usage.model_calls == 3, "one chance after STOP_REQUIRED, then the controlled stop"


def test_budget_stop_with_safe_progress_is_fallback() -> None:
    traj = {
        "steps": [
            {"tool": "lookup", "input": {"query": "timeout"}},
            {"tool": "lookup", "input": {"query": "pool"}, "gain": "GAINED"},
            {"tool": "lookup", "input": {"query": "tenant=t1"}, "gain": "GAINED"},
        ],
        "draft": POOL_DRAFT,
    }
    r, tool = run(traj, max_tool_invocations=2)
    assert tool.calls == 2
    assert r.decision.stop_reason is StopReason.BUDGET_LIMIT_REACHED
    assert r.decision.outcome is ReleaseOutcome.FALLBACK
    assert r.decision.fallback_kind is FallbackKind.INSUFFICIENT_EVIDENCE
    assert r.usage.model_calls == 3, "a budget stop makes no extra model call"


def test_budget_stop_without_safe_progress_fails_closed() -> None:
    traj = {"steps": [{"tool": "lookup", "input": {"query": f"q{i}"}} for i in range(5)]}
    r, _ = run(traj, tool=LookupTool(LINES, fail=True), max_tool_invocations=3)
    assert r.decision.stop_reason is StopReason.BUDGET_LIMIT_REACHED
    assert r.decision.outcome is ReleaseOutcome.FAILED
    assert r.decision.snapshot is not None and len(r.decision.snapshot.limitations) == 3


def test_model_call_budget_stops_before_calling_again() -> None:
    traj = {
        "steps": [{"tool": "lookup", "input": {"query": "timeout"}, "gain": "GAINED"} for _ in range(1)] * 1
        + [{"tool": "lookup", "input": {"query": f"t1 {i}"}, "gain": "GAINED"} for i in range(6)]
    }
    r, _ = run(traj, max_model_calls=3, no_gain_threshold=9)
    assert r.usage.model_calls == 3
    assert r.decision.stop_reason is StopReason.BUDGET_LIMIT_REACHED


def test_zero_tool_missing_context_is_a_legal_finish() -> None:
    r, tool = run({"steps": [], "draft": {"conclusion": None, "missing_info": ["tenant id", "time window"]}})
    assert tool.calls == 0 and r.usage.model_calls == 1
    assert r.decision.outcome is ReleaseOutcome.FALLBACK
    assert r.decision.fallback_kind is FallbackKind.MISSING_REQUIRED_CONTEXT
    assert r.decision.fallback is not None and r.decision.fallback.missing_info == ("tenant id", "time window")


def test_no_conclusion_no_facts_no_missing_info_fails_closed() -> None:
    r, _ = run({"steps": [], "draft": {"conclusion": None}})
    assert r.decision.outcome is ReleaseOutcome.FAILED


def test_fabricated_citation_blocked_by_evidence_guard() -> None:
    draft = {
        "conclusion": "settlement DB connection pool exhausted",
        "claims": [{"statement": "x", "citations": [{"tool_call_id": "call_77", "excerpt": "pool exhausted"}]}],
    }
    r, _ = run({"steps": [{"tool": "lookup", "input": {"query": "pool"}}], "draft": draft})
    assert r.decision.outcome is ReleaseOutcome.FALLBACK
    assert "never ran" in r.decision.reason
    assert [(e.guard, e.verdict) for e in r.events if isinstance(e, EvidenceChecked | GuardVerdict)] == [
        (GuardName.EVIDENCE, EvidenceCheck.FAILED)
    ]
    assert r.usage.guard_calls == 0, "SemanticGuard is not asked about fabricated evidence"


def test_excerpt_not_in_raw_record_blocked() -> None:
    draft = {
        "conclusion": "redis down",
        "claims": [{"statement": "x", "citations": [{"tool_call_id": "@step1", "excerpt": "redis cluster down"}]}],
    }
    r, _ = run({"steps": [{"tool": "lookup", "input": {"query": "pool"}}], "draft": draft})
    assert r.decision.outcome is ReleaseOutcome.FALLBACK and "excerpt not found" in r.decision.reason


def test_semantic_guard_blocks_overinterpretation() -> None:
    traj = {
        "steps": [{"tool": "lookup", "input": {"query": "pool"}}],
        "draft": POOL_DRAFT,
        "semantic_verdict": "UNSUPPORTED",
    }
    r, _ = run(traj)
    assert r.decision.outcome is ReleaseOutcome.FALLBACK
    assert r.decision.fallback_kind is FallbackKind.INSUFFICIENT_EVIDENCE
    assert r.decision.reason.startswith("SemanticGuard")


def test_expired_records_become_limitations_not_facts() -> None:
    clock = [0.0]
    from harness.context import RunContext

    ctx = RunContext.create(HarnessConfig(record_ttl_seconds=10), clock=lambda: clock[0])
    tool = LookupTool(LINES)
    traj = Trajectory.model_validate(
        {"steps": [{"tool": "lookup", "input": {"query": "pool"}}], "draft": {"conclusion": None}}
    )

    class Aging(ScriptedChatModel):
        def complete(self, request):  # type: ignore[no-untyped-def]
            clock[0] += 12.0
            return super().complete(request)

    r = run_diagnosis(TASK, [tool], Aging(traj), ctx=ctx)
    assert r.decision.outcome is ReleaseOutcome.FAILED
    assert r.decision.snapshot is not None
    assert r.decision.snapshot.limitations == ("call_1: record expired",)
