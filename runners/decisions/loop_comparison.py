"""The Harness against a plain loop, on the same model and cases: what the protocol costs and what it buys.

Both loops ran the same cases with the same model, tools and budgets (`--agent plain` beside the Harness's own
loop). The comparison is paired by case over the cases both ran: per case, the plain loop's value minus the Harness's,
averaged over cases with a bootstrap interval that resamples cases (the case is the unit). Counts that have no pair
(a fabricated citation the plain loop published, a release that FAILED) are given as counts per loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from runners.decisions.intervals import Interval
from runners.decisions.recommend import case_bootstrap_mean
from runners.store.recorded_sweeps import CaseRunRow

__all__ = ["LoopComparison", "PairedMetric", "compare_loops"]


class PairedMetric(BaseModel):
    """One measure of the two loops over the cases both ran."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    """What is measured, as the report's row says it."""
    share: bool
    """A share of cases (recall, honest fallback: 0 to 1) rather than an amount per run."""
    cases: int
    """Cases it is measured over."""
    harness: float
    """The Harness's mean over those cases."""
    plain: float
    """The plain loop's mean over the same cases."""
    difference: Interval
    """Plain minus Harness, mean over cases with its 95% bootstrap interval."""


class LoopComparison(BaseModel):
    """The Harness's runs of a model against the plain loop's."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    model: str
    """The model both loops drove."""
    no_gain_threshold: int
    """The Harness's NO_GAIN threshold compared."""
    cases: int
    """Cases both loops ran."""
    metrics: tuple[PairedMetric, ...]
    """Recall (and the part of it whose citations EvidenceGuard accepts: the plain loop publishes unchecked), honest
    fallback, tokens, model calls and tool calls per run, paired by case."""
    harness_failed: int
    """Harness runs released as FAILED."""
    plain_failed: int
    """Plain-loop runs released as FAILED (a budget, an invalid final message, an error)."""
    harness_blocked: int
    """Harness runs whose conclusion EvidenceGuard rejected: a FALLBACK published instead of the conclusion."""
    plain_published_rejected: int
    """Plain-loop runs that published a SUCCESS whose citations EvidenceGuard would have rejected."""
    harness_violations: int
    """Protocol violations in the Harness's runs (the protocol's cost in the model's mistakes)."""


def _paired(
    name: str, share: bool, harness: Mapping[str, float], plain: Mapping[str, float], cases: Iterable[str]
) -> PairedMetric | None:
    both = [c for c in cases if c in harness and c in plain]
    if not both:
        return None
    h = [harness[c] for c in both]
    p = [plain[c] for c in both]
    return PairedMetric(
        name=name,
        share=share,
        cases=len(both),
        harness=sum(h) / len(h),
        plain=sum(p) / len(p),
        difference=case_bootstrap_mean([b - a for a, b in zip(h, p, strict=True)]),
    )


def compare_loops(
    model: str,
    harness_runs: Sequence[CaseRunRow],
    plain_runs: Sequence[CaseRunRow],
    expected_success: Mapping[str, bool],
    no_gain_threshold: int,
) -> LoopComparison:
    """Compare the Harness's runs at `no_gain_threshold` with the plain loop's (one run per case each; a later epoch
    of the same case replaces an earlier one) over the cases both ran; `expected_success` says which cases expect
    SUCCESS (recall) and which a FALLBACK (honest fallback)."""
    # a run the bench failed (unjudged: runners/run/verdict.py) says nothing of either loop: its case is left out
    h = {r.case_id: r for r in harness_runs if r.no_gain_threshold == no_gain_threshold and r.passed is not None}
    p = {r.case_id: r for r in plain_runs if r.passed is not None}
    common = sorted(set(h) & set(p))
    success = [c for c in common if expected_success.get(c, False)]
    fallback = [c for c in common if not expected_success.get(c, False)]

    def per_case(runs: Mapping[str, CaseRunRow], value: Callable[[CaseRunRow], float]) -> dict[str, float]:
        return {c: value(runs[c]) for c in common}

    def measured(
        name: str, value: Callable[[CaseRunRow], float], over: list[str], *, share: bool = False
    ) -> PairedMetric | None:
        return _paired(name, share, per_case(h, value), per_case(p, value), over)

    rows = [
        measured("recall (SUCCESS with the root cause)", lambda r: float(bool(r.outcome_passed)), success, share=True),
        measured(
            "recall, citations verified",
            lambda r: float(bool(r.outcome_passed) and r.outcome == "SUCCESS" and r.evidence_check == "PASSED"),
            success,
            share=True,
        ),
        measured("honest fallback", lambda r: float(bool(r.outcome_passed)), fallback, share=True),
        measured("tokens per run", lambda r: float(r.input_tokens + r.output_tokens), common),
        measured("model calls per run", lambda r: float(r.model_calls), common),
        measured("tool calls per run", lambda r: float(r.tool_invocations), common),
    ]
    hc = [h[c] for c in common]
    pc = [p[c] for c in common]
    return LoopComparison(
        model=model,
        no_gain_threshold=no_gain_threshold,
        cases=len(common),
        metrics=tuple(m for m in rows if m is not None),
        harness_failed=sum(r.outcome == "FAILED" for r in hc),
        plain_failed=sum(r.outcome == "FAILED" for r in pc),
        harness_blocked=sum(r.evidence_check == "FAILED" for r in hc),
        plain_published_rejected=sum(r.outcome == "SUCCESS" and r.evidence_check == "FAILED" for r in pc),
        harness_violations=sum(r.protocol_violations for r in hc),
    )
