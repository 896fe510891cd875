"""Model observations: the bounded, cleaned projection of a tool result (docs/architecture.md §6.2).

The observation is what the model reads. It is never a source of truth: guards and the snapshot
read the canonical store. Control messages (corrections, STOP_REQUIRED) are built here too so
that every model-facing text has one home. Every observation, header included, fits its byte cap:
records are dropped first, then the longest strings (a long scope included) are cut with a marker.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from harness.contracts import (
    ControlSignal,
    InvocationStatus,
    JsonObject,
    JsonValue,
    RejectionReason,
    StopReason,
    ViolationKind,
)
from harness.envelope import GAIN_VALUES
from harness.tools.base import ToolResult
from harness.tracker import Violation

_STOP_TEXT = (
    "Stop calling tools. Write your final Draft now as JSON: the conclusion with its citations if the results "
    "you received show the root cause, otherwise conclusion null with what is missing and the next steps."
)
_CUT = "…[cut]"
_MIN_STRING = 24  # strings are never cut below this many characters before the last-resort fallback
_ID_CHARS = 64  # a model-chosen call id is echoed at most this long when space runs out
# What survives when nothing else fits: enough for the model to follow the protocol.
_ESSENTIAL = (
    "tool_call_id", "status", "reason", "evidence_status", "count", "evaluation_required", "control",
    "stop_reason", "evaluate_first", "violation",
)  # fmt: skip

# What to change, per violation kind. Each text names the fix; the template shown next to it is
# built from the same pending state, so it can never contradict the text.
_FIX: dict[ViolationKind, str] = {
    ViolationKind.MISSING_PREVIOUS_OBSERVATION: (
        "Add previous_observation with tool_call_id {pending} and your evaluation of that observation "
        "(GAINED or NO_GAIN), then the input."
    ),
    ViolationKind.WRONG_TOOL_CALL_ID: (
        "Set previous_observation.tool_call_id to {pending}: it is the only observation waiting for evaluation."
    ),
    ViolationKind.UNEXPECTED_PREVIOUS_OBSERVATION: (
        "Remove previous_observation: no observation is waiting for evaluation. Send only the input."
    ),
    ViolationKind.INVALID_GAIN_VALUE: "Set previous_observation.information_gain to exactly GAINED or NO_GAIN.",
    ViolationKind.MALFORMED_ENVELOPE: "Send the arguments as one JSON object shaped like the template.",
    ViolationKind.UNKNOWN_TOOL: "Call one of the available tools named in the message.",
    ViolationKind.INVALID_INPUT: "Fix the input fields named in the message; keep the rest of the envelope.",
    ViolationKind.REUSED_TOOL_CALL_ID: "Give every tool call a new id.",
}


@dataclass(frozen=True, slots=True)
class Observation:
    """A model-facing observation and its size."""

    text: str
    """The JSON text handed to the model as the tool message."""
    bytes: int
    """UTF-8 size of `text`."""
    truncated: bool
    """Whether records or strings were cut to fit the byte cap (or the backend truncated)."""


def _dump(obj: JsonValue) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str)


def _size(obj: JsonValue) -> int:
    return len(_dump(obj).encode("utf-8"))


@dataclass(frozen=True, slots=True)
class _StringAt:
    """The longest string value somewhere in a JSON value: where it sits and how long it is."""

    container: JsonObject | list[JsonValue]
    """The object or list that holds it."""
    key: str | int
    """Its key in `container` (an index for a list)."""
    length: int
    """Its length in characters."""

    def cut(self, keep: int) -> None:
        """Replace it by its first `keep` characters and the cut marker."""
        container, key = self.container, self.key
        if isinstance(container, dict) and isinstance(key, str):
            value = container[key]
            assert isinstance(value, str)
            container[key] = value[:keep] + _CUT
        elif isinstance(container, list) and isinstance(key, int):
            item = container[key]
            assert isinstance(item, str)
            container[key] = item[:keep] + _CUT


def _longest_string(obj: JsonValue) -> _StringAt | None:
    """The longest string value anywhere in `obj` (keys never count)."""
    best: _StringAt | None = None

    def walk(node: JsonValue) -> None:
        nonlocal best
        items: list[tuple[str | int, JsonValue]]
        if isinstance(node, dict):
            items = list(node.items())
        elif isinstance(node, list):
            items = list(enumerate(node))
        else:
            return
        for key, value in items:
            if isinstance(value, str):
                if best is None or len(value) > best.length:
                    best = _StringAt(node, key, len(value))
            else:
                walk(value)

    walk(obj)
    return best


def _fit(obj: JsonObject, max_bytes: int, truncated: bool) -> Observation:
    """Dump `obj` within `max_bytes`, cutting the longest strings (with a marker) until it fits."""
    text = _dump(obj)
    size = len(text.encode("utf-8"))
    if size <= max_bytes:
        return Observation(text, size, truncated)
    obj["truncated"] = True
    while _size(obj) > max_bytes:
        found = _longest_string(obj)
        if found is None or found.length <= _MIN_STRING:
            break
        over = _size(obj) - max_bytes
        found.cut(max(_MIN_STRING - len(_CUT), found.length - over - len(_CUT)))  # cut just enough (bytes >= chars)
    records = obj.get("records")
    if isinstance(records, list):
        while records and _size(obj) > max_bytes:
            records.pop()
            obj["records_shown"] = len(records)
    if _size(obj) > max_bytes:
        # Last resort (tiny caps, a huge model-chosen id): only the control facts the model needs.
        kept: JsonObject = {k: obj[k] for k in _ESSENTIAL if k in obj}
        call_id = kept.get("tool_call_id")
        kept["tool_call_id"] = call_id[:_ID_CHARS] if isinstance(call_id, str) else None
        kept["truncated"] = True
        obj = kept
    text = _dump(obj)
    return Observation(text, len(text.encode("utf-8")), True)


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
        "status": InvocationStatus.COMPLETED.value,
        "evidence_status": result.evidence_status.value,
        "count": result.count,
        "scope": result.actual_scope,
        "truncated": result.truncated,
        "evaluation_required": evaluation_required,
    }
    if result.count_without_text_filter is not None:
        head["count_without_text_filter"] = result.count_without_text_filter
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
    if _size(head) <= max_bytes:
        return _fit(head, max_bytes, result.truncated)
    # Cutting works in place: on a copy, so the canonical record (scope, nested record strings) the snapshot
    # and EvidenceGuard read stays what the backend returned. JSON in, JSON out: the dump's round trip is the copy.
    copied = json.loads(_dump(head))
    head, records = copied, copied["records"]
    head["truncated"] = True
    # A scope is metadata: it may use at most a quarter of the cap before records are dropped.
    scope_budget = max_bytes // 4
    while _size(head["scope"]) > scope_budget:
        found = _longest_string(head["scope"])
        if found is None or found.length <= _MIN_STRING:
            break
        found.cut(max(_MIN_STRING - len(_CUT), found.length // 2))
    # Drop records from the end while it does not fit; keep the first one to be cut if need be.
    while len(records) > 1 and _size(head) > max_bytes:
        records.pop()
    head["records_shown"] = len(records)
    return _fit(head, max_bytes, True)


def failed(call_id: str, tool: str, message: str, max_bytes: int) -> Observation:
    """Observation of a backend failure (technical path, no gain)."""
    return _fit(
        {"tool_call_id": call_id, "tool": tool, "status": InvocationStatus.FAILED.value, "error": message[:500]},
        max_bytes,
        False,
    )


def _template(pending: str | None) -> JsonObject:
    """The envelope the next call must have, for the current pending state."""
    if pending is None:
        return {"input": {"...": "the tool's parameters"}}
    return {
        "previous_observation": {"tool_call_id": pending, "information_gain": "GAINED or NO_GAIN"},
        "input": {"...": "the tool's parameters"},
    }


def violation(call_id: str, v: Violation, expected_pending: str | None, max_bytes: int) -> Observation:
    """Corrective observation: type, what to change, missing field, expected pending id, a consistent template."""
    obj: JsonObject = {
        "tool_call_id": call_id,
        "status": InvocationStatus.REJECTED.value,
        "reason": RejectionReason.PROTOCOL_VIOLATION.value,
        "violation": v.kind.value,
        "message": v.message,
        "fix": _FIX[v.kind].format(pending=expected_pending),
        "missing_field": v.missing_field,
        "expected_previous_tool_call_id": expected_pending,
        "envelope_template": _template(expected_pending),
        "backend_called": False,
    }
    if expected_pending is not None or v.kind is ViolationKind.INVALID_GAIN_VALUE:
        obj["allowed_information_gain"] = list(GAIN_VALUES)
    return _fit(obj, max_bytes, False)


def awaiting(call_id: str, pending: str, max_bytes: int) -> Observation:
    """A call queued in the same message behind a call whose result now awaits evaluation."""
    return _fit(
        {
            "tool_call_id": call_id,
            "status": InvocationStatus.REJECTED.value,
            "reason": RejectionReason.AWAITING_EVALUATION.value,
            "evaluate_first": pending,
            "message": (
                f"Not executed: evaluate {pending} first. Read its observation, then send this request again "
                f"with previous_observation {{tool_call_id: {pending}, information_gain: GAINED or NO_GAIN}}. "
                "Make one tool call per message."
            ),
            "backend_called": False,
            "protocol_violation": False,
        },
        max_bytes,
        False,
    )


def duplicate(call_id: str, duplicate_of: str, max_bytes: int) -> Observation:
    """Observation for a duplicate scope: NO_GAIN applied, backend not called."""
    return _fit(
        {
            "tool_call_id": call_id,
            "status": InvocationStatus.REJECTED.value,
            "reason": RejectionReason.DUPLICATE_SCOPE.value,
            "duplicate_of": duplicate_of,
            "information_gain": "NO_GAIN",
            "message": f"The same query was already executed as {duplicate_of}; it was not run again.",
            "backend_called": False,
            "evaluation_required": False,
        },
        max_bytes,
        False,
    )


def stop_required(call_id: str, reason: StopReason, v: Violation | None, max_bytes: int) -> Observation:
    """The one STOP_REQUIRED instruction."""
    obj: JsonObject = {
        "tool_call_id": call_id,
        "status": InvocationStatus.REJECTED.value,
        "control": ControlSignal.STOP_REQUIRED.value,
        "stop_reason": reason.value,
        "message": _STOP_TEXT,
        "backend_called": False,
    }
    if v is not None:
        obj["violation"] = v.kind.value
    return _fit(obj, max_bytes, False)


def saturated(call_id: str, reason: StopReason | None, max_bytes: int) -> Observation:
    """A request in the same turn as STOP_REQUIRED: rejected, nothing runs."""
    return _fit(
        {
            "tool_call_id": call_id,
            "status": InvocationStatus.REJECTED.value,
            "reason": RejectionReason.SATURATED.value,
            "stop_reason": reason.value if reason else None,
            "message": _STOP_TEXT,
            "backend_called": False,
        },
        max_bytes,
        False,
    )


def not_executed(call_id: str, reason: RejectionReason, detail: str, max_bytes: int) -> Observation:
    """A request left in a message after the loop ended (controlled stop or budget): never run."""
    return _fit(
        {"tool_call_id": call_id, "status": InvocationStatus.REJECTED.value, "reason": reason.value, "message": detail,
         "backend_called": False},
        max_bytes,
        False,
    )  # fmt: skip
