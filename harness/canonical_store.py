"""The canonical store: per-run truth of every tool invocation (docs/architecture.md §6.1).

EvidenceGuard and the ProgressSnapshot read only from here — never from what the model saw.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from harness.contracts import InvocationStatus, JsonObject
from harness.tools.base import ToolResult

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class CanonicalRecord:
    """One backend invocation as it really happened."""

    tool_call_id: str
    """The model-visible id of the call; citations point here."""
    tool: str
    """Tool name."""
    scope: str
    """Normalised scope."""
    input: JsonObject
    """The business input passed to the backend (control fields stripped)."""
    status: InvocationStatus
    """COMPLETED or FAILED (rejections never reach the store)."""
    result: ToolResult | None
    """The raw result for a completed call."""
    error: str | None
    """The failure message for a failed call."""
    started_at: float
    """Clock time the backend was called."""
    finished_at: float
    """Clock time the backend returned."""
    expires_at: float
    """Clock time after which the record is no longer readable."""


class ReadProblem(StrEnum):
    """Why a record could not be read."""

    MISSING = "MISSING"
    EXPIRED = "EXPIRED"


@dataclass(frozen=True, slots=True)
class RecordRead:
    """The result of reading one record: the record, or why there is none."""

    record: CanonicalRecord | None
    """The record when readable."""
    problem: ReadProblem | None
    """Why it is not readable."""


class CanonicalStore:
    """In-memory store with TTL; the clock is injectable for tests."""

    __slots__ = ("_clock", "_lock", "_records", "_ttl")

    def __init__(self, ttl_seconds: float, clock: Clock = time.monotonic) -> None:
        self._records: dict[str, CanonicalRecord] = {}
        self._lock = threading.Lock()
        self._clock = clock
        self._ttl = ttl_seconds

    @property
    def clock(self) -> Clock:
        """The store's clock."""
        return self._clock

    def put(
        self,
        *,
        tool_call_id: str,
        tool: str,
        scope: str,
        input: JsonObject,
        status: InvocationStatus,
        result: ToolResult | None,
        error: str | None,
        started_at: float,
    ) -> CanonicalRecord:
        """Record an invocation; the TTL starts when it finishes."""
        now = self._clock()
        record = CanonicalRecord(
            tool_call_id, tool, scope, input, status, result, error, started_at, now, now + self._ttl
        )
        with self._lock:
            self._records[tool_call_id] = record
        return record

    def read(self, tool_call_id: str) -> RecordRead:
        """Read a record if it exists and has not expired."""
        with self._lock:
            record = self._records.get(tool_call_id)
        if record is None:
            return RecordRead(None, ReadProblem.MISSING)
        if self._clock() >= record.expires_at:
            return RecordRead(None, ReadProblem.EXPIRED)
        return RecordRead(record, None)

    def ids(self) -> list[str]:
        """All recorded call ids in insertion order."""
        with self._lock:
            return list(self._records)

    def __len__(self) -> int:
        return len(self._records)
