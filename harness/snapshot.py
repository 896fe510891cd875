"""DiagnosisProgressProjector: a bounded ProgressSnapshot from canonical READY records (docs/architecture.md §7.4).

Only records that are readable, unexpired, well-formed and known to the tracker as completed
become facts; anything else becomes a limitation, never a fact.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from harness.canonical_store import CanonicalStore
from harness.contracts import EvidenceStatus, InvocationStatus, JsonObject, StopReason
from harness.tracker import DiagnosisProgressTracker

MAX_FACTS = 50


@dataclass(frozen=True, slots=True)
class ObservedFact:
    """A verified, scoped observation — including an empty result for a scope."""

    tool_call_id: str
    """The canonical record it comes from."""
    tool: str
    """Tool name."""
    scope: JsonObject
    """The scope the backend actually applied."""
    evidence_status: EvidenceStatus
    """EVIDENCE or NO_EVIDENCE."""
    count: int
    """Records returned."""
    summary: str
    """One line for the user."""


@dataclass(frozen=True, slots=True)
class ProgressSnapshot:
    """What can be safely published when there is no verified conclusion."""

    verified_sources: tuple[str, ...]
    """Tool call ids of verified records."""
    observed_facts: tuple[ObservedFact, ...]
    """Verified observations, scoped empty results included."""
    limitations: tuple[str, ...]
    """What could not be verified (failed, expired, malformed, unknown records)."""
    stop_reason: StopReason | None
    """Why collection stopped, if the Harness stopped it."""

    @property
    def has_verified_facts(self) -> bool:
        """Whether any fact survived verification."""
        return bool(self.observed_facts)


def project_snapshot(store: CanonicalStore, tracker: DiagnosisProgressTracker) -> ProgressSnapshot:
    """Read every canonical record back and keep only what verifies."""
    completed = tracker.completed_call_ids
    facts: list[ObservedFact] = []
    limitations: list[str] = []
    for call_id in store.ids():
        read = store.read(call_id)
        rec = read.record
        if rec is None:
            limitations.append(f"{call_id}: record {read.problem.value.lower() if read.problem else 'unreadable'}")
            continue
        if rec.status is InvocationStatus.FAILED:
            limitations.append(f"{call_id}: {rec.tool} failed ({(rec.error or 'unknown error')[:160]})")
            continue
        result = rec.result
        if (
            result is None
            or not isinstance(result.records, tuple)
            or not all(isinstance(r, dict) for r in result.records)
            or result.count < 0
            or (result.evidence_status is EvidenceStatus.NO_EVIDENCE) != (len(result.records) == 0)
        ):
            limitations.append(f"{call_id}: {rec.tool} record is malformed and was not used")
            continue
        if call_id not in completed:
            limitations.append(f"{call_id}: record is not a completed call of this run")
            continue
        scope_text = json.dumps(result.actual_scope, ensure_ascii=False, sort_keys=True)[:240]
        if result.evidence_status is EvidenceStatus.NO_EVIDENCE:
            summary = f"{rec.tool} returned no records for {scope_text}"
        else:
            summary = f"{rec.tool} returned {result.count} record(s) for {scope_text}"
            if result.truncated:
                summary += " (truncated)"
        facts.append(
            ObservedFact(call_id, rec.tool, result.actual_scope, result.evidence_status, result.count, summary)
        )
    return ProgressSnapshot(
        verified_sources=tuple(f.tool_call_id for f in facts[:MAX_FACTS]),
        observed_facts=tuple(facts[:MAX_FACTS]),
        limitations=tuple(limitations[:MAX_FACTS]),
        stop_reason=tracker.stop_reason,
    )
