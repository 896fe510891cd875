"""Release: the single place that publishes a run's outcome (docs/architecture.md §7.4).

1. A valid Draft with a conclusion -> EvidenceGuard -> SemanticGuard -> SUCCESS.
2. Anything else -> ProgressSnapshot: verified facts -> FALLBACK/INSUFFICIENT_EVIDENCE;
   else a Draft declaring missing_info -> FALLBACK/MISSING_REQUIRED_CONTEXT; else FAILED.

With a guard switched off for a measurement (`HarnessConfig.ablate`): no SemanticGuard call, a verified conclusion is
published; or EvidenceGuard's verdict is traced and not applied, the SemanticGuard judging the citations as written.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.context import RunContext
from harness.contracts import (
    EvidenceCheck,
    FallbackKind,
    HarnessControl,
    ModelErrorKind,
    ReleaseOutcome,
    SemanticVerdict,
    StopReason,
)
from harness.draft import Draft, DraftParse
from harness.evidence_guard import VerifiedEvidence, check_evidence
from harness.models.base import ChatModel
from harness.semantic_guard import review
from harness.snapshot import ProgressSnapshot, project_snapshot
from harness.trace import EvidenceChecked, GuardVerdict, Released


@dataclass(frozen=True, slots=True)
class Fallback:
    """The safe content published instead of a conclusion."""

    kind: FallbackKind
    """Which fallback."""
    checked: tuple[str, ...]
    """What was checked (verified observed facts)."""
    missing_info: tuple[str, ...]
    """Context the user should supply."""
    next_steps: tuple[str, ...]
    """What to do next."""
    limitations: tuple[str, ...]
    """What could not be verified."""


@dataclass(frozen=True, slots=True)
class ReleaseDecision:
    """The one published outcome of a run."""

    outcome: ReleaseOutcome
    """SUCCESS, FALLBACK, FAILED or CANCELLED."""
    fallback_kind: FallbackKind | None
    """Set for FALLBACK."""
    stop_reason: StopReason | None
    """The Harness stop reason, if it stopped the loop."""
    draft: Draft | None
    """The published Draft (SUCCESS only)."""
    fallback: Fallback | None
    """The published fallback (FALLBACK only)."""
    snapshot: ProgressSnapshot | None
    """The snapshot the fallback was built from."""
    reason: str
    """Why this outcome, in one readable line."""
    call_error: str | None = None
    """A model-call failure that decided this outcome (the SemanticGuard's endpoint failed), else None."""
    call_error_kind: ModelErrorKind | None = None
    """The classification of `call_error` (None without one)."""


def release(
    ctx: RunContext,
    *,
    question: str,
    parsed: DraftParse | None,
    guard_model: ChatModel,
    cancelled: bool = False,
    loop_error: str | None = None,
) -> ReleaseDecision:
    """Decide and trace the single outcome. `parsed` is None when the loop ended without a Draft."""
    stop_reason = ctx.tracker.stop_reason
    if cancelled:
        return _emit(
            ctx, ReleaseDecision(ReleaseOutcome.CANCELLED, None, stop_reason, None, None, None, "run cancelled")
        )

    draft = parsed.draft if parsed else None
    why: str
    call_error: str | None = None
    call_error_kind: ModelErrorKind | None = None
    if draft is not None and draft.conclusion is not None and draft.conclusion.strip():
        ev = check_evidence(draft, ctx.store, ctx.config.min_excerpt_chars)
        ctx.trace.emit(
            EvidenceChecked(
                verdict=EvidenceCheck.PASSED if ev.passed else EvidenceCheck.FAILED,
                detail="; ".join(ev.problems)[:300] or None,
            )
        )
        ablate = ctx.config.ablate
        if ev.passed and ablate is HarnessControl.SEMANTIC_GUARD:
            return _emit(
                ctx,
                ReleaseDecision(
                    ReleaseOutcome.SUCCESS, None, stop_reason, draft, None, None,
                    "conclusion published with citations verified (the SemanticGuard switched off)",
                ),
            )  # fmt: skip
        if ev.passed or ablate is HarnessControl.EVIDENCE_GUARD:
            # EvidenceGuard switched off: its verdict is traced above but not applied, and the SemanticGuard is
            # shown the citations as the Draft wrote them, as if they had verified
            evidence = ev.verified if ev.passed else _as_written(ctx, draft)
            sem = review(ctx, guard_model, question, draft, evidence)
            ctx.trace.emit(GuardVerdict(verdict=sem.verdict, detail=sem.reason[:300]))
            if sem.verdict is SemanticVerdict.SUPPORTED:
                return _emit(
                    ctx,
                    ReleaseDecision(
                        ReleaseOutcome.SUCCESS, None, stop_reason, draft, None, None, "conclusion verified"
                    ),
                )
            why = f"SemanticGuard: {sem.reason}"
            call_error, call_error_kind = sem.call_error, sem.call_error_kind
            if sem.budget is not None:  # a budget forbade or cut the guard's call: the run was stopped by that budget
                ctx.record_budget_stop(sem.budget, f"SemanticGuard call: {sem.reason}"[:300])
                stop_reason = ctx.tracker.stop_reason
        else:
            why = "EvidenceGuard: " + "; ".join(ev.problems)
    elif parsed is not None and parsed.error is not None:
        why = f"invalid Draft: {parsed.error}"
    elif draft is not None:
        why = "the agent reported no conclusion"
    else:
        why = loop_error or (f"collection stopped: {stop_reason.value}" if stop_reason else "no Draft")

    snapshot = project_snapshot(ctx.store, ctx.tracker)
    next_steps = tuple(draft.next_steps) if draft else ()
    missing = tuple(draft.missing_info) if draft else ()
    if snapshot.has_verified_facts:
        fb = Fallback(
            FallbackKind.INSUFFICIENT_EVIDENCE,
            tuple(f.summary for f in snapshot.observed_facts),
            missing,
            next_steps or ("Widen or change the scope with a human operator; the checks above found no root cause.",),
            snapshot.limitations,
        )
        return _emit(
            ctx,
            ReleaseDecision(
                ReleaseOutcome.FALLBACK, fb.kind, stop_reason, None, fb, snapshot, why, call_error, call_error_kind
            ),
        )
    if missing:
        fb = Fallback(FallbackKind.MISSING_REQUIRED_CONTEXT, (), missing, next_steps, snapshot.limitations)
        return _emit(
            ctx,
            ReleaseDecision(
                ReleaseOutcome.FALLBACK, fb.kind, stop_reason, None, fb, snapshot, why, call_error, call_error_kind
            ),
        )
    return _emit(
        ctx,
        ReleaseDecision(
            ReleaseOutcome.FAILED,
            None,
            stop_reason,
            None,
            None,
            snapshot,
            why + " (fail closed)",
            call_error,
            call_error_kind,
        ),
    )


def _as_written(ctx: RunContext, draft: Draft) -> tuple[VerifiedEvidence, ...]:
    """The Draft's citations as it wrote them (the tool named from this run's records where the call ran)."""
    out: list[VerifiedEvidence] = []
    for claim in draft.claims:
        for c in claim.citations:
            record = ctx.store.read(c.tool_call_id).record
            out.append(VerifiedEvidence(c.tool_call_id, record.tool if record is not None else "unknown", c.excerpt))
    return tuple(out)


def _emit(ctx: RunContext, decision: ReleaseDecision) -> ReleaseDecision:
    ctx.trace.emit(
        Released(
            outcome=decision.outcome,
            fallback_kind=decision.fallback_kind,
            stop_reason=decision.stop_reason,
            detail=decision.reason[:300],
        )
    )
    return decision
