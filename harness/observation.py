"""Model observations: the bounded, cleaned projection of a tool result (BRIEF §6).

The observation is what the model reads. It is never a source of truth: guards and the snapshot
read the canonical store. Control messages (corrections, STOP_REQUIRED) are built here too so
that every model-facing text has one home.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from harness.contracts import ControlSignal, JsonObject, JsonValue, StopReason
from harness.envelope import GAIN_VALUES
from harness.progress import Violation
from harness.tools.base import ToolResult

_STOP_TEXT = (
    "Stop calling tools. Write your final Draft now as JSON. If the evidence does not support a root "
    "cause, set conclusion to null and list what is missing and the next steps."
)


@dataclass(frozen=True, slots=True)
class Observation:
    """A model-facing observation and its size."""

    text: str
    """The JSON text handed to the model as the tool message."""
    bytes: int
    """UTF-8 size of `text`."""
    truncated: bool
    """Whether records were cut to fit the byte cap (or the backend truncated)."""


def _dump(obj: JsonObject) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str)


def _finish(obj: JsonObject, truncated: bool) -> Observation:
    text = _dump(obj)
    return Observation(text, len(text.encode("utf-8")), truncated)


def project_result(
    call_id: str,
    tool: str,
    result: ToolResult,
    max_bytes: int,
    *,
    evaluation_required: bool,
    stop_reason: StopReason | None = None,
) -> Observation:
    """Project a completed call into at most `max_bytes` (records dropped, then strings cut)."""
    head: JsonObject = {
        "tool_call_id": call_id,
        "tool": tool,
        "status": "COMPLETED",
        "evidence_status": result.evidence_status.value,
        "count": result.count,
        "scope": result.actual_scope,
        "truncated": result.truncated,
        "evaluation_required": evaluation_required,
    }
    if stop_reason is not None:
        head["control"] = ControlSignal.STOP_REQUIRED.value
        head["stop_reason"] = stop_reason.value
        head["message"] = _STOP_TEXT
    if evaluation_required:
        head["next_call_must_include"] = {
            "previous_observation": {"tool_call_id": call_id, "information_gain": "GAINED | NO_GAIN"}
        }
    records: list[JsonValue] = []
    for i, rec in enumerate(result.records):
        item: JsonObject = dict(rec)
        if result.relevance and i < len(result.relevance):
            item["relevance"] = result.relevance[i].value
        records.append(item)
    head["records"] = records
    obs = _finish(head, result.truncated)
    if obs.bytes <= max_bytes:
        return obs
    # Drop records from the end until it fits; then cut long strings of what is left.
    head["truncated"] = True
    while records and len(_dump(head).encode("utf-8")) > max_bytes:
        records.pop()
    if not records and result.records:
        first: JsonObject = dict(result.records[0])
        budget = max(32, max_bytes // 4)
        records.append(
            {k: (v[:budget] + "…" if isinstance(v, str) and len(v) > budget else v) for k, v in first.items()}
        )
        if len(_dump(head).encode("utf-8")) > max_bytes:
            records.clear()
    head["records_shown"] = len(records)
    return _finish(head, True)


def failed(call_id: str, tool: str, message: str) -> Observation:
    """Observation of a backend failure (technical path, no gain)."""
    return _finish({"tool_call_id": call_id, "tool": tool, "status": "FAILED", "error": message[:500]}, False)


def violation(call_id: str, v: Violation, expected_pending: str | None) -> Observation:
    """Corrective observation: type, missing field, expected pending id, allowed values."""
    return _finish(
        {
            "tool_call_id": call_id,
            "status": "REJECTED",
            "reason": "PROTOCOL_VIOLATION",
            "violation": v.kind.value,
            "message": v.message,
            "missing_field": v.missing_field,
            "expected_previous_tool_call_id": expected_pending,
            "allowed_information_gain": list(GAIN_VALUES),
            "envelope": '{"previous_observation": {"tool_call_id": "...", "information_gain": "GAINED|NO_GAIN"}, '
            '"input": {...}}',
            "backend_called": False,
        },
        False,
    )


def duplicate(call_id: str, duplicate_of: str) -> Observation:
    """Observation for a duplicate scope: NO_GAIN applied, backend not called."""
    return _finish(
        {
            "tool_call_id": call_id,
            "status": "REJECTED",
            "reason": "DUPLICATE_SCOPE",
            "duplicate_of": duplicate_of,
            "information_gain": "NO_GAIN",
            "message": f"The same query was already executed as {duplicate_of}; it was not run again.",
            "backend_called": False,
            "evaluation_required": False,
        },
        False,
    )


def stop_required(call_id: str, reason: StopReason, v: Violation | None = None) -> Observation:
    """The one STOP_REQUIRED instruction."""
    obj: JsonObject = {
        "tool_call_id": call_id,
        "status": "REJECTED",
        "control": ControlSignal.STOP_REQUIRED.value,
        "stop_reason": reason.value,
        "message": _STOP_TEXT,
        "backend_called": False,
    }
    if v is not None:
        obj["violation"] = v.kind.value
    return _finish(obj, False)


def saturated(call_id: str, reason: StopReason | None) -> Observation:
    """A request in the same turn as STOP_REQUIRED: rejected, nothing runs."""
    return _finish(
        {
            "tool_call_id": call_id,
            "status": "REJECTED",
            "reason": "SATURATED",
            "stop_reason": reason.value if reason else None,
            "message": _STOP_TEXT,
            "backend_called": False,
        },
        False,
    )
