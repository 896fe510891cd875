"""A suite's tool results: one fixture per result a declared tool gives for the arguments it matches.

A fixture matches a call when every argument it names is in the call with an equal value (a subset match: the
call may carry more), `*` standing for any value, the argument present or not. The first fixture of the tool that
matches answers; a call none matches gets no data (`NO_MATCH`), an empty result the Harness judges NO_GAIN, as
the run records it. Values compare as JSON does (`1` equals `1.0`, a string never equals a number).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness import JsonValue

__all__ = ["WILDCARD", "FixtureStatus", "ToolFixture", "first_match", "matches"]

WILDCARD = "*"
"""A fixture argument that matches any value, or none."""


class FixtureStatus(StrEnum):
    """What the tool's backend did for a matching call."""

    RESULTS = "results"
    """It returned the fixture's output."""
    NO_DATA = "no_data"
    """It ran and found nothing (an empty result: NO_GAIN, decided by the Harness)."""
    ERROR = "error"
    """It failed with the fixture's error (a failed invocation, never NO_GAIN)."""


class ToolFixture(BaseModel):
    """One result of a declared tool, for the calls whose arguments it matches."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    tool: str = Field(min_length=1, max_length=128)
    """The declared tool it answers."""
    match: dict[str, JsonValue] = Field(default_factory=dict)
    """Arguments a call must have, with these values (`*`: any value, or absent); others are not looked at."""
    status: FixtureStatus = FixtureStatus.RESULTS
    """Results, no data or an error."""
    output: str = ""
    """The raw output (results): each non-empty line is one record the model may cite."""
    error: str | None = None
    """The backend's error message (status error)."""

    @model_validator(mode="after")
    def _coherent(self) -> ToolFixture:
        if self.status is FixtureStatus.ERROR and not self.error:
            raise ValueError("error: required when status is error")
        if self.status is not FixtureStatus.ERROR and self.error is not None:
            raise ValueError("error: only allowed when status is error")
        if self.status is FixtureStatus.RESULTS and not self.output.strip():
            raise ValueError("output: required (non-empty) when status is results; an empty result is no_data")
        return self


def _equal(want: JsonValue, got: JsonValue) -> bool:
    if isinstance(want, bool) or isinstance(got, bool):
        return isinstance(want, bool) and isinstance(got, bool) and want is got
    if isinstance(want, int | float) and isinstance(got, int | float):
        return want == got
    if isinstance(want, list) and isinstance(got, list):
        return len(want) == len(got) and all(_equal(a, b) for a, b in zip(want, got, strict=True))
    if isinstance(want, dict) and isinstance(got, dict):
        return want.keys() == got.keys() and all(_equal(v, got[k]) for k, v in want.items())
    return type(want) is type(got) and want == got


def matches(match: Mapping[str, JsonValue], arguments: Mapping[str, JsonValue]) -> bool:
    """Whether a call with `arguments` is matched by a fixture's `match` (subset match, `*` any value)."""
    for key, want in match.items():
        if want == WILDCARD:
            continue
        if key not in arguments or not _equal(want, arguments[key]):
            return False
    return True


def first_match(fixtures: Sequence[ToolFixture], tool: str, arguments: Mapping[str, JsonValue]) -> ToolFixture | None:
    """The first of `tool`'s fixtures that matches the call, None when none does (the call gets no data)."""
    return next((f for f in fixtures if f.tool == tool and matches(f.match, arguments)), None)
