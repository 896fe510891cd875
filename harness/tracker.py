"""DiagnosisProgressTracker: the information-gain state machine (docs/architecture.md §5).

It keeps only identities and counters — never requests, raw results or model thoughts, which
live in the canonical store. Every transition happens under one lock, so an admission decision
is atomic even if several threads share a run.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from enum import StrEnum

from harness.contracts import (
    CollectionState,
    EvidenceStatus,
    GainProducer,
    InformationGain,
    StopReason,
    ViolationKind,
)


class AdmissionKind(StrEnum):
    """What the tracker allows for one tool request."""

    EXECUTE = "EXECUTE"
    REJECT_VIOLATION = "REJECT_VIOLATION"
    REJECT_DUPLICATE = "REJECT_DUPLICATE"
    REJECT_SATURATED = "REJECT_SATURATED"
    REJECT_AWAITING = "REJECT_AWAITING"
    STOP_REQUIRED = "STOP_REQUIRED"
    STOPPED = "STOPPED"


@dataclass(frozen=True, slots=True)
class PreviousObservation:
    """The model's evaluation of the pending observation, from the tool envelope."""

    tool_call_id: str
    """The call being evaluated."""
    information_gain: InformationGain
    """The model's verdict on it."""


@dataclass(frozen=True, slots=True)
class Violation:
    """One protocol violation with what a corrective observation needs to say."""

    kind: ViolationKind
    """The violation type."""
    message: str
    """What is wrong, for the model."""
    missing_field: str | None = None
    """The field that is missing, if any."""


@dataclass(frozen=True, slots=True)
class AppliedGain:
    """A gain value applied to a call."""

    tool_call_id: str
    """The call the gain is about."""
    gain: InformationGain
    """The value."""
    producer: GainProducer
    """Harness (empty or duplicate) or Agent (its evaluation)."""


@dataclass(frozen=True, slots=True)
class Admission:
    """The tracker's decision on a tool request, plus what changed while deciding."""

    kind: AdmissionKind
    """The decision."""
    gains: tuple[AppliedGain, ...] = ()
    """Gains applied while deciding (the agent's evaluation, a duplicate's NO_GAIN)."""
    violation: Violation | None = None
    """The violation, for protocol rejections (and a protocol STOP_REQUIRED)."""
    expected_pending: str | None = None
    """The call id the model had to evaluate."""
    stop_reason: StopReason | None = None
    """Set with STOP_REQUIRED and STOPPED."""
    duplicate_of: str | None = None
    """The completed call with the same tool and scope."""
    trigger: AdmissionKind | None = None
    """For STOP_REQUIRED: what saturated the run (violation, duplicate, or None for a NO_GAIN)."""


@dataclass(frozen=True, slots=True)
class Completion:
    """What completing a backend call changed."""

    gain: AppliedGain | None
    """NO_GAIN applied by the Harness for an empty result."""
    pending: bool
    """True when the result now waits for the model's evaluation."""
    stop_required: bool
    """True when this completion saturated the run and STOP_REQUIRED must ride along."""
    stop_reason: StopReason | None = None
    """INFORMATION_SATURATED when stop_required."""


@dataclass(slots=True)
class _State:
    completed_scopes: dict[tuple[str, str], str] = field(default_factory=dict)
    completed_ids: set[str] = field(default_factory=set)
    seen_ids: set[str] = field(default_factory=set)
    pending: str | None = None
    pending_turn: int | None = None
    evaluated_in_turn: dict[str, int] = field(default_factory=dict)
    consecutive_no_gain: int = 0
    consecutive_violations: int = 0
    state: CollectionState = CollectionState.COLLECTING
    stop_reason: StopReason | None = None
    stop_required_delivered: bool = False
    delivered_turn: int | None = None
    stopped: bool = False


class DiagnosisProgressTracker:
    """Per-run progress state; thresholds come from HarnessConfig and never reach the model."""

    def __init__(
        self,
        no_gain_threshold: int,
        protocol_violation_threshold: int,
        *,
        contract: bool = True,
        reject_duplicates: bool = True,
    ) -> None:
        """`contract`: False runs without the information-gain contract (nothing pending, no NO_GAIN counted);
        `reject_duplicates`: False lets a completed tool and scope run again (both only ever off for an ablation)."""
        if no_gain_threshold < 1:
            raise ValueError(f"no_gain_threshold must be >= 1, got {no_gain_threshold}")
        if protocol_violation_threshold < 1:
            raise ValueError(f"protocol_violation_threshold must be >= 1, got {protocol_violation_threshold}")
        self._no_gain_threshold = no_gain_threshold
        self._violation_threshold = protocol_violation_threshold
        self._contract = contract
        self._reject_duplicates = reject_duplicates
        self._s = _State()
        self._lock = threading.Lock()

    # -- read-only views -------------------------------------------------------------------
    @property
    def state(self) -> CollectionState:
        """COLLECTING or SATURATED."""
        return self._s.state

    @property
    def stop_reason(self) -> StopReason | None:
        """Why the run saturated, if it did."""
        return self._s.stop_reason

    @property
    def pending(self) -> str | None:
        """The call id whose observation awaits the model's evaluation."""
        return self._s.pending

    @property
    def consecutive_no_gain(self) -> int:
        """Current run of NO_GAIN observations."""
        return self._s.consecutive_no_gain

    @property
    def consecutive_violations(self) -> int:
        """Current run of protocol violations."""
        return self._s.consecutive_violations

    @property
    def stop_required_delivered(self) -> bool:
        """Whether STOP_REQUIRED has been handed to the model (at most once)."""
        return self._s.stop_required_delivered

    @property
    def stopped(self) -> bool:
        """Whether the collection ended in a controlled stop."""
        return self._s.stopped

    @property
    def completed_call_ids(self) -> frozenset[str]:
        """Ids of calls that completed at the backend."""
        with self._lock:
            return frozenset(self._s.completed_ids)

    # -- transitions ------------------------------------------------------------------------
    def admit(
        self,
        call_id: str,
        tool: str | None,
        scope: str | None,
        previous: PreviousObservation | None,
        *,
        structural: Violation | None = None,
        input_problem: Violation | None = None,
        turn: int,
    ) -> Admission:
        """Decide one tool request: reject, stop, or allow the backend call.

        `turn` numbers the assistant message the request came in (required: a STOP_REQUIRED only
        turns into a controlled stop in a *later* turn, so a caller that never advanced it would
        be rejected forever). `structural` is a violation found while parsing the envelope
        (malformed, unknown tool, bad gain value); `input_problem` one found validating the
        business input. Both are checked in the seed's order around the pending-evaluation check.
        """
        with self._lock:
            s = self._s
            if s.state is CollectionState.SATURATED:
                if s.stop_required_delivered and (s.delivered_turn is None or turn > s.delivered_turn):
                    s.stopped = True
                    return Admission(AdmissionKind.STOPPED, stop_reason=s.stop_reason)
                if not s.stop_required_delivered:
                    return self._deliver(turn, AdmissionKind.STOP_REQUIRED, ())
                return Admission(AdmissionKind.REJECT_SATURATED, stop_reason=s.stop_reason)

            if s.pending is not None and s.pending_turn == turn:
                # Queued in the same assistant message behind a call whose result is now pending:
                # the model cannot have evaluated what it has not seen. Not a violation, no gain.
                s.seen_ids.add(call_id)
                return Admission(AdmissionKind.REJECT_AWAITING, expected_pending=s.pending)
            if previous is not None and s.evaluated_in_turn.get(previous.tool_call_id) == turn:
                # A later call of the same message repeating the evaluation an earlier one already
                # gave (parallel calls copy the envelope): applied once, the echo is ignored.
                previous = None

            violation = self._find_violation(call_id, previous, structural, input_problem)
            s.seen_ids.add(call_id)
            if violation is not None:
                s.consecutive_violations += 1
                if s.consecutive_violations >= self._violation_threshold:
                    self._saturate(StopReason.PROGRESS_PROTOCOL_VIOLATED)
                    admission = self._deliver(turn, AdmissionKind.REJECT_VIOLATION, ())
                    return Admission(
                        admission.kind,
                        violation=violation,
                        expected_pending=s.pending,
                        stop_reason=admission.stop_reason,
                        trigger=AdmissionKind.REJECT_VIOLATION,
                    )
                return Admission(AdmissionKind.REJECT_VIOLATION, violation=violation, expected_pending=s.pending)

            s.consecutive_violations = 0
            gains: list[AppliedGain] = []
            if previous is not None:
                gains.append(AppliedGain(previous.tool_call_id, previous.information_gain, GainProducer.AGENT))
                s.pending = None
                s.evaluated_in_turn[previous.tool_call_id] = turn
                if self._apply(previous.information_gain):
                    return self._deliver(turn, None, tuple(gains))

            assert tool is not None and scope is not None  # a valid request has both
            duplicate_of = s.completed_scopes.get((tool, scope)) if self._reject_duplicates else None
            if duplicate_of is not None and not self._contract:  # rejected, but no gain without the contract
                return Admission(AdmissionKind.REJECT_DUPLICATE, duplicate_of=duplicate_of)
            if duplicate_of is not None:
                gains.append(AppliedGain(call_id, InformationGain.NO_GAIN, GainProducer.HARNESS))
                if self._apply(InformationGain.NO_GAIN):
                    admission = self._deliver(turn, AdmissionKind.REJECT_DUPLICATE, tuple(gains))
                    return Admission(
                        admission.kind,
                        gains=admission.gains,
                        stop_reason=admission.stop_reason,
                        duplicate_of=duplicate_of,
                        trigger=AdmissionKind.REJECT_DUPLICATE,
                    )
                return Admission(AdmissionKind.REJECT_DUPLICATE, gains=tuple(gains), duplicate_of=duplicate_of)
            return Admission(AdmissionKind.EXECUTE, gains=tuple(gains))

    def complete(
        self, call_id: str, tool: str, scope: str, evidence: EvidenceStatus | None, *, turn: int
    ) -> Completion:
        """Record a backend call's end. `evidence` None means the call failed (no gain at all)."""
        with self._lock:
            s = self._s
            if evidence is None:
                return Completion(None, False, False)
            s.completed_scopes[(tool, scope)] = call_id
            s.completed_ids.add(call_id)
            if not self._contract:  # nothing waits for an evaluation, an empty result is no NO_GAIN
                return Completion(None, False, False)
            if evidence is EvidenceStatus.EVIDENCE:
                s.pending = call_id
                s.pending_turn = turn
                return Completion(None, True, False)
            gain = AppliedGain(call_id, InformationGain.NO_GAIN, GainProducer.HARNESS)
            if self._apply(InformationGain.NO_GAIN):
                self._deliver(turn, None, ())
                return Completion(gain, False, True, s.stop_reason)
            return Completion(gain, False, False)

    def stop_for_budget(self) -> None:
        """Mark a controlled stop caused by a hard budget (the run ends with no extra model call)."""
        with self._lock:
            if self._s.stop_reason is None:
                self._s.stop_reason = StopReason.BUDGET_LIMIT_REACHED
            self._s.stopped = True

    # -- internals (lock held) ----------------------------------------------------------------
    def _find_violation(
        self,
        call_id: str,
        previous: PreviousObservation | None,
        structural: Violation | None,
        input_problem: Violation | None,
    ) -> Violation | None:
        s = self._s
        if call_id in s.seen_ids:
            return Violation(ViolationKind.REUSED_TOOL_CALL_ID, f"tool_call_id {call_id!r} was already used")
        if structural is not None:
            return structural
        if s.pending is not None:
            if previous is None:
                return Violation(
                    ViolationKind.MISSING_PREVIOUS_OBSERVATION,
                    f"the observation of {s.pending} must be evaluated in previous_observation",
                    missing_field="previous_observation",
                )
            if previous.tool_call_id != s.pending:
                return Violation(
                    ViolationKind.WRONG_TOOL_CALL_ID,
                    f"previous_observation.tool_call_id is {previous.tool_call_id!r}, expected {s.pending!r}",
                )
        elif previous is not None:
            return Violation(
                ViolationKind.UNEXPECTED_PREVIOUS_OBSERVATION,
                "no observation is waiting for evaluation; omit previous_observation",
            )
        return input_problem

    def _apply(self, gain: InformationGain) -> bool:
        """Apply a gain; True only on the transition to SATURATED (so STOP_REQUIRED goes out once
        even when calls admitted concurrently complete after saturation)."""
        s = self._s
        if gain is InformationGain.GAINED:
            s.consecutive_no_gain = 0
            return False
        s.consecutive_no_gain += 1
        if s.consecutive_no_gain >= self._no_gain_threshold and s.state is CollectionState.COLLECTING:
            self._saturate(StopReason.INFORMATION_SATURATED)
            return True
        return False

    def _saturate(self, reason: StopReason) -> None:
        s = self._s
        s.state = CollectionState.SATURATED
        if s.stop_reason is None:
            s.stop_reason = reason

    def _deliver(self, turn: int, trigger: AdmissionKind | None, gains: tuple[AppliedGain, ...]) -> Admission:
        s = self._s
        s.stop_required_delivered = True
        s.delivered_turn = turn
        return Admission(AdmissionKind.STOP_REQUIRED, gains=gains, stop_reason=s.stop_reason, trigger=trigger)
