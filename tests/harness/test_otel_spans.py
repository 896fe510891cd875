"""OpenTelemetry GenAI spans of a library run (`HarnessSession(tracer=...)`): the span tree, one span per model call
and backend invocation, rejections as span events, the Harness's decisions as `harness.*` attributes equal to the
run's events, and no message content unless opted in."""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai

from harness.agent import run_diagnosis
from harness.contracts import ModelPurpose
from harness.otel import CAPTURE_CONTENT_ENV, attribute_name, event_name
from harness.trace import ModelCall, Released, RunStarted, ToolInvocation, ToolRequestRejected
from runners.domain.evalset import load_cases
from runners.run.case_runner import CaseRun, run_case

CASES = load_cases()


def _traced(case: Any) -> tuple[CaseRun, list[ReadableSpan]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    run = run_case(case, loop=functools.partial(run_diagnosis, tracer=provider.get_tracer("test")))
    return run, list(exporter.get_finished_spans())


@pytest.mark.parametrize("case", CASES[::8], ids=[c.id for c in CASES[::8]])
def test_one_span_tree_per_run_with_a_span_per_model_call_and_invocation(case: Any) -> None:
    run, spans = _traced(case)
    events = run.result.events
    roots = [s for s in spans if s.parent is None]
    assert len(roots) == 1 and roots[0].name.startswith("invoke_agent")
    root = roots[0]
    children = [s for s in spans if s is not root]
    assert all(s.parent is not None and s.parent.span_id == root.context.span_id for s in children)
    assert all(s.context.trace_id == root.context.trace_id for s in spans)
    calls = [e for e in events if isinstance(e, ModelCall)]
    chats = [s for s in children if s.name.startswith("chat")]
    assert len(chats) == len(calls) == run.result.usage.model_calls + run.result.usage.guard_calls
    tools = [s for s in children if s.name.startswith("execute_tool")]
    invocations = [e for e in events if isinstance(e, ToolInvocation)]
    assert len(tools) == len(invocations) == run.result.usage.tool_invocations
    assert len(spans) == 1 + len(calls) + len(invocations)
    # every model call's attributes are its event's fields, the guard's call marked
    for span, call in zip(sorted(chats, key=lambda s: s.start_time or 0), calls, strict=True):
        a = span.attributes or {}
        assert a[gen_ai.GEN_AI_OPERATION_NAME] == "chat"
        assert a[attribute_name("seq")] == call.seq
        assert a[attribute_name("purpose")] == call.purpose.value
        assert a["harness.semantic_guard"] is (call.purpose is ModelPurpose.SEMANTIC_GUARD)
        assert a.get(gen_ai.GEN_AI_USAGE_INPUT_TOKENS) == call.input_tokens
        assert a.get(gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS) == call.output_tokens
    for span, inv in zip(sorted(tools, key=lambda s: s.start_time or 0), invocations, strict=True):
        a = span.attributes or {}
        assert span.name == f"execute_tool {inv.tool}"
        assert a[gen_ai.GEN_AI_TOOL_NAME] == inv.tool and a[gen_ai.GEN_AI_TOOL_CALL_ID] == inv.tool_call_id
        assert a["harness.scope"] == inv.scope and a["harness.invocation_status"] == inv.invocation_status.value
    # every other event is a span event of the run's span, in order
    others = [e for e in events if not isinstance(e, ModelCall | ToolInvocation | RunStarted | Released)]
    assert [(ev.name, (ev.attributes or {})[attribute_name("seq")]) for ev in root.events] == [
        (event_name(e), e.seq) for e in others
    ]
    rejected = [e for e in events if isinstance(e, ToolRequestRejected)]
    assert sum(ev.name == "harness.tool_request_rejected" for ev in root.events) == len(rejected)
    # the decision that stands: outcome, stop reason, fallback kind, budget hit, STOP_REQUIRED
    ra = root.attributes or {}
    d = run.result.decision
    assert ra["harness.outcome"] == d.outcome.value
    assert ra.get("harness.stop_reason") == (d.stop_reason.value if d.stop_reason else None)
    assert ra.get("harness.fallback_kind") == (d.fallback_kind.value if d.fallback_kind else None)
    assert ra.get("harness.budget_hit") == (run.metrics.budget_hit.value if run.metrics.budget_hit else None)
    assert ra["harness.stop_required_delivered"] is run.metrics.stop_required_delivered
    assert ra[gen_ai.GEN_AI_CONVERSATION_ID] == run.result.run_id
    assert ra[gen_ai.GEN_AI_USAGE_INPUT_TOKENS] == run.result.usage.input_tokens


def test_every_case_traced_keeps_its_run_identical() -> None:
    """A tracer observes: the run's outcome and events are those of the run without one."""
    for case in CASES[:12]:
        plain = run_case(case)
        traced, _ = _traced(case)
        assert [type(e) for e in traced.result.events] == [type(e) for e in plain.result.events]
        assert traced.result.decision.outcome == plain.result.decision.outcome


def test_message_content_only_when_opted_in(monkeypatch: pytest.MonkeyPatch) -> None:
    case = CASES[0]
    monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
    _, spans = _traced(case)
    keys = {k for s in spans for k in (s.attributes or {})}
    assert gen_ai.GEN_AI_INPUT_MESSAGES not in keys and gen_ai.GEN_AI_OUTPUT_MESSAGES not in keys
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    _, spans = _traced(case)
    chats = sorted((s for s in spans if s.name.startswith("chat")), key=lambda s: s.start_time or 0)
    first = json.loads(str((chats[0].attributes or {})[gen_ai.GEN_AI_INPUT_MESSAGES]))
    assert [m["role"] for m in first[:2]] == ["system", "user"]
    question = case.question
    assert question in first[1]["parts"][0]["content"]
    out = json.loads(str((chats[0].attributes or {})[gen_ai.GEN_AI_OUTPUT_MESSAGES]))
    assert out and out[0]["role"] == "assistant"
