"""A run whose span does not record (its tracer's sampler dropped it, or a no-op tracer) costs one span start: the
recorder builds no child span, span event or attribute for it, and the run itself is unchanged."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import NoOpTracer, Span, Tracer

from harness.agent import run_diagnosis
from runners.domain.evalset import load_cases
from runners.run.case_runner import run_case

CASES = load_cases()[::11]


class Counting(Tracer):
    """Counts the spans started through `inner` (and the events added to them)."""

    def __init__(self, inner: Tracer) -> None:
        self.inner = inner
        self.started = 0

    def start_span(self, name: str, context: Context | None = None, *args: Any, **kwargs: Any) -> Span:
        self.started += 1
        return self.inner.start_span(name, context, *args, **kwargs)

    def start_as_current_span(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the recorder starts spans explicitly")


@pytest.mark.parametrize("tracer", ["sampled-out", "no-op"])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_run_that_is_not_recorded_starts_one_span(case: Any, tracer: str) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=ALWAYS_OFF)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    counting = Counting(provider.get_tracer("off") if tracer == "sampled-out" else NoOpTracer())
    run = run_case(case, loop=functools.partial(run_diagnosis, tracer=counting))
    plain = run_case(case)
    assert run.result.usage.model_calls > 0
    assert counting.started == 1  # the run's span: nothing else once it is known not to record
    assert exporter.get_finished_spans() == ()
    assert [type(e) for e in run.result.events] == [type(e) for e in plain.result.events]
    assert run.result.decision.outcome == plain.result.decision.outcome


def test_a_recorded_run_starts_a_span_per_model_call_and_invocation() -> None:
    """The counting tracer counts what it should (so the test above could fail)."""
    case = CASES[0]
    counting = Counting(TracerProvider().get_tracer("on"))
    run = run_case(case, loop=functools.partial(run_diagnosis, tracer=counting))
    usage = run.result.usage
    assert counting.started == 1 + usage.model_calls + usage.guard_calls + usage.tool_invocations > 1
