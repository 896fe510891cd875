"""The DiagnosisDraft: the model's final answer, as JSON in its last assistant message."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class Citation(BaseModel):
    """A pointer into this run's canonical records."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool_call_id: str = Field(min_length=1)
    """The tool call whose raw result contains the excerpt."""
    excerpt: str = Field(min_length=1)
    """Text copied verbatim from that raw result."""


class Claim(BaseModel):
    """One statement of the diagnosis with its evidence."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    statement: str = Field(min_length=1)
    """What is claimed."""
    citations: list[Citation] = Field(default_factory=list)
    """Evidence for the claim."""


class Draft(BaseModel):
    """The agent's final report; `conclusion: null` is a legal, honest finish."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    conclusion: str | None = None
    """The root cause, or null when the evidence does not support one."""
    claims: list[Claim] = Field(default_factory=list)
    """Claims with citations."""
    missing_info: list[str] = Field(default_factory=list)
    """Context the diagnosis needs but does not have (tenant, time window, …)."""
    next_steps: list[str] = Field(default_factory=list)
    """What a human should check next."""

    @property
    def citations(self) -> list[Citation]:
        """Every citation of every claim."""
        return [c for claim in self.claims for c in claim.citations]


DRAFT_JSON_SCHEMA = Draft.model_json_schema()
"""The Draft's JSON schema, as a client that constrains replies to JSON offers it."""


@dataclass(frozen=True, slots=True)
class DraftParse:
    """A parsed Draft, or why the final message is not one."""

    draft: Draft | None
    """The Draft when valid."""
    error: str | None
    """Why it is invalid (an invalid Draft reaches Release as invalid)."""


_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


def parse_draft(content: str | None) -> DraftParse:
    """Parse the final assistant message into a Draft, never raising."""
    if content is None or not content.strip():
        return DraftParse(None, "the final message is empty")
    text = content.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return DraftParse(None, "the final message is not JSON")
    if not isinstance(data, dict):
        return DraftParse(None, f"the Draft must be a JSON object, got {type(data).__name__}")
    try:
        return DraftParse(Draft.model_validate(data), None)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "<draft>"
        return DraftParse(None, f"invalid Draft at {where}: {first['msg']}")
