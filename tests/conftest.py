"""Shared test helpers: a small real in-memory business tool and call builders."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, settings
from pydantic import BaseModel, ConfigDict, Field

from harness.contracts import EvidenceStatus, JsonObject
from harness.models.base import ToolCallRequest
from harness.tools.base import BusinessTool, ToolResult

# Property tests assert behaviour, not speed: no per-example deadline on a loaded 2-core CI machine.
settings.register_profile("harness-bench", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("harness-bench")


class LookupInput(BaseModel):
    """Input of the test lookup tool."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1)
    """Case-insensitive substring to find."""
    tenant: str | None = None
    """Optional tenant filter."""


class LookupTool(BusinessTool[LookupInput]):
    """A real (in-memory) business tool that counts backend calls and remembers inputs."""

    name = "lookup"
    description = "Find lines containing the query."
    input_model = LookupInput

    def __init__(self, lines: Sequence[str] = (), *, fail: bool = False) -> None:
        self.lines = list(lines)
        self.fail = fail
        self.calls = 0
        self.seen_inputs: list[JsonObject] = []
        self._lock = threading.Lock()

    def run(self, parsed: LookupInput) -> ToolResult:
        with self._lock:
            self.calls += 1
            self.seen_inputs.append(parsed.model_dump(mode="json"))
        if self.fail:
            raise RuntimeError("backend exploded")
        hits = tuple({"line": line} for line in self.lines if parsed.query.casefold() in line.casefold())
        status = EvidenceStatus.EVIDENCE if hits else EvidenceStatus.NO_EVIDENCE
        return ToolResult(status, len(hits), {"query": parsed.query, "tenant": parsed.tenant}, hits)


LINES = [
    "2026-07-01T14:02:11Z ERROR gateway tenant=t1 upstream timeout after 3000ms calling settlement",
    "2026-07-01T14:02:12Z ERROR settlement tenant=t1 db connection pool exhausted (max=20)",
    "2026-07-01T14:05:00Z INFO order tenant=t2 order created",
]


def call(
    call_id: str,
    query: str | None = "timeout",
    *,
    prev: tuple[str, str] | None = None,
    name: str = "lookup",
    raw: str | None = None,
    **extra_input: object,
) -> ToolCallRequest:
    """Build a tool call with the envelope; `raw` overrides the arguments text entirely."""
    if raw is not None:
        return ToolCallRequest(call_id, name, raw)
    envelope: dict[str, object] = {"input": {"query": query, **extra_input} if query is not None else dict(extra_input)}
    if prev is not None:
        envelope["previous_observation"] = {"tool_call_id": prev[0], "information_gain": prev[1]}
    return ToolCallRequest(call_id, name, json.dumps(envelope))


@pytest.fixture
def lookup() -> LookupTool:
    return LookupTool(LINES)
