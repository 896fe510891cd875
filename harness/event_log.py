"""The library's own event log: a run's typed trace events as JSON Lines, one event per line, as they are emitted.

`HarnessSession(event_log=stream)` writes every event of its run to `stream` (any text stream: a file, a pipe);
`harness-bench import LOG` reads such a file back into the bench as observed runs. A line is one `EventLogLine`:

    {"run_id": "…", "event": {"kind": "TOOL_INVOCATION", "seq": 3, "t_ms": 12.5, "tool": "kb_search", …}}

the event's fields as `dataclasses` has them (enums as their values); the RUN_STARTED line also carries the run's
thresholds and budgets (`limits`). Several runs may share one log (their lines interleave); each run's lines come
in trace order, RUN_STARTED first and RELEASED last.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from typing import Any, TextIO

import pydantic

from harness.config import HarnessConfig, RunLimits
from harness.trace import EVENT_TYPES, EventKind, RunStarted, TraceEvent

__all__ = ["EventLogError", "EventLogLine", "EventLogWriter", "event_adapter", "event_from_json", "event_line"]


class EventLogLine(pydantic.BaseModel, frozen=True, extra="forbid"):
    """One line of the event log."""

    run_id: str
    """The run the event belongs to."""
    event: dict[str, Any]
    """The event: `kind`, then its fields (`event_from_json` rebuilds the typed event)."""
    limits: RunLimits | None = None
    """The run's limits (RUN_STARTED lines only)."""


_ADAPTERS: dict[str, tuple[type[TraceEvent], pydantic.TypeAdapter[TraceEvent]]] = {
    cls.kind.value: (cls, pydantic.TypeAdapter(cls)) for cls in EVENT_TYPES
}
"""One validator per event kind, built once (building one costs more than validating a run's events with it)."""


def event_adapter(kind: EventKind) -> pydantic.TypeAdapter[TraceEvent]:
    """The validator of `kind`'s event class (each enum from its value): every reader of stored or traced events
    rebuilds them with it, so an event is validated the same way wherever it comes from."""
    return _ADAPTERS[kind.value][1]


class EventLogError(ValueError):
    """An event that is not an event of its kind (unknown kind, a field missing, unknown or of the wrong type)."""


def event_from_json(data: dict[str, Any]) -> TraceEvent:
    """The typed event of one line's `event` (validated by pydantic: every field of its class, no other)."""
    kind = data.get("kind")
    spec = _ADAPTERS.get(str(kind))
    if spec is None:
        raise EventLogError(f"unknown kind {kind!r} (known: {', '.join(k.value for k in EventKind)})")
    cls, adapter = spec
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - fields - {"kind"})
    if unknown:
        raise EventLogError(f"{kind}: unknown field {unknown[0]!r}")
    try:
        event: TraceEvent = adapter.validate_python({k: v for k, v in data.items() if k != "kind"})
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        raise EventLogError(f"{kind}: {'.'.join(str(p) for p in first['loc'])}: {first['msg']}") from None
    return event


def event_line(run_id: str, event: TraceEvent, limits: RunLimits | None = None) -> str:
    """The log line of one event (no newline)."""
    _, adapter = _ADAPTERS[event.kind.value]
    data = {"kind": event.kind.value, **adapter.dump_python(event, mode="json")}
    out: dict[str, Any] = {"run_id": run_id, "event": data}
    if limits is not None:
        out["limits"] = limits.model_dump(mode="json")
    return json.dumps(out, ensure_ascii=False, separators=(",", ":"))


_WRITING = threading.Lock()
"""Held while a line is written: runs in several threads may share one log, and a line is written whole."""


class EventLogWriter:
    """A trace listener writing each event of one run to a text stream, a line each, flushed per line (so a run cut
    short leaves every event it emitted)."""

    __slots__ = ("_limits", "_run_id", "_stream")

    def __init__(self, stream: TextIO, *, run_id: str, config: HarnessConfig) -> None:
        self._stream = stream
        self._run_id = run_id
        self._limits = RunLimits.of(config)

    def __call__(self, event: TraceEvent) -> None:
        """Write one event (in trace order)."""
        line = event_line(self._run_id, event, self._limits if isinstance(event, RunStarted) else None)
        with _WRITING:
            self._stream.write(line + "\n")
            self._stream.flush()
