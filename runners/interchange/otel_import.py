"""`harness-bench import TRACES`: runs observed elsewhere read back as the typed events they were recorded from.

Two inputs, told apart by their first line:

- OTLP/JSON (`harness-bench export --otel`, an OpenTelemetry Collector's file exporter, any producer of the same
  attributes): every `invoke_agent` span is one run; its `chat` and `execute_tool` children and its `harness.*`
  span events are the run's events (`harness.seq` orders them), its own attributes RUN_STARTED and RELEASED.
  Spans that are none of these and belong to no run (an embedder's own) are left aside; the bench's verdict
  (`gen_ai.evaluation.result`) is not read: imported runs are observations, without expectations.
- the library's event log (`harness.event_log`): one typed event per line, each with its run's id.

Every run must be whole (RUN_STARTED … RELEASED, no event missing, no attribute or field unknown); the first
problem is one line naming the file and line, and the span id where there is one, and nothing is imported.
"""

from __future__ import annotations

import dataclasses
import json
import re
import typing
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
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
    parse_draft,
)

if TYPE_CHECKING:
    from runners.plan.settings import SettingValue
    from runners.store.schema import CaseRunRows

__all__ = ["ObservedRun", "TraceImportError", "import_rows", "observed_result", "read_traces"]


class TraceImportError(ValueError):
    """A trace file that is not a set of whole runs: one line naming the file, the line and the span."""


@dataclass(frozen=True, slots=True)
class CallContents:
    """What one model call attempt's span says of its messages, in the conventions' JSON (None: not recorded)."""

    given: str | None
    """`gen_ai.input.messages`: the messages the call sent that the conversation had not sent before."""
    answered: str | None
    """`gen_ai.output.messages`: its answer."""
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
    contents: tuple[CallContents, ...] = ()
    """Per model call attempt, in order, what its span carries of its messages, when the trace carries message
    contents; else empty."""


_BENCH_ID = re.compile(r"(?P<bench>.+)/(?P<case>[^/]+)/(?P<epoch>[1-9][0-9]{0,8})")
"""A bench case run id (`runners.run.bench.case_run_id`)."""


def _identity(run_id: str) -> tuple[str, int]:
    m = _BENCH_ID.fullmatch(run_id)
    return (m["case"], int(m["epoch"])) if m else (run_id, 1)


def read_traces(path: Path) -> tuple[ObservedRun, ...]:
    """Every run in `path` (OTLP/JSON or the event log), each whole, in file order; else a TraceImportError."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TraceImportError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise TraceImportError(f"{path}: cannot read ({exc.strerror or exc})") from None
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines:
        raise TraceImportError(f"{path}: no trace in it (an empty file)")
    first_no, first = lines[0]
    head = _json(path, first_no, first)
    if isinstance(head, dict) and "resourceSpans" in head:
        runs = _OtlpReader(path).read(lines)
    elif isinstance(head, dict) and "run_id" in head:
        runs = _read_event_log(path, lines)
    else:
        raise TraceImportError(f"{path}:{first_no}: neither an OTLP/JSON traces request (resourceSpans) nor an"
                               " event-log line (run_id, event)")  # fmt: skip
    return _distinct_epochs(runs)


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
        run.events.append(event)
        run.released = isinstance(event, Released)
    out = []
    for run_id, run in runs.items():
        if not run.released:
            last = run.events[-1]
            raise TraceImportError(f"{path}:{run.line}: run {_short(run_id)}: cut off (no RELEASED; its last event is"
                                   f" {last.kind.value} seq {last.seq})")  # fmt: skip
        case_id, epoch = _identity(run_id)
        out.append(ObservedRun(run_id, case_id, epoch, tuple(run.events), run.limits))
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


class _OtlpReader:
    def __init__(self, path: Path) -> None:
        from harness import OTEL_NAMESPACE, HarnessAttribute

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
        self.run_extra = {_OPERATION, "gen_ai.agent.name", "gen_ai.conversation.id",
                          HarnessAttribute.STOP_REQUIRED_DELIVERED.value, HarnessAttribute.BUDGET_HIT.value,
                          "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", *self.limits}  # fmt: skip
        self.chat_extra = {_OPERATION, "gen_ai.request.model", HarnessAttribute.SEMANTIC_GUARD.value,
                           "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.definitions"}  # fmt: skip
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
                raise TraceImportError(f"{self.path}:{s.line}: span {s.span_id} ({s.name}): its run span"
                                       f" {s.parent or '(none)'} is not in the file (a run cut off, or spans"
                                       " missing)")  # fmt: skip
            parent.append(s)
        seen: dict[str, _Span] = {}
        out = []
        for r in runs:
            run_id = r.attributes.get("gen_ai.conversation.id")
            if not isinstance(run_id, str) or not run_id:
                raise TraceImportError(f"{self._at(r)}: no gen_ai.conversation.id (the run's id)")
            if run_id in seen:
                raise TraceImportError(f"{self._at(r)}: run {_short(run_id)} also has run span"
                                       f" {seen[run_id].span_id} (two runs interleaved under one id)")  # fmt: skip
            seen[run_id] = r
            out.append(self._run(r, run_id, children[(r.trace_id, r.span_id)]))
        if not out:
            raise TraceImportError(f"{self.path}: no invoke_agent span: no run to import")
        return out

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
    def _event(self, where: str, cls: type[TraceEvent], attrs: dict[str, object], extra: set[str],
               timing: dict[str, float]) -> TraceEvent:  # fmt: skip
        names = self.names[cls]
        data: dict[str, object] = dict.fromkeys(_NULLABLE[cls])  # the recorder leaves a None field out
        data.update(timing)
        for key, value in attrs.items():
            field = names.get(key)
            if field is not None:
                data[field] = value
            elif key not in extra:
                raise TraceImportError(f"{where}: unknown attribute {key!r} on a {cls.kind.value}")
        try:
            event: TraceEvent = event_adapter(cls.kind).validate_python(data)
        except pydantic.ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"])
            raise TraceImportError(f"{where} ({cls.kind.value}): {field}: {first['msg']}") from None
        return event

    def _run(self, r: _Span, run_id: str, kids: list[_Span]) -> ObservedRun:
        at = self._at(r)
        t0 = r.start

        def ms(ns: int) -> float:
            return round((ns - t0) / 1e6, 3)

        run_names, release_names = self.names[RunStarted], self.names[Released]
        start_attrs = {k: v for k, v in r.attributes.items() if k in run_names}
        release_attrs = {k: v for k, v in r.attributes.items() if k in release_names and k not in run_names}
        rest = set(r.attributes) - set(start_attrs) - set(release_attrs)
        unknown = sorted(rest - self.run_extra)
        if unknown:
            raise TraceImportError(f"{at}: unknown attribute {unknown[0]!r} on an invoke_agent span")
        if f"{self.namespace}.outcome" not in release_attrs:
            raise TraceImportError(f"{at}: no {self.namespace}.outcome: the run was never released (cut off?)")
        limit_values = {self.limits[k]: v for k, v in r.attributes.items() if k in self.limits}
        limits = None
        if limit_values:
            try:
                limits = RunLimits.model_validate(limit_values)
            except pydantic.ValidationError as exc:
                first = exc.errors()[0]
                raise TraceImportError(f"{at}: harness.config.{first['loc'][0]}: {first['msg']}") from None
        events: list[TraceEvent] = [self._event(at, RunStarted, {**start_attrs, "harness.seq": 0}, set(),
                                                {"t_ms": 0.0})]  # fmt: skip
        final: tuple[int, str | None] = (-1, None)
        contents: list[tuple[int, CallContents]] = []
        for k in kids:
            where = self._at(k)
            cls: type[TraceEvent] = ModelCall if k.attributes[_OPERATION] == "chat" else ToolInvocation
            extra = self.chat_extra if cls is ModelCall else {_OPERATION}
            timing = {"t_ms": ms(k.end), "latency_ms": round((k.end - k.start) / 1e6, 3)}
            event = self._event(where, cls, k.attributes, extra, timing)
            events.append(event)
            if isinstance(event, ModelCall) and event.purpose is ModelPurpose.DIAGNOSIS and event.seq > final[0]:
                final = (event.seq, _answer_text(where, k.attributes.get("gen_ai.output.messages")))
            if isinstance(event, ModelCall):
                given, answered = k.attributes.get("gen_ai.input.messages"), k.attributes.get("gen_ai.output.messages")
                tools = k.attributes.get("gen_ai.tool.definitions")
                contents.append((event.seq, CallContents(None if given is None else str(given),
                                                         None if answered is None else str(answered),
                                                         None if tools is None else str(tools))))  # fmt: skip
        for name, ts, attrs in r.events:
            if name == _EVALUATION:
                continue  # the bench's verdict: imported runs carry no expectations
            ev_cls = self.by_event_name.get(name)
            if ev_cls is None:
                raise TraceImportError(f"{at}: unknown span event {name!r}")
            events.append(self._event(f"{at}, event {name}", ev_cls, attrs, set(), {"t_ms": ms(ts)}))
        events.sort(key=lambda e: e.seq)
        for expected, e in enumerate(events):
            if e.seq != expected:
                what = "twice" if e.seq < expected else "missing"
                missing = expected if e.seq > expected else e.seq
                raise TraceImportError(f"{at}: harness.seq {missing} {what} among its spans and span events (a"
                                       " span missing, or two runs interleaved under one run span)")  # fmt: skip
        events.append(self._event(at, Released, {**release_attrs, "harness.seq": len(events)}, set(),
                                  {"t_ms": ms(r.end)}))  # fmt: skip
        case_id, epoch = _identity(run_id)
        carried = any(c.given is not None or c.answered is not None for _, c in contents)
        in_order = tuple(c for _, c in sorted(contents, key=lambda sc: sc[0])) if carried else ()
        return ObservedRun(run_id, case_id, epoch, tuple(events), limits, final[1], in_order)


def _answer_text(where: str, messages: object) -> str | None:
    """The text of an answer's `gen_ai.output.messages` (the conventions' JSON), None when it has none."""
    if messages is None:
        return None
    try:
        parsed = json.loads(str(messages))
    except RecursionError:
        raise TraceImportError(f"{where}: gen_ai.output.messages: JSON nested too deep") from None
    except ValueError:
        raise TraceImportError(f"{where}: gen_ai.output.messages: not JSON") from None
    texts = [part.get("content") for m in parsed if isinstance(m, dict) and m.get("role") == "assistant"
             for part in m.get("parts") or () if isinstance(part, dict) and part.get("type") == "text"
             ] if isinstance(parsed, list) else []  # fmt: skip
    strings = [t for t in texts if isinstance(t, str)]
    return strings[-1] if strings else None


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


def _parts(text: str | None) -> list[dict[str, Any]]:
    """The messages of a `gen_ai.*.messages` attribute (already read once as JSON by `_answer_text`)."""
    if text is None:
        return []
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return []
    return [m for m in parsed if isinstance(m, dict)] if isinstance(parsed, list) else []


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
            this = next(contents, CallContents(None, None))
            offered = _offered(this.tools)
            if offered is not None:
                add(e.purpose, EntryKind.TOOLS, call, offered)
            for m in _parts(this.given):
                kind = _ROLES.get(str(m.get("role")))
                for part in m.get("parts") or ():
                    if kind is not None and isinstance(part, dict):
                        text = part.get("content", part.get("response"))
                        add(e.purpose, kind, call, text if isinstance(text, str) else None,
                            tool_call_id=part.get("id") if kind is EntryKind.OBSERVATION else None)  # fmt: skip
            if e.error_kind is not None:
                add(e.purpose, EntryKind.MODEL_ERROR, call, e.detail, error_kind=e.error_kind)
                continue
            answer = [m for m in _parts(this.answered) if m.get("role") == "assistant"]
            texts = [p.get("content") for m in answer for p in m.get("parts") or () if p.get("type") == "text"]
            add(e.purpose, EntryKind.ASSISTANT, call, next((t for t in texts if isinstance(t, str)), None),
                input_tokens=e.input_tokens, output_tokens=e.output_tokens,
                finish_reason=answer[0].get("finish_reason") if answer else None)  # fmt: skip
            for m in answer:
                for p in m.get("parts") or ():
                    if p.get("type") == "tool_call":
                        add(e.purpose, EntryKind.TOOL_CALL, call, None, tool_call_id=p.get("id"), tool=p.get("name"),
                            arguments=p.get("arguments"))  # fmt: skip
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
        out.append((rows, transcript_rows(bench_run_id, str(rows.case_run["case_run_id"]), result)))
    return out
