"""What a lower NO_GAIN threshold (or a lower tool budget) would have done to stored runs, computed exactly.

Every stored case run's tool requests are replayed, in trace order, through the real `DiagnosisProgressTracker`
at the point's threshold: the agent's recorded evaluations (`GAIN_APPLIED` by the agent) ride on the next
request as its `previous_observation`, recorded protocol violations are handed in as they were found, completed
invocations are completed with their recorded evidence. Up to the first place the point's tracker decides
otherwise the run is the recorded run (the model is never told the threshold, so it saw the same observations),
so everything before that place is known exactly:

- the tracker delivers STOP_REQUIRED earlier: the run is CUT there; no backend call follows (later requests are
  rejected), the model gets the one call STOP_REQUIRED allows for its Draft — what it writes there, that
  call's tokens and whether a SemanticGuard call follows are not known (UNKNOWN);
- the point's tool budget is used up first: CUT with BUDGET_LIMIT_REACHED; no model call follows, so all counts
  are exact;
- the run reaches its recorded end (or its recorded STOP_REQUIRED) with the tracker agreeing: UNCHANGED;
- the run stopped where the point would have let it go on (a threshold above the one it saturated at, a budget
  above the one it hit): CENSORED — what it would have done next was never recorded.

Pure: stored runs in (`runners.store.whatif_runs`), typed results out; no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel, ConfigDict
from scipy import stats

from harness import (
    AdmissionKind,
    BudgetExhausted,
    CollectionStopped,
    DiagnosisProgressTracker,
    DraftReceived,
    GainApplied,
    GainProducer,
    InvocationStatus,
    ModelCall,
    ModelPurpose,
    PreviousObservation,
    RejectionReason,
    Released,
    ReleaseOutcome,
    StopReason,
    StopRequiredDelivered,
    ToolInvocation,
    ToolRequestRejected,
    TraceEvent,
    Violation,
    parse_draft,
)
from runners.store.whatif_runs import ReplayableRun

__all__ = [
    "NOTES",
    "Bound",
    "ConclusionRisk",
    "Counts",
    "CutPoint",
    "PointWhatIf",
    "ReplayError",
    "RunStatus",
    "RunWhatIf",
    "Saving",
    "WhatIf",
    "WhatIfInputError",
    "check_points",
    "replay_run",
    "whatif",
]

CONFIDENCE = 0.95
"""The level of the intervals over runs."""

NOTES = (
    "unknown: the Draft the model would have written after an earlier STOP_REQUIRED, the tokens of that one"
    " Draft call and whether a SemanticGuard call follows it; so a STOP_REQUIRED cut's tokens saved are at most"
    " the figure shown, and its model calls saved count that Draft call once (its retries are not known)",
    "censored: a run that stopped where the point would have let it go on (a threshold above the one it"
    " saturated at, a tool budget above the one it hit): what it did next was never recorded, so it is left out"
    " of the savings",
    "model calls and tokens are the diagnosis loop's (a SemanticGuard call is not replayed); the Draft call after"
    " STOP_REQUIRED is counted when the model-call and token budgets still allow it (the deadline and the"
    " observation-byte budget are assumed to)",
)
"""What the what-if cannot know, said once (printed under the table, written into the JSON)."""


class WhatIfInputError(ValueError):
    """A point the selection cannot answer (a threshold or budget not below the runs'), or runs without events."""


class ReplayError(ValueError):
    """A stored trace that does not replay through the tracker at its own settings (names the run and event)."""


class RunStatus(StrEnum):
    """What a point does to one run."""

    CUT = "CUT"
    """It stops earlier: exact up to the cut."""
    UNCHANGED = "UNCHANGED"
    """It is the recorded run: no earlier stop."""
    CENSORED = "CENSORED"
    """It would go on past where the recorded run stopped: not known."""


class ConclusionRisk(StrEnum):
    """What a cut does to the conclusion the run published."""

    AT_RISK = "AT_RISK"
    """The published Draft cites a record obtained after the cut."""
    KEPT = "KEPT"
    """The published Draft cites only records obtained before the cut (the Draft written instead is unknown)."""
    UNKNOWN = "UNKNOWN"
    """A Draft was published, but it is not stored (the bench run kept no transcripts)."""
    NONE = "NONE"
    """Nothing was published (the outcome was not SUCCESS)."""


class Bound(StrEnum):
    """How a saving is known."""

    EXACT = "EXACT"
    """Exactly."""
    AT_MOST = "AT_MOST"
    """As an upper bound (a cut run's Draft call after STOP_REQUIRED costs tokens that are not known)."""


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Counts(_Model):
    """What a run spends."""

    tool_invocations: int
    """Backend tool invocations."""
    model_calls: int
    """Diagnosis-loop model call attempts."""
    tokens: int
    """Input plus output tokens of those calls."""


class CutPoint(_Model):
    """Where a point stops a run."""

    tool_call_id: str
    """The tool request at which it stops."""
    tool: str
    """That request's tool."""
    request: int
    """Its position among the run's tool requests, from 1."""
    model_call: int
    """The diagnosis turn that asked for it, from 1."""
    executed: bool
    """The request itself reached the backend (its empty result saturated the run), or it was refused."""
    stop_reason: StopReason
    """INFORMATION_SATURATED (an earlier STOP_REQUIRED) or BUDGET_LIMIT_REACHED (the point's tool budget)."""


class RunWhatIf(_Model):
    """One run at one point."""

    case_run_id: str
    """The case run."""
    case_id: str
    """Its case."""
    epoch: int
    """Its epoch."""
    recorded_no_gain_threshold: int
    """The threshold it ran with."""
    recorded_max_tool_invocations: int
    """The tool budget it ran with."""
    status: RunStatus
    """Cut, unchanged or censored."""
    recorded: Counts
    """What it spent."""
    cut: CutPoint | None
    """Where the point stops it (CUT only)."""
    to_cut: Counts | None
    """What it spends up to and including the cut's turn (the recorded counts when UNCHANGED; None: censored)."""
    draft_call: bool
    """A STOP_REQUIRED cut: the model still gets its one call for the Draft (the budgets allow it)."""
    saved: Counts | None
    """Recorded minus what the point spends (None: censored); tokens leave out the Draft call's, not known."""
    conclusion: ConclusionRisk | None
    """What the cut does to the published conclusion (None: not cut)."""


class Saving(_Model):
    """One count saved at a point, over the runs it answers (censored runs left out)."""

    total: int
    """Summed over the runs."""
    mean: float | None
    """Per run (None: no run)."""
    low: float | None
    """Lower end of the 95% t interval of the per-run mean (None: under two runs)."""
    high: float | None
    """Upper end (None: under two runs)."""
    bound: Bound
    """Exact, or an upper bound."""


class PointWhatIf(_Model):
    """One point of the what-if: a threshold (and a tool budget)."""

    no_gain_threshold: int
    """The consecutive-NO_GAIN threshold replayed."""
    max_tool_invocations: int | None
    """The tool budget replayed (None: each run's own)."""
    runs: int
    """Runs replayed."""
    runs_cut: int
    """Runs that stop earlier."""
    runs_censored: int
    """Runs the point cannot answer."""
    conclusions_at_risk: int
    """Cut runs whose published Draft cites a record obtained after the cut."""
    conclusions_unknown: int
    """Cut runs that published a Draft that is not stored."""
    tool_invocations: Saving
    """Tool invocations saved."""
    model_calls: Saving
    """Diagnosis model calls saved."""
    tokens: Saving
    """Tokens saved."""
    per_run: tuple[RunWhatIf, ...]
    """Every run at this point, cut points included."""


class WhatIf(_Model):
    """The what-if of a selection of stored runs."""

    points: tuple[PointWhatIf, ...]
    """One per (threshold, tool budget), thresholds descending."""
    notes: tuple[str, ...] = NOTES
    """What cannot be known, and how it is counted."""


# -- the replay -------------------------------------------------------------------------------------------------
@dataclass(slots=True)
class _Spent:
    tools: int = 0
    calls: int = 0
    tokens: int = 0

    def counts(self) -> Counts:
        return Counts(tool_invocations=self.tools, model_calls=self.calls, tokens=self.tokens)


@dataclass(frozen=True, slots=True)
class _End:
    status: RunStatus
    spent: Counts | None
    cut: CutPoint | None = None
    executed: frozenset[str] = frozenset()


_EXPECTED: dict[RejectionReason, AdmissionKind] = {
    RejectionReason.PROTOCOL_VIOLATION: AdmissionKind.REJECT_VIOLATION,
    RejectionReason.DUPLICATE_SCOPE: AdmissionKind.REJECT_DUPLICATE,
    RejectionReason.AWAITING_EVALUATION: AdmissionKind.REJECT_AWAITING,
    RejectionReason.BUDGET: AdmissionKind.EXECUTE,  # admitted, then refused by the tool budget
    RejectionReason.SATURATED: AdmissionKind.STOP_REQUIRED,  # only the one that delivered it is replayed
}
"""What the tracker decided for a recorded rejection that went through it."""


def _known(run: ReplayableRun, limit: int | None) -> int:
    """A limit the run recorded; another agent's run recorded none, and has no contract to replay."""
    if limit is None:
        raise WhatIfInputError(f"case run {run.case_run_id} records no thresholds or budgets (another agent's run,"
                               " imported from its trace): it has no information-gain contract to replay; compare"
                               " caps and loop detectors on it with compare-stops")  # fmt: skip
    return limit


def recorded_counts(events: Sequence[TraceEvent]) -> Counts:
    """What a run spent, from its trace."""
    spent = _Spent()
    for e in events:
        if isinstance(e, ModelCall) and e.purpose is ModelPurpose.DIAGNOSIS:
            spent.calls += 1
            spent.tokens += (e.input_tokens or 0) + (e.output_tokens or 0)
        elif isinstance(e, ToolInvocation):
            spent.tools += 1
    return spent.counts()


def _replay(run: ReplayableRun, threshold: int, budget: int) -> _End:
    """Walk the run's requests through a tracker at `threshold` and a tool budget of `budget`."""
    events = run.events
    stop_ids = {e.tool_call_id for e in events if isinstance(e, StopRequiredDelivered)}
    budget_ids = {e.tool_call_id for e in events if isinstance(e, BudgetExhausted) and e.tool_call_id is not None}
    tracker = DiagnosisProgressTracker(threshold, _known(run, run.protocol_violation_threshold))
    spent = _Spent()
    turn = requests = 0
    executed: list[str] = []
    evaluation: GainApplied | None = None

    def cut(e: ToolInvocation | ToolRequestRejected, ran: bool, reason: StopReason) -> _End:
        point = CutPoint(tool_call_id=e.tool_call_id, tool=e.tool, request=requests, model_call=turn, executed=ran,
                         stop_reason=reason)  # fmt: skip
        return _End(RunStatus.CUT, spent.counts(), point, frozenset(executed))

    for e in events:
        if isinstance(e, ModelCall):
            if e.purpose is ModelPurpose.DIAGNOSIS:
                spent.calls += 1
                spent.tokens += (e.input_tokens or 0) + (e.output_tokens or 0)
                turn += e.error_kind is None  # the session numbers turns by answered calls
            continue
        if isinstance(e, GainApplied):
            if e.producer is GainProducer.AGENT:  # it came with the next request's envelope
                evaluation = e
            continue  # the Harness's own gains the tracker derives itself
        if isinstance(e, DraftReceived | BudgetExhausted | CollectionStopped | Released):
            return _End(RunStatus.UNCHANGED, recorded_counts(events))  # the recorded loop ended: nothing earlier
        if not isinstance(e, ToolInvocation | ToolRequestRejected):
            continue
        previous = None if evaluation is None else PreviousObservation(evaluation.tool_call_id, evaluation.gain)
        evaluation = None
        recorded_stop = e.tool_call_id in stop_ids
        structural: Violation | None = None
        if isinstance(e, ToolRequestRejected):
            admitted = e.rejection in _EXPECTED and (
                (e.rejection is not RejectionReason.BUDGET or e.tool_call_id in budget_ids)
                and (e.rejection is not RejectionReason.SATURATED or recorded_stop)
            )
            if not admitted:  # answered without the tracker after the loop had to end (budget, stop, cancel)
                return _End(RunStatus.UNCHANGED, recorded_counts(events))
            expected = AdmissionKind.STOP_REQUIRED if recorded_stop else _EXPECTED[e.rejection]
            if e.rejection is RejectionReason.PROTOCOL_VIOLATION:
                if e.violation is None:
                    raise ReplayError(f"case run {run.case_run_id}, event {e.seq}: a protocol rejection without"
                                      " its violation kind")  # fmt: skip
                structural = Violation(e.violation, e.detail or "")
        else:
            expected = AdmissionKind.EXECUTE
        requests += 1
        admission = tracker.admit(e.tool_call_id, e.tool, e.scope, previous, structural=structural, turn=turn)
        if admission.kind is AdmissionKind.STOP_REQUIRED:
            if expected is AdmissionKind.STOP_REQUIRED:
                return _End(RunStatus.UNCHANGED, recorded_counts(events))
            return cut(e, False, admission.stop_reason or StopReason.INFORMATION_SATURATED)
        if expected is AdmissionKind.STOP_REQUIRED:
            return _End(RunStatus.CENSORED, None)
        if admission.kind is not expected:
            raise ReplayError(
                f"case run {run.case_run_id}, event {e.seq} ({e.tool_call_id}): the tracker decides"
                f" {admission.kind.value} where the run recorded {expected.value}; the stored trace does not replay"
            )
        if admission.kind is not AdmissionKind.EXECUTE:
            continue
        if isinstance(e, ToolRequestRejected):  # a recorded budget refused it: the run ended here
            if spent.tools >= budget or spent.tools < _known(run, run.max_tool_invocations):  # here too, or not tools
                return _End(RunStatus.UNCHANGED, recorded_counts(events))
            return _End(RunStatus.CENSORED, None)  # the point's larger tool budget would have run it
        if spent.tools >= budget:
            return cut(e, False, StopReason.BUDGET_LIMIT_REACHED)
        spent.tools += 1
        executed.append(e.tool_call_id)
        evidence = e.evidence_status if e.invocation_status is InvocationStatus.COMPLETED else None
        done = tracker.complete(e.tool_call_id, e.tool, e.scope, evidence, turn=turn)
        if done.stop_required and not recorded_stop:
            return cut(e, True, done.stop_reason or StopReason.INFORMATION_SATURATED)
        if recorded_stop:
            return _End(RunStatus.UNCHANGED if done.stop_required else RunStatus.CENSORED, recorded_counts(events))
    return _End(RunStatus.UNCHANGED, recorded_counts(events))


def replay_run(run: ReplayableRun, no_gain_threshold: int, max_tool_invocations: int | None = None) -> RunWhatIf:
    """One run at one point (`max_tool_invocations` None: the run's own budget)."""
    if not run.events:
        raise WhatIfInputError(f"case run {run.case_run_id} has no stored events to replay")
    budget = _known(run, run.max_tool_invocations) if max_tool_invocations is None else max_tool_invocations
    end = _replay(run, no_gain_threshold, budget)
    recorded = recorded_counts(run.events)
    base = {
        "case_run_id": run.case_run_id, "case_id": run.case_id, "epoch": run.epoch,
        "recorded_no_gain_threshold": run.no_gain_threshold,
        "recorded_max_tool_invocations": run.max_tool_invocations, "recorded": recorded,
    }  # fmt: skip
    if end.status is RunStatus.CENSORED or end.spent is None:
        return RunWhatIf(**base, status=RunStatus.CENSORED, cut=None, to_cut=None, draft_call=False, saved=None,
                         conclusion=None)  # fmt: skip
    if end.status is RunStatus.UNCHANGED or end.cut is None:
        zero = Counts(tool_invocations=0, model_calls=0, tokens=0)
        return RunWhatIf(**base, status=RunStatus.UNCHANGED, cut=None, to_cut=recorded, draft_call=False, saved=zero,
                         conclusion=None)  # fmt: skip
    spent = end.spent
    draft_call = end.cut.stop_reason is not StopReason.BUDGET_LIMIT_REACHED and (
        spent.model_calls < _known(run, run.max_model_calls) and spent.tokens < _known(run, run.max_total_tokens)
    )
    saved = Counts(
        tool_invocations=recorded.tool_invocations - spent.tool_invocations,
        model_calls=max(recorded.model_calls - spent.model_calls - int(draft_call), 0),
        tokens=recorded.tokens - spent.tokens,
    )
    return RunWhatIf(**base, status=RunStatus.CUT, cut=end.cut, to_cut=spent, draft_call=draft_call, saved=saved,
                     conclusion=_conclusion(run, end.executed))  # fmt: skip


def _conclusion(run: ReplayableRun, before_cut: frozenset[str]) -> ConclusionRisk:
    """Whether the run's published Draft cites a record the cut run would not have obtained."""
    if run.outcome != ReleaseOutcome.SUCCESS.value:
        return ConclusionRisk.NONE
    parsed = parse_draft(run.final_message) if run.final_message is not None else None
    if parsed is None or parsed.draft is None:
        return ConclusionRisk.UNKNOWN
    after = {e.tool_call_id for e in run.events if isinstance(e, ToolInvocation)} - before_cut
    cited = {c.tool_call_id for c in parsed.draft.citations}
    return ConclusionRisk.AT_RISK if cited & after else ConclusionRisk.KEPT


# -- the points -------------------------------------------------------------------------------------------------
def check_points(runs: Sequence[ReplayableRun], thresholds: Sequence[int], budgets: Sequence[int]) -> None:
    """Refuse what the selection cannot answer: no runs, runs without events, a threshold or tool budget that is
    not below the highest one the runs used (a what-if replays lower settings only)."""
    if not runs:
        raise WhatIfInputError("the selection holds no case runs")
    empty = [r.case_run_id for r in runs if not r.events]
    if empty:
        more = f" (and {len(empty) - 1} more)" if len(empty) > 1 else ""
        raise WhatIfInputError(f"case run {empty[0]}{more} has no stored events to replay")
    top = max(_known(r, r.no_gain_threshold) for r in runs)
    for t in thresholds:
        if t >= top:
            raise WhatIfInputError(
                f"--no-gain-threshold {t}: not below the threshold the selected runs used ({top}); a what-if"
                " replays lower thresholds only"
            )
    most = max(_known(r, r.max_tool_invocations) for r in runs)
    for n in budgets:
        if n >= most:
            raise WhatIfInputError(
                f"--max-tool-invocations {n}: not below the tool budget the selected runs used ({most}); a what-if"
                " replays lower budgets only"
            )


def _interval(values: Sequence[int]) -> tuple[float | None, float | None, float | None]:
    """Mean and its 95% t interval over runs (the case run is the unit)."""
    if not values:
        return None, None, None
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, None, None
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, n - 1)) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def _saving(values: Sequence[int], bound: Bound) -> Saving:
    mean, low, high = _interval(values)
    return Saving(total=sum(values), mean=mean, low=low, high=high, bound=bound)


def _point(runs: Sequence[ReplayableRun], threshold: int, budget: int | None) -> PointWhatIf:
    per_run = tuple(replay_run(r, threshold, budget) for r in runs)
    answered = [r.saved for r in per_run if r.saved is not None]
    cut = [r for r in per_run if r.status is RunStatus.CUT]
    tokens_bound = Bound.AT_MOST if any(r.draft_call for r in cut) else Bound.EXACT
    return PointWhatIf(
        no_gain_threshold=threshold,
        max_tool_invocations=budget,
        runs=len(per_run),
        runs_cut=len(cut),
        runs_censored=sum(r.status is RunStatus.CENSORED for r in per_run),
        conclusions_at_risk=sum(r.conclusion is ConclusionRisk.AT_RISK for r in cut),
        conclusions_unknown=sum(r.conclusion is ConclusionRisk.UNKNOWN for r in cut),
        tool_invocations=_saving([s.tool_invocations for s in answered], Bound.EXACT),
        model_calls=_saving([s.model_calls for s in answered], tokens_bound),
        tokens=_saving([s.tokens for s in answered], tokens_bound),
        per_run=per_run,
    )


def whatif(runs: Sequence[ReplayableRun], thresholds: Sequence[int], budgets: Sequence[int] = ()) -> WhatIf:
    """Every point (each threshold, with each tool budget or, without any, each run's own) over `runs`."""
    check_points(runs, thresholds, budgets)
    grid: list[int | None] = list(dict.fromkeys(sorted(budgets, reverse=True))) or [None]
    points = [
        _point(runs, t, n) for t in dict.fromkeys(sorted(thresholds, reverse=True)) for n in grid
    ]  # fmt: skip
    return WhatIf(points=tuple(points))
