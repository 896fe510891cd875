"""DiagnosisProgressTrackerTest (docs/architecture.md §14 row 1): NO_EVIDENCE accumulates NO_GAIN, GAINED resets."""

from __future__ import annotations

import threading

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from harness.contracts import (
    CollectionState,
    EvidenceStatus,
    GainProducer,
    InformationGain,
    StopReason,
    ViolationKind,
)
from harness.tracker import AdmissionKind, Completion, DiagnosisProgressTracker, PreviousObservation

NO_GAIN = InformationGain.NO_GAIN
GAINED = InformationGain.GAINED


def _execute(
    tr: DiagnosisProgressTracker, call_id: str, scope: str, evidence: EvidenceStatus, turn: int = 1
) -> Completion:
    prev = PreviousObservation(tr.pending, NO_GAIN) if tr.pending else None
    adm = tr.admit(call_id, "logs", scope, prev, turn=turn)
    assert adm.kind is AdmissionKind.EXECUTE, adm
    return tr.complete(call_id, "logs", scope, evidence, turn=turn)


def test_no_evidence_applies_no_gain_at_once_with_nothing_pending() -> None:
    tr = DiagnosisProgressTracker(3, 2)
    done = _execute(tr, "c1", "s1", EvidenceStatus.NO_EVIDENCE)
    assert done.gain is not None and done.gain.producer is GainProducer.HARNESS and done.gain.gain is NO_GAIN
    assert tr.pending is None
    assert tr.consecutive_no_gain == 1


def test_evidence_sets_pending_and_blocks_until_evaluated() -> None:
    tr = DiagnosisProgressTracker(2, 5)
    done = _execute(tr, "c1", "s1", EvidenceStatus.EVIDENCE)
    assert done.pending and tr.pending == "c1"
    adm = tr.admit("c2", "logs", "s2", None, turn=2)
    assert adm.kind is AdmissionKind.REJECT_VIOLATION
    assert adm.violation is not None and adm.violation.kind is ViolationKind.MISSING_PREVIOUS_OBSERVATION
    assert adm.expected_pending == "c1"
    assert tr.pending == "c1", "a rejected request must not clear the pending evaluation"


def test_gained_resets_consecutive_no_gain() -> None:
    tr = DiagnosisProgressTracker(2, 2)
    _execute(tr, "c1", "s1", EvidenceStatus.NO_EVIDENCE)
    assert tr.consecutive_no_gain == 1
    _execute(tr, "c2", "s2", EvidenceStatus.EVIDENCE)
    adm = tr.admit("c3", "logs", "s3", PreviousObservation("c2", GAINED), turn=2)
    assert adm.kind is AdmissionKind.EXECUTE
    assert [g.gain for g in adm.gains] == [GAINED] and adm.gains[0].producer is GainProducer.AGENT
    assert tr.consecutive_no_gain == 0
    tr.complete("c3", "logs", "s3", EvidenceStatus.NO_EVIDENCE, turn=2)
    assert tr.state is CollectionState.COLLECTING, "one NO_GAIN after a GAINED must not saturate at threshold 2"


def test_threshold_saturates_with_information_saturated_and_stop_required_once() -> None:
    tr = DiagnosisProgressTracker(2, 2)
    first = _execute(tr, "c1", "s1", EvidenceStatus.NO_EVIDENCE)
    assert not first.stop_required
    second = _execute(tr, "c2", "s2", EvidenceStatus.NO_EVIDENCE)
    assert second.stop_required and second.stop_reason is StopReason.INFORMATION_SATURATED
    assert tr.state is CollectionState.SATURATED and tr.stop_required_delivered
    same_turn = tr.admit("c3", "logs", "s3", None, turn=1)
    assert same_turn.kind is AdmissionKind.REJECT_SATURATED
    later = tr.admit("c4", "logs", "s4", None, turn=2)
    assert later.kind is AdmissionKind.STOPPED and tr.stopped


def test_agent_no_gain_reaching_threshold_returns_stop_required_instead_of_executing() -> None:
    tr = DiagnosisProgressTracker(2, 2)
    _execute(tr, "c1", "s1", EvidenceStatus.NO_EVIDENCE)
    _execute(tr, "c2", "s2", EvidenceStatus.EVIDENCE)
    adm = tr.admit("c3", "logs", "s3", PreviousObservation("c2", NO_GAIN), turn=3)
    assert adm.kind is AdmissionKind.STOP_REQUIRED
    assert adm.stop_reason is StopReason.INFORMATION_SATURATED


def test_duplicate_scope_is_harness_no_gain_and_never_executes() -> None:
    tr = DiagnosisProgressTracker(3, 2)
    _execute(tr, "c1", "same", EvidenceStatus.NO_EVIDENCE)
    adm = tr.admit("c2", "logs", "same", None, turn=2)
    assert adm.kind is AdmissionKind.REJECT_DUPLICATE and adm.duplicate_of == "c1"
    assert [(g.gain, g.producer) for g in adm.gains] == [(NO_GAIN, GainProducer.HARNESS)]
    assert tr.consecutive_no_gain == 2
    other_tool = tr.admit("c3", "kb", "same", None, turn=3)
    assert other_tool.kind is AdmissionKind.EXECUTE, "scope identity is tool_name + normalized_scope"


def test_failed_call_produces_no_gain_and_allows_retry_of_the_scope() -> None:
    tr = DiagnosisProgressTracker(2, 2)
    assert tr.admit("c1", "logs", "s", None, turn=1).kind is AdmissionKind.EXECUTE
    done = tr.complete("c1", "logs", "s", None, turn=1)
    assert done.gain is None and tr.consecutive_no_gain == 0 and tr.pending is None
    assert tr.admit("c2", "logs", "s", None, turn=2).kind is AdmissionKind.EXECUTE


@pytest.mark.parametrize("bad", [0, -1])
def test_thresholds_below_one_are_rejected(bad: int) -> None:
    with pytest.raises(ValueError, match="no_gain_threshold"):
        DiagnosisProgressTracker(bad, 2)
    with pytest.raises(ValueError, match="protocol_violation_threshold"):
        DiagnosisProgressTracker(2, bad)


def test_concurrent_completions_deliver_stop_required_exactly_once() -> None:
    """16 calls admitted before any completes, then completed in parallel: one STOP_REQUIRED."""
    tr = DiagnosisProgressTracker(1, 1)
    for i in range(16):
        assert tr.admit(f"c{i}", "logs", f"s{i}", None, turn=1).kind is AdmissionKind.EXECUTE
    flags: list[bool] = []
    lock = threading.Lock()
    barrier = threading.Barrier(16)

    def worker(i: int) -> None:
        barrier.wait()
        done = tr.complete(f"c{i}", "logs", f"s{i}", EvidenceStatus.NO_EVIDENCE, turn=1)
        with lock:
            flags.append(done.stop_required)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert flags.count(True) == 1
    assert tr.state is CollectionState.SATURATED and tr.consecutive_no_gain == 16


def test_concurrent_duplicate_admissions_execute_one_scope_once() -> None:
    tr = DiagnosisProgressTracker(100, 100)
    assert tr.admit("c0", "logs", "dup", None, turn=1).kind is AdmissionKind.EXECUTE
    tr.complete("c0", "logs", "dup", EvidenceStatus.NO_EVIDENCE, turn=1)
    kinds: list[AdmissionKind] = []
    lock = threading.Lock()
    barrier = threading.Barrier(12)

    def worker(i: int) -> None:
        barrier.wait()
        adm = tr.admit(f"c{i + 1}", "logs", "dup", None, turn=2)
        with lock:
            kinds.append(adm.kind)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert kinds == [AdmissionKind.REJECT_DUPLICATE] * 12
    assert tr.consecutive_no_gain == 13


def test_turn_is_required_so_a_caller_cannot_spin_after_stop_required() -> None:
    """With `turn` defaulted to 0 a caller was rejected forever, never stopped."""
    tr = DiagnosisProgressTracker(1, 1)
    with pytest.raises(TypeError, match="turn"):
        tr.admit("c1", "logs", "s1", None)  # type: ignore[call-arg]
    assert tr.admit("c1", "logs", "s1", None, turn=1).kind is AdmissionKind.EXECUTE
    assert tr.complete("c1", "logs", "s1", EvidenceStatus.NO_EVIDENCE, turn=1).stop_required
    assert tr.admit("c2", "logs", "s2", None, turn=1).kind is AdmissionKind.REJECT_SATURATED
    assert not tr.stopped
    assert tr.admit("c3", "logs", "s3", None, turn=2).kind is AdmissionKind.STOPPED
    assert tr.stopped


def test_a_call_queued_behind_a_same_turn_pending_call_awaits_without_any_count() -> None:
    tr = DiagnosisProgressTracker(2, 1)
    assert tr.admit("c1", "logs", "s1", None, turn=1).kind is AdmissionKind.EXECUTE
    assert tr.complete("c1", "logs", "s1", EvidenceStatus.EVIDENCE, turn=1).pending
    # the model could not have seen c1's result: even a "correct-looking" evaluation is not applied
    for i, prev in enumerate((None, PreviousObservation("c1", GAINED), PreviousObservation("x", NO_GAIN)), 2):
        adm = tr.admit(f"c{i}", "logs", f"s{i}", prev, turn=1)
        assert adm.kind is AdmissionKind.REJECT_AWAITING and adm.expected_pending == "c1"
        assert adm.gains == () and adm.violation is None
    assert (tr.pending, tr.consecutive_violations, tr.consecutive_no_gain) == ("c1", 0, 0)
    assert tr.state is CollectionState.COLLECTING
    # the next turn must evaluate c1 as usual; a missing evaluation is now a real violation
    assert tr.admit("c5", "logs", "s5", None, turn=2).kind is AdmissionKind.STOP_REQUIRED  # threshold 1
    assert tr.stop_reason is StopReason.PROGRESS_PROTOCOL_VIOLATED


def test_an_awaiting_call_reissued_next_turn_with_the_evaluation_executes() -> None:
    tr = DiagnosisProgressTracker(2, 2)
    tr.admit("c1", "logs", "s1", None, turn=1)
    tr.complete("c1", "logs", "s1", EvidenceStatus.EVIDENCE, turn=1)
    assert tr.admit("c2", "logs", "s2", None, turn=1).kind is AdmissionKind.REJECT_AWAITING
    adm = tr.admit("c3", "logs", "s2", PreviousObservation("c1", GAINED), turn=2)
    assert adm.kind is AdmissionKind.EXECUTE and [g.gain for g in adm.gains] == [GAINED]
    # the queued call's id was answered: reusing it is a violation
    tr.complete("c3", "logs", "s2", EvidenceStatus.NO_EVIDENCE, turn=2)
    reused = tr.admit("c2", "logs", "s9", None, turn=3)
    assert reused.kind is AdmissionKind.REJECT_VIOLATION
    assert reused.violation is not None and reused.violation.kind is ViolationKind.REUSED_TOOL_CALL_ID


def test_an_evaluation_echoed_by_later_calls_of_the_same_message_is_applied_once() -> None:
    tr = DiagnosisProgressTracker(5, 1)
    tr.admit("c1", "logs", "s1", None, turn=1)
    tr.complete("c1", "logs", "s1", EvidenceStatus.EVIDENCE, turn=1)
    first = tr.admit("c2", "logs", "s2", PreviousObservation("c1", NO_GAIN), turn=2)
    assert first.kind is AdmissionKind.EXECUTE and len(first.gains) == 1
    tr.complete("c2", "logs", "s2", EvidenceStatus.NO_EVIDENCE, turn=2)
    echo = tr.admit("c3", "logs", "s3", PreviousObservation("c1", NO_GAIN), turn=2)
    assert echo.kind is AdmissionKind.EXECUTE and echo.gains == ()
    assert tr.consecutive_no_gain == 2 and tr.consecutive_violations == 0
    # the same echo in a later message is what it is: an unexpected evaluation
    tr.complete("c3", "logs", "s3", EvidenceStatus.NO_EVIDENCE, turn=2)
    late = tr.admit("c4", "logs", "s4", PreviousObservation("c1", NO_GAIN), turn=3)
    assert late.violation is not None and late.violation.kind is ViolationKind.UNEXPECTED_PREVIOUS_OBSERVATION


def test_gained_resets_the_no_gain_count_after_several_no_gains() -> None:
    t = DiagnosisProgressTracker(no_gain_threshold=3, protocol_violation_threshold=2)
    gains = [InformationGain.NO_GAIN, InformationGain.NO_GAIN, InformationGain.GAINED, InformationGain.NO_GAIN]
    prev: PreviousObservation | None = None
    for i, gain in enumerate([*gains, InformationGain.NO_GAIN], start=1):
        admission = t.admit(f"c{i}", "lookup", f"q{i}", prev, turn=i)
        assert admission.kind.value == "EXECUTE", f"call {i}: {admission.kind}"
        t.complete(f"c{i}", "lookup", f"q{i}", EvidenceStatus.EVIDENCE, turn=i)
        prev = PreviousObservation(f"c{i}", gain)
    # NO_GAIN, NO_GAIN, GAINED (reset to 0), NO_GAIN: one, not two
    assert t.consecutive_no_gain == 1
    assert t.stop_reason is None


# -- the consecutive NO_GAIN counter and STOP_REQUIRED-once, as a state machine ----------------------------------------
class NoGainCounterMachine(RuleBasedStateMachine):
    """One request per turn, against a model of docs/architecture.md §5: every NO_GAIN (the Harness's for an empty
    result or a duplicate scope, the agent's evaluation) counts, GAINED resets, a failed call counts nothing; reaching
    the threshold saturates with INFORMATION_SATURATED and delivers STOP_REQUIRED exactly once; every later request is
    a controlled stop."""

    @initialize(threshold=st.integers(1, 4))
    def start(self, threshold: int) -> None:
        self.threshold = threshold
        self.tracker = DiagnosisProgressTracker(threshold, 100)
        self.turn = 0
        self.count = 0
        self.pending: str | None = None
        self.completed: list[str] = []
        self.saturated = False
        self.stop_required_seen = 0

    def _no_gain(self) -> bool:
        """Count one NO_GAIN in the model; True when it saturates the run."""
        self.count += 1
        if self.count >= self.threshold and not self.saturated:
            self.saturated = True
            return True
        return False

    @rule(
        gain=st.sampled_from(InformationGain),
        evidence=st.sampled_from([EvidenceStatus.EVIDENCE, EvidenceStatus.NO_EVIDENCE, None]),
        duplicate=st.booleans(),
    )
    def request(self, gain: InformationGain, evidence: EvidenceStatus | None, duplicate: bool) -> None:
        self.turn += 1
        call_id = f"c{self.turn}"
        scope = self.completed[0] if duplicate and self.completed else f"s{self.turn}"
        prev = PreviousObservation(self.pending, gain) if self.pending else None
        adm = self.tracker.admit(call_id, "logs", scope, prev, turn=self.turn)
        if self.saturated:
            assert adm.kind is AdmissionKind.STOPPED and self.tracker.stopped
            return
        if prev is not None:
            self.pending = None
            if gain is InformationGain.GAINED:
                self.count = 0
            elif self._no_gain():
                assert adm.kind is AdmissionKind.STOP_REQUIRED, adm
                self.stop_required_seen += 1
                return
        if scope in self.completed:
            if self._no_gain():
                assert adm.kind is AdmissionKind.STOP_REQUIRED and adm.trigger is AdmissionKind.REJECT_DUPLICATE
                self.stop_required_seen += 1
            else:
                assert adm.kind is AdmissionKind.REJECT_DUPLICATE, adm
            return
        assert adm.kind is AdmissionKind.EXECUTE, adm
        done = self.tracker.complete(call_id, "logs", scope, evidence, turn=self.turn)
        if evidence is not None:
            self.completed.append(scope)
        if evidence is EvidenceStatus.EVIDENCE:
            self.pending = call_id
            assert done.pending and not done.stop_required
        elif evidence is EvidenceStatus.NO_EVIDENCE:
            saturates = self._no_gain()
            assert done.stop_required is saturates
            self.stop_required_seen += saturates
        else:
            assert done == Completion(None, False, False), "a failed call is never NO_GAIN"

    @invariant()
    def counter_matches_the_model(self) -> None:
        if hasattr(self, "tracker"):
            assert self.tracker.consecutive_no_gain == self.count
            assert self.tracker.pending == self.pending

    @invariant()
    def stop_required_at_most_once_and_only_when_saturated(self) -> None:
        if hasattr(self, "tracker"):
            assert self.stop_required_seen == int(self.saturated) <= 1
            assert self.tracker.stop_required_delivered is self.saturated
            assert (self.tracker.state is CollectionState.SATURATED) is self.saturated
            expected = StopReason.INFORMATION_SATURATED if self.saturated else None
            assert self.tracker.stop_reason is expected


TestNoGainCounterMachine = NoGainCounterMachine.TestCase
TestNoGainCounterMachine.settings = settings(max_examples=150, stateful_step_count=25, deadline=None)
