"""RunContext: run identity, deadline, budgets and their consumption, cancellation, and the
per-run tracker, canonical store and trace — passed explicitly, never held in globals."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from harness.canonical_store import CanonicalStore, Clock
from harness.config import HarnessConfig
from harness.contracts import BudgetKind, HarnessControl
from harness.request_checks import RequestCheck, SeenRequest
from harness.trace import BudgetExhausted, Trace
from harness.tracker import DiagnosisProgressTracker
from harness.transcript import Transcript

MIN_OBSERVATION_BYTES = 256
"""The smallest observation cap: a status line with the call id always fits."""


class DeadlineClock(Protocol):
    """Where a run reads the time left before its deadline: every deadline decision goes through it."""

    def remaining(self, deadline: float) -> float:
        """Seconds left before `deadline` (a `time.monotonic()` value); may be negative."""
        ...


class MonotonicDeadline:
    """The live clock: `deadline - time.monotonic()`. (A recorded run's clock also logs each reading, and a
    replay answers with the recorded readings, so a deadline cut replays as one.)"""

    __slots__ = ()

    def remaining(self, deadline: float) -> float:
        """Seconds left before `deadline`."""
        return deadline - time.monotonic()


@dataclass(slots=True)
class BudgetUsage:
    """What a run has consumed so far."""

    model_calls: int = 0
    """Diagnosis-loop model call attempts."""
    guard_calls: int = 0
    """SemanticGuard call attempts (they count against the model-call budget too)."""
    tool_invocations: int = 0
    """Backend tool invocations (rejections never count)."""
    input_tokens: int = 0
    """Prompt tokens over all model calls."""
    output_tokens: int = 0
    """Completion tokens over all model calls."""
    observation_bytes: int = 0
    """Bytes of tool observations handed to the model (the run-wide observation budget)."""
    budget_hit: BudgetKind | None = None
    """The hard budget that stopped the run, if one did."""

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


class CancellationToken:
    """Cooperative cancellation, for one run or shared by every run of a process (Ctrl-C, SIGTERM).

    A plain flag, not a lock-based Event: a signal handler sets it in the main thread at any bytecode
    boundary, so `cancel` must never wait for a lock the interrupted code may hold.
    """

    __slots__ = ("_cancelled",)

    def __init__(self) -> None:
        self._cancelled = False

    def cancel(self) -> None:
        """Ask the run(s) to stop at the next checkpoint."""
        self._cancelled = True  # one atomic store: safe from a signal handler and from any thread

    @property
    def cancelled(self) -> bool:
        """Whether cancel() was called."""
        return self._cancelled


@dataclass
class RunContext:
    """Everything a run owns. Create one per run with `RunContext.create`."""

    run_id: str
    """Unique id of the run."""
    config: HarnessConfig
    """Thresholds and budgets."""
    started_at: float
    """time.monotonic() at start."""
    deadline: float
    """time.monotonic() after which the run must stop."""
    tracker: DiagnosisProgressTracker
    """The progress state machine."""
    store: CanonicalStore
    """The canonical truth of tool invocations."""
    trace: Trace
    """The audit trace."""
    cancellation: CancellationToken = field(default_factory=CancellationToken)
    """Cooperative cancellation."""
    usage: BudgetUsage = field(default_factory=BudgetUsage)
    """Budget consumption."""
    deadline_clock: DeadlineClock = field(default_factory=MonotonicDeadline)
    """How the deadline is read (live: the monotonic clock)."""
    transcript: Transcript = field(default_factory=Transcript)
    """What was sent to the model and what it answered (recorded at the model-call boundary)."""
    request_checks: tuple[RequestCheck, ...] = ()
    """Stop rules consulted before each tool request is admitted (`harness.request_checks`; none by default)."""
    seen_requests: list[SeenRequest] = field(default_factory=list)
    """The tool requests the checks have seen, in order (kept only when there are checks)."""

    @classmethod
    def create(
        cls,
        config: HarnessConfig | None = None,
        *,
        run_id: str | None = None,
        clock: Clock = time.monotonic,
        cancellation: CancellationToken | None = None,
        deadline_clock: DeadlineClock | None = None,
        request_checks: Sequence[RequestCheck] = (),
    ) -> RunContext:
        """A fresh context with its own tracker, store and trace (`cancellation`: a token shared with
        the caller, e.g. the bench's one flag for Ctrl-C/SIGTERM; default: the run's own;
        `deadline_clock`: how the deadline is read, default the monotonic clock; `request_checks`: stop rules
        consulted before each tool request, `harness.request_checks`)."""
        cfg = config or HarnessConfig()
        now = time.monotonic()
        return cls(
            run_id=run_id or uuid.uuid4().hex,
            config=cfg,
            started_at=now,
            deadline=now + cfg.deadline_seconds,
            tracker=DiagnosisProgressTracker(
                cfg.no_gain_threshold,
                cfg.protocol_violation_threshold,
                contract=cfg.ablate is not HarnessControl.ENVELOPE,
                reject_duplicates=cfg.ablate is not HarnessControl.DUPLICATE_REJECTION,
            ),
            store=CanonicalStore(cfg.record_ttl_seconds, clock),
            trace=Trace(),
            cancellation=cancellation or CancellationToken(),
            deadline_clock=deadline_clock or MonotonicDeadline(),
            request_checks=tuple(request_checks),
        )

    def remaining_seconds(self) -> float:
        """Seconds left before the deadline (may be negative)."""
        return self.deadline_clock.remaining(self.deadline)

    def guard_budget_exhausted(self) -> BudgetKind | None:
        """Which budget forbids the SemanticGuard's call: it counts against deadline, calls and tokens."""
        if self.remaining_seconds() <= 0:
            return BudgetKind.DEADLINE
        if self.usage.model_calls + self.usage.guard_calls >= self.config.max_model_calls:
            return BudgetKind.MODEL_CALLS
        if self.usage.total_tokens >= self.config.max_total_tokens:
            return BudgetKind.TOKENS
        return None

    def model_budget_exhausted(self) -> BudgetKind | None:
        """Which budget forbids another diagnosis model call, if any."""
        exhausted = self.guard_budget_exhausted()
        if exhausted is None and self.usage.observation_bytes > self.config.max_run_observation_bytes:
            return BudgetKind.OBSERVATION_BYTES  # (rejection answers of the last message pushed it over)
        return exhausted

    def tool_budget_exhausted(self) -> BudgetKind | None:
        """Which budget forbids another backend tool call, if any."""
        if self.remaining_seconds() <= 0:
            return BudgetKind.DEADLINE
        if self.usage.tool_invocations >= self.config.max_tool_invocations:
            return BudgetKind.TOOL_INVOCATIONS
        if self.config.max_run_observation_bytes - self.usage.observation_bytes < MIN_OBSERVATION_BYTES:
            return BudgetKind.OBSERVATION_BYTES
        return None

    def check_request(self, tool_call_id: str, tool: str, scope: str | None) -> str | None:
        """Consult the request checks on a request about to be decided: the first one's reason to stop, or None
        (the request is then remembered for the next ones). Without checks: None, nothing kept."""
        if not self.request_checks:
            return None
        request = SeenRequest(tool_call_id, tool, scope)
        seen = tuple(self.seen_requests)
        for check in self.request_checks:
            why = check.stop_before(seen, request)
            if why is not None:
                return why
        self.seen_requests.append(request)
        return None

    def request_failed(self, tool_call_id: str) -> None:
        """The backend call of a seen request failed (an error cycle watches for that)."""
        for i in range(len(self.seen_requests) - 1, -1, -1):
            if self.seen_requests[i].tool_call_id == tool_call_id:
                self.seen_requests[i] = replace(self.seen_requests[i], failed=True)
                return

    def record_budget_stop(
        self, budget: BudgetKind, detail: str | None = None, tool_call_id: str | None = None
    ) -> None:
        """A hard budget stopped the run: BUDGET_LIMIT_REACHED unless an earlier stop reason
        (INFORMATION_SATURATED, PROGRESS_PROTOCOL_VIOLATED) stands, the first budget hit kept, traced
        (`tool_call_id`: the tool call that ran into it). The one place a budget stop is recorded."""
        self.tracker.stop_for_budget()
        if self.usage.budget_hit is None:
            self.usage.budget_hit = budget
        self.trace.emit(BudgetExhausted(budget=budget, tool_call_id=tool_call_id, detail=detail))

    def result_observation_cap(self) -> int:
        """Byte cap of the next observation (a tool result or a rejection answer): the per-observation
        cap, or what is left of the run's observation budget (at least the 256-byte floor: a tool call
        is always answered, and with less left no backend call starts)."""
        left = self.config.max_run_observation_bytes - self.usage.observation_bytes
        return max(MIN_OBSERVATION_BYTES, min(self.config.max_observation_bytes, left))
