"""Another agent's OpenTelemetry GenAI spans (no `harness.*` attribute), written here as OTLP/JSON: any such run reads
with its model and tool calls in the order they ended, each call's arguments and result from its span or from the
chat messages, a failed span failed, and the Harness's NO_GAIN inferred; calls nested under the agent's own spans
belong to the run above them; arrays among the attributes are left alone; any mangled line is one line naming the
file, or reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness import GainApplied, InvocationStatus, ModelCall, ReleaseOutcome, ToolInvocation
from runners.interchange.otel_import import TraceImportError, read_traces

TRACE = "ab" * 16


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    if isinstance(value, list):
        return {"key": key, "value": {"arrayValue": {"values": [{"stringValue": v} for v in value]}}}
    return {"key": key, "value": {"stringValue": value}}


def _span(span_id: int, parent: int | None, name: str, start: int, end: int, attrs: dict[str, Any],
          error: bool = False) -> dict[str, Any]:  # fmt: skip
    return {"traceId": TRACE, "spanId": f"{span_id:016x}", "parentSpanId": f"{parent:016x}" if parent else "",
            "name": name, "startTimeUnixNano": str(start), "endTimeUnixNano": str(end),
            "attributes": [_attr(k, v) for k, v in attrs.items()], "status": {"code": 2 if error else 0}}  # fmt: skip


def _file(path: Path, spans: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}) + "\n", encoding="utf-8")
    return path


# one call: (kind, tool, arguments, result, failed, where the arguments/result are: span or messages)
_CALLS = st.lists(
    st.tuples(
        st.sampled_from(["chat", "tool"]),
        st.sampled_from(["kubectl", "logs", "metrics"]),
        st.dictionaries(st.sampled_from("ab"), st.integers(0, 2), max_size=2),
        st.sampled_from(["", "[]", "{}", "ok", '["pod"]']),
        st.booleans(),
        st.booleans(),
    ),
    max_size=8,
)


@given(_CALLS, st.booleans())
def test_any_agent_run_reads_with_its_calls_in_order(
    tmp_path_factory: pytest.TempPathFactory, calls: list[Any], nested: bool
) -> None:
    spans = [_span(1, None, "invoke_agent my-agent", 0, 10**9, {"gen_ai.operation.name": "invoke_agent",
                                                                "gen_ai.conversation.id": "conv-1"})]  # fmt: skip
    if nested:  # the agent's own step span between the run and its calls
        spans.append(_span(2, 1, "step", 0, 10**9, {"framework.step": 1}))
    parent, t, expected = 2 if nested else 1, 1000, []
    pending: list[tuple[str, str]] = []
    for n, (kind, tool, args, result, failed, on_span) in enumerate(calls):
        t += 1000
        if kind == "chat":
            attrs: dict[str, Any] = {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-x",
                "gen_ai.usage.input_tokens": 10,
                "gen_ai.response.finish_reasons": ["stop"],
            }
            attrs["gen_ai.input.messages"] = json.dumps(
                [
                    {
                        "role": "tool",
                        "parts": [{"type": "tool_call_response", "id": i, "response": r} for i, r in pending],
                    }
                ]
            )
            pending = []
            spans.append(_span(100 + n, parent, "chat gpt-x", t - 500, t, attrs, error=failed))
            expected.append(("model", failed))
            continue
        call_id = f"call-{n}"
        attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool, "gen_ai.tool.call.id": call_id}
        if on_span:
            attrs |= {"gen_ai.tool.call.arguments": json.dumps(args), "gen_ai.tool.call.result": result}
        spans.append(_span(100 + n, parent, f"execute_tool {tool}", t - 500, t, attrs, error=failed))
        expected.append((tool, failed))
    path = _file(tmp_path_factory.mktemp("spans") / "s.jsonl", spans)
    (run,) = read_traces(path)
    assert not run.harnessed and run.run_id == "conv-1" and run.trace_id == TRACE and run.limits is None
    got = [("model", e.error_kind is not None) if isinstance(e, ModelCall)
           else (e.tool, e.invocation_status is InvocationStatus.FAILED)
           for e in run.events if isinstance(e, ModelCall | ToolInvocation)]  # fmt: skip
    assert got == expected
    # arguments not recorded: no scope, never a repeat (the span carried none and no chat message named the call)
    tools = [e for e in run.events if isinstance(e, ToolInvocation)]
    assert [e.scope == "" for e in tools] == [not c[5] for c in calls if c[0] == "tool"]
    assert [e.seq for e in run.events] == list(range(len(run.events)))
    gains = {e.tool_call_id for e in run.events if isinstance(e, GainApplied)}
    for e in run.events:
        if isinstance(e, ToolInvocation) and e.evidence_status is None:
            assert e.tool_call_id not in gains  # a result not recorded: no gain known


def test_arguments_and_results_come_from_the_messages_when_the_spans_lack_them(tmp_path: Path) -> None:
    answer = json.dumps([{"role": "assistant", "parts": [
        {"type": "tool_call", "id": "c1", "name": "logs", "arguments": {"pod": "a"}}]}])  # fmt: skip
    back = json.dumps([{"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": ""}]}])
    spans = [
        _span(1, None, "invoke_agent a", 0, 10**6, {"gen_ai.operation.name": "invoke_agent"}),
        _span(2, 1, "chat m", 10, 20, {"gen_ai.operation.name": "chat", "gen_ai.output.messages": answer}),
        _span(3, 1, "execute_tool logs", 30, 40, {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "logs",
                                                  "gen_ai.tool.call.id": "c1"}),
        _span(4, 1, "chat m", 50, 60, {"gen_ai.operation.name": "chat", "gen_ai.input.messages": back}),
    ]  # fmt: skip
    (run,) = read_traces(_file(tmp_path / "s.jsonl", spans))
    (call,) = [e for e in run.events if isinstance(e, ToolInvocation)]
    assert (
        call.scope == '{"pod":"a"}' and call.evidence_status is not None and call.evidence_status.value == "NO_EVIDENCE"
    )
    assert [e.tool_call_id for e in run.events if isinstance(e, GainApplied)] == ["c1"]
    assert run.run_id == f"{TRACE}-{1:016x}" and run.events[-1].outcome is ReleaseOutcome.SUCCESS  # type: ignore[union-attr]


def test_a_bad_value_in_an_attribute_the_reader_uses_is_one_line(tmp_path: Path) -> None:
    spans = [
        _span(1, None, "invoke_agent a", 0, 10**6, {"gen_ai.operation.name": "invoke_agent"}),
        _span(2, 1, "chat m", 10, 20, {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": "many"}),
    ]
    path = _file(tmp_path / "s.jsonl", spans)
    with pytest.raises(TraceImportError) as err:
        read_traces(path)
    assert str(err.value).startswith(f'{path}:1: span {2:016x} (chat m): gen_ai.usage.input_tokens: "many"')


@given(st.integers(0, 400), st.binary(min_size=1, max_size=3))
def test_a_mangled_line_reads_or_is_one_line(tmp_path_factory: pytest.TempPathFactory, at: int, junk: bytes) -> None:
    spans = [
        _span(1, None, "invoke_agent a", 0, 10**6, {"gen_ai.operation.name": "invoke_agent"}),
        _span(2, 1, "execute_tool t", 10, 20, {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"}),
    ]
    path = _file(tmp_path_factory.mktemp("m") / "s.jsonl", spans)
    raw = path.read_bytes()
    at = min(at, len(raw) - 1)
    path.write_bytes(raw[:at] + junk + raw[at + 1 :])
    try:
        read_traces(path)
    except TraceImportError as exc:
        assert str(exc).startswith(f"{path}") and "\n" not in str(exc)
