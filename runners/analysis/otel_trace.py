"""A case run read back from the OTLP/JSON the bench writes (`harness-bench export --otel FILE --otel-content`, or
a `HarnessSession` with a tracer recording contents), as `capture --trace FILE --run ID` builds a case from it.

One line of the file is one `ExportTraceServiceRequest` (OTLP/JSON: the protobuf JSON mapping) holding one run:
its `invoke_agent` span (outcome, stop reason), a `chat` span per model call with the messages it added and its
answer (`gen_ai.input.messages`, `gen_ai.output.messages`: only when contents were recorded), an `execute_tool`
span per backend invocation, and the Harness's other decisions as span events (`harness.<kind>`).
"""

from __future__ import annotations

import json
from collections import defaultdict, deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.contracts import InformationGain, InvocationStatus, ModelPurpose
from harness.transcript import EntryKind
from runners.store.captured_runs import CapturedMessage, CapturedRun, RunSetting
from runners.store.transcripts import GUARD_VERDICT

__all__ = ["TraceError", "captured_run_from_trace"]

_Attrs = dict[str, object]
_LIMITS = {
    "harness.config.no_gain_threshold": "no_gain_threshold",
    "harness.config.protocol_violation_threshold": "protocol_violation_threshold",
    "harness.config.max_tool_invocations": "max_tool_invocations",
    "harness.config.max_model_calls": "max_model_calls",
    "harness.config.max_total_tokens": "max_total_tokens",
}
"""The run span's limits (harness/otel.py) and the bench settings they are."""


class TraceError(ValueError):
    """The trace file cannot be read, lacks the run, or lacks what a case is built from (exit 2)."""


@dataclass(frozen=True, slots=True)
class _Span:
    name: str
    """The span's name (`chat scripted`, `execute_tool log_search`, …)."""
    attrs: _Attrs
    """Its attributes, values decoded."""
    events: tuple[tuple[str, _Attrs], ...]
    """Its span events: name and attributes."""


def _value(v: object) -> object:
    """An OTLP/JSON AnyValue as Python (int64 values are strings in the JSON mapping)."""
    if not isinstance(v, dict) or not v:
        return None
    kind, inner = next(iter(v.items()))
    if kind == "intValue":
        return int(str(inner))
    if kind == "arrayValue" and isinstance(inner, dict):
        return [_value(x) for x in inner.get("values", [])]
    return inner


def _attrs(obj: object) -> _Attrs:
    items = obj.get("attributes", []) if isinstance(obj, dict) else []
    return {str(a.get("key")): _value(a.get("value")) for a in items if isinstance(a, dict)}


def _spans(request: object) -> Iterator[_Span]:
    if not isinstance(request, dict):
        return
    for rs in request.get("resourceSpans", []) or []:
        for ss in rs.get("scopeSpans", []) or [] if isinstance(rs, dict) else []:
            for s in ss.get("spans", []) or [] if isinstance(ss, dict) else []:
                if isinstance(s, dict):
                    events = tuple(
                        (str(e.get("name")), _attrs(e)) for e in s.get("events", []) or [] if isinstance(e, dict)
                    )
                    yield _Span(str(s.get("name", "")), _attrs(s), events)


def _seq(attrs: _Attrs) -> int:
    seq = attrs.get("harness.seq")
    return int(seq) if isinstance(seq, int | str) and str(seq).lstrip("-").isdigit() else -1


def _read_run(path: Path, run_id: str) -> list[_Span]:
    try:
        with path.open(encoding="utf-8") as f:
            for n, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    spans = list(_spans(json.loads(line)))
                except ValueError:
                    raise TraceError(f"--trace {path}: line {n} is not OTLP/JSON") from None
                if any(s.attrs.get("gen_ai.operation.name") == "invoke_agent"
                       and s.attrs.get("gen_ai.conversation.id") == run_id for s in spans):  # fmt: skip
                    return spans
    except OSError as exc:
        raise TraceError(f"--trace {path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise TraceError(f"--trace {path}: not UTF-8 text") from None
    raise TraceError(f"--run {run_id!r}: no invoke_agent span with that gen_ai.conversation.id in {path}")


def _str(value: object) -> str | None:
    return None if value is None else str(value)


def _parts(message: dict[str, object]) -> list[dict[str, object]]:
    parts = message.get("parts")
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def _unsent(attrs: _Attrs) -> dict[str, object]:
    """The observation of an invocation never sent to the model, from its span (its records are not there)."""
    status = attrs.get("harness.invocation_status")
    if status == InvocationStatus.FAILED.value:
        return {"status": status, "error": attrs.get("harness.detail")}
    scope = str(attrs.get("harness.scope") or "")
    try:
        parsed = json.loads(scope)
    except ValueError:
        parsed = None
    return {"status": status, "evidence_status": attrs.get("harness.evidence_status"),
            "count": attrs.get("harness.count"), "scope": parsed if isinstance(parsed, dict) else {"sql": scope},
            "truncated": attrs.get("harness.truncated"), "records": []}  # fmt: skip


def _messages(text: object, where: str) -> list[dict[str, object]]:
    try:
        data = json.loads(str(text))
    except ValueError:
        raise TraceError(f"{where}: not the conventions' message JSON") from None
    return [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []


def captured_run_from_trace(path: Path, run_id: str) -> CapturedRun:
    """The run `run_id` (its `gen_ai.conversation.id`) of the OTLP/JSON file `path`, as capture reads a stored one."""
    spans = _read_run(path, run_id)
    run = next(s for s in spans if s.attrs.get("gen_ai.operation.name") == "invoke_agent")
    chats = sorted((s for s in spans if s.attrs.get("gen_ai.operation.name") == "chat"), key=lambda s: _seq(s.attrs))
    tools = [s for s in spans if s.attrs.get("gen_ai.operation.name") == "execute_tool"]
    decisions: dict[str, deque[_Attrs]] = defaultdict(deque)  # by call id, in trace order
    for attrs in sorted([t.attrs for t in tools] + [a for n, a in run.events if n == "harness.tool_request_rejected"],
                        key=_seq):  # fmt: skip
        decisions[str(attrs.get("gen_ai.tool.call.id"))].append(attrs)
    stops = {str(a.get("gen_ai.tool.call.id")) for n, a in run.events if n == "harness.stop_required_delivered"}
    gains = [a.get("harness.gain") for n, a in run.events if n == "harness.gain_applied"]
    diagnosis = [c for c in chats if c.attrs.get("harness.model_call.purpose") == ModelPurpose.DIAGNOSIS.value]
    if diagnosis and all("gen_ai.input.messages" not in c.attrs for c in diagnosis):
        raise TraceError(f"--run {run_id!r}: its chat spans hold no messages; export with --otel-content (or record"
                         " with capture_content=True) to capture it")  # fmt: skip
    rows: list[CapturedMessage] = []

    def add(kind: EntryKind, call: int, content: object = None, *, call_id: object = None,
            decision: _Attrs | None = None, tool: object = None, arguments: object = None,
            sent: bool | None = None) -> None:  # fmt: skip
        d = decision or {}
        rows.append(CapturedMessage(
            len(rows), ModelPurpose.DIAGNOSIS.value, kind.value, call, _str(content), _str(call_id),
            _str(d.get("gen_ai.tool.call.id")), _str(tool), _str(arguments), sent,
            _str(d.get("harness.invocation_status")), _str(d.get("harness.rejection.reason")),
            _str(d.get("harness.violation")),
            None if decision is None else str(d.get("gen_ai.tool.call.id")) in stops, None, None,
        ))  # fmt: skip

    conclusion: object = None
    for call, chat in enumerate(diagnosis, start=1):
        where = f"--run {run_id!r}: chat span (harness.seq {_seq(chat.attrs)})"
        for m in _messages(chat.attrs.get("gen_ai.input.messages", "[]"), where):
            for part in _parts(m):
                if m.get("role") in ("system", "user"):
                    add(EntryKind.SYSTEM if m["role"] == "system" else EntryKind.USER, call, part.get("content"))
                elif part.get("type") == "tool_call_response":
                    add(EntryKind.OBSERVATION, call, part.get("response"), call_id=part.get("id"), sent=True)
        for m in _messages(chat.attrs.get("gen_ai.output.messages", "[]"), where):
            parts = _parts(m)
            text = next((p.get("content") for p in parts if p.get("type") == "text"), "")
            add(EntryKind.ASSISTANT, call, text)
            calls = [p for p in parts if p.get("type") == "tool_call"]
            if not calls and text:
                try:
                    draft = json.loads(str(text))
                except ValueError:
                    draft = None
                conclusion = draft.get("conclusion") if isinstance(draft, dict) else None
            for p in calls:
                queue = decisions.get(str(p.get("id")))
                add(EntryKind.TOOL_CALL, call, call_id=p.get("id"), decision=queue.popleft() if queue else {},
                    tool=p.get("name"), arguments=p.get("arguments"))  # fmt: skip
    answered = {m.tool_call_id for m in rows if m.kind == EntryKind.OBSERVATION.value}
    for span in tools:  # an invocation whose answer the run ended before sending: what its span says of it
        cid = str(span.attrs.get("gen_ai.tool.call.id"))
        if cid not in answered:
            add(EntryKind.OBSERVATION, 0, json.dumps(_unsent(span.attrs), ensure_ascii=False), call_id=cid, sent=False)
    for name, attrs in run.events:
        if name == "harness.guard_verdict":
            rows.append(CapturedMessage(len(rows), ModelPurpose.SEMANTIC_GUARD.value, GUARD_VERDICT, None, None,
                                        None, None, None, None, None, None, None, None, None,
                                        str(attrs.get("harness.guard")),
                                        str(attrs.get("harness.verdict"))))  # fmt: skip
    a = run.attrs
    bench, _, rest = run_id.partition("/")
    case_id = rest.rpartition("/")[0] or run_id

    def attr(key: str) -> str | None:
        value = a.get(key)
        return None if value is None else str(value)

    no_gain, gained = gains.count(InformationGain.NO_GAIN.value), gains.count(InformationGain.GAINED.value)
    delivered = sum(1 for n, _ in run.events if n == "harness.stop_required_delivered")
    settings = tuple(RunSetting(name, int(str(a[key]))) for key, name in _LIMITS.items()
                     if str(a.get(key, "")).isdigit())  # fmt: skip
    return CapturedRun(
        run_id, bench if rest else "", case_id, None, attr("gen_ai.request.model"), None, attr("harness.outcome"),
        attr("harness.fallback_kind"), attr("harness.stop_reason"), None if conclusion is None else str(conclusion),
        len(diagnosis), len(tools), no_gain, gained, delivered, tuple(rows), settings,
    )  # fmt: skip
