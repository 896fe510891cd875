"""One case run as the bench keeps it: the harness result, the counts derived from its trace, and the verdict
(written by the run, stored row by row by the store)."""

from __future__ import annotations

from dataclasses import dataclass

from harness import BudgetKind, RejectionReason, RunResult
from runners.domain.evalset import EvalCase

__all__ = ["CaseMetrics", "CaseRun", "Verdicts"]


@dataclass(frozen=True, slots=True)
class CaseMetrics:
    """Counts derived from one run's trace (the same numbers land in DuckDB)."""

    model_calls: int
    """Diagnosis model call attempts."""
    guard_calls: int
    """SemanticGuard calls."""
    tool_invocations: int
    """Backend invocations."""
    failed_invocations: int
    """Backend invocations that failed."""
    tool_rejections: int
    """Requests rejected before the backend."""
    duplicate_scope_rejections: int
    """Rejections for a duplicate scope."""
    protocol_violations: int
    """Rejections for a protocol violation."""
    no_gain_count: int
    """NO_GAIN applications (Harness and Agent)."""
    gained_count: int
    """GAINED applications."""
    stop_required_delivered: bool
    """Whether STOP_REQUIRED went out."""
    stop_required_deliveries: int
    """How many STOP_REQUIRED observations went out (the contract allows one)."""
    rejections: dict[RejectionReason, int]
    """Rejections before the backend, by reason (reasons with none are absent)."""
    awaiting_rejections: int
    """Calls queued in a message behind a same-message pending call (not violations)."""
    observation_bytes: int
    """Observation bytes handed to the model over the run."""
    budget_hit: BudgetKind | None
    """The hard budget that stopped the run, if one did."""
    distinct_scopes_executed: int
    """Distinct tool+scope pairs that reached the backend."""
    wasted_invocations: int
    """Backend invocations after the first NO_GAIN."""
    input_tokens: int
    """Prompt tokens."""
    output_tokens: int
    """Completion tokens."""
    text_tool_calls: int = 0
    """Tool calls the model wrote as text and the client read from it (`--tool-call-format json`)."""


@dataclass(frozen=True, slots=True)
class Verdicts:
    """Both verdicts of one case run."""

    outcome_failures: tuple[str, ...]
    """Why the outcome verdict failed (empty: passed)."""
    trajectory_failures: tuple[str, ...] | None
    """Why the trajectory verdict failed (empty: passed; None: no trajectory verdict applies to this run)."""
    bench_failure: str | None = None
    """Why the run measures the bench, not the model (`runners/run/verdict.py` `bench_failure`): no verdict judges
    it, and a pass or recall figure leaves it out and counts it apart (None: the run is judged)."""

    @property
    def outcome_passed(self) -> bool | None:
        """The published outcome is right and the Harness kept its invariants (None: the bench's failure, unjudged)."""
        return None if self.bench_failure is not None else not self.outcome_failures

    @property
    def trajectory_passed(self) -> bool | None:
        """The run followed the reference trajectory's bounds (None: not judged on them)."""
        return None if self.trajectory_failures is None else not self.trajectory_failures

    @property
    def passed(self) -> bool | None:
        """Every verdict that applies passed (None: the bench's failure, unjudged)."""
        if self.bench_failure is not None:
            return None
        return not self.outcome_failures and self.trajectory_passed is not False

    @property
    def failures(self) -> tuple[str, ...]:
        """Every failure, each naming its verdict (`[bench]`: why the run is not judged)."""
        return (*((f"[bench] {self.bench_failure}",) if self.bench_failure is not None else ()),
                *(f"[outcome] {f}" for f in self.outcome_failures),
                *(f"[trajectory] {f}" for f in self.trajectory_failures or ()))  # fmt: skip


@dataclass(frozen=True, slots=True)
class CaseRun:
    """One case run: the harness result, its metrics and the verdict."""

    case: EvalCase
    """The case."""
    result: RunResult
    """What the harness produced."""
    metrics: CaseMetrics
    """Counts from the trace."""
    verdicts: Verdicts
    """The outcome verdict and, where it applies, the trajectory verdict (runners/run/verdict.py)."""
    evidence_calls: frozenset[str] = frozenset()
    """The completed calls whose records carry the case's evidence (the truth its gain tags are scored against)."""

    @property
    def passed(self) -> bool | None:
        """True when every verdict that applies passed (None: the bench's failure, unjudged)."""
        return self.verdicts.passed

    @property
    def failures(self) -> tuple[str, ...]:
        """Every unmet expectation, each naming its verdict."""
        return self.verdicts.failures
