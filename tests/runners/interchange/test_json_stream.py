"""The incremental JSON reader the trace import streams through (`_json_stream`, `_otlp_spans`): it reads outside
data, so hypothesis draws it.

- Any JSON value, read from a file delivered in pieces of any sizes (a piece may end inside a number, a string's
  escape or a multi-byte UTF-8 character), decodes as `json.loads` decodes the whole text.
- Any OTLP/JSON document of spans — compact on one line or indented over many, several requests one per line —
  yields its spans in order, each as `json.loads` reads it, at the line it starts on.
- A document cut anywhere, or with any byte changed, yields spans equal to the document's or is refused with a
  `JsonStreamError` naming a line of the file: never another exception, never a span that is not in it.
- A key given twice in one object is refused (at any depth, in the structure and in a span).
- The shapes exporters write are read (`_plain_span`) exactly as protobuf's JSON mapping reads them.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runners.interchange._json_stream import JsonCursor, JsonStreamError
from runners.interchange._otlp_spans import RawSpan, _plain_span, raw_spans, read_span


class _Pieces(io.RawIOBase):
    """A file that hands its bytes over in the sizes given (cycled), whatever size is asked for."""

    def __init__(self, data: bytes, sizes: list[int]) -> None:
        self._data, self._sizes, self._at, self._n = data, sizes, 0, 0

    def read(self, size: int = -1) -> bytes:
        step = self._sizes[self._n % len(self._sizes)]
        self._n += 1
        out = self._data[self._at : self._at + step]
        self._at += len(out)
        return out


def _cursor(text: str | bytes, sizes: list[int]) -> JsonCursor:
    data = text.encode() if isinstance(text, str) else text
    return JsonCursor(_Pieces(data, sizes), chunk=1)  # type: ignore[arg-type]


_SIZES = st.lists(st.integers(1, 9), min_size=1, max_size=6)
_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_SCALAR = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | _TEXT
_JSON = st.recursive(_SCALAR, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
                     max_leaves=20)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(value=_JSON, sizes=_SIZES, ascii_only=st.booleans())
def test_any_value_read_in_pieces_decodes_as_json_loads(value: Any, sizes: list[int], ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    cursor = _cursor(text, sizes)
    assert cursor.value() == json.loads(text)
    assert cursor.peek() == ""


_SPAN = st.dictionaries(_TEXT, _JSON, max_size=4)


def _document(requests: list[list[list[dict[str, Any]]]], indent: int | None) -> str:
    out = []
    for resources in requests:
        req = {"resourceSpans": [{"scopeSpans": [{"spans": spans}]} for spans in resources]}
        out.append(json.dumps(req, indent=indent, ensure_ascii=False))
    return "\n".join(out) + "\n"


_REQUESTS = st.lists(st.lists(st.lists(_SPAN, max_size=3), max_size=2), min_size=1, max_size=3)


@settings(max_examples=150, deadline=None)
@given(requests=_REQUESTS, sizes=_SIZES, indent=st.sampled_from([None, 1, 2]))
def test_any_otlp_document_yields_its_spans_as_json_loads_reads_them(
    requests: list[list[list[dict[str, Any]]]], sizes: list[int], indent: int | None
) -> None:
    text = _document(requests, indent)
    got = list(raw_spans(_cursor(text, sizes)))
    reqs = [json.loads(line) for line in text.split("\n") if indent is None and line]
    expected = [s for req in reqs for rs in req["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    if indent is None:
        assert [r.data for r in got] == expected
        lines = text.split("\n")
        for r in got:  # each span on the line of its request
            assert json.dumps(r.data, ensure_ascii=False) in lines[r.line - 1]
    else:
        flat = [s for resources in requests for spans in resources for s in spans]
        assert [r.data for r in got] == flat
        assert all(1 <= r.line <= text.count("\n") for r in got)


@settings(max_examples=200, deadline=None)
@given(requests=_REQUESTS, sizes=_SIZES, data=st.data())
def test_a_cut_or_changed_document_is_its_spans_or_refused_naming_a_line(
    requests: list[list[list[dict[str, Any]]]], sizes: list[int], data: st.DataObject
) -> None:
    text = _document(requests, None)
    raw = text.encode()
    at = data.draw(st.integers(0, len(raw)))
    cut = data.draw(st.booleans())
    bad = raw[:at] if cut else raw[:at] + bytes([data.draw(st.integers(0, 255))]) + raw[at + 1 :]
    whole = [s.data for s in raw_spans(_cursor(text, [64]))]
    got: list[dict[str, Any]] = []
    try:
        for span in raw_spans(_cursor(bad, sizes)):
            got.append(span.data)
    except JsonStreamError as exc:
        assert 1 <= exc.line <= bad.count(b"\n") + 1, (exc.line, bad)
        assert str(exc).startswith(f"{exc.line}: ")
        return
    if cut:  # read to its end: it was cut between requests, and holds the spans of those before the cut
        assert got == whole[: len(got)]


@pytest.mark.parametrize(
    "text",
    [
        '{"resourceSpans": [], "resourceSpans": []}',
        '{"resourceSpans": [], "resource_spans": []}',
        '{"resourceSpans": [{"scopeSpans": [], "scopeSpans": []}]}',
        '{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "a", "name": "b"}]}]}]}',
        '{"resourceSpans": [{"scopeSpans": [{"spans": [{"attributes": [{"key": "k", "key": "j"}]}]}]}]}',
    ],
)
def test_a_key_given_twice_is_refused_at_any_depth(text: str) -> None:
    with pytest.raises(JsonStreamError) as info:
        list(raw_spans(_cursor(text, [5])))
    assert "twice" in str(info.value) or "multiple" in str(info.value)


def test_two_requests_on_one_line_are_refused_naming_it() -> None:
    with pytest.raises(JsonStreamError, match=r"^2: not JSON \(extra data after the value"):
        list(raw_spans(_cursor('{"resourceSpans": []}\n{"resourceSpans": []} {"resourceSpans": []}\n', [3])))


def test_a_value_past_the_bound_is_refused_not_read_on() -> None:
    huge = '{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "' + "x" * 5000 + '"}]}]}]}'
    cursor = JsonCursor(io.BytesIO(huge.encode()), chunk=64, max_value=1000)
    with pytest.raises(JsonStreamError, match="a single JSON value over 1,000 characters"):
        list(raw_spans(cursor))


# -- the spans exporters write, read as protobuf reads them --------------------------------------------------------
_HEX = st.sampled_from(["", "00", "0a1B", "ffffffffffffffff", "0123456789abcdef0123456789ABCDEF"])
_UINT64 = st.integers(0, 2**64 - 1)
_ATTR_VALUE = st.one_of(
    st.builds(lambda v: {"stringValue": v}, _TEXT),
    st.builds(lambda v: {"boolValue": v}, st.booleans()),
    st.builds(lambda v: {"intValue": v}, st.integers(-(2**63), 2**63 - 1) | st.integers(0, 2**63 - 1).map(str)),
    st.builds(lambda v: {"doubleValue": v}, st.floats(allow_nan=False, allow_infinity=False) | st.integers(-99, 99)),
    st.builds(lambda v: {"arrayValue": {"values": [{"stringValue": v}]}}, _TEXT),
)
_ATTRS = st.lists(st.builds(lambda k, v: {"key": k, "value": v}, st.sampled_from(["a", "b", "gen_ai.x"]), _ATTR_VALUE),
                  max_size=4)  # fmt: skip
_EVENT = st.fixed_dictionaries({}, optional={"name": _TEXT, "timeUnixNano": _UINT64 | _UINT64.map(str),
                                             "attributes": _ATTRS})  # fmt: skip
_EXPORTED_SPAN = st.fixed_dictionaries(
    {},
    optional={
        "traceId": _HEX, "spanId": _HEX, "parentSpanId": _HEX, "name": _TEXT, "kind": st.integers(0, 5),
        "startTimeUnixNano": _UINT64.map(str), "endTimeUnixNano": _UINT64 | _UINT64.map(str), "attributes": _ATTRS,
        "events": st.lists(_EVENT, max_size=2), "flags": st.integers(0, 2**32 - 1),
        "status": st.fixed_dictionaries({}, optional={"code": st.integers(0, 2), "message": _TEXT}),
        "droppedAttributesCount": st.integers(0, 3), "traceState": _TEXT,
    },
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(span=_EXPORTED_SPAN)
def test_the_direct_reading_of_a_span_is_protobufs(span: dict[str, Any]) -> None:
    import runners.interchange._otlp_spans as otlp

    raw = RawSpan(3, span)
    plain = _plain_span(raw)
    has_array = any("arrayValue" in a["value"] for a in span.get("attributes", [])) or any(
        "arrayValue" in a["value"] for e in span.get("events", []) for a in e.get("attributes", []))  # fmt: skip
    assert (plain is None) is has_array  # the shapes exporters write are all read directly
    original = otlp._plain_span
    try:
        otlp._plain_span = lambda raw: None  # type: ignore[assignment]
        via_protobuf = read_span(raw)
    finally:
        otlp._plain_span = original
    assert read_span(raw) == via_protobuf
