"""The ProgressSnapshot (docs/architecture.md §7.4): only readable, unexpired, well-formed records of calls the tracker
knows as completed become facts; every other record is a limitation; both lists are bounded; the stop reason rides
along."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.canonical_store import CanonicalStore
from harness.contracts import EvidenceStatus, InformationGain, InvocationStatus, JsonObject, StopReason
from harness.snapshot import MAX_FACTS, ObservedFact, ProgressSnapshot, project_snapshot
from harness.tools.base import ToolResult
from harness.tracker import DiagnosisProgressTracker, PreviousObservation

EVIDENCE = EvidenceStatus.EVIDENCE
NO_EVIDENCE = EvidenceStatus.NO_EVIDENCE
TTL = 60.0


@dataclass
class Clock:
    """The store's clock, moved by hand."""

    now: float = 1_000.0

    def __call__(self) -> float:
        return self.now


def _setup(no_gain_threshold: int = 100) -> tuple[CanonicalStore, DiagnosisProgressTracker, Clock]:
    clock = Clock()
    return CanonicalStore(TTL, clock), DiagnosisProgressTracker(no_gain_threshold, 100), clock


def _result(records: int, scope: JsonObject | None = None, truncated: bool = False) -> ToolResult:
    rows: tuple[JsonObject, ...] = tuple({"line": f"row {i}"} for i in range(records))
    return ToolResult(EVIDENCE if records else NO_EVIDENCE, records, scope or {"q": "timeout"}, rows, truncated)


def _put(
    store: CanonicalStore,
    call_id: str,
    result: ToolResult | None,
    *,
    status: InvocationStatus = InvocationStatus.COMPLETED,
    error: str | None = None,
    tool: str = "logs",
) -> None:
    store.put(
        tool_call_id=call_id,
        tool=tool,
        scope=call_id,
        input={"q": call_id},
        status=status,
        result=result,
        error=error,
        started_at=store.clock(),
    )


def _complete(tracker: DiagnosisProgressTracker, call_id: str, evidence: EvidenceStatus | None = NO_EVIDENCE) -> None:
    """Run `call_id` through the tracker as a call that reached the backend (evaluating whatever is pending)."""
    prev = PreviousObservation(tracker.pending, InformationGain.GAINED) if tracker.pending else None
    tracker.admit(call_id, "logs", call_id, prev, turn=len(tracker.completed_call_ids) + 1)
    tracker.complete(call_id, "logs", call_id, evidence, turn=len(tracker.completed_call_ids) + 1)


def _record(store: CanonicalStore, tracker: DiagnosisProgressTracker, call_id: str, result: ToolResult) -> None:
    _put(store, call_id, result)
    _complete(tracker, call_id, result.evidence_status)


# -- what becomes a fact -----------------------------------------------------------------------------------------------
def test_a_completed_record_with_evidence_is_a_fact_with_its_actual_scope() -> None:
    store, tracker, _ = _setup()
    _record(store, tracker, "c1", _result(3, {"tenant": "t1", "q": "timeout"}))
    snap = project_snapshot(store, tracker)
    assert snap == ProgressSnapshot(
        verified_sources=("c1",),
        observed_facts=(
            ObservedFact(
                "c1",
                "logs",
                {"tenant": "t1", "q": "timeout"},
                EVIDENCE,
                3,
                'logs returned 3 record(s) for {"q": "timeout", "tenant": "t1"}',
            ),
        ),
        limitations=(),
        stop_reason=None,
    )
    assert snap.has_verified_facts


def test_a_scoped_empty_result_is_a_fact_too() -> None:
    store, tracker, _ = _setup()
    _record(store, tracker, "c1", _result(0, {"q": "über"}))
    (fact,) = project_snapshot(store, tracker).observed_facts
    assert fact.evidence_status is NO_EVIDENCE and fact.count == 0
    assert fact.summary == 'logs returned no records for {"q": "über"}', "scope text keeps non-ASCII"


def test_a_backend_truncated_result_says_so_and_a_long_scope_is_cut() -> None:
    store, tracker, _ = _setup()
    _record(store, tracker, "c1", _result(2, {"sql": "x" * 1_000}, truncated=True))
    (fact,) = project_snapshot(store, tracker).observed_facts
    assert fact.summary.endswith(" (truncated)")
    cut_scope = '{"sql": "' + "x" * 231  # the scope's JSON text, cut at 240 characters
    assert fact.summary == f"logs returned 2 record(s) for {cut_scope} (truncated)"
    assert fact.scope == {"sql": "x" * 1_000}, "the fact keeps the whole scope; only its summary is cut"


# -- what becomes a limitation -----------------------------------------------------------------------------------------
def test_a_failed_call_is_a_limitation_with_its_error() -> None:
    store, tracker, _ = _setup()
    _put(store, "c1", None, status=InvocationStatus.FAILED, error="connection refused " + "e" * 300)
    _put(store, "c2", None, status=InvocationStatus.FAILED, error=None)
    _complete(tracker, "c1", None)
    snap = project_snapshot(store, tracker)
    assert snap.observed_facts == () and snap.verified_sources == () and not snap.has_verified_facts
    assert snap.limitations == (
        f"c1: logs failed ({('connection refused ' + 'e' * 300)[:160]})",
        "c2: logs failed (unknown error)",
    )


def test_an_expired_record_is_a_limitation_never_a_fact() -> None:
    store, tracker, clock = _setup()
    _record(store, tracker, "c1", _result(2))
    clock.now += TTL
    snap = project_snapshot(store, tracker)
    assert snap.observed_facts == ()
    assert snap.limitations == ("c1: record expired",)


def test_a_record_the_tracker_never_completed_is_a_limitation() -> None:
    store, tracker, _ = _setup()
    _put(store, "c1", _result(1))
    snap = project_snapshot(store, tracker)
    assert snap.observed_facts == ()
    assert snap.limitations == ("c1: record is not a completed call of this run",)


MALFORMED = {
    "no result": None,
    "negative count": ToolResult(EVIDENCE, -1, {}, ({"a": 1},)),
    "empty but EVIDENCE": ToolResult(EVIDENCE, 0, {}, ()),
    "records but NO_EVIDENCE": ToolResult(NO_EVIDENCE, 1, {}, ({"a": 1},)),
    "a record that is not an object": ToolResult(EVIDENCE, 2, {}, ({"a": 1}, "text")),  # type: ignore[arg-type]
    "records not a tuple": ToolResult(EVIDENCE, 1, {}, [{"a": 1}]),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("result", list(MALFORMED.values()), ids=list(MALFORMED))
def test_a_malformed_record_is_a_limitation_never_a_fact(result: ToolResult | None) -> None:
    store, tracker, _ = _setup()
    _put(store, "c1", result)
    _complete(tracker, "c1", EVIDENCE)
    snap = project_snapshot(store, tracker)
    assert snap.observed_facts == ()
    assert snap.limitations == ("c1: logs record is malformed and was not used",)


def test_facts_and_limitations_keep_the_store_order() -> None:
    store, tracker, _ = _setup()
    _record(store, tracker, "c1", _result(1))
    _put(store, "c2", None, status=InvocationStatus.FAILED, error="boom")
    _record(store, tracker, "c3", _result(0))
    _put(store, "c4", _result(1))
    snap = project_snapshot(store, tracker)
    assert snap.verified_sources == ("c1", "c3")
    assert [f.tool_call_id for f in snap.observed_facts] == ["c1", "c3"]
    assert snap.limitations == ("c2: logs failed (boom)", "c4: record is not a completed call of this run")


# -- bounds and the stop reason ----------------------------------------------------------------------------------------
def test_facts_sources_and_limitations_are_bounded() -> None:
    store, tracker, _ = _setup()
    for i in range(MAX_FACTS + 7):
        _record(store, tracker, f"ok{i}", _result(1))
        _put(store, f"bad{i}", None, status=InvocationStatus.FAILED, error="boom")
    snap = project_snapshot(store, tracker)
    assert MAX_FACTS == 50
    assert len(snap.observed_facts) == len(snap.verified_sources) == len(snap.limitations) == MAX_FACTS
    assert snap.verified_sources == tuple(f"ok{i}" for i in range(MAX_FACTS)), "the first facts are kept"
    assert snap.limitations[-1] == f"bad{MAX_FACTS - 1}: logs failed (boom)"


def test_no_stop_reason_when_the_harness_did_not_stop_collection() -> None:
    store, tracker, _ = _setup()
    assert project_snapshot(store, tracker) == ProgressSnapshot((), (), (), None)


def test_the_saturation_stop_reason_is_carried() -> None:
    store, tracker, _ = _setup(no_gain_threshold=1)
    _record(store, tracker, "c1", _result(0))
    assert project_snapshot(store, tracker).stop_reason is StopReason.INFORMATION_SATURATED


def test_the_budget_stop_reason_is_carried() -> None:
    store, tracker, _ = _setup()
    tracker.stop_for_budget()
    assert project_snapshot(store, tracker).stop_reason is StopReason.BUDGET_LIMIT_REACHED


# -- any mix of records ------------------------------------------------------------------------------------------------
record_kinds = st.sampled_from(["evidence", "empty", "failed", "expired", "unknown", "malformed"])


@given(kinds=st.lists(record_kinds, max_size=MAX_FACTS))
def test_every_record_is_exactly_one_fact_or_one_limitation(kinds: list[str]) -> None:
    store, tracker, clock = _setup()
    for i, kind in enumerate(kinds):
        call_id = f"c{i}"
        # an expired record finished long before the others: its TTL ran out before the snapshot is taken
        clock.now = 0.0 if kind == "expired" else 1_000.0
        if kind in ("evidence", "expired"):
            _record(store, tracker, call_id, _result(2))
        elif kind == "empty":
            _record(store, tracker, call_id, _result(0))
        elif kind == "failed":
            _put(store, call_id, None, status=InvocationStatus.FAILED, error="boom")
        elif kind == "unknown":
            _put(store, call_id, _result(1))
        else:
            _put(store, call_id, MALFORMED["empty but EVIDENCE"])
            _complete(tracker, call_id, EVIDENCE)
    clock.now = 1_000.0
    snap = project_snapshot(store, tracker)
    facts = {f.tool_call_id for f in snap.observed_facts}
    limited = {line.split(":", 1)[0] for line in snap.limitations}
    assert facts.isdisjoint(limited) and facts | limited == {f"c{i}" for i in range(len(kinds))}
    for i, kind in enumerate(kinds):
        assert (f"c{i}" in facts) is (kind in ("evidence", "empty")), (kind, snap)
    assert snap.verified_sources == tuple(f.tool_call_id for f in snap.observed_facts)
    assert snap.has_verified_facts is bool(facts)
