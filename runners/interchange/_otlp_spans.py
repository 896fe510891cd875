"""The spans of an OTLP/JSON file, one at a time: every `ExportTraceServiceRequest` in it (one per line as the bench
and a Collector's file exporter write them, or one over several lines) walked down `resourceSpans` → `scopeSpans` →
`spans` with a `JsonCursor`, so that a request of any size costs the memory of its largest span. Every other member
(a resource, a scope, a schema URL) is checked as protobuf's JSON mapping checks it and dropped; a span is checked
when it is read (`span_message`). Ids are hex, as OTLP/JSON writes them (protobuf's own mapping would say base64).
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from runners.interchange._json_stream import JsonCursor, JsonStreamError
from runners.interchange.genai_spans import NotScalar, Span

__all__ = ["RawSpan", "raw_spans", "read_span"]

_ID_FIELDS = frozenset({"traceId", "spanId", "parentSpanId"})
"""The byte fields OTLP/JSON writes as hex."""


@dataclass(frozen=True, slots=True)
class RawSpan:
    """One span as its request holds it, decoded but not yet checked."""

    line: int
    """The file's line it starts on."""
    data: dict[str, Any]
    """The span object."""

    @property
    def trace_key(self) -> str:
        """Its trace id as written (lower case): the spans of one trace are read together."""
        value = self.data.get("traceId", self.data.get("trace_id"))
        return value.lower() if isinstance(value, str) else repr(value)


def _not_otlp(line: int, problem: str) -> JsonStreamError:
    return JsonStreamError(line, f"not an OTLP/JSON traces request ({problem[:200]})")


def _one_field(cursor: JsonCursor, message: Any, key: str) -> None:
    """The value of `key` in an object of type `message`, checked as protobuf's JSON mapping reads it."""
    from google.protobuf.json_format import ParseDict, ParseError

    line = cursor.line
    value = cursor.value()
    if _plain_member(key, value):
        return
    try:
        ParseDict({key: value}, message())
    except (ParseError, ValueError, TypeError, AttributeError, RecursionError) as exc:
        raise _not_otlp(line, str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None


def _field(cursor: JsonCursor, key: str, message: Any, seen: set[str]) -> str:
    """The field `key` names (its camelCase or snake_case spelling), each given once per object."""
    fields = message.DESCRIPTOR.fields_by_name
    name = next((f.name for f in fields.values() if key in (f.name, f.json_name)), key)
    if name in seen:
        raise _not_otlp(cursor.line, f'Message type "{message.DESCRIPTOR.full_name}" should not have multiple'
                                     f' "{name}" fields.')  # fmt: skip
    seen.add(name)
    return name


def raw_spans(cursor: JsonCursor) -> Iterator[RawSpan]:
    """Every span of every request the cursor's file holds, in file order; each request ends its line."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans

    while cursor.peek():
        seen: set[str] = set()
        for key in cursor.members("the request"):
            if _field(cursor, key, ExportTraceServiceRequest, seen) != "resource_spans":
                _one_field(cursor, ExportTraceServiceRequest, key)
            elif not cursor.null():
                for _ in cursor.items("resourceSpans"):
                    if cursor.null():
                        continue
                    in_resource: set[str] = set()
                    for rkey in cursor.members("a resourceSpans item"):
                        if _field(cursor, rkey, ResourceSpans, in_resource) != "scope_spans":
                            _one_field(cursor, ResourceSpans, rkey)
                        elif not cursor.null():
                            for _ in cursor.items("scopeSpans"):
                                yield from _scope_spans(cursor, ScopeSpans)
        cursor.next_line()


def _scope_spans(cursor: JsonCursor, message: Any) -> Iterator[RawSpan]:
    if cursor.null():
        return
    seen: set[str] = set()
    for key in cursor.members("a scopeSpans item"):
        if _field(cursor, key, message, seen) != "spans":
            _one_field(cursor, message, key)
        elif not cursor.null():
            for _ in cursor.items("spans"):
                line = cursor.line
                data = cursor.value()
                if not isinstance(data, dict):
                    raise _not_otlp(line, f"a span is an object, not {type(data).__name__}")
                yield RawSpan(line, data)


def _hex_ids(value: Any) -> Any:
    """Hex ids as the base64 protobuf's JSON mapping reads (in links too)."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in _ID_FIELDS and isinstance(v, str):
                v = base64.b64encode(bytes.fromhex(v)).decode()  # ValueError: not hex
            out[k] = _hex_ids(v)
        return out
    if isinstance(value, list):
        return [_hex_ids(v) for v in value]
    return value


def _message(raw: RawSpan) -> Any:
    """The span as an OTLP `Span` message, else JsonStreamError naming its line (protobuf's reason)."""
    from google.protobuf.json_format import ParseDict, ParseError
    from opentelemetry.proto.trace.v1.trace_pb2 import Span as SpanMessage

    try:
        return ParseDict(_hex_ids(raw.data), SpanMessage())
    except RecursionError:
        raise JsonStreamError(raw.line, "JSON nested too deep") from None
    except (ParseError, ValueError, TypeError, AttributeError) as exc:
        raise _not_otlp(raw.line, str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None


def _attrs_of(kvs: Any) -> dict[str, object]:
    out: dict[str, object] = {}
    for kv in kvs:
        which = kv.value.WhichOneof("value")
        scalar = which in ("string_value", "bool_value", "int_value", "double_value")
        out[kv.key] = getattr(kv.value, which) if scalar else NotScalar(which or "missing")
    return out


def read_span(raw: RawSpan) -> Span:
    """The span, checked as protobuf's JSON mapping reads an OTLP `Span` (its ids hex): the shapes exporters write
    read directly (`_plain_span`: protobuf's reading costs about a millisecond a span), any other through protobuf,
    which refuses what OTLP does not allow — one line naming the span's line and protobuf's reason."""
    plain = _plain_span(raw)
    if plain is not None:
        return plain
    s = _message(raw)
    events = tuple((e.name, e.time_unix_nano, _attrs_of(e.attributes)) for e in s.events)
    return Span(raw.line, s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(), s.name, s.start_time_unix_nano,
                s.end_time_unix_nano, _attrs_of(s.attributes), events, s.status.code, s.status.message)  # fmt: skip


# -- the shapes exporters write, read as protobuf reads them ------------------------------------------------------
_U32, _I64, _U64 = 2**32 - 1, 2**63 - 1, 2**64 - 1
_DIGITS = frozenset("0123456789")


def _uint(value: object, top: int) -> int | None:
    """An unsigned integer as protobuf's JSON mapping writes it (a number, or its decimal digits as a string)."""
    if type(value) is str and 0 < len(value) <= 20 and _DIGITS.issuperset(value):
        value = int(value)
    return value if type(value) is int and 0 <= value <= top else None


def _hex(value: object) -> str | None:
    if type(value) is not str or len(value) % 2:
        return None
    try:
        return bytes.fromhex(value).hex()
    except ValueError:
        return None


_SCALARS = frozenset({"stringValue", "boolValue", "intValue", "doubleValue"})


def _plain_attrs(kvs: object) -> dict[str, object] | None:
    """`[{"key": …, "value": {"stringValue" | "boolValue" | "intValue" | "doubleValue": …}}, …]` read as protobuf
    reads it; None for any other shape (protobuf then reads it, or says what is wrong)."""
    if type(kvs) is not list:
        return None
    out: dict[str, object] = {}
    for kv in kvs:
        if type(kv) is not dict or kv.keys() != {"key", "value"} or type(kv["key"]) is not str:
            return None
        value = kv["value"]
        if type(value) is not dict or len(value) != 1:
            return None
        ((which, v),) = value.items()
        if which not in _SCALARS:
            return None
        if (which == "stringValue" and type(v) is str) or (which == "boolValue" and type(v) is bool):
            out[kv["key"]] = v
        elif which == "intValue":
            if type(v) is str and 0 < len(v) <= 20 and _DIGITS.issuperset(v.removeprefix("-")) and v != "-":
                v = int(v)
            if type(v) is not int or not -_I64 - 1 <= v <= _I64:
                return None
            out[kv["key"]] = v
        elif which == "doubleValue" and (type(v) is float or (type(v) is int and abs(v) <= 2**53)):
            out[kv["key"]] = float(v)
        else:
            return None
    return out


_SPAN_KEYS = frozenset({"traceId", "spanId", "parentSpanId", "traceState", "flags", "name", "kind",
                        "startTimeUnixNano", "endTimeUnixNano", "attributes", "droppedAttributesCount", "events",
                        "droppedEventsCount", "droppedLinksCount", "status"})  # fmt: skip
_EVENT_KEYS = frozenset({"timeUnixNano", "name", "attributes", "droppedAttributesCount"})


def _plain_member(key: str, value: object) -> bool:
    """A resource, a scope or a schema URL of the shape exporters write (what protobuf would accept as it is)."""
    if key == "schemaUrl":
        return type(value) is str
    allowed = {"resource": {"attributes", "droppedAttributesCount"},
               "scope": {"name", "version", "attributes", "droppedAttributesCount"}}.get(key)  # fmt: skip
    if allowed is None or type(value) is not dict or not allowed.issuperset(value):
        return False
    return (_plain_attrs(value.get("attributes", [])) is not None
            and _uint(value.get("droppedAttributesCount", 0), _U32) is not None
            and all(type(value.get(k, "")) is str for k in ("name", "version")))  # fmt: skip


def _plain_span(raw: RawSpan) -> Span | None:
    """The span when it has the shape exporters write (camelCase members, hex ids, scalar attributes, no links),
    read exactly as protobuf would read it; None otherwise."""
    d = raw.data
    if not _SPAN_KEYS.issuperset(d):
        return None
    trace_id, span_id, parent = _hex(d.get("traceId", "")), _hex(d.get("spanId", "")), _hex(d.get("parentSpanId", ""))
    name, state = d.get("name", ""), d.get("traceState", "")
    start, end = _uint(d.get("startTimeUnixNano", 0), _U64), _uint(d.get("endTimeUnixNano", 0), _U64)
    attrs = _plain_attrs(d.get("attributes", []))
    kind = d.get("kind", 0)
    counts = ("flags", "droppedAttributesCount", "droppedEventsCount", "droppedLinksCount")
    if (trace_id is None or span_id is None or parent is None or type(name) is not str or type(state) is not str
            or start is None or end is None or attrs is None or type(kind) is not int or not 0 <= kind <= _U32 // 2
            or any(_uint(d.get(k, 0), _U32) is None for k in counts)):  # fmt: skip
        return None
    status = d.get("status", {})
    if type(status) is not dict or not {"code", "message"}.issuperset(status):
        return None
    code, message = status.get("code", 0), status.get("message", "")
    if type(code) is not int or not 0 <= code <= 2 or type(message) is not str:
        return None
    events = []
    for e in d.get("events", []) if type(d.get("events", [])) is list else [None]:
        if type(e) is not dict or not _EVENT_KEYS.issuperset(e):
            return None
        e_name, e_time, e_attrs = e.get("name", ""), _uint(e.get("timeUnixNano", 0), _U64), _plain_attrs(
            e.get("attributes", []))  # fmt: skip
        if type(e_name) is not str or e_time is None or e_attrs is None:
            return None
        if _uint(e.get("droppedAttributesCount", 0), _U32) is None:
            return None
        events.append((e_name, e_time, e_attrs))
    return Span(raw.line, trace_id, span_id, parent, name, start, end, attrs, tuple(events), code, message)
