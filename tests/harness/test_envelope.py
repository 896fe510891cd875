"""The tool envelope `T({previous_observation?, input})` (docs/architecture.md §4): `parse_envelope` turns every
defect into a typed Violation and never raises; `envelope_schema` states the protocol the interceptor enforces."""

from __future__ import annotations

import json

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.contracts import InformationGain, JsonObject, SchemaMode, ViolationKind
from harness.envelope import GAIN_VALUES, ParsedEnvelope, envelope_schema, parse_envelope
from harness.tracker import PreviousObservation

CAP = 16_384
MALFORMED = ViolationKind.MALFORMED_ENVELOPE


def _parse(data: object, cap: int = CAP) -> ParsedEnvelope:
    return parse_envelope(json.dumps(data), cap)


# -- valid envelopes ---------------------------------------------------------------------------------------------------
def test_an_envelope_without_previous_observation_yields_its_input() -> None:
    p = _parse({"input": {"query": "timeout", "n": 3}})
    assert p == ParsedEnvelope(None, {"query": "timeout", "n": 3}, None)


@pytest.mark.parametrize("gain", list(InformationGain))
def test_an_envelope_with_an_evaluation_yields_both_parts(gain: InformationGain) -> None:
    p = _parse({"previous_observation": {"tool_call_id": "call-1", "information_gain": gain.value}, "input": {}})
    assert p == ParsedEnvelope(PreviousObservation("call-1", gain), {}, None)


def test_a_null_previous_observation_is_the_same_as_none() -> None:
    assert _parse({"previous_observation": None, "input": {"q": 1}}) == ParsedEnvelope(None, {"q": 1}, None)


def test_gain_values_are_exactly_the_two_information_gains() -> None:
    assert GAIN_VALUES == ("GAINED", "NO_GAIN")


# -- every malformed envelope: kind, message, missing field ------------------------------------------------------------
@pytest.mark.parametrize(
    ("arguments", "message", "missing"),
    [
        ("", "the envelope has no 'input' object", "input"),
        ("   ", "the envelope has no 'input' object", "input"),
        ("{}", "the envelope has no 'input' object", "input"),
        ('{"input": ', "arguments are not valid JSON (JSONDecodeError)", None),
        ("NaN-ish", "arguments are not valid JSON (JSONDecodeError)", None),
        ("[1, 2]", "arguments must be a JSON object, got list", None),
        ('"text"', "arguments must be a JSON object, got str", None),
        ("null", "arguments must be a JSON object, got NoneType", None),
        (
            '{"input": {}, "query": "x", "extra": 1}',
            "unexpected top-level fields ['extra', 'query']; put business parameters under 'input'",
            None,
        ),
        ('{"input": [1]}', "'input' must be a JSON object, got list", None),
        ('{"input": null}', "'input' must be a JSON object, got NoneType", None),
        (
            '{"input": {}, "previous_observation": "call-1"}',
            "'previous_observation' must be an object {tool_call_id, information_gain}",
            None,
        ),
        (
            '{"input": {}, "previous_observation": {"information_gain": "GAINED"}}',
            "previous_observation.tool_call_id is missing or not a string",
            "previous_observation.tool_call_id",
        ),
        (
            '{"input": {}, "previous_observation": {"tool_call_id": "", "information_gain": "GAINED"}}',
            "previous_observation.tool_call_id is missing or not a string",
            "previous_observation.tool_call_id",
        ),
        (
            '{"input": {}, "previous_observation": {"tool_call_id": 7, "information_gain": "GAINED"}}',
            "previous_observation.tool_call_id is missing or not a string",
            "previous_observation.tool_call_id",
        ),
    ],
)
def test_each_structural_defect_is_a_malformed_envelope_with_its_message(
    arguments: str, message: str, missing: str | None
) -> None:
    p = parse_envelope(arguments, CAP)
    assert p.violation is not None
    assert (p.violation.kind, p.violation.message, p.violation.missing_field) == (MALFORMED, message, missing)
    assert p.previous is None and p.input == {}, "a malformed envelope never hands its input on"


@pytest.mark.parametrize(
    ("gain", "shown", "missing"),
    [
        (None, "None", "previous_observation.information_gain"),
        ("gained", "'gained'", None),
        ("PARTIAL", "'PARTIAL'", None),
        (1, "1", None),
    ],
)
def test_a_bad_gain_value_is_its_own_violation_and_keeps_the_input(
    gain: object, shown: str, missing: str | None
) -> None:
    prev: dict[str, object] = {"tool_call_id": "call-1"}
    if gain is not None:
        prev["information_gain"] = gain
    p = _parse({"previous_observation": prev, "input": {"q": "x"}})
    assert p.violation is not None and p.violation.kind is ViolationKind.INVALID_GAIN_VALUE
    assert p.violation.message == (
        f"previous_observation.information_gain is {shown}; allowed values are ['GAINED', 'NO_GAIN']"
    )
    assert p.violation.missing_field == missing
    assert p.previous is None and p.input == {"q": "x"}


# -- the byte cap and nesting depth ------------------------------------------------------------------------------------
def test_arguments_over_the_byte_cap_are_malformed_before_parsing() -> None:
    # two bytes per é: the cap counts UTF-8 bytes, not characters
    text = json.dumps({"input": {"q": "é" * 30}}, ensure_ascii=False)
    size = len(text.encode())
    assert len(text) < size
    assert parse_envelope(text, size).violation is None
    p = parse_envelope(text, size - 1)
    assert p.violation is not None and p.violation.kind is MALFORMED
    assert p.violation.message == f"arguments are {size} bytes, more than the {size - 1}-byte limit"


def test_a_lone_surrogate_is_measured_without_raising() -> None:
    p = parse_envelope('{"input": {"q": "\ud800"}}', CAP)
    assert p.violation is None and p.input == {"q": "\ud800"}


def test_nesting_deep_enough_to_exhaust_the_stack_is_malformed_not_a_crash() -> None:
    depth = 200_000
    text = '{"input": ' + "[" * depth + "]" * depth + "}"
    p = parse_envelope(text, len(text))
    assert p.violation is not None and p.violation.kind is MALFORMED
    assert p.violation.message == "arguments are not valid JSON (RecursionError)"


# -- arbitrary input: parse never raises, input only without a structural violation ------------------------------------
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
envelope_like = st.fixed_dictionaries(
    {},
    optional={
        "input": json_values,
        "previous_observation": json_values
        | st.fixed_dictionaries(
            {},
            optional={
                "tool_call_id": json_values | st.text(min_size=1, max_size=8),
                "information_gain": json_values | st.sampled_from(GAIN_VALUES),
            },
        ),
        "query": json_values,
    },
)


@given(data=envelope_like | json_values)
def test_any_json_parses_without_raising_and_input_passes_only_when_structurally_sound(data: object) -> None:
    p = _parse(data)
    structural = p.violation is not None and p.violation.kind is MALFORMED
    if structural:
        assert p.input == {} and p.previous is None
        return
    assert isinstance(data, dict) and set(data) <= {"input", "previous_observation"}
    assert p.input == data["input"] and isinstance(p.input, dict)
    raw_prev = data.get("previous_observation")
    if p.violation is None:
        if raw_prev is None:
            assert p.previous is None
        else:
            assert p.previous == PreviousObservation(
                raw_prev["tool_call_id"], InformationGain(raw_prev["information_gain"])
            )
    else:
        assert p.violation.kind is ViolationKind.INVALID_GAIN_VALUE and p.previous is None
        assert isinstance(raw_prev, dict) and raw_prev.get("information_gain") not in GAIN_VALUES


@given(text=st.text(max_size=200), cap=st.integers(0, 400))
def test_any_text_parses_without_raising(text: str, cap: int) -> None:
    p = parse_envelope(text, cap)
    assert isinstance(p, ParsedEnvelope)
    if len(text.encode("utf-8", "replace")) > cap:
        assert p.violation is not None and p.violation.kind is MALFORMED and p.input == {}


# -- the schema the model sees -----------------------------------------------------------------------------------------
INPUT_SCHEMA: JsonObject = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}


def _valid(schema: JsonObject, instance: object) -> bool:
    return bool(jsonschema.Draft202012Validator(schema).is_valid(instance))


def test_adaptive_with_nothing_pending_forbids_previous_observation() -> None:
    schema = envelope_schema(INPUT_SCHEMA, SchemaMode.ADAPTIVE, pending=None)
    assert schema["properties"] == {"input": INPUT_SCHEMA}
    assert _valid(schema, {"input": {"query": "x"}})
    assert not _valid(schema, {"input": {"query": "x"}, "previous_observation": {}})
    assert not _valid(schema, {"query": "x"})


def test_adaptive_with_a_pending_call_requires_exactly_its_evaluation() -> None:
    schema = envelope_schema(INPUT_SCHEMA, SchemaMode.ADAPTIVE, pending="call-7")
    assert schema["required"] == ["previous_observation", "input"]
    for gain in GAIN_VALUES:
        good = {"previous_observation": {"tool_call_id": "call-7", "information_gain": gain}, "input": {"query": "x"}}
        assert _valid(schema, good)
        assert parse_envelope(json.dumps(good), CAP).violation is None, "what the schema allows parses cleanly"
    assert not _valid(schema, {"input": {"query": "x"}})
    wrong_id = {
        "previous_observation": {"tool_call_id": "call-6", "information_gain": "GAINED"},
        "input": {"query": ""},
    }
    assert not _valid(schema, wrong_id)
    bad_gain = {"previous_observation": {"tool_call_id": "call-7", "information_gain": "MAYBE"}, "input": {"query": ""}}
    assert not _valid(schema, bad_gain)


def test_adaptive_is_the_default_mode() -> None:
    assert envelope_schema(INPUT_SCHEMA) == envelope_schema(INPUT_SCHEMA, SchemaMode.ADAPTIVE, None)


def test_static_states_previous_observation_as_optional_whatever_is_pending() -> None:
    schema = envelope_schema(INPUT_SCHEMA, SchemaMode.STATIC, pending="call-7")
    assert schema == envelope_schema(INPUT_SCHEMA, SchemaMode.STATIC, pending=None)
    assert schema["required"] == ["input"]
    assert "additionalProperties" not in schema
    gain = json.loads(json.dumps(schema))["properties"]["previous_observation"]["properties"]["information_gain"]
    assert gain["enum"] == ["GAINED", "NO_GAIN"]
    assert _valid(schema, {"input": {"query": "x"}})
    assert _valid(
        schema,
        {"previous_observation": {"tool_call_id": "any", "information_gain": "NO_GAIN"}, "input": {"query": "x"}},
    )
