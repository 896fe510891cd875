"""Where a FALLBACK came from — three different things one outcome hides: the model declined to conclude (a valid
Draft without a conclusion), a guard blocked its conclusion (EvidenceGuard or SemanticGuard), or the Harness
relabelled a reply it could not use (an invalid or cut-off Draft, or none) as the snapshot of the verified checks."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["FallbackSource", "fallback_source"]


class FallbackSource(StrEnum):
    """Where a FALLBACK came from."""

    MODEL_DECLINED = "model_declined"
    """The model's own valid Draft drew no conclusion: it said it could not."""
    GUARD_BLOCKED = "guard_blocked"
    """The model concluded; EvidenceGuard or SemanticGuard blocked the conclusion."""
    HARNESS_RELABELLED = "harness_relabelled"
    """The model's reply was no valid Draft (invalid, cut off, or never written): the Harness published its
    snapshot of the verified checks."""


def fallback_source(
    outcome: str, *, draft_valid: bool, evidence_check: str | None, semantic_verdict: str | None
) -> FallbackSource | None:
    """The source of a FALLBACK (None for any other outcome), from what the run stored of its Draft and guards."""
    if outcome != "FALLBACK":
        return None
    if not draft_valid:
        return FallbackSource.HARNESS_RELABELLED
    if evidence_check is None and semantic_verdict is None:
        return FallbackSource.MODEL_DECLINED
    return FallbackSource.GUARD_BLOCKED
