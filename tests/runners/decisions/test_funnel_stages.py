"""The funnel's stage of one run, for the tag counts that decide TAGGED_NO_GAIN: evidence tagged NO_GAIN only is
TAGGED_NO_GAIN; evidence tagged NO_GAIN once and GAINED elsewhere was not dismissed, so the run goes on down the
funnel. A property over every count."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from runners.decisions.funnel import FunnelStage, stage_of
from runners.store.diagnosis_reads import FunnelRow


def _row(*, evidence_calls: int | None, gained: int, no_gain: int, draft_valid: bool = True) -> FunnelRow:
    return FunnelRow(
        case_run_id="b/c/1", bench_run_id="b", case_id="c", family="diagnosable", label=None, no_gain_threshold=2,
        expected_outcome="SUCCESS", outcome="FALLBACK", outcome_passed=False, stop_reason=None, budget_hit=None,
        error_kind=None, draft_received=True, draft_valid=draft_valid, evidence_check=None, evidence_detail=None,
        semantic_verdict=None, evidence_calls=evidence_calls, evidence_gained=gained, evidence_no_gain=no_gain,
        failures=None,
    )  # fmt: skip


def test_evidence_tagged_no_gain_once_and_gained_elsewhere_is_not_dismissed() -> None:
    assert stage_of(_row(evidence_calls=2, gained=1, no_gain=1)) is FunnelStage.NO_CONCLUSION
    assert stage_of(_row(evidence_calls=2, gained=0, no_gain=2)) is FunnelStage.TAGGED_NO_GAIN


@given(calls=st.integers(0, 6), gained=st.integers(0, 6), no_gain=st.integers(0, 6), valid=st.booleans())
def test_tagged_no_gain_exactly_when_evidence_came_back_and_was_never_gained(
    calls: int, gained: int, no_gain: int, valid: bool
) -> None:
    stage = stage_of(_row(evidence_calls=calls, gained=gained, no_gain=no_gain, draft_valid=valid))
    if calls == 0:
        assert stage is FunnelStage.NEVER_RETRIEVED
    elif no_gain > 0 and gained == 0:
        assert stage is FunnelStage.TAGGED_NO_GAIN
    else:
        assert stage in (FunnelStage.NO_VALID_DRAFT, FunnelStage.NO_CONCLUSION)
        assert (stage is FunnelStage.NO_VALID_DRAFT) == (not valid)


def test_unknown_evidence_truth_starts_at_the_draft() -> None:
    assert stage_of(_row(evidence_calls=None, gained=0, no_gain=3)) is FunnelStage.NO_CONCLUSION
