"""The library's event log: `run_diagnosis(event_log=stream)` writes every typed event of the run, one JSON line each,
in trace order, read back equal to the run's own events; with a tracer beside it both get every event."""

from __future__ import annotations

import functools
import io
import json

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from harness.agent import run_diagnosis
from harness.config import HarnessConfig, RunLimits
from harness.event_log import EventLogError, EventLogLine, event_from_json
from harness.trace import RunStarted
from runners.domain.evalset import load_cases
from runners.run.case_runner import run_case

CASES = load_cases()[::9]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_every_event_is_one_line_read_back_equal(case: object) -> None:
    log = io.StringIO()
    run = run_case(case, config=HarnessConfig(no_gain_threshold=3), loop=functools.partial(run_diagnosis,  # type: ignore[arg-type]
                   event_log=log))  # fmt: skip
    lines = [EventLogLine.model_validate_json(line) for line in log.getvalue().splitlines()]
    assert [event_from_json(line.event) for line in lines] == list(run.result.events)
    assert {line.run_id for line in lines} == {run.result.run_id}
    assert [line.limits is not None for line in lines] == [isinstance(e, RunStarted) for e in run.result.events]
    assert lines[0].limits == RunLimits.of(HarnessConfig(no_gain_threshold=3))


def test_a_tracer_and_an_event_log_both_get_every_event() -> None:
    log = io.StringIO()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    loop = functools.partial(run_diagnosis, event_log=log, tracer=provider.get_tracer("t"))
    run = run_case(CASES[0], loop=loop)
    assert len(log.getvalue().splitlines()) == len(run.result.events)
    assert any(s.name.startswith("invoke_agent") for s in exporter.get_finished_spans())


def test_a_line_that_is_no_event_of_its_kind_is_refused() -> None:
    with pytest.raises(EventLogError, match="unknown kind"):
        event_from_json({"kind": "NOPE"})
    with pytest.raises(EventLogError, match="unknown field 'extra'"):
        event_from_json({"kind": "RUN_STARTED", "model": "m", "extra": 1})
    with pytest.raises(EventLogError, match="model"):
        event_from_json(json.loads('{"kind": "RUN_STARTED"}'))
