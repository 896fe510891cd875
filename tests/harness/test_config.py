"""Configuration values out of range are rejected with a message naming the field."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from harness.config import HarnessConfig


def test_defaults_match_the_contract() -> None:
    cfg = HarnessConfig()
    assert cfg.no_gain_threshold == 2 and cfg.protocol_violation_threshold == 2


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("no_gain_threshold", 0),
        ("protocol_violation_threshold", 0),
        ("max_model_calls", -1),
        ("max_tool_invocations", 0),
        ("max_total_tokens", -5),
        ("deadline_seconds", 0),
        ("max_observation_bytes", 10),
    ],
)
def test_out_of_range_names_the_field(field: str, value: float) -> None:
    with pytest.raises(ValidationError) as err:
        HarnessConfig(**{field: value})
    assert field in str(err.value)


def test_unknown_field_is_rejected() -> None:
    with pytest.raises(ValidationError, match="no_gain_treshold"):
        HarnessConfig(no_gain_treshold=3)  # type: ignore[call-arg]
