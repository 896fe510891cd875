"""`harness-bench import TRACES`: runs observed elsewhere read back as the typed events they were recorded from.

Two inputs, told apart by their first line:

- OTLP/JSON (`harness-bench export --otel`, an OpenTelemetry Collector's file exporter, any producer of the same
  attributes): every `invoke_agent` span is one run; its `chat` and `execute_tool` children and its `harness.*`
  span events are the run's events (`harness.seq` orders them), its own attributes RUN_STARTED and RELEASED.
  Spans that are none of these and belong to no run (an embedder's own) are left aside; the bench's verdict
  (`gen_ai.evaluation.result`) is not read: imported runs are observations, without expectations.
- the library's event log (`harness.event_log`): one typed event per line, each with its run's id.

Every run must be whole (RUN_STARTED … RELEASED, no event missing, no attribute or field unknown) and every value
what its field says (`_trace_values.py`: types and ranges, the settings' bounds, the GenAI message shapes, times in
order); the first problem is one line naming the file and line, the span id where there is one, and the field, and
nothing is imported. Lines end at `\n` only: any other line separator (U+2028, U+2029, U+0085) is text inside a
JSON string.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import re
import typing
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum, StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pydantic

from harness import (
    EVENT_TYPES,
    BudgetExhausted,
    BudgetUsage,
    EntryKind,
    EventLogError,
    EventLogLine,
    ModelCall,
    ModelPurpose,
    Released,
    ReleaseDecision,
    ReleaseOutcome,
    RunLimits,
    RunResult,
    RunStarted,
    ToolInvocation,
    ToolRequestRejected,
    TraceEvent,
    TranscriptEntry,
    event_adapter,
    event_from_json,
    event_line,
    parse_draft,
)
from runners.interchange._trace_values import (
    INT64_MAX,
    BadValue,
    ChatMessage,
    TextPart,
    ToolCallPart,
    ToolCallResponsePart,
    check_bool,
    check_count,
    check_enum,
    check_event_fields,
    check_limit,
    check_text,
    check_times,
    check_totals,
    read_messages,
)

if TYPE_CHECKING:
    from runners.plan.settings import SettingValue
    from runners.store.schema import CaseRunRows

__all__ = [
    "Contents",
    "ObservedRun",
    "TraceFormat",
    "TraceImportError",
    "fingerprint",
    "import_rows",
    "observed_result",
    "read_traces",
]


class TraceImportError(ValueError):
    """A trace file that is not a set of whole runs: one line naming the file, the line and the span."""


@dataclass(frozen=True, slots=True)
class Contents:
    """The messages of one model call attempt, as its span carries them (None: the attribute is absent)."""

    given: tuple[ChatMessage, ...] | None
    """`gen_ai.input.messages`: what the call added to the conversation."""
    answered: tuple[ChatMessage, ...] | None
    """`gen_ai.output.messages`: the model's answer."""
    tools: str | None = None
    """`gen_ai.tool.definitions`: the tools it offered, where they first appear or change."""


@dataclass(frozen=True, slots=True)
class ObservedRun:
    """One run read from a trace file, whole."""

    run_id: str
    """Its id in the trace (`gen_ai.conversation.id`, or the event log's `run_id`)."""
    case_id: str
    """The case it ran: the middle of a bench case run id (`BENCH/CASE/EPOCH`), else the run id."""
    epoch: int
    """Its epoch: the end of a bench case run id, else 1."""
    events: tuple[TraceEvent, ...]
    """Its typed events, in trace order."""
    limits: RunLimits | None
    """The thresholds and budgets it ran under, when the trace says."""
    final_text: str | None = None
    """The text of its last diagnosis answer, when the trace carries message contents (the Draft)."""
    contents: tuple[Contents, ...] = ()
    """Per model call attempt, in order: its `gen_ai.input.messages` and `gen_ai.output.messages`, when the trace
    carries message contents; else empty."""
    source: str = ""
    """Where it was read (`FILE:LINE`, and its run span), for a message about it."""


_BENCH_ID = re.compile(r"(?P<bench>.+)/(?P<case>[^/]+)/(?P<epoch>[1-9][0-9]{0,8})")
"""A bench case run id (`runners.run.bench.case_run_id`)."""


def _identity(run_id: str) -> tuple[str, int]:
    m = _BENCH_ID.fullmatch(run_id)
    return (m["case"], int(m["epoch"])) if m else (run_id, 1)


class TraceFormat(StrEnum):
    """What a trace file holds, told apart by its first line."""

    OTLP_JSON = "OTLP/JSON"
    """OpenTelemetry spans: one ExportTraceServiceRequest per line."""
    EVENT_LOG = "event log"
    """The library's event log: one typed event per line."""


def read_traces(path: Path, *, formats: Collection[TraceFormat] = tuple(TraceFormat)) -> tuple[ObservedRun, ...]:
    """Every run in `path` (OTLP/JSON or the event log: one of `formats`), each whole, in file order; else a
    TraceImportError."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TraceImportError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise TraceImportError(f"{path}: cannot read ({exc.strerror or exc})") from None
    # `\n` alone ends a line: str.splitlines() would also end one at U+2028, U+2029 or U+0085, which JSON (and
    # what the bench exports) may hold raw inside a string
    lines = [(n, line) for n, line in enumerate(text.split("\n"), 1) if line.strip()]
    if not lines:
        raise TraceImportError(f"{path}: no trace in it (an empty file)")
    first_no, first = lines[0]
    head = _json(path, first_no, first)
    if isinstance(head, dict) and "resourceSpans" in head:
        found = TraceFormat.OTLP_JSON
    elif isinstance(head, dict) and "run_id" in head:
        found = TraceFormat.EVENT_LOG
    else:
        wanted = " nor ".join(_FORMAT_SHAPES[f] for f in formats)
        raise TraceImportError(f"{path}:{first_no}: {'neither ' if len(formats) > 1 else 'not '}{wanted}")
    if found not in formats:
        raise TraceImportError(f"{path}:{first_no}: {_FORMAT_SHAPES[found]}, not"
                               f" {' or '.join(_FORMAT_SHAPES[f] for f in formats)}")  # fmt: skip
    runs = _OtlpReader(path).read(lines) if found is TraceFormat.OTLP_JSON else _read_event_log(path, lines)
    return _distinct_epochs(runs)


_FORMAT_SHAPES = {
    TraceFormat.OTLP_JSON: "an OTLP/JSON traces request (resourceSpans)",
    TraceFormat.EVENT_LOG: "an event-log line (run_id, event)",
}


def fingerprint(runs: Sequence[ObservedRun]) -> str:
    """The runs as a hash of their ids, events and limits (not of the file's bytes: the same runs exported again,
    under new span ids, hash the same) — how an import finds runs imported before."""
    digest = hashlib.sha256()
    for run in runs:
        for e in run.events:
            digest.update(event_line(run.run_id, e, run.limits if isinstance(e, RunStarted) else None).encode())
            digest.update(b"\n")
    return f"trace-sha256:{digest.hexdigest()}"


def _distinct_epochs(runs: Sequence[ObservedRun]) -> tuple[ObservedRun, ...]:
    """Each run a case and epoch of its own: a case and epoch seen before (two bench runs in one file) gets the
    case's next free epoch (the import's case run id is `BENCH/CASE/EPOCH`)."""
    taken: dict[str, set[int]] = {}
    out = []
    for run in runs:
        epochs = taken.setdefault(run.case_id, set())
        if run.epoch in epochs:
            run = dataclasses.replace(run, epoch=max(epochs) + 1)
        epochs.add(run.epoch)
        out.append(run)
    return tuple(out)


def _short(text: str) -> str:
    """A trace's id as an error names it: cut to 120 characters (a trace may hold any text there)."""
    return text if len(text) <= 120 else text[:120] + "…"


def _json(path: Path, n: int, line: str) -> Any:
    try:
        return json.loads(line)
    except RecursionError:
        raise TraceImportError(f"{path}:{n}: JSON nested too deep") from None
    except ValueError as exc:
        raise TraceImportError(f"{path}:{n}: not JSON ({str(exc).splitlines()[0]})") from None


# -- the event log -------------------------------------------------------------------------------------------------
@dataclass
class _OpenRun:
    line: int
    limits: RunLimits | None
    events: list[TraceEvent]
    released: bool = False


def _event_log_values(where: str, text: str) -> None:
    """A line's values strictly as they are written (pydantic would read `true` or `"1"` as 1): the run id a
    non-empty string, every event field of its type and range, the limits within the settings' bounds."""
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError):
        return  # pydantic read it: json can too (it is refused there otherwise)
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


def _read_event_log(path: Path, lines: Sequence[tuple[int, str]]) -> list[ObservedRun]:
    runs: dict[str, _OpenRun] = {}
    for n, text in lines:
        where = f"{path}:{n}"
        try:
            line = EventLogLine.model_validate_json(text)
        except pydantic.ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first["loc"]) or "line"
            raise TraceImportError(f"{where}: not an event-log line ({loc}: {first['msg']})") from None
        _event_log_values(where, text)
        name = _short(line.run_id)
        try:
            event = event_from_json(line.event)
        except EventLogError as exc:
            raise TraceImportError(f"{where}: run {name}: {exc}") from None
        run = runs.get(line.run_id)
        if run is None:
            if not isinstance(event, RunStarted) or event.seq != 0:
                raise TraceImportError(f"{where}: run {name}: its first line is {event.kind.value} seq"
                                       f" {event.seq}, not RUN_STARTED seq 0 (the run's start is missing)")  # fmt: skip
            runs[line.run_id] = _OpenRun(n, line.limits, [event])
            continue
        if run.released:
            raise TraceImportError(f"{where}: run {name}: {event.kind.value} after its RELEASED (two runs"
                                   " interleaved under one id?)")  # fmt: skip
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
        run.released = isinstance(event, Released)
    out = []
    for run_id, run in runs.items():
        at = f"{path}:{run.line}: run {_short(run_id)}"
        if not run.released:
            last = run.events[-1]
            raise TraceImportError(f"{at}: cut off (no RELEASED; its last event is {last.kind.value} seq {last.seq})")
        try:
            check_totals(run.events, {f: f"event.{f}" for f in ("input_tokens", "output_tokens", "observation_bytes")})
        except BadValue as exc:
            raise TraceImportError(f"{at}: {exc}") from None
        case_id, epoch = _identity(run_id)
        out.append(ObservedRun(run_id, case_id, epoch, tuple(run.events), run.limits, source=f"{path}:{run.line}"))
    return out


# -- OTLP/JSON -----------------------------------------------------------------------------------------------------
_OPERATION = "gen_ai.operation.name"
_EVALUATION = "gen_ai.evaluation.result"


def _attribute_names() -> dict[type[TraceEvent], dict[str, str]]:
    """Per event class: attribute name -> field (`harness.otel_attribute_name`), timings aside."""
    from harness import otel_attribute_name

    timing = {"t_ms", "latency_ms"}
    return {cls: {otel_attribute_name(f.name): f.name for f in dataclasses.fields(cls) if f.name not in timing}
            for cls in EVENT_TYPES}  # fmt: skip


def _nullable() -> dict[type[TraceEvent], tuple[str, ...]]:
    """Per event class: its fields without a default that may be None (a span leaves them out when None)."""
    out = {}
    for cls in EVENT_TYPES:
        hints = typing.get_type_hints(cls)
        out[cls] = tuple(
            f.name
            for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING and type(None) in typing.get_args(hints[f.name])
        )
    return out


_NULLABLE = _nullable()


@dataclass(frozen=True, slots=True)
class _Span:
    line: int
    trace_id: str
    span_id: str
    parent: str
    name: str
    start: int
    end: int
    attributes: dict[str, object]
    events: tuple[tuple[str, int, dict[str, object]], ...]


_Check = Callable[[str, object], object]
"""The check of one span attribute (its name, its value): the value it reads as, or BadValue."""


class _OtlpReader:
    def __init__(self, path: Path) -> None:
        from harness import OTEL_NAMESPACE, BudgetKind, HarnessAttribute

        self.path = path
        self.names = _attribute_names()
        self.namespace = OTEL_NAMESPACE
        self.limits = {
            HarnessAttribute.NO_GAIN_THRESHOLD.value: "no_gain_threshold",
            HarnessAttribute.PROTOCOL_VIOLATION_THRESHOLD.value: "protocol_violation_threshold",
            HarnessAttribute.MAX_TOOL_INVOCATIONS.value: "max_tool_invocations",
            HarnessAttribute.MAX_MODEL_CALLS.value: "max_model_calls",
            HarnessAttribute.MAX_TOTAL_TOKENS.value: "max_total_tokens",
            HarnessAttribute.SCHEMA_MODE.value: "schema_mode",
        }
        # the attributes a span may carry besides its event's fields, each with its check
        self.run_extra: dict[str, _Check] = {
            _OPERATION: check_text, "gen_ai.agent.name": check_text, _CONVERSATION: _run_id,
            HarnessAttribute.STOP_REQUIRED_DELIVERED.value: check_bool,
            HarnessAttribute.BUDGET_HIT.value: functools.partial(_budget_kind, kinds=BudgetKind),
            "gen_ai.usage.input_tokens": check_count, "gen_ai.usage.output_tokens": check_count,
            **{a: functools.partial(_limit, setting=setting) for a, setting in self.limits.items()},
        }  # fmt: skip
        self.chat_extra: dict[str, _Check] = {
            _OPERATION: check_text, "gen_ai.request.model": check_text,
            HarnessAttribute.SEMANTIC_GUARD.value: check_bool, _INPUT: read_messages, _OUTPUT: read_messages,
            _TOOLS: check_text,
        }  # fmt: skip
        self.tool_extra: dict[str, _Check] = {_OPERATION: check_text}
        self.by_event_name = {f"{OTEL_NAMESPACE}.{cls.kind.value.lower()}": cls for cls in EVENT_TYPES
                              if cls not in (RunStarted, ModelCall, ToolInvocation, Released)}  # fmt: skip

    # reading ------------------------------------------------------------------------------------------------------
    def read(self, lines: Sequence[tuple[int, str]]) -> list[ObservedRun]:
        spans: dict[tuple[str, str], _Span] = {}
        for n, text in lines:
            for span in self._spans(n, text):
                key = (span.trace_id, span.span_id)
                if key in spans:
                    raise TraceImportError(f"{self.path}:{n}: span {span.span_id} appears twice (also line"
                                           f" {spans[key].line})")  # fmt: skip
                spans[key] = span
        runs = [s for s in spans.values() if s.attributes.get(_OPERATION) == "invoke_agent"]
        children: dict[tuple[str, str], list[_Span]] = {(r.trace_id, r.span_id): [] for r in runs}
        for s in spans.values():
            op = s.attributes.get(_OPERATION)
            if op not in ("chat", "execute_tool"):
                continue
            parent = children.get((s.trace_id, s.parent))
            if parent is None:
                raise TraceImportError(self._orphan(s, spans.get((s.trace_id, s.parent))))
            parent.append(s)
        seen: dict[str, _Span] = {}
        out = []
        for r in runs:
            run_id = r.attributes.get(_CONVERSATION)
            if run_id is None:
                raise TraceImportError(f"{self._at(r)}: no {_CONVERSATION} (the run's id)")
            try:
                run_id = _run_id(_CONVERSATION, run_id)
            except BadValue as exc:
                raise TraceImportError(f"{self._at(r)}: {exc}") from None
            if run_id in seen:
                raise TraceImportError(f"{self._at(r)}: run {_short(run_id)} also has run span"
                                       f" {seen[run_id].span_id} (two runs interleaved under one id)")  # fmt: skip
            seen[run_id] = r
            out.append(self._run(r, run_id, children[(r.trace_id, r.span_id)]))
        if not out:
            raise TraceImportError(f"{self.path}: no invoke_agent span: no run to import")
        return out

    def _orphan(self, s: _Span, parent: _Span | None) -> str:
        """Why a chat or execute_tool span belongs to no run: its parent is missing, or is not a run span."""
        at = f"{self.path}:{s.line}: span {s.span_id} ({s.name})"
        if parent is None:
            return f"{at}: its run span {s.parent or '(none)'} is not in the file (a run cut off, or spans missing)"
        op = parent.attributes.get(_OPERATION)
        what = f"{_OPERATION} {op!r}" if op is not None else f"no {_OPERATION}"
        return (f"{at}: its parent span {parent.span_id} ({parent.name}, line {parent.line}) is not a run span: it"
                f" has {what}, where a run span has 'invoke_agent'")  # fmt: skip

    def _spans(self, n: int, text: str) -> Iterable[_Span]:
        from google.protobuf.json_format import ParseError

        from runners.interchange.otel_export import parse_otlp_json

        try:
            request = parse_otlp_json(text)
        except RecursionError:
            raise TraceImportError(f"{self.path}:{n}: JSON nested too deep") from None
        except (ParseError, ValueError, TypeError, AttributeError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise TraceImportError(f"{self.path}:{n}: not an OTLP/JSON traces request ({first[:200]})") from None
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                for s in ss.spans:
                    where = f"{self.path}:{n}: span {s.span_id.hex()}"
                    events = tuple((e.name, e.time_unix_nano, self._attrs(where, e.attributes)) for e in s.events)
                    yield _Span(n, s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(), s.name,
                                s.start_time_unix_nano, s.end_time_unix_nano, self._attrs(where, s.attributes),
                                events)  # fmt: skip

    @staticmethod
    def _attrs(where: str, kvs: Any) -> dict[str, object]:
        out: dict[str, object] = {}
        for kv in kvs:
            which = kv.value.WhichOneof("value")
            if which not in ("string_value", "bool_value", "int_value", "double_value"):
                raise TraceImportError(f"{where}: attribute {kv.key}: a {which or 'missing'} value (a harness"
                                       " attribute is a string, boolean or number)")  # fmt: skip
            out[kv.key] = getattr(kv.value, which)
        return out

    def _at(self, s: _Span) -> str:
        return f"{self.path}:{s.line}: span {s.span_id} ({s.name})"

    # one run ------------------------------------------------------------------------------------------------------
    def _event(self, where: str, cls: type[TraceEvent], attrs: dict[str, object], extra: Mapping[str, _Check],
               timing: dict[str, float]) -> TraceEvent:  # fmt: skip
        names = self.names[cls]
        data: dict[str, object] = dict.fromkeys(_NULLABLE[cls])  # the recorder leaves a None field out
        data.update(timing)
        given: dict[str, object] = {}
        for key, value in attrs.items():
            field = names.get(key)
            if field is not None:
                given[field] = value
            elif key not in extra:
                raise TraceImportError(f"{where}: unknown attribute {key!r} on a {cls.kind.value}")
        try:
            check_event_fields(cls, given, {f: a for a, f in names.items()})
            check_event_fields(cls, timing, {"t_ms": "endTimeUnixNano", "latency_ms": "startTimeUnixNano"})
        except BadValue as exc:
            raise TraceImportError(f"{where}: {exc}") from None
        data.update(given)
        try:
            event: TraceEvent = event_adapter(cls.kind).validate_python(data)
        except pydantic.ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"])
            raise TraceImportError(f"{where} ({cls.kind.value}): {field}: {first['msg']}") from None
        return event

    def _extra(self, where: str, attrs: Mapping[str, object], checks: Mapping[str, _Check]
               ) -> dict[str, object]:  # fmt: skip
        """The span's attributes besides its event's fields, each checked (`checks`); the values they read as."""
        out: dict[str, object] = {}
        for key, check in checks.items():
            if key in attrs:
                try:
                    out[key] = check(key, attrs[key])
                except BadValue as exc:
                    raise TraceImportError(f"{where}: {exc}") from None
        return out

    def _times(self, where: str, s: _Span, run_start: int) -> None:
        """A span's times: an end not before its start, and neither before its run's start."""
        if s.end < s.start:
            raise TraceImportError(f"{where}: endTimeUnixNano {s.end} is before startTimeUnixNano {s.start}: the"
                                   " span ends before it starts")  # fmt: skip
        if s.start < run_start:
            raise TraceImportError(f"{where}: startTimeUnixNano {s.start} is before its run span's start"
                                   f" ({run_start})")  # fmt: skip

    def _run(self, r: _Span, run_id: str, kids: list[_Span]) -> ObservedRun:
        at = self._at(r)
        t0 = r.start

        def ms(ns: int) -> float:
            return round((ns - t0) / 1e6, 3)

        self._times(at, r, t0)
        run_names, release_names = self.names[RunStarted], self.names[Released]
        start_attrs = {k: v for k, v in r.attributes.items() if k in run_names}
        release_attrs = {k: v for k, v in r.attributes.items() if k in release_names and k not in run_names}
        rest = set(r.attributes) - set(start_attrs) - set(release_attrs)
        unknown = sorted(rest - set(self.run_extra))
        if unknown:
            raise TraceImportError(f"{at}: unknown attribute {unknown[0]!r} on an invoke_agent span")
        if f"{self.namespace}.outcome" not in release_attrs:
            raise TraceImportError(f"{at}: no {self.namespace}.outcome: the run was never released (cut off?)")
        self._extra(at, r.attributes, self.run_extra)
        limit_values = {self.limits[k]: v for k, v in r.attributes.items() if k in self.limits}
        limits = None
        if limit_values:
            try:
                limits = RunLimits.model_validate(limit_values)
            except pydantic.ValidationError as exc:
                first = exc.errors()[0]
                raise TraceImportError(f"{at}: harness.config.{first['loc'][0]}: {first['msg']}") from None
        events: list[TraceEvent] = [self._event(at, RunStarted, {**start_attrs, "harness.seq": 0}, {},
                                                {"t_ms": 0.0})]  # fmt: skip
        final: tuple[int, str | None] = (-1, None)
        contents: list[tuple[int, Contents]] = []
        for k in kids:
            where = self._at(k)
            self._times(where, k, t0)
            is_chat = k.attributes[_OPERATION] == "chat"
            cls: type[TraceEvent] = ModelCall if is_chat else ToolInvocation
            extra = self.chat_extra if is_chat else self.tool_extra
            checked = self._extra(where, k.attributes, extra)
            timing = {"t_ms": ms(k.end), "latency_ms": round((k.end - k.start) / 1e6, 3)}
            event = self._event(where, cls, k.attributes, extra, timing)
            events.append(event)
            if isinstance(event, ModelCall):
                given = typing.cast("tuple[ChatMessage, ...] | None", checked.get(_INPUT))
                answered = typing.cast("tuple[ChatMessage, ...] | None", checked.get(_OUTPUT))
                tools = checked.get(_TOOLS)
                if event.purpose is ModelPurpose.DIAGNOSIS and event.seq > final[0]:
                    final = (event.seq, _answer_text(answered))
                contents.append((event.seq, Contents(given, answered, tools if isinstance(tools, str) else None)))
        for name, ts, attrs in r.events:
            if name == _EVALUATION:
                continue  # the bench's verdict: imported runs carry no expectations
            ev_cls = self.by_event_name.get(name)
            if ev_cls is None:
                raise TraceImportError(f"{at}: unknown span event {name!r}")
            where = f"{at}, event {name}"
            if ts < t0:
                raise TraceImportError(f"{where}: timeUnixNano {ts} is before its run span's start ({t0})")
            events.append(self._event(where, ev_cls, attrs, {}, {"t_ms": ms(ts)}))
        events.sort(key=lambda e: e.seq)
        for expected, e in enumerate(events):
            if e.seq != expected:
                what = "twice" if e.seq < expected else "missing"
                missing = expected if e.seq > expected else e.seq
                raise TraceImportError(f"{at}: harness.seq {missing} {what} among its spans and span events (a"
                                       " span missing, or two runs interleaved under one run span)")  # fmt: skip
        events.append(self._event(at, Released, {**release_attrs, "harness.seq": len(events)}, {},
                                  {"t_ms": ms(r.end)}))  # fmt: skip
        try:
            check_times(events, {"t_ms": "the span times"})
            check_totals(events, {"input_tokens": "gen_ai.usage.input_tokens",
                                  "output_tokens": "gen_ai.usage.output_tokens",
                                  "observation_bytes": "harness.observation_bytes"})  # fmt: skip
        except BadValue as exc:
            raise TraceImportError(f"{at}: {exc}") from None
        case_id, epoch = _identity(run_id)
        carried = any(c.given is not None or c.answered is not None for _, c in contents)
        in_order = tuple(c for _, c in sorted(contents, key=lambda sc: sc[0])) if carried else ()
        return ObservedRun(run_id, case_id, epoch, tuple(events), limits, final[1], in_order,
                           source=f"{self.path}:{r.line}: span {r.span_id}")  # fmt: skip


def _budget_kind(name: str, value: object, *, kinds: type[Enum]) -> str:
    return check_enum(name, value, kinds)


def _limit(name: str, value: object, *, setting: str) -> None:
    check_limit(name, setting, value)


_CONVERSATION = "gen_ai.conversation.id"
_INPUT = "gen_ai.input.messages"
_OUTPUT = "gen_ai.output.messages"
_TOOLS = "gen_ai.tool.definitions"


def _run_id(name: str, value: object) -> str:
    """A run's id: a string with more than spaces in it (it names the case run the import stores)."""
    return check_text(name, value, empty=False)


def _answer_text(messages: Sequence[ChatMessage] | None) -> str | None:
    """The text of an answer (its assistant messages' last text part), None when it has none."""
    texts = [p.content for m in messages or () if m.role == "assistant" for p in m.parts if isinstance(p, TextPart)]
    return texts[-1] if texts else None


# -- as a result ---------------------------------------------------------------------------------------------------
def observed_result(run: ObservedRun) -> RunResult:
    """The run as a `RunResult`: the outcome from RELEASED, the usage counted from its events."""
    released = run.events[-1]
    assert isinstance(released, Released)  # read_traces returns whole runs only
    calls = [e for e in run.events if isinstance(e, ModelCall)]
    budgets = [e for e in run.events if isinstance(e, BudgetExhausted)]
    usage = BudgetUsage(
        model_calls=sum(c.purpose is ModelPurpose.DIAGNOSIS for c in calls),
        guard_calls=sum(c.purpose is ModelPurpose.SEMANTIC_GUARD for c in calls),
        tool_invocations=sum(isinstance(e, ToolInvocation) for e in run.events),
        input_tokens=sum(c.input_tokens or 0 for c in calls),
        output_tokens=sum(c.output_tokens or 0 for c in calls),
        observation_bytes=sum(e.observation_bytes for e in run.events if isinstance(e, ToolInvocation)),
        budget_hit=budgets[0].budget if budgets else None,
    )
    failed = [c for c in calls if c.error_kind is not None]
    draft = None
    if released.outcome is ReleaseOutcome.SUCCESS and run.final_text is not None:  # only SUCCESS publishes it
        draft = parse_draft(run.final_text).draft
    decision = ReleaseDecision(released.outcome, released.fallback_kind, released.stop_reason, draft, None, None,
                               released.detail or "")  # fmt: skip
    last = failed[-1] if failed and failed[-1] is calls[-1] else None
    return RunResult(run.run_id, decision, usage, run.events, sum(c.error_kind is None for c in calls), None,
                     last.detail if last else None, released.t_ms,
                     error_kind=last.error_kind if last else None, transcript=_transcript(run))  # fmt: skip


_ROLES = {"system": EntryKind.SYSTEM, "user": EntryKind.USER, "tool": EntryKind.OBSERVATION}


def _extra_text(part: Any, key: str) -> str | None:
    """A string field a part of another type carries beyond its `type` (None: absent or not a string)."""
    value = (part.model_extra or {}).get(key)
    return value if isinstance(value, str) else None


def _given_text(part: Any) -> str | None:
    """What a part sent to the model says: a text's content, a tool answer's response when it is text."""
    if isinstance(part, TextPart):
        return part.content
    if isinstance(part, ToolCallResponsePart):
        return part.response if isinstance(part.response, str) else None
    return _extra_text(part, "content")


def _part_id(part: Any) -> str | None:
    if isinstance(part, ToolCallPart | ToolCallResponsePart):
        return part.id
    return _extra_text(part, "id")


def _arguments(part: ToolCallPart) -> str | None:
    """A tool call's arguments as stored: the text the model sent, or a JSON value written as JSON."""
    args = part.arguments
    return args if isinstance(args, str) or args is None else json.dumps(args, ensure_ascii=False)


def _offered(definitions: str | None) -> str | None:
    """A TOOLS entry's content (`[{"name", "description"}]`) from `gen_ai.tool.definitions` (None: none given)."""
    if definitions is None:
        return None
    try:
        parsed = json.loads(definitions)
    except (ValueError, RecursionError):
        return None
    tools = [{"name": str(d.get("name")), "description": str(d.get("description") or "")}
             for d in (parsed if isinstance(parsed, list) else []) if isinstance(d, dict)]  # fmt: skip
    return json.dumps(tools, ensure_ascii=False, separators=(",", ":")) if tools else None


def _transcript(run: ObservedRun) -> tuple[TranscriptEntry, ...]:
    """What the model was sent and answered, as far as the trace says: with message contents, every message of
    every call; without, one entry per model answer or failure and per tool call (no text), so each tool call's
    decision has its place."""
    out: list[TranscriptEntry] = []

    def add(purpose: ModelPurpose, kind: EntryKind, call: int, content: str | None, **fields: Any) -> None:
        out.append(TranscriptEntry(len(out), purpose, kind, call, content, **fields))

    contents = iter(run.contents)
    call = diagnosis_call = 0
    for e in run.events:
        if isinstance(e, ModelCall):
            call += 1
            if e.purpose is ModelPurpose.DIAGNOSIS:
                diagnosis_call = call
            carried = next(contents, Contents(None, None))
            offered = _offered(carried.tools)
            if offered is not None:
                add(e.purpose, EntryKind.TOOLS, call, offered)
            for m in carried.given or ():
                kind = _ROLES.get(m.role)
                if kind is None:
                    continue  # an assistant's own earlier words, or a role the transcript has no entry for
                for part in m.parts:
                    add(e.purpose, kind, call, _given_text(part),
                        tool_call_id=_part_id(part) if kind is EntryKind.OBSERVATION else None)  # fmt: skip
            if e.error_kind is not None:
                add(e.purpose, EntryKind.MODEL_ERROR, call, e.detail, error_kind=e.error_kind)
                continue
            answer = [m for m in carried.answered or () if m.role == "assistant"]
            texts = [p.content for m in answer for p in m.parts if isinstance(p, TextPart)]
            add(e.purpose, EntryKind.ASSISTANT, call, texts[0] if texts else None,
                input_tokens=e.input_tokens, output_tokens=e.output_tokens,
                finish_reason=answer[0].finish_reason if answer else None)  # fmt: skip
            for m in answer:
                for p in m.parts:
                    if isinstance(p, ToolCallPart):
                        add(e.purpose, EntryKind.TOOL_CALL, call, None, tool_call_id=p.id, tool=p.name,
                            arguments=_arguments(p))  # fmt: skip
        elif isinstance(e, ToolInvocation | ToolRequestRejected) and not run.contents:
            add(ModelPurpose.DIAGNOSIS, EntryKind.TOOL_CALL, diagnosis_call, None, tool_call_id=e.tool_call_id,
                tool=e.tool)  # fmt: skip
    return tuple(out)


def import_rows(
    runs: Sequence[ObservedRun], bench_run_id: str, label: str
) -> list[tuple[CaseRunRows, tuple[list[tuple[Any, ...]], dict[str, str]]]]:
    """Every table's rows of the runs, as the bench stores a case run (`runners.store.schema`), without a verdict:
    case run `BENCH/CASE/EPOCH` with the run's own thresholds and budgets where its trace names them; each with its
    `messages` rows and prompts (`runners.store.transcripts.transcript_rows`)."""
    from runners.run.bench import case_run_id
    from runners.run.case_runner import metrics_of
    from runners.store.schema import observed_case_run_rows
    from runners.store.transcripts import transcript_rows

    out = []
    for run in runs:
        result = observed_result(run)
        started = run.events[0]
        assert isinstance(started, RunStarted)
        lim = run.limits
        swept: dict[str, SettingValue] = {
            "no_gain_threshold": lim.no_gain_threshold if lim else None,
            "protocol_violation_threshold": lim.protocol_violation_threshold if lim else None,
            "max_model_calls": lim.max_model_calls if lim else None,
            "max_tool_invocations": lim.max_tool_invocations if lim else None,
            "max_total_tokens": lim.max_total_tokens if lim else None,
            "schema_mode": lim.schema_mode if lim else None,
        }
        rows = observed_case_run_rows(bench_run_id, case_run_id(bench_run_id, run.case_id, run.epoch), run.case_id,
                                      started.model, label, run.epoch, swept, result, metrics_of(result))  # fmt: skip
        if any(isinstance(e, ToolRequestRejected) for e in run.events):
            # a rejection's answer has a size too, which no event records: the run's total is not known
            rows = dataclasses.replace(rows, case_run={**rows.case_run, "observation_bytes": None})
        transcript = transcript_rows(bench_run_id, str(rows.case_run["case_run_id"]), result)
        _storable(run, rows, transcript[0])
        out.append((rows, transcript))
    return out


def _storable(run: ObservedRun, rows: CaseRunRows, messages: Sequence[tuple[Any, ...]]) -> None:
    """Every number the run's rows hold fits its column (a BIGINT, a finite DOUBLE) — what the readers' checks
    already ensure, checked once more on what is about to be written, so that no value the database cannot hold
    is found after it has been opened."""
    cells: list[tuple[str, object]] = [(f"case_runs.{k}", v) for k, v in rows.case_run.items()]
    cells += [(f"tool_calls.{f.name}", getattr(r, f.name)) for r in rows.tool_calls for f in dataclasses.fields(r)]
    cells += [("events", v) for row in rows.events for v in row]
    cells += [("messages", v) for row in messages for v in row]
    for column, value in cells:
        if isinstance(value, bool):
            continue
        if (isinstance(value, int) and not -(2**63) <= value <= INT64_MAX) or (
            isinstance(value, float) and not math.isfinite(value)
        ):
            raise TraceImportError(f"{run.source}: run {_short(run.run_id)}: {column} would be {value}, which the"
                                   " database cannot store")  # fmt: skip
