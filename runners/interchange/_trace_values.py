"""What a trace's values must be before an import stores anything.

Every event field and span attribute has its type and range: counts (tokens, bytes, records, sequence numbers) are
integers from 0 — an attempt from 1 — to the largest a BIGINT column holds, and a run's sums stay within it; a
boolean is a boolean (never 1 or "true"); times are finite, not negative, and in their run's order; the run's
thresholds and budgets are within the bounds the settings declare (runners/plan/settings.py: what `run` accepts);
message contents (`gen_ai.input.messages`, `gen_ai.output.messages`) are shaped as the OpenTelemetry GenAI
conventions say. A value that is not is a `BadValue` naming the field (or attribute); the reader adds the file,
line and span.
"""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Annotated, Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Discriminator, Tag

from harness import ModelCall, ToolInvocation, TraceEvent

__all__ = [
    "INT64_MAX",
    "BadValue",
    "ChatMessage",
    "TextPart",
    "ToolCallPart",
    "ToolCallResponsePart",
    "check_bool",
    "check_count",
    "check_enum",
    "check_event_fields",
    "check_limit",
    "check_text",
    "check_times",
    "check_totals",
    "read_messages",
    "strict_decoder",
    "strict_json",
]

INT64_MAX = 2**63 - 1
"""The largest integer a BIGINT column holds: every stored count and sum stays within it."""

_FROM_ONE = frozenset({"attempt"})
"""Integer fields counted from 1 (every other integer field is a count or position from 0)."""


class BadValue(ValueError):
    """A value a trace may not hold: the field (or attribute) that holds it and what is wrong with it."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        """The field or attribute, as the trace names it."""


def _shown(value: object) -> str:
    """A value as a message shows it: its JSON spelling cut to 40 characters, and what it is when that is the
    problem (a boolean or a string where a number is due)."""
    kind = {bool: "a boolean", str: "a string", float: "a number"}.get(type(value), "")
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=True)
    except (TypeError, ValueError):
        text = repr(value)
    text = text if len(text) <= 40 else text[:40] + "…"
    return f"{text} ({kind})" if kind and not isinstance(value, float) else text


def check_count(field: str, value: object, *, low: int = 0) -> int:
    """An integer from `low` to INT64_MAX (never a boolean, a string or a float), else BadValue."""
    if type(value) is not int:
        raise BadValue(field, f"{_shown(value)} where an integer is due")
    if not low <= value <= INT64_MAX:
        raise BadValue(field, f"{_shown(value)}: must be an integer from {low} to {INT64_MAX}")
    return value


def _check_time(field: str, value: object) -> float:
    if type(value) not in (int, float):
        raise BadValue(field, f"{_shown(value)} where a number of milliseconds is due")
    number = float(typing.cast(float, value))
    if not math.isfinite(number) or number < 0:
        raise BadValue(field, f"{_shown(value)}: must be a finite number of milliseconds ≥ 0")
    return number


def check_text(field: str, value: object, *, empty: bool = True) -> str:
    """A string (not empty unless `empty`), else BadValue."""
    if type(value) is not str:
        raise BadValue(field, f"{_shown(value)} where a string is due")
    if not empty and not value.strip():
        raise BadValue(field, "empty")
    return value


def check_bool(field: str, value: object) -> bool:
    """A boolean (never 1 or "true"), else BadValue."""
    if type(value) is not bool:
        raise BadValue(field, f"{_shown(value)} where a boolean (true or false) is due")
    return value


def check_enum(field: str, value: object, enum: type[Enum]) -> str:
    """One of `enum`'s values (a string), else BadValue naming them."""
    allowed = [str(m.value) for m in enum]
    if type(value) is not str or value not in allowed:
        raise BadValue(field, f"{_shown(value)}: must be one of {', '.join(allowed)}")
    return value


def _base(cls: type[TraceEvent], name: str) -> tuple[Any, bool]:
    """A field's type without None, and whether None is allowed."""
    hint = typing.get_type_hints(cls)[name]
    args = typing.get_args(hint)
    if type(None) in args:
        (base,) = [a for a in args if a is not type(None)]
        return base, True
    return hint, False


_FIELDS: dict[type[TraceEvent], dict[str, tuple[Any, bool]]] = {}


def _fields_of(cls: type[TraceEvent]) -> dict[str, tuple[Any, bool]]:
    fields = _FIELDS.get(cls)
    if fields is None:
        fields = _FIELDS[cls] = {f.name: _base(cls, f.name) for f in dataclasses.fields(cls)}
    return fields


def check_event_fields(cls: type[TraceEvent], values: Mapping[str, object], names: Mapping[str, str]) -> None:
    """Each of `values` (field -> value, fields of `cls` only; others are the caller's to refuse) of the type its
    field declares, within its range; `names`: how the trace names a field (an attribute), for the message."""
    fields = _fields_of(cls)
    for name, value in values.items():
        spec = fields.get(name)
        if spec is None:
            continue
        base, nullable = spec
        shown = names.get(name, name)
        if value is None:
            if not nullable:
                raise BadValue(shown, "null where a value is due")
            continue
        if base is bool:
            check_bool(shown, value)
        elif base is int:
            check_count(shown, value, low=1 if name in _FROM_ONE else 0)
        elif base is float:
            _check_time(shown, value)
        elif base is str:
            check_text(shown, value)
        elif isinstance(base, type) and issubclass(base, Enum):
            check_enum(shown, value, base)


def check_limit(field: str, setting: str, value: object) -> None:
    """A run's threshold or budget (`setting`, declared in runners/plan/settings.py) within its declared bounds —
    what `run` would accept for it — else BadValue."""
    from runners.plan.settings import SettingsError, declaration

    declared = declaration()[setting]
    if not isinstance(value, int | float | str) or isinstance(value, bool):
        raise BadValue(field, f"{_shown(value)}: must be {declared.allowed()} (as {declared.flag})")
    try:
        declared.check(value)
    except SettingsError:
        raise BadValue(field, f"{_shown(value)}: must be {declared.allowed(value)} (as {declared.flag})") from None


def check_times(events: Sequence[TraceEvent], names: Mapping[str, str]) -> None:
    """A run's events, in `seq` order, at times that never go back (each event's `t_ms` at or after the one
    before it), else BadValue naming the event's position."""
    last: TraceEvent | None = None
    for e in events:
        if last is not None and e.t_ms < last.t_ms:
            shown = names.get("t_ms", "t_ms")
            raise BadValue(shown, f"{e.kind.value} seq {e.seq} at {e.t_ms:g} ms comes before {last.kind.value} seq"
                                  f" {last.seq} at {last.t_ms:g} ms: times out of order")  # fmt: skip
        last = e


def check_totals(events: Sequence[TraceEvent], names: Mapping[str, str]) -> None:
    """A run's token and byte totals within INT64_MAX (what its case run row stores), else BadValue."""
    calls = [e for e in events if isinstance(e, ModelCall)]
    tokens_in = sum(c.input_tokens or 0 for c in calls)
    tokens_out = sum(c.output_tokens or 0 for c in calls)
    sums = {
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "observation_bytes": sum(e.observation_bytes for e in events if isinstance(e, ToolInvocation)),
    }
    for name, total in sums.items():
        if total > INT64_MAX:
            raise BadValue(names.get(name, name), f"the run's events sum to {total}, past {INT64_MAX} (the largest"
                                                  " integer a count is stored as)")  # fmt: skip
    if tokens_in + tokens_out > INT64_MAX:
        total = tokens_in + tokens_out
        raise BadValue(names.get("input_tokens", "input_tokens"), f"the run's input and output tokens sum to {total},"
                                                                  f" past {INT64_MAX} (the largest integer a count is"
                                                                  " stored as)")  # fmt: skip


# -- message contents (the GenAI conventions' JSON) -----------------------------------------------------------------
class _Part(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow", frozen=True)


class TextPart(_Part):
    """A text part: what a message says."""

    type: Literal["text"]
    """Always `text`."""
    content: str
    """The text."""


class ToolCallPart(_Part):
    """A tool call the model asked for."""

    type: Literal["tool_call"]
    """Always `tool_call`."""
    name: str
    """The tool's name."""
    id: str | None = None
    """The call's id."""
    arguments: pydantic.JsonValue = None
    """Its arguments: the text the model sent, or a JSON value."""


class ToolCallResponsePart(_Part):
    """A tool's answer, sent back to the model."""

    type: Literal["tool_call_response"]
    """Always `tool_call_response`."""
    id: str | None = None
    """The call it answers."""
    response: pydantic.JsonValue = None
    """The answer: text, or a JSON value."""


class OtherPart(_Part):
    """A part of another type (media, reasoning, …): kept out of transcripts, its type still a string."""

    type: str
    """Its type."""


_KNOWN_PARTS = ("text", "tool_call", "tool_call_response")


def _part_tag(value: object) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return kind if isinstance(kind, str) and kind in _KNOWN_PARTS else "other"


Part = Annotated[
    Annotated[TextPart, Tag("text")]
    | Annotated[ToolCallPart, Tag("tool_call")]
    | Annotated[ToolCallResponsePart, Tag("tool_call_response")]
    | Annotated[OtherPart, Tag("other")],
    Discriminator(_part_tag),
]
"""One part of a message: known types checked field by field, any other only for its `type`."""


class ChatMessage(BaseModel):
    """One message of `gen_ai.input.messages` or `gen_ai.output.messages`."""

    model_config = ConfigDict(strict=True, extra="allow", frozen=True)

    role: str
    """`system`, `user`, `assistant`, `tool` (another role is kept out of transcripts)."""
    parts: tuple[Part, ...]
    """What it holds, in order."""
    name: str | None = None
    """The participant's name, when given."""
    finish_reason: str | None = None
    """Why the model stopped (output messages)."""


_MESSAGES: pydantic.TypeAdapter[tuple[ChatMessage, ...]] = pydantic.TypeAdapter(tuple[ChatMessage, ...])


def _path(loc: Sequence[int | str]) -> str:
    """A validation error's location as `[0].parts[1].content` (the union's tags left out)."""
    out = ""
    for item in loc:
        if isinstance(item, int):
            out += f"[{item}]"
        elif item not in (*_KNOWN_PARTS, "other"):
            out += f".{item}"
    return out


def read_messages(attribute: str, value: object) -> tuple[ChatMessage, ...]:
    """The messages of a `gen_ai.*.messages` attribute (a JSON array of messages), else BadValue naming where in it
    the first problem is."""
    text = check_text(attribute, value)
    try:
        return _MESSAGES.validate_json(text)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        if first["type"] in ("json_invalid", "recursion_loop"):
            raise BadValue(attribute, f"not JSON ({first['msg']})") from None
        where = _path(first["loc"]) or "the value"
        shown = f" = {_shown(first['input'])}" if not isinstance(first["input"], dict | list) else ""
        why = first["msg"][:1].lower() + first["msg"][1:]
        raise BadValue(attribute, f"{where}{shown}: {why} (a message is"
                                  ' {"role": …, "parts": [{"type": …}, …]})') from None  # fmt: skip


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are each given once: a key twice (`"input_tokens": -7, "input_tokens": 1230`) would
    let the last one win and a value never checked pass, so it is refused."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"key {key!r} given twice in one object")
        out[key] = value
    return out


def strict_decoder() -> json.JSONDecoder:
    """A JSON decoder refusing an object that gives a key twice (ValueError)."""
    return json.JSONDecoder(object_pairs_hook=_no_duplicate_keys)


def strict_json(text: str) -> Any:
    """`json.loads` refusing an object that gives a key twice (ValueError)."""
    return json.loads(text, object_pairs_hook=_no_duplicate_keys)
