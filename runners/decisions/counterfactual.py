"""The counterfactual core: a stored run replayed under a stop rule, exact up to its cut.

A stop rule only stops a run; it never changes what the model saw before the stop. So up to the first place a rule
would stop a stored run, the run is the recorded run and everything before that place is known; after it, what the
model would have written is not (UNKNOWN), and where the recorded run stopped but the rule would have gone on, what
it would have done next was never recorded (CENSORED). `what-if` (lower NO_GAIN thresholds and tool budgets),
`compare-stops` (every declared stop policy) and the real-models report read a run this way, through here:

- `spent_before` / `recorded_counts`: the one walk of a stored trace that counts what a run spent (tool
  invocations, diagnosis model calls and their tokens, tool requests, whether a call completed) before an event;
- `replay_run`: the run's tool requests replayed, in trace order, through the real `DiagnosisProgressTracker` at a
  threshold and a tool budget — the agent's recorded evaluations (`GAIN_APPLIED` by the agent) ride on the next
  request as its `previous_observation`, recorded protocol violations are handed in as they were found, completed
  invocations are completed with their recorded evidence. The run is CUT where the tracker delivers STOP_REQUIRED
  earlier (no backend call follows; the model gets the one call STOP_REQUIRED allows for its Draft, whose content
  and tokens are not known) or where the tool budget is used up first (BUDGET_LIMIT_REACHED: no model call
  follows); UNCHANGED where it reaches its recorded end with the tracker agreeing; CENSORED where it stopped but
  the point would have let it go on;
- `draft_call_allowed`: whether the model still gets its Draft call after a STOP_REQUIRED cut (the recorded
  budgets, and a policy's caps, leave room for it);
- `unreplayable`: why a selection cannot be replayed at all (no runs, runs without events); `recorded_limit`: a
  limit the run recorded, else ReplayError (another agent's run, imported from its trace, recorded none: it has
  no contract to replay through the tracker — compare-stops infers it, `runners/decisions/_inferred_contract.py`).

Pure: stored runs in (`runners.store.replayable_runs`), typed results out; no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from harness import (
    AdmissionKind,
    BudgetExhausted,
    CollectionStopped,
    DiagnosisProgressTracker,
    DraftReceived,
    GainApplied,
    GainProducer,
    HarnessControl,
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
from runners.decisions._model import Frozen
from runners.domain.stop_rules import StopRule
from runners.store.replayable_runs import ReplayableRun

__all__ = [
    "ConclusionRisk",
    "Counts",
    "CutPoint",
    "ReplayError",
    "RunStatus",
    "RunWhatIf",
    "Spent",
    "draft_call_allowed",
    "recorded_counts",
    "replay_run",
    "spent_before",
    "unreplayable",
]


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


class Counts(Frozen):
    """What a run spends."""

    tool_invocations: int
    """Backend tool invocations."""
    model_calls: int
    """Diagnosis-loop model call attempts."""
    tokens: int
    """Input plus output tokens of those calls."""


class CutPoint(Frozen):
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


class RunWhatIf(Frozen):
    """One run at one point."""

    case_run_id: str
    """The case run."""
    case_id: str
    """Its case."""
    epoch: int
    """Its epoch."""
    recorded_no_gain_threshold: int | None
    """The threshold it ran with (None: not recorded)."""
    recorded_max_tool_invocations: int | None
    """The tool budget it ran with (None: not recorded)."""
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


# -- what a run spent -----------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Spent:
    """What a stored run spent before an event."""

    counts: Counts
    """Tool invocations, diagnosis model calls and their tokens."""
    requests: int
    """Tool requests decided (run or refused)."""
    facts: bool
    """A call completed (Release has a verified fact to publish a fallback from)."""


def spent_before(events: Sequence[TraceEvent], seq: int | None = None) -> Spent:
    """What the run spent before the event `seq` (None: the whole run)."""
    tools = calls = tokens = requests = 0
    facts = False
    for e in events:
        if seq is not None and e.seq >= seq:
            break
        if isinstance(e, ModelCall) and e.purpose is ModelPurpose.DIAGNOSIS:
            calls += 1
            tokens += (e.input_tokens or 0) + (e.output_tokens or 0)
        elif isinstance(e, ToolInvocation):
            tools += 1
            requests += 1
            facts = facts or e.invocation_status is InvocationStatus.COMPLETED
        elif isinstance(e, ToolRequestRejected):
            requests += 1
    return Spent(Counts(tool_invocations=tools, model_calls=calls, tokens=tokens), requests, facts)


def recorded_counts(events: Sequence[TraceEvent]) -> Counts:
    """What a run spent, from its trace."""
    return spent_before(events).counts


def draft_call_allowed(run: ReplayableRun, spent: Counts, policy: StopRule | None = None) -> bool:
    """Whether the model gets its Draft call after a STOP_REQUIRED cut: the recorded budgets (and the `policy`'s
    caps) leave room for it (the deadline and the observation-byte budget are assumed to)."""
    calls, tokens = run.max_model_calls, run.max_total_tokens  # None: not recorded (another agent's run)
    if (calls is not None and spent.model_calls >= calls) or (tokens is not None and spent.tokens >= tokens):
        return False
    rules = () if policy is None else policy.call_rules
    return not any(rule.stops_model_call(spent.model_calls, spent.tokens) for rule in rules)


def recorded_limit(run: ReplayableRun, limit: int | None) -> int:
    """`limit`, one of the run's recorded thresholds or budgets; ReplayError when it recorded none."""
    if limit is None:
        raise ReplayError(f"case run {run.case_run_id} records no thresholds or budgets (another agent's run,"
                          " imported from its trace): it has no information-gain contract to replay; compare caps,"
                          " loop detectors and the inferred contract on it with compare-stops")  # fmt: skip
    return limit


def unreplayable(runs: Sequence[ReplayableRun], purpose: str) -> str | None:
    """Why the selection cannot be replayed (no runs, a run without stored events; `purpose` ends the line), or
    None."""
    if not runs:
        return "the selection holds no case runs"
    empty = [r.case_run_id for r in runs if not r.events]
    if empty:
        more = f" (and {len(empty) - 1} more)" if len(empty) > 1 else ""
        return f"case run {empty[0]}{more} has no stored events {purpose}"
    # The replay re-decides each request through the tracker as it ships; a run without the envelope (no gain
    # evaluations) or without duplicate rejection was admitted by other rules, so no replay of it is exact.
    off = next((r for r in runs if r.ablate in _TRACKER_CONTROLS), None)
    if off is not None:
        return (f"case run {off.case_run_id} ran with --ablate {off.ablate}: the tracker it would be replayed through"
                f" decides with that control on, so there is nothing exact {purpose}")  # fmt: skip
    return None


_TRACKER_CONTROLS = frozenset({HarnessControl.ENVELOPE, HarnessControl.DUPLICATE_REJECTION})
"""The controls the tracker's own decisions depend on (the guards act after the loop, which a replay does not)."""


# -- through the tracker --------------------------------------------------------------------------------------------
@dataclass(slots=True)
class _Running:
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


def _replay(run: ReplayableRun, threshold: int, budget: int) -> _End:
    """Walk the run's requests through a tracker at `threshold` and a tool budget of `budget`."""
    events = run.events
    stop_ids = {e.tool_call_id for e in events if isinstance(e, StopRequiredDelivered)}
    budget_ids = {e.tool_call_id for e in events if isinstance(e, BudgetExhausted) and e.tool_call_id is not None}
    tracker = DiagnosisProgressTracker(threshold, recorded_limit(run, run.protocol_violation_threshold))
    spent = _Running()
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
            if spent.tools >= budget or spent.tools < recorded_limit(run, run.max_tool_invocations):  # not by tools
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
    """One run through the real tracker at `no_gain_threshold` and a tool budget of `max_tool_invocations` (None:
    the run's own), exact up to where it decides otherwise than the recorded run (the module docstring)."""
    budget = recorded_limit(run, run.max_tool_invocations) if max_tool_invocations is None else max_tool_invocations
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
    draft_call = end.cut.stop_reason is not StopReason.BUDGET_LIMIT_REACHED and draft_call_allowed(run, spent)
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
