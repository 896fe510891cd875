"""The agent-facing tool envelope `T({previous_observation?, input})` (docs/architecture.md §4).

Parsing never raises: every defect becomes a typed Violation so that bad model output is a
protocol violation, not an exception out of the loop.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from harness.contracts import InformationGain, JsonObject, SchemaMode, ViolationKind
from harness.tracker import PreviousObservation, Violation

GAIN_VALUES = tuple(g.value for g in InformationGain)
_ALLOWED_KEYS = frozenset({"previous_observation", "input"})


@dataclass(frozen=True, slots=True)
class ParsedEnvelope:
    """The envelope split into its control part and its business part."""

    previous: PreviousObservation | None
    """The evaluation of the pending observation, if given."""
    input: JsonObject
    """The business input (the only thing the tool ever sees)."""
    violation: Violation | None
    """A structural defect; when set, `input` may be empty."""


def parse_envelope(arguments: str, max_bytes: int) -> ParsedEnvelope:
    """Split raw tool-call arguments into previous_observation and input."""
    data = _json_object(arguments, max_bytes)
    if isinstance(data, ParsedEnvelope):
        return data
    extra = sorted(set(data) - _ALLOWED_KEYS)
    if extra:
        return _bad(f"unexpected top-level fields {extra}; put business parameters under 'input'")
    if "input" not in data:
        return _bad("the envelope has no 'input' object", missing="input")
    business = data["input"]
    if not isinstance(business, dict):
        return _bad(f"'input' must be a JSON object, got {type(business).__name__}")

    previous: PreviousObservation | None = None
    raw_prev = data.get("previous_observation")
    if raw_prev is not None:
        if not isinstance(raw_prev, dict):
            return _bad("'previous_observation' must be an object {tool_call_id, information_gain}")
        call_id = raw_prev.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            return _bad(
                "previous_observation.tool_call_id is missing or not a string",
                missing="previous_observation.tool_call_id",
            )
        gain = raw_prev.get("information_gain")
        if gain not in GAIN_VALUES:
            return ParsedEnvelope(
                None,
                business,
                Violation(
                    ViolationKind.INVALID_GAIN_VALUE,
                    f"previous_observation.information_gain is {gain!r}; allowed values are {list(GAIN_VALUES)}",
                    missing_field="previous_observation.information_gain" if gain is None else None,
                ),
            )
        previous = PreviousObservation(call_id, InformationGain(gain))
    return ParsedEnvelope(previous, business, None)


def parse_plain(arguments: str, max_bytes: int) -> ParsedEnvelope:
    """Raw tool-call arguments read as the business input alone (the envelope switched off for an ablation): the
    same size and JSON-object checks, no control fields."""
    data = _json_object(arguments, max_bytes)
    return data if isinstance(data, ParsedEnvelope) else ParsedEnvelope(None, data, None)


def _json_object(arguments: str, max_bytes: int) -> JsonObject | ParsedEnvelope:
    """The arguments as a JSON object within `max_bytes`, or the malformed-envelope answer saying why not (both
    readings of the arguments apply the same checks)."""
    size = len(arguments.encode("utf-8", "replace"))
    if size > max_bytes:
        return _bad(f"arguments are {size} bytes, more than the {max_bytes}-byte limit")
    try:
        data = json.loads(arguments) if arguments.strip() else {}
    except (ValueError, RecursionError) as exc:
        return _bad(f"arguments are not valid JSON ({type(exc).__name__})")
    if not isinstance(data, dict):
        return _bad(f"arguments must be a JSON object, got {type(data).__name__}")
    return data


def _bad(message: str, missing: str | None = None) -> ParsedEnvelope:
    return ParsedEnvelope(None, {}, Violation(ViolationKind.MALFORMED_ENVELOPE, message, missing_field=missing))


_GAIN_DESCRIPTION = (
    "GAINED if it confirmed, excluded or narrowed a hypothesis; NO_GAIN if it was generic, repeated or irrelevant."
)


def envelope_schema(
    input_schema: JsonObject, mode: SchemaMode = SchemaMode.ADAPTIVE, pending: str | None = None
) -> JsonObject:
    """The JSON schema the model sees: the business schema wrapped in the envelope.

    STATIC states `previous_observation` as optional, in prose. ADAPTIVE states the protocol exactly for
    this call: no `previous_observation` when nothing is pending; when `pending` is set it is required and
    its `tool_call_id` can only be that id, so a constrained decoder cannot emit a malformed envelope.
    The interceptor validates everything either way.
    """
    if mode is SchemaMode.ADAPTIVE:
        if pending is None:
            return {
                "type": "object",
                "properties": {"input": input_schema},
                "required": ["input"],
                "additionalProperties": False,
            }
        return {
            "type": "object",
            "properties": {
                "previous_observation": {
                    "type": "object",
                    "description": f"Your evaluation of the observation of {pending}.",
                    "properties": {
                        "tool_call_id": {"type": "string", "enum": [pending]},
                        "information_gain": {
                            "type": "string", "enum": list(GAIN_VALUES), "description": _GAIN_DESCRIPTION,
                        },
                    },
                    "required": ["tool_call_id", "information_gain"],
                    "additionalProperties": False,
                },
                "input": input_schema,
            },
            "required": ["previous_observation", "input"],
            "additionalProperties": False,
        }  # fmt: skip
    return {
        "type": "object",
        "properties": {
            "previous_observation": {
                "type": "object",
                "description": (
                    "Your evaluation of the previous tool observation. Required exactly when the previous "
                    "observation had evaluation_required=true; omit it otherwise."
                ),
                "properties": {
                    "tool_call_id": {"type": "string", "description": "The id of the call you evaluate."},
                    "information_gain": {"type": "string", "enum": list(GAIN_VALUES), "description": _GAIN_DESCRIPTION},
                },
                "required": ["tool_call_id", "information_gain"],
            },
            "input": input_schema,
        },
        "required": ["input"],
    }
