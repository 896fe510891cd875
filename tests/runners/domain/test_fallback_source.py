"""Where a FALLBACK came from: the model declined (a valid Draft, no conclusion checked), a guard blocked its
conclusion, or the Harness relabelled a reply that was no valid Draft."""

from __future__ import annotations

from runners.domain.fallback_source import FallbackSource, fallback_source


def test_three_sources_and_none_for_other_outcomes() -> None:
    def of(outcome: str, valid: bool, evidence: str | None = None, semantic: str | None = None) -> object:
        return fallback_source(outcome, draft_valid=valid, evidence_check=evidence, semantic_verdict=semantic)

    assert of("FALLBACK", True) is FallbackSource.MODEL_DECLINED
    assert of("FALLBACK", True, "FAILED") is FallbackSource.GUARD_BLOCKED
    assert of("FALLBACK", True, "PASSED", "UNSUPPORTED") is FallbackSource.GUARD_BLOCKED
    assert of("FALLBACK", False) is FallbackSource.HARNESS_RELABELLED
    assert of("FALLBACK", False, "FAILED") is FallbackSource.HARNESS_RELABELLED
    assert of("SUCCESS", True, "PASSED", "SUPPORTED") is None and of("FAILED", False) is None
