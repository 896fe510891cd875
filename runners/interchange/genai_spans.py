"""Runs of any agent instrumented with the OpenTelemetry GenAI conventions, read from their spans: no `harness.*`
attribute needed.

An `invoke_agent` span is one run; the `chat` (or `text_completion`, `generate_content`) and `execute_tool` spans
under it — directly or through spans of the agent's own — are its model calls and tool calls, in the order they
ended. A tool call's arguments and result come from `gen_ai.tool.call.arguments` and `gen_ai.tool.call.result` where
the span records them, else from the messages of the chat spans (`gen_ai.output.messages`' tool_call part and a later
`gen_ai.input.messages`' tool_call_response part of the same id) when contents were recorded; a span whose status is
ERROR, or that has `error.type`, failed. What the Harness would have decided of each result is inferred by its rules
(`_foreign_events`); the model's gain tags are not known. The run's id is its `gen_ai.conversation.id`, else its trace
and span id; the model is the first chat span's `gen_ai.request.model` (or `gen_ai.response.model`).

Attributes the reader does not use are left alone (an agent's spans carry many); those it uses are checked as the
bench's own are (`_trace_values`): one line naming the file, line, span and attribute, and nothing imported.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness import ModelErrorKind
from runners.interchange._foreign_events import ForeignModelCall, ForeignToolCall, foreign_events
from runners.interchange._trace_values import (
    BadValue,
    ChatMessage,
    ToolCallPart,
    ToolCallResponsePart,
    check_count,
    check_text,
    read_messages,
)
from runners.interchange.observed_runs import Contents, ObservedRun, TraceImportError, identity

__all__ = ["MODEL_OPERATIONS", "NotScalar", "Span", "foreign_run", "is_foreign"]

MODEL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
"""The `gen_ai.operation.name` values of a model call."""
_TOOL = "execute_tool"
_NAMESPACE = "harness."
_STATUS_ERROR = 2
"""OTLP's `STATUS_CODE_ERROR`."""
_UNKNOWN_MODEL = "unknown"


@dataclass(frozen=True, slots=True)
class NotScalar:
    """An attribute value that is an array, a map or bytes (kept so that a reader that needs a scalar says so)."""

    which: str
    """Its OTLP value kind (`array_value`, …)."""


@dataclass(frozen=True, slots=True)
class Span:
    """One span as an OTLP/JSON line holds it."""

    line: int
    """The file's line it is on."""
    trace_id: str
    """Its trace (hex)."""
    span_id: str
    """Its id (hex)."""
    parent: str
    """Its parent's id (hex; empty: a root)."""
    name: str
    """Its name."""
    start: int
    """startTimeUnixNano."""
    end: int
    """endTimeUnixNano."""
    attributes: dict[str, object]
    """Its attributes (a non-scalar value as `NotScalar`)."""
    events: tuple[tuple[str, int, dict[str, object]], ...]
    """Its span events: name, time, attributes."""
    status_code: int = 0
    """Its status (2: ERROR)."""
    status_message: str = ""
    """Its status message."""


def is_foreign(run: Span, kids: Sequence[Span]) -> bool:
    """Whether a run span and its calls carry no `harness.*` attribute: another agent's run."""
    return not any(k.startswith(_NAMESPACE) for s in (run, *kids) for k in s.attributes)


def _value(at: str, attrs: Mapping[str, object], key: str, check: Callable[[str, object], object]) -> object:
    if key not in attrs:
        return None
    value = attrs[key]
    try:
        if isinstance(value, NotScalar):
            raise BadValue(key, f"a {value.which} where a string or number is due")
        return check(key, value)
    except BadValue as exc:
        raise TraceImportError(f"{at}: {exc}") from None


def _text(at: str, attrs: Mapping[str, object], key: str) -> str | None:
    value = _value(at, attrs, key, check_text)
    return value if isinstance(value, str) else None


def _tokens(at: str, attrs: Mapping[str, object], key: str) -> int | None:
    value = _value(at, attrs, key, check_count)
    return value if isinstance(value, int) else None


def _messages(at: str, attrs: Mapping[str, object], key: str) -> tuple[ChatMessage, ...] | None:
    value = _value(at, attrs, key, read_messages)
    return value if isinstance(value, tuple) else None


def _as_text(value: object) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def foreign_run(path: Path, run: Span, kids: Sequence[Span], conversation: str | None) -> ObservedRun:
    """The run of an `invoke_agent` span without `harness.*` attributes and its calls (`kids`, any order)."""
    at = f"{path}:{run.line}: span {run.span_id} ({run.name})"
    run_id = conversation if conversation is not None else f"{run.trace_id}-{run.span_id}"
    t0 = run.start
    ordered = sorted(kids, key=lambda s: (s.end, s.start, s.line))
    arguments: dict[str, str] = {}
    results: dict[str, str] = {}
    model: str | None = None
    contents: list[Contents] = []
    for k in ordered:
        where = f"{path}:{k.line}: span {k.span_id} ({k.name})"
        if k.end < k.start or k.start < t0:
            raise TraceImportError(f"{where}: its times ({k.start} to {k.end}) are not within its run's, from {t0}")
        if k.attributes.get("gen_ai.operation.name") == _TOOL:
            continue
        model = (
            model
            or _text(where, k.attributes, "gen_ai.request.model")
            or _text(where, k.attributes, "gen_ai.response.model")
        )
        given = _messages(where, k.attributes, "gen_ai.input.messages")
        answered = _messages(where, k.attributes, "gen_ai.output.messages")
        contents.append(Contents(given, answered))
        for m in (*(given or ()), *(answered or ())):
            for p in m.parts:
                if isinstance(p, ToolCallPart) and p.id is not None:
                    text = _as_text(p.arguments)
                    if text is not None:
                        arguments.setdefault(p.id, text)
                elif isinstance(p, ToolCallResponsePart) and p.id is not None:
                    text = _as_text(p.response)
                    if text is not None:
                        results.setdefault(p.id, text)
    steps: list[ForeignModelCall | ForeignToolCall] = []
    for k in ordered:
        where = f"{path}:{k.line}: span {k.span_id} ({k.name})"
        t_ms, latency = round((k.end - t0) / 1e6, 3), round((k.end - k.start) / 1e6, 3)
        error = _text(where, k.attributes, "error.type")
        failed = k.status_code == _STATUS_ERROR or error is not None
        detail = k.status_message or error or ("failed" if failed else None)
        if k.attributes.get("gen_ai.operation.name") == _TOOL:
            call_id = _text(where, k.attributes, "gen_ai.tool.call.id") or k.span_id
            tool = _text(where, k.attributes, "gen_ai.tool.name")
            if tool is None:
                raise TraceImportError(f"{where}: no gen_ai.tool.name (which tool it ran)")
            args = _text(where, k.attributes, "gen_ai.tool.call.arguments") or arguments.get(call_id)
            result = _text(where, k.attributes, "gen_ai.tool.call.result") or results.get(call_id)
            steps.append(ForeignToolCall(tool_call_id=call_id, tool=tool, arguments=args, result=result,
                                         failed=failed, t_ms=t_ms, latency_ms=latency,
                                         detail=detail if failed else None))  # fmt: skip
            continue
        kind = ModelErrorKind.SERVER_ERROR
        if error is not None and error in ModelErrorKind._value2member_map_:
            kind = ModelErrorKind(error)
        steps.append(ForeignModelCall(t_ms=t_ms, latency_ms=latency,
                                      input_tokens=_tokens(where, k.attributes, "gen_ai.usage.input_tokens"),
                                      output_tokens=_tokens(where, k.attributes, "gen_ai.usage.output_tokens"),
                                      error=detail if failed else None, error_kind=kind))  # fmt: skip
    if run.end < run.start:
        raise TraceImportError(f"{at}: endTimeUnixNano {run.end} is before startTimeUnixNano {run.start}")
    events = foreign_events(model or _text(at, run.attributes, "gen_ai.request.model") or _UNKNOWN_MODEL, steps,
                            end_ms=round((run.end - t0) / 1e6, 3))  # fmt: skip
    case_id, epoch = identity(run_id)
    carried = any(c.given is not None or c.answered is not None for c in contents)
    return ObservedRun(run_id, case_id, epoch, events, None, None, tuple(contents) if carried else (),
                       source=f"{at}", trace_id=run.trace_id, harnessed=False)  # fmt: skip
