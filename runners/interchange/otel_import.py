"""`harness-bench import TRACES`: runs observed elsewhere read back as the typed events they were recorded from.

Two inputs, told apart by their first line:

- OTLP/JSON (`harness-bench export --otel`, an OpenTelemetry Collector's file exporter, any producer of the same
  attributes): every `invoke_agent` span is one run; its `chat` and `execute_tool` children and its `harness.*`
  span events are the run's events (`harness.seq` orders them), its own attributes RUN_STARTED and RELEASED.
  Spans that are none of these and belong to no run (an embedder's own) are left aside; the bench's verdict
  (`gen_ai.evaluation.result`) is not read (`--outcomes` gives imported runs their verdicts). A run whose spans carry
  no `harness.*` attribute is another agent's, read by `genai_spans` (its calls may sit under spans of its own).
- the library's event log (`harness.event_log`, read by `_event_log`): one typed event per line, each with its
  run's id.

Both are read a piece at a time (`stream_traces`): the event log a line at a time, each run given as soon as its
RELEASED is read; OTLP/JSON a span at a time (`_otlp_spans`, over `_json_stream`: a request of any size costs its
largest span), each trace's runs given once its last span is read (a first reading of the file finds where that is).
Memory holds the runs or traces begun and not yet whole, never the file.

Every run must be whole (RUN_STARTED … RELEASED, no event missing, no attribute or field unknown) and every value
what its field says (`_trace_values.py`: types and ranges, the settings' bounds, the GenAI message shapes, times in
order); the first problem is one line naming the file and line, the span id where there is one, and the field, and
nothing is imported. Lines end at `\n` only: any other line separator (U+2028, U+2029, U+0085) is text inside a
JSON string.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from enum import Enum, StrEnum
from pathlib import Path
from typing import Any

import pydantic

from harness import (
    EVENT_TYPES,
    BudgetExhausted,
    ModelCall,
    ModelPurpose,
    Released,
    RunLimits,
    RunStarted,
    ToolInvocation,
    TraceEvent,
    event_adapter,
)
from runners.domain.input_files import MAX_TRACE_BYTES, InputPathError, check_input_path
from runners.interchange._event_log import file_lines, opened, read_event_log
from runners.interchange._json_stream import JsonCursor, JsonStreamError
from runners.interchange._otlp_spans import RawSpan, raw_spans, read_span
from runners.interchange._trace_values import (
    BadValue,
    ChatMessage,
    TextPart,
    check_bool,
    check_count,
    check_enum,
    check_event_fields,
    check_limit,
    check_text,
    check_times,
    check_totals,
    read_messages,
    strict_json,
)
from runners.interchange.genai_spans import MODEL_OPERATIONS, NotScalar, Span, foreign_run, is_foreign
from runners.interchange.observed_runs import (
    Contents,
    ObservedRun,
    TraceImportError,
    distinct_epochs,
    fingerprint,
    identity,
    short,
)

__all__ = [
    "Contents",
    "ObservedRun",
    "TraceFormat",
    "TraceImportError",
    "fingerprint",
    "read_traces",
    "stream_traces",
]


class TraceFormat(StrEnum):
    """What a trace file holds, told apart by its first line."""

    OTLP_JSON = "OTLP/JSON"
    """OpenTelemetry spans: one ExportTraceServiceRequest per line."""
    EVENT_LOG = "event log"
    """The library's event log: one typed event per line."""


def stream_traces(path: Path, *, formats: Collection[TraceFormat] = tuple(TraceFormat)) -> Iterator[ObservedRun]:
    """Every run in `path` (OTLP/JSON or the event log: one of `formats`), each whole, read a trace (OTLP/JSON) or a
    run (the event log) at a time: memory holds the traces not yet whole, never the file. The first problem is a
    TraceImportError — after the runs before it were yielded: a caller that stores runs reads the file through once
    before it stores any."""
    try:
        check_input_path("", path, max_bytes=MAX_TRACE_BYTES)
    except InputPathError as exc:
        raise TraceImportError(str(exc)) from None
    found = _format_of(path, formats)
    runs = _OtlpReader(path).runs() if found is TraceFormat.OTLP_JSON else read_event_log(path)
    yield from distinct_epochs(runs)


def read_traces(path: Path, *, formats: Collection[TraceFormat] = tuple(TraceFormat)) -> tuple[ObservedRun, ...]:
    """Every run in `path` (`stream_traces`), all of them, in the order they are whole; else a TraceImportError."""
    return tuple(stream_traces(path, formats=formats))


def _format_of(path: Path, formats: Collection[TraceFormat]) -> TraceFormat:
    """What the file holds, told apart by its first value: a request whose first member is `resourceSpans`, or an
    event-log line."""
    with opened(path) as f:
        cursor = JsonCursor(f)
        first_no = 1
        try:
            if not cursor.peek():
                raise TraceImportError(f"{path}: no trace in it (an empty file)")
            first_no = cursor.line
            first = next(cursor.members("the first line"), None)
        except JsonStreamError:
            first = None  # the first line read whole says what is wrong with it
    if first in _REQUEST_KEYS:
        found = TraceFormat.OTLP_JSON
    else:
        first_no, text = next(file_lines(path), (first_no, ""))
        head = _json(path, first_no, text)
        if isinstance(head, dict) and not _REQUEST_KEYS.isdisjoint(head):
            found = TraceFormat.OTLP_JSON  # refused by the reader, naming the member that comes first
        elif isinstance(head, dict) and "run_id" in head:
            found = TraceFormat.EVENT_LOG
        else:
            wanted = " nor ".join(_FORMAT_SHAPES[f] for f in formats)
            raise TraceImportError(f"{path}:{first_no}: {'neither ' if len(formats) > 1 else 'not '}{wanted}")
    if found not in formats:
        raise TraceImportError(f"{path}:{first_no}: {_FORMAT_SHAPES[found]}, not"
                               f" {' or '.join(_FORMAT_SHAPES[f] for f in formats)}")  # fmt: skip
    return found


_REQUEST_KEYS = frozenset({"resourceSpans", "resource_spans"})


_FORMAT_SHAPES = {
    TraceFormat.OTLP_JSON: "an OTLP/JSON traces request (resourceSpans)",
    TraceFormat.EVENT_LOG: "an event-log line (run_id, event)",
}


def _json(path: Path, n: int, line: str) -> Any:
    try:
        return strict_json(line)
    except RecursionError:
        raise TraceImportError(f"{path}:{n}: JSON nested too deep") from None
    except ValueError as exc:
        raise TraceImportError(f"{path}:{n}: not JSON ({str(exc).splitlines()[0]})") from None


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


_Check = Callable[[str, object], object]
"""The check of one span attribute (its name, its value): the value it reads as, or BadValue."""


class _OtlpReader:
    def __init__(self, path: Path) -> None:
        from harness import OTEL_NAMESPACE, BudgetKind, HarnessAttribute

        self.path = path
        self.seen: dict[str, str] = {}
        """Every run id read so far, with its run span's id (a run id is one run's in the whole file)."""
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
    def runs(self) -> Iterator[ObservedRun]:
        """The file's runs, a trace at a time: a first reading finds where each trace's last span is (a span's
        parent is always in its own trace), the second reads each trace's runs once that span is read — memory
        holds the traces begun and not yet ended (one, as the bench and a Collector write them), never the file."""
        last: dict[str, int] = {}
        for i, raw in enumerate(self._raw()):
            last[raw.trace_key] = i
        pending: dict[str, list[Span]] = {}
        found = False
        for i, raw in enumerate(self._raw()):
            key = raw.trace_key
            pending.setdefault(key, []).append(self._span(raw))
            if last.get(key, i) <= i:  # its last span (or one the first reading did not see: the file changed)
                last.pop(key, None)
                for run in self._trace(pending.pop(key)):
                    found = True
                    yield run
        for group in list(pending.values()):
            for run in self._trace(group):
                found = True
                yield run
        if not found:
            raise TraceImportError(f"{self.path}: no invoke_agent span: no run to import")

    def _raw(self) -> Iterator[RawSpan]:
        with opened(self.path) as f:
            try:
                yield from raw_spans(JsonCursor(f))
            except JsonStreamError as exc:
                raise TraceImportError(f"{self.path}:{exc}") from None

    def _trace(self, group: Sequence[Span]) -> list[ObservedRun]:
        """The runs of one trace's spans, in the order their run spans come."""
        spans: dict[tuple[str, str], Span] = {}
        for span in group:
            key = (span.trace_id, span.span_id)
            if key in spans:
                raise TraceImportError(f"{self.path}:{span.line}: span {span.span_id} appears twice (also line"
                                       f" {spans[key].line})")  # fmt: skip
            spans[key] = span
        self._refuse_cycles(spans)
        runs = [s for s in spans.values() if s.attributes.get(_OPERATION) == "invoke_agent"]
        children: dict[tuple[str, str], list[Span]] = {(r.trace_id, r.span_id): [] for r in runs}
        indirect: dict[tuple[str, str], Span] = {}
        for s in spans.values():
            op = s.attributes.get(_OPERATION)
            if op not in MODEL_OPERATIONS and op != "execute_tool":
                continue
            parent = children.get((s.trace_id, s.parent))
            if parent is None:  # another agent may nest its calls under spans of its own: the nearest run above
                run = self._run_above(s, spans)
                if run is None:
                    raise TraceImportError(self._orphan(s, spans.get((s.trace_id, s.parent))))
                parent = children[(run.trace_id, run.span_id)]
                indirect[(s.trace_id, s.span_id)] = s
            parent.append(s)
        seen = self.seen
        out = []
        for r in runs:
            kids = children[(r.trace_id, r.span_id)]
            foreign = is_foreign(r, kids)
            run_id = r.attributes.get(_CONVERSATION)
            if run_id is None and not foreign:
                raise TraceImportError(f"{self._at(r)}: no {_CONVERSATION} (the run's id)")
            try:
                run_id = None if run_id is None else _run_id(_CONVERSATION, run_id)
            except BadValue as exc:
                raise TraceImportError(f"{self._at(r)}: {exc}") from None
            if run_id is not None and run_id in seen:
                raise TraceImportError(f"{self._at(r)}: run {short(run_id)} also has run span"
                                       f" {seen[run_id]} (two runs interleaved under one id)")  # fmt: skip
            if run_id is not None:
                seen[run_id] = r.span_id
            if foreign:
                out.append(foreign_run(self.path, r, kids, run_id))
                continue
            assert run_id is not None
            nested = next((k for k in kids if (k.trace_id, k.span_id) in indirect), None)
            if nested is not None:
                raise TraceImportError(self._orphan(nested, spans.get((nested.trace_id, nested.parent))))
            self._scalars(r, kids)
            out.append(self._run(r, run_id, kids))
        return out

    def _refuse_cycles(self, spans: Mapping[tuple[str, str], Span]) -> None:
        """Spans form a tree: a span whose parent ids lead back to it (its own ancestor) is refused, naming it."""
        done: set[tuple[str, str]] = set()
        for start in spans.values():
            path: list[tuple[str, str]] = []
            at: Span | None = start
            while at is not None and (at.trace_id, at.span_id) not in done:
                key = (at.trace_id, at.span_id)
                if key in path:
                    raise TraceImportError(f"{self.path}:{at.line}: span {at.span_id} is its own ancestor (its parent"
                                           " ids lead back to it): spans must form a tree")  # fmt: skip
                path.append(key)
                at = spans.get((at.trace_id, at.parent)) if at.parent else None
            done.update(path)

    @staticmethod
    def _run_above(s: Span, spans: Mapping[tuple[str, str], Span]) -> Span | None:
        """The nearest `invoke_agent` span above `s` (None: none; a cycle of parents ends the walk)."""
        seen: set[str] = set()
        at = spans.get((s.trace_id, s.parent))
        while at is not None and at.span_id not in seen:
            if at.attributes.get(_OPERATION) == "invoke_agent":
                return at
            seen.add(at.span_id)
            at = spans.get((at.trace_id, at.parent))
        return None

    def _scalars(self, r: Span, kids: Sequence[Span]) -> None:
        """A run the Harness drove holds only scalar attributes (it writes no other)."""
        for s in (r, *kids):
            where = f"{self.path}:{s.line}: span {s.span_id}"
            for attrs in (s.attributes, *(a for _, _, a in s.events)):
                for key, value in attrs.items():
                    if isinstance(value, NotScalar):
                        raise TraceImportError(f"{where}: attribute {key}: a {value.which} value (a harness"
                                               " attribute is a string, boolean or number)")  # fmt: skip

    def _orphan(self, s: Span, parent: Span | None) -> str:
        """Why a chat or execute_tool span belongs to no run: its parent is missing, or is not a run span."""
        at = f"{self.path}:{s.line}: span {s.span_id} ({s.name})"
        if parent is None:
            return f"{at}: its run span {s.parent or '(none)'} is not in the file (a run cut off, or spans missing)"
        op = parent.attributes.get(_OPERATION)
        what = f"{_OPERATION} {op!r}" if op is not None else f"no {_OPERATION}"
        return (f"{at}: its parent span {parent.span_id} ({parent.name}, line {parent.line}) is not a run span: it"
                f" has {what}, where a run span has 'invoke_agent'")  # fmt: skip

    def _span(self, raw: RawSpan) -> Span:
        try:
            return read_span(raw)
        except JsonStreamError as exc:
            raise TraceImportError(f"{self.path}:{exc}") from None

    def _at(self, s: Span) -> str:
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

    def _times(self, where: str, s: Span, run_start: int) -> None:
        """A span's times: an end not before its start, and neither before its run's start."""
        if s.end < s.start:
            raise TraceImportError(f"{where}: endTimeUnixNano {s.end} is before startTimeUnixNano {s.start}: the"
                                   " span ends before it starts")  # fmt: skip
        if s.start < run_start:
            raise TraceImportError(f"{where}: startTimeUnixNano {s.start} is before its run span's start"
                                   f" ({run_start})")  # fmt: skip

    def _agrees(self, at: str, attrs: Mapping[str, object], events: Sequence[TraceEvent]) -> None:
        """The run span's token sums and budget stop agree with its spans and span events: the last span or event
        dropped leaves no gap in `harness.seq` (RELEASED takes the next number), but shows here."""
        calls = [e for e in events if isinstance(e, ModelCall)]
        sums = {"gen_ai.usage.input_tokens": sum(c.input_tokens or 0 for c in calls),
                "gen_ai.usage.output_tokens": sum(c.output_tokens or 0 for c in calls)}  # fmt: skip
        for name, total in sums.items():
            if name in attrs and attrs[name] != total:
                raise TraceImportError(f"{at}: {name} {attrs[name]} where its chat spans sum to {total} (a chat span"
                                       " missing?)")  # fmt: skip
        hit = attrs.get(f"{self.namespace}.budget_hit")
        first = next((e.budget.value for e in events if isinstance(e, BudgetExhausted)), None)
        if hit is not None and hit != first:
            found = "no budget_exhausted event" if first is None else f"its first budget_exhausted event says {first}"
            raise TraceImportError(f"{at}: {self.namespace}.budget_hit {hit!r} where {found} (a span event"
                                   " missing?)")  # fmt: skip

    def _run(self, r: Span, run_id: str, kids: list[Span]) -> ObservedRun:
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
        self._agrees(at, r.attributes, events)
        events.append(self._event(at, Released, {**release_attrs, "harness.seq": len(events)}, {},
                                  {"t_ms": ms(r.end)}))  # fmt: skip
        try:
            check_times(events, {"t_ms": "the span times"})
            check_totals(events, {"input_tokens": "gen_ai.usage.input_tokens",
                                  "output_tokens": "gen_ai.usage.output_tokens",
                                  "observation_bytes": "harness.observation_bytes"})  # fmt: skip
        except BadValue as exc:
            raise TraceImportError(f"{at}: {exc}") from None
        case_id, epoch = identity(run_id)
        carried = any(c.given is not None or c.answered is not None for _, c in contents)
        in_order = tuple(c for _, c in sorted(contents, key=lambda sc: sc[0])) if carried else ()
        return ObservedRun(run_id, case_id, epoch, tuple(events), limits, final[1], in_order,
                           source=f"{self.path}:{r.line}: span {r.span_id}", trace_id=r.trace_id)  # fmt: skip


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
