"""The audit trace: typed metadata events, never raw payloads (docs/architecture.md §6.3).

One frozen dataclass per event kind; `Trace.emit(event)` stamps its position and time. Consumers
pattern-match on the classes (`match e: case ToolInvocation(scope=s): ...`); `EVENT_TYPES` lists every class.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar, TypeVar

from harness.contracts import (
    BudgetKind,
    EvidenceCheck,
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
)

__all__ = [
    "EVENT_TYPES",
    "BudgetExhausted",
    "CollectionStopped",
    "DraftReceived",
    "EventKind",
    "EvidenceChecked",
    "GainApplied",
    "GuardVerdict",
    "ModelCall",
    "Released",
    "RunStarted",
    "StopRequiredDelivered",
    "ToolInvocation",
    "ToolRequestRejected",
    "Trace",
    "TraceEvent",
]


class EventKind(StrEnum):
    """Every kind of event a run can log (one event class each)."""

    RUN_STARTED = "RUN_STARTED"
    MODEL_CALL = "MODEL_CALL"
    TOOL_INVOCATION = "TOOL_INVOCATION"
    TOOL_REQUEST_REJECTED = "TOOL_REQUEST_REJECTED"
    GAIN_APPLIED = "GAIN_APPLIED"
    STOP_REQUIRED_DELIVERED = "STOP_REQUIRED_DELIVERED"
    COLLECTION_STOPPED = "COLLECTION_STOPPED"
    BUDGET_EXHAUSTED = "BUDGET_EXHAUSTED"
    DRAFT_RECEIVED = "DRAFT_RECEIVED"
    EVIDENCE_CHECKED = "EVIDENCE_CHECKED"
    GUARD_VERDICT = "GUARD_VERDICT"
    RELEASED = "RELEASED"


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceEvent:
    """What every audit record has: its position and time (stamped by `Trace.emit`)."""

    kind: ClassVar[EventKind]
    """What happened (fixed per event class)."""
    seq: int = -1
    """Position in the run's trace, from 0 (-1 until emitted)."""
    t_ms: float = 0.0
    """Milliseconds since the run started."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStarted(TraceEvent):
    """A run began."""

    kind: ClassVar[EventKind] = EventKind.RUN_STARTED
    model: str
    """The diagnosis model's name."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCall(TraceEvent):
    """One model call attempt (diagnosis loop or SemanticGuard), answered or failed."""

    kind: ClassVar[EventKind] = EventKind.MODEL_CALL
    purpose: ModelPurpose
    """Diagnosis loop or semantic guard."""
    attempt: int
    """Attempt number of this call, from 1."""
    latency_ms: float
    """Duration of the attempt."""
    input_tokens: int | None = None
    """Prompt tokens reported by the endpoint (None when the attempt failed)."""
    output_tokens: int | None = None
    """Completion tokens reported by the endpoint (None when the attempt failed)."""
    error_kind: ModelErrorKind | None = None
    """Classification of a failed attempt (None when answered)."""
    detail: str | None = None
    """The failure message of a failed attempt."""
    text_tool_calls: int = 0
    """Tool calls the client read from the reply's text (`ToolCallFormat.JSON`), not from `tool_calls`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolInvocation(TraceEvent):
    """An admitted tool request reached the backend (completed or failed)."""

    kind: ClassVar[EventKind] = EventKind.TOOL_INVOCATION
    tool_call_id: str
    """The tool call invoked."""
    tool: str
    """Tool name."""
    scope: str
    """Normalised scope."""
    invocation_status: InvocationStatus
    """COMPLETED or FAILED."""
    observation_bytes: int
    """Size of the observation handed to the model."""
    latency_ms: float
    """Duration of the backend call."""
    evidence_status: EvidenceStatus | None = None
    """EVIDENCE / NO_EVIDENCE of a completed invocation (None when it failed)."""
    count: int | None = None
    """Records returned by the backend (None when it failed)."""
    truncated: bool | None = None
    """Whether the observation was cut (None when it failed)."""
    detail: str | None = None
    """The failure message of a failed invocation."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolRequestRejected(TraceEvent):
    """A tool request the Harness answered without running it."""

    kind: ClassVar[EventKind] = EventKind.TOOL_REQUEST_REJECTED
    tool_call_id: str
    """The tool call rejected."""
    tool: str
    """The requested tool name (as sent, cut to 100 characters)."""
    rejection: RejectionReason
    """Why it was rejected."""
    scope: str | None = None
    """Normalised scope, when the input was valid."""
    violation: ViolationKind | None = None
    """The protocol violation kind, for protocol rejections."""
    detail: str | None = None
    """The violation text, for protocol rejections."""
    invocation_status: InvocationStatus = InvocationStatus.REJECTED
    """Always REJECTED (the column shared with TOOL_INVOCATION)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GainApplied(TraceEvent):
    """An information gain was applied to a pending invocation."""

    kind: ClassVar[EventKind] = EventKind.GAIN_APPLIED
    tool_call_id: str
    """The invocation the gain was applied to."""
    gain: InformationGain
    """The gain value."""
    producer: GainProducer
    """Who produced it (the agent's envelope or the Harness)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StopRequiredDelivered(TraceEvent):
    """The observation of this call delivered STOP_REQUIRED."""

    kind: ClassVar[EventKind] = EventKind.STOP_REQUIRED_DELIVERED
    tool_call_id: str
    """The call whose answer carries it."""
    stop_reason: StopReason
    """Why the collection must stop."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectionStopped(TraceEvent):
    """A tool request after STOP_REQUIRED: the controlled stop."""

    kind: ClassVar[EventKind] = EventKind.COLLECTION_STOPPED
    tool_call_id: str
    """The request that ended the collection."""
    stop_reason: StopReason | None
    """The stop reason that stands."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetExhausted(TraceEvent):
    """A hard budget stopped the run."""

    kind: ClassVar[EventKind] = EventKind.BUDGET_EXHAUSTED
    budget: BudgetKind
    """Which budget ran out."""
    stop_reason: StopReason = StopReason.BUDGET_LIMIT_REACHED
    """Always BUDGET_LIMIT_REACHED (an earlier stop reason may still stand on the tracker)."""
    tool_call_id: str | None = None
    """The tool call that ran into it, if a tool call did."""
    detail: str | None = None
    """A short note (what ran into the budget)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DraftReceived(TraceEvent):
    """The model's final message (no tool calls) was read as a Draft."""

    kind: ClassVar[EventKind] = EventKind.DRAFT_RECEIVED
    draft_valid: bool
    """Whether it parsed as a valid Draft."""
    detail: str | None = None
    """Why it is not a valid Draft (None when valid)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EvidenceChecked(TraceEvent):
    """The EvidenceGuard's verdict on the Draft's citations."""

    kind: ClassVar[EventKind] = EventKind.EVIDENCE_CHECKED
    verdict: EvidenceCheck
    """PASSED or FAILED."""
    detail: str | None = None
    """The problems found (None when it passed)."""
    guard: GuardName = GuardName.EVIDENCE
    """Always EVIDENCE (the column shared with GUARD_VERDICT)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GuardVerdict(TraceEvent):
    """The SemanticGuard's verdict on the conclusion."""

    kind: ClassVar[EventKind] = EventKind.GUARD_VERDICT
    verdict: SemanticVerdict
    """SUPPORTED or UNSUPPORTED."""
    detail: str | None = None
    """The guard's reason."""
    guard: GuardName = GuardName.SEMANTIC
    """Always SEMANTIC."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Released(TraceEvent):
    """The run's single published outcome."""

    kind: ClassVar[EventKind] = EventKind.RELEASED
    outcome: ReleaseOutcome
    """The released outcome."""
    stop_reason: StopReason | None
    """The Harness stop reason, if it stopped the loop."""
    fallback_kind: FallbackKind | None = None
    """The fallback kind, for FALLBACK."""
    detail: str | None = None
    """Why this outcome, in one line."""


EVENT_TYPES: tuple[type[TraceEvent], ...] = (
    RunStarted,
    ModelCall,
    ToolInvocation,
    ToolRequestRejected,
    GainApplied,
    StopRequiredDelivered,
    CollectionStopped,
    BudgetExhausted,
    DraftReceived,
    EvidenceChecked,
    GuardVerdict,
    Released,
)
"""Every event class, one per EventKind."""


E = TypeVar("E", bound=TraceEvent)


class Trace:
    """Append-only event log of one run; safe to append from several threads."""

    __slots__ = ("_events", "_listener", "_lock", "_t0")

    def __init__(self) -> None:
        self._events: list[TraceEvent] = []
        self._lock = threading.Lock()
        self._t0 = time.perf_counter()
        self._listener: Callable[[TraceEvent], None] | None = None

    def listen(self, listener: Callable[[TraceEvent], None]) -> None:
        """Hand every event emitted from now on to `listener` as well (e.g. `harness.otel`'s span recorder), in
        trace order: it is called under the trace's lock, so it must be quick and never emit itself."""
        self._listener = listener

    def also_listen(self, listener: Callable[[TraceEvent], None]) -> None:
        """Hand every event to `listener` after the one already listening (if any), in the same way."""
        first = self._listener
        if first is None:
            self._listener = listener
            return

        def both(event: TraceEvent) -> None:
            first(event)
            listener(event)

        self._listener = both

    def emit(self, event: E) -> E:
        """Append `event`, stamped with its position and time; returns the stamped event."""
        with self._lock:
            stamped = dataclasses.replace(
                event, seq=len(self._events), t_ms=round((time.perf_counter() - self._t0) * 1000.0, 3)
            )
            self._events.append(stamped)
            if self._listener is not None:  # the one check a run without a listener pays
                self._listener(stamped)
        return stamped

    @property
    def events(self) -> tuple[TraceEvent, ...]:
        """A snapshot of the events so far."""
        with self._lock:
            return tuple(self._events)

    def of(self, cls: type[E]) -> list[E]:
        """Events of one class, in order."""
        return [e for e in self.events if isinstance(e, cls)]

    def __iter__(self) -> Iterator[TraceEvent]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self._events)
