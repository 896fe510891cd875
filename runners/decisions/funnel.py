"""The diagnosis funnel: for every run expected to end in SUCCESS, the first place it fell out, and the gain-tag
confusion: how an agent's GAINED / NO_GAIN compare with what the observations it judged really held.

The funnel's stages, in order (a run is counted at the first one it does not pass):

1. `NEVER_RETRIEVED` — no call returned a record carrying the case's evidence;
2. `TAGGED_NO_GAIN` — evidence came back, and the agent tagged it NO_GAIN (never GAINED);
3. `NO_VALID_DRAFT` — the run ended without a valid Draft: saturation, a budget or the deadline stopped it, the
   final message was not a valid Draft, or a model call failed;
4. `NO_CONCLUSION` — a valid Draft with `conclusion: null`;
5. `CITATION_REJECTED` — EvidenceGuard rejected a citation (the reason kept);
6. `UNSUPPORTED` — SemanticGuard judged the conclusion UNSUPPORTED;
7. `ROOT_CAUSE_MISSING` — published SUCCESS whose conclusion does not state the root cause (as the judge reads it);
8. `SUCCESS` — published SUCCESS with the root cause.

A run that ended on the bench's failure, not the model's (a model call that timed out on a loaded machine, was refused
or failed on the endpoint after the Harness's retries: runners/run/verdict.py) is counted apart as `BENCH_FAILURE`,
before every stage: it says nothing of the model. A run whose evidence truth is unknown (imported from a trace: the
bench never saw its records) starts at stage 3;
an imported run has no expected outcome, so it enters the funnel only if one is given for it. Anything that fits no
stage (a Harness invariant broken on a SUCCESS) is `OTHER`, never silently dropped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from runners.store.diagnosis_reads import FunnelRow, GainTagRow

__all__ = [
    "STAGE_DOCS",
    "FunnelCounts",
    "FunnelStage",
    "GainTagConfusion",
    "by_label",
    "confusion",
    "funnel",
    "stage_of",
]

ROOT_CAUSE_FAILURE = "conclusion does not state the root cause"
"""How the outcome verdict says a SUCCESS missed the root cause (runners/run/verdict.py)."""


class FunnelStage(StrEnum):
    """Where a run expected to succeed fell out (in funnel order)."""

    NEVER_RETRIEVED = "NEVER_RETRIEVED"
    """No call returned a record carrying the case's evidence."""
    TAGGED_NO_GAIN = "TAGGED_NO_GAIN"
    """Evidence came back and the agent tagged it NO_GAIN."""
    NO_VALID_DRAFT = "NO_VALID_DRAFT"
    """Stopped (saturation, budget, deadline), an invalid final message, or a failed model call."""
    NO_CONCLUSION = "NO_CONCLUSION"
    """A valid Draft with no conclusion."""
    CITATION_REJECTED = "CITATION_REJECTED"
    """EvidenceGuard rejected a citation."""
    UNSUPPORTED = "UNSUPPORTED"
    """SemanticGuard judged the conclusion unsupported."""
    ROOT_CAUSE_MISSING = "ROOT_CAUSE_MISSING"
    """SUCCESS whose conclusion does not state the root cause."""
    SUCCESS = "SUCCESS"
    """SUCCESS with the root cause."""
    OTHER = "OTHER"
    """Fits no stage (shown, never dropped)."""
    BENCH_FAILURE = "BENCH_FAILURE"
    """The bench's failure, not the model's: a model call failed on the endpoint or the machine (counted apart)."""


STAGE_DOCS: dict[FunnelStage, str] = {
    FunnelStage.NEVER_RETRIEVED: "no call returned a record carrying the case's evidence",
    FunnelStage.TAGGED_NO_GAIN: "the evidence came back and the agent tagged it NO_GAIN",
    FunnelStage.NO_VALID_DRAFT: "a stop (saturation, budget, deadline), an invalid final message or a failed call",
    FunnelStage.NO_CONCLUSION: "a valid Draft with no conclusion",
    FunnelStage.CITATION_REJECTED: "EvidenceGuard rejected a citation",
    FunnelStage.UNSUPPORTED: "SemanticGuard judged the conclusion unsupported",
    FunnelStage.ROOT_CAUSE_MISSING: "SUCCESS without the root cause",
    FunnelStage.SUCCESS: "SUCCESS with the root cause",
    FunnelStage.OTHER: "fits no stage (shown, never dropped)",
    FunnelStage.BENCH_FAILURE: "the bench's failure, not the model's (a model call timed out, failed on its endpoint)",
}
"""One line per stage, for the tables' legends."""


def stage_of(row: FunnelRow) -> FunnelStage:
    """The funnel stage of one case run (see the module docstring)."""
    if row.bench_failure:
        return FunnelStage.BENCH_FAILURE
    if row.outcome == "SUCCESS":
        if row.outcome_passed:
            return FunnelStage.SUCCESS
        if row.failures is not None and ROOT_CAUSE_FAILURE in row.failures:
            return FunnelStage.ROOT_CAUSE_MISSING
        return FunnelStage.OTHER
    if row.evidence_calls is not None:
        if row.evidence_calls == 0:
            return FunnelStage.NEVER_RETRIEVED
        if row.evidence_no_gain > 0 and row.evidence_gained == 0:
            return FunnelStage.TAGGED_NO_GAIN
    if not row.draft_valid:
        return FunnelStage.NO_VALID_DRAFT
    if row.evidence_check is None:
        return FunnelStage.NO_CONCLUSION
    if row.evidence_check != "PASSED":
        return FunnelStage.CITATION_REJECTED
    if row.semantic_verdict == "UNSUPPORTED":
        return FunnelStage.UNSUPPORTED
    return FunnelStage.OTHER


@dataclass(frozen=True, slots=True)
class FunnelCounts:
    """How many runs of one group (a label and threshold, a family) fell out at each stage."""

    group: str
    """What the runs share (`label @ NO_GAIN n`, a family)."""
    runs: int
    """Runs expected to succeed in the group."""
    stages: tuple[tuple[FunnelStage, int], ...]
    """Runs per stage, in funnel order (every stage listed, zeros included)."""
    rejections: tuple[tuple[str, int], ...]
    """Why EvidenceGuard rejected the citations of the CITATION_REJECTED runs, most frequent first."""

    def count(self, stage: FunnelStage) -> int:
        """Runs at `stage`."""
        return dict(self.stages)[stage]


def by_label(row: FunnelRow | GainTagRow) -> str:
    """The default group: the bench run's label (or id) and NO_GAIN threshold."""
    return f"{row.label or row.bench_run_id} @ NO_GAIN {row.no_gain_threshold}"


def funnel(rows: Iterable[FunnelRow], *, key: Callable[[FunnelRow], str] = by_label) -> list[FunnelCounts]:
    """The funnel of the runs expected to succeed, per group (`key`: label and threshold by default)."""
    groups: dict[str, list[FunnelRow]] = {}
    for row in rows:
        if row.expected_outcome == "SUCCESS":
            groups.setdefault(key(row), []).append(row)
    out: list[FunnelCounts] = []
    for group in sorted(groups):
        runs = groups[group]
        stages = Counter(stage_of(r) for r in runs)
        why = Counter(_reason(r.evidence_detail) for r in runs if stage_of(r) is FunnelStage.CITATION_REJECTED)
        out.append(FunnelCounts(group, len(runs), tuple((s, stages.get(s, 0)) for s in FunnelStage),
                                tuple(why.most_common())))  # fmt: skip
    return out


def _reason(detail: str | None) -> str:
    """EvidenceGuard's reason without the ids and excerpts that make each one unique."""
    if not detail:
        return "(no detail)"
    text = detail.split(";")[0]
    for marker in (" for ", ": "):
        text = text.split(marker)[0]
    return text.strip()[:80]


@dataclass(frozen=True, slots=True)
class GainTagConfusion:
    """An agent's gain tags against the truth, over a group of runs."""

    group: str
    """What the runs share (`label @ NO_GAIN n`)."""
    gained_on_evidence: int
    """GAINED on an observation carrying evidence (right)."""
    gained_on_nothing: int
    """GAINED on one carrying none (optimistic)."""
    no_gain_on_evidence: int
    """NO_GAIN on one carrying evidence (premature)."""
    no_gain_on_nothing: int
    """NO_GAIN on one carrying none (right)."""

    @property
    def tags(self) -> int:
        """Every judged tag."""
        return self.gained_on_evidence + self.gained_on_nothing + self.no_gain_on_evidence + self.no_gain_on_nothing

    @property
    def accuracy(self) -> float | None:
        """The share of tags that were right (None without a tag)."""
        return (self.gained_on_evidence + self.no_gain_on_nothing) / self.tags if self.tags else None


def confusion(rows: Sequence[GainTagRow], *, key: Callable[[GainTagRow], str] = by_label) -> list[GainTagConfusion]:
    """The confusion per group (`key`: label and NO_GAIN threshold by default)."""
    groups: dict[str, list[GainTagRow]] = {}
    for row in rows:
        groups.setdefault(key(row), []).append(row)
    return [
        GainTagConfusion(key, sum(r.gained_on_evidence for r in rs), sum(r.gained_on_nothing for r in rs),
                         sum(r.no_gain_on_evidence for r in rs), sum(r.no_gain_on_nothing for r in rs))
        for key, rs in sorted(groups.items())
    ]  # fmt: skip
