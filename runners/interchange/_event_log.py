"""The library's event log read back a run at a time (`harness.event_log`: one typed event per line, each with its
run's id), and the file reading every trace reader shares: a regular file opened for reading, its lines one at a
time (`\\n` alone ends a line: JSON may hold U+2028, U+2029 or U+0085 raw inside a string)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pydantic

from harness import (
    EVENT_TYPES,
    EventLogError,
    EventLogLine,
    Released,
    RunLimits,
    RunStarted,
    TraceEvent,
    event_from_json,
)
from runners.interchange._json_stream import MAX_VALUE_CHARS
from runners.interchange._trace_values import (
    BadValue,
    check_event_fields,
    check_limit,
    check_text,
    check_times,
    check_totals,
    strict_json,
)
from runners.interchange.observed_runs import ObservedRun, TraceImportError, identity, short

__all__ = ["EVENT_TYPES_BY_KIND", "file_lines", "opened", "read_event_log"]


@contextlib.contextmanager
def opened(path: Path) -> Iterator[IO[bytes]]:
    try:
        f = path.open("rb")
    except OSError as exc:
        raise TraceImportError(f"{path}: cannot read ({exc.strerror or exc})") from None
    with f:
        yield f


def file_lines(path: Path) -> Iterator[tuple[int, str]]:
    """The file's lines that are not blank, numbered from 1, a line at a time (`\\n` alone ends a line: JSON may hold
    U+2028, U+2029 or U+0085 raw inside a string); a line past `MAX_VALUE_CHARS` bytes or not UTF-8 is refused."""
    with opened(path) as f:
        n = 0
        while raw := f.readline(MAX_VALUE_CHARS + 1):
            n += 1
            if len(raw) > MAX_VALUE_CHARS:
                raise TraceImportError(f"{path}:{n}: a line over {MAX_VALUE_CHARS:,} bytes")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise TraceImportError(f"{path}:{n}: not UTF-8 text (byte {exc.start} of the line)") from None
            if text.strip():
                yield n, text.removesuffix("\n")


@dataclass
class _OpenRun:
    line: int
    limits: RunLimits | None
    events: list[TraceEvent]


def _event_log_values(where: str, text: str) -> None:
    """A line's values strictly as they are written (pydantic would read `true` or `"1"` as 1): the run id a
    non-empty string, every event field of its type and range, the limits within the settings' bounds."""
    try:
        raw = strict_json(text)
    except RecursionError:
        return  # pydantic read it: json can too (it is refused there otherwise)
    except ValueError as exc:
        raise TraceImportError(f"{where}: not JSON ({str(exc).splitlines()[0]})") from None
    if not isinstance(raw, dict):
        return
    try:
        check_text("run_id", raw.get("run_id"), empty=False)
        event, limits = raw.get("event"), raw.get("limits")
        if isinstance(event, dict):
            cls = EVENT_TYPES_BY_KIND.get(str(event.get("kind")))
            if cls is not None:
                check_event_fields(cls, event, {f: f"event.{f}" for f in event})
        if isinstance(limits, dict):
            for name, value in limits.items():
                if name in RunLimits.model_fields and not (value is None and name == _OPTIONAL_LIMIT):
                    check_limit(f"limits.{name}", name, value)
    except BadValue as exc:
        raise TraceImportError(f"{where}: {exc}") from None


EVENT_TYPES_BY_KIND: dict[str, type[TraceEvent]] = {cls.kind.value: cls for cls in EVENT_TYPES}
"""Every event class by its kind's value."""
_OPTIONAL_LIMIT = "schema_mode"
"""The one limit a trace may leave unknown (every `RunLimits` field is the setting of the same name)."""


def read_event_log(path: Path) -> Iterator[ObservedRun]:
    """The event log's runs, each as soon as its RELEASED is read (memory holds the runs still open)."""
    runs: dict[str, _OpenRun] = {}
    released: set[str] = set()
    for n, text in file_lines(path):
        where = f"{path}:{n}"
        try:
            line = EventLogLine.model_validate_json(text)
        except pydantic.ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first["loc"]) or "line"
            raise TraceImportError(f"{where}: not an event-log line ({loc}: {first['msg']})") from None
        _event_log_values(where, text)
        name = short(line.run_id)
        try:
            event = event_from_json(line.event)
        except EventLogError as exc:
            raise TraceImportError(f"{where}: run {name}: {exc}") from None
        if line.run_id in released:
            raise TraceImportError(f"{where}: run {name}: {event.kind.value} after its RELEASED (two runs"
                                   " interleaved under one id?)")  # fmt: skip
        run = runs.get(line.run_id)
        if run is None:
            if not isinstance(event, RunStarted) or event.seq != 0:
                raise TraceImportError(f"{where}: run {name}: its first line is {event.kind.value} seq"
                                       f" {event.seq}, not RUN_STARTED seq 0 (the run's start is missing)")  # fmt: skip
            runs[line.run_id] = _OpenRun(n, line.limits, [event])
            continue
        expected = len(run.events)
        if event.seq != expected:
            raise TraceImportError(f"{where}: run {name}: event seq {event.seq} where seq {expected} was due"
                                   " (an event missing, or two runs interleaved under one id)")  # fmt: skip
        if line.limits is not None:
            raise TraceImportError(f"{where}: run {name}: limits on a {event.kind.value} line (only"
                                   " RUN_STARTED carries them)")  # fmt: skip
        try:
            check_times([run.events[-1], event], {"t_ms": "event.t_ms"})
        except BadValue as exc:
            raise TraceImportError(f"{where}: run {name}: {exc}") from None
        run.events.append(event)
        if isinstance(event, Released):
            del runs[line.run_id]
            released.add(line.run_id)
            yield _whole_run(path, line.run_id, run)
    for run_id, run in runs.items():
        last = run.events[-1]
        raise TraceImportError(f"{path}:{run.line}: run {short(run_id)}: cut off (no RELEASED; its last event is"
                               f" {last.kind.value} seq {last.seq})")  # fmt: skip


def _whole_run(path: Path, run_id: str, run: _OpenRun) -> ObservedRun:
    try:
        check_totals(run.events, {f: f"event.{f}" for f in ("input_tokens", "output_tokens", "observation_bytes")})
    except BadValue as exc:
        raise TraceImportError(f"{path}:{run.line}: run {short(run_id)}: {exc}") from None
    case_id, epoch = identity(run_id)
    return ObservedRun(run_id, case_id, epoch, tuple(run.events), run.limits, source=f"{path}:{run.line}")
