"""The audit trace: typed metadata events, never raw payloads (BRIEF §6)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from harness.contracts import (
    BudgetKind,
    EvidenceStatus,
    FallbackKind,
    GainProducer,
    GuardName,
    InformationGain,
    InvocationStatus,
    ModelErrorKind,
    ModelPurpose,
    RejectionReason,
    ReleaseOutcome,
    SemanticVerdict,
    StopReason,
    ViolationKind,
    _StrEnum,
)


class EventKind(_StrEnum):
    """Every kind of event a run can log."""

    RUN_STARTED = "RUN_STARTED"
    MODEL_CALL = "MODEL_CALL"
    TOOL_INVOCATION = "TOOL_INVOCATION"
    TOOL_REQUEST_REJECTED = "TOOL_REQUEST_REJECTED"
    GAIN_APPLIED = "GAIN_APPLIED"
    STOP_REQUIRED_DELIVERED = "STOP_REQUIRED_DELIVERED"
    COLLECTION_STOPPED = "COLLECTION_STOPPED"
    BUDGET_EXHAUSTED = "BUDGET_EXHAUSTED"
    DRAFT_RECEIVED = "DRAFT_RECEIVED"
    GUARD_VERDICT = "GUARD_VERDICT"
    RELEASED = "RELEASED"


@dataclass(frozen=True, slots=True)
class TraceEvent:
    """One audit record. Fields not relevant to a kind stay None."""

    seq: int
    """Position in the run's trace, from 0."""
    kind: EventKind
    """What happened."""
    t_ms: float
    """Milliseconds since the run started."""
    tool_call_id: str | None = None
    """The tool call this event is about."""
    tool: str | None = None
    """Tool name for tool events."""
    scope: str | None = None
    """Normalised scope for tool events."""
    invocation_status: InvocationStatus | None = None
    """COMPLETED / FAILED for TOOL_INVOCATION, REJECTED for rejections."""
    evidence_status: EvidenceStatus | None = None
    """EVIDENCE / NO_EVIDENCE of a completed invocation."""
    count: int | None = None
    """Records returned by the backend."""
    truncated: bool | None = None
    """Whether the observation or result was cut."""
    observation_bytes: int | None = None
    """Size of the observation handed to the model."""
    rejection: RejectionReason | None = None
    """Why a request was rejected."""
    violation: ViolationKind | None = None
    """The protocol violation kind, for protocol rejections."""
    gain: InformationGain | None = None
    """Applied gain value."""
    producer: GainProducer | None = None
    """Who produced the gain."""
    stop_reason: StopReason | None = None
    """Stop reason for STOP_REQUIRED / COLLECTION_STOPPED / RELEASED."""
    budget: BudgetKind | None = None
    """Which budget ran out."""
    purpose: ModelPurpose | None = None
    """Diagnosis loop or semantic guard, for MODEL_CALL."""
    attempt: int | None = None
    """Attempt number of a model call, from 1."""
    input_tokens: int | None = None
    """Prompt tokens reported by the model endpoint."""
    output_tokens: int | None = None
    """Completion tokens reported by the model endpoint."""
    latency_ms: float | None = None
    """Duration of the model call or tool invocation."""
    error_kind: ModelErrorKind | None = None
    """Classification of a failed model call."""
    guard: GuardName | None = None
    """Which guard gave a verdict."""
    verdict: SemanticVerdict | None = None
    """The guard verdict (EvidenceGuard maps pass/fail to SUPPORTED/UNSUPPORTED)."""
    outcome: ReleaseOutcome | None = None
    """The released outcome."""
    fallback_kind: FallbackKind | None = None
    """The released fallback kind."""
    detail: str | None = None
    """A short human-readable note (error message, violation text); never payload data."""


class Trace:
    """Append-only event log of one run; safe to append from several threads."""

    __slots__ = ("_events", "_lock", "_t0")

    def __init__(self) -> None:
        self._events: list[TraceEvent] = []
        self._lock = threading.Lock()
        self._t0 = time.perf_counter()

    def emit(self, kind: EventKind, **fields: object) -> TraceEvent:
        """Append an event of `kind` with the given metadata fields."""
        with self._lock:
            event = TraceEvent(
                len(self._events),
                kind,
                round((time.perf_counter() - self._t0) * 1000.0, 3),
                **fields,  # type: ignore[arg-type]
            )
            self._events.append(event)
        return event

    @property
    def events(self) -> tuple[TraceEvent, ...]:
        """A snapshot of the events so far."""
        with self._lock:
            return tuple(self._events)

    def of(self, kind: EventKind) -> list[TraceEvent]:
        """Events of one kind, in order."""
        return [e for e in self.events if e.kind is kind]

    def __iter__(self) -> Iterator[TraceEvent]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self._events)
