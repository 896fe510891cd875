"""docs/architecture.md §14 row 8: an unknown query no longer ends in a generic internal error.

End to end through the real path — openai SDK → HTTP → serve-sim — a question whose logs are empty
ends as FALLBACK/INSUFFICIENT_EVIDENCE via INFORMATION_SATURATED, with the model turns, tool
invocations, rejections, tokens and the event sequence checked, not only the final outcome."""

from __future__ import annotations

import pytest

from harness.trace import EventKind
from runners.domain.evalset import load_cases
from runners.domain.profiles import trajectory_for_model
from runners.endpoints.simulator import SimulatorServer
from runners.plan.options import BenchOptions
from runners.plan.settings import ModelSettings
from runners.run.bench import plan_run, run_bench

CASE = "empty_logs_gateway_timeout_t1"


def test_unknown_query_over_http_is_an_honest_fallback(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("HB_E2E_KEY", "x")
    with SimulatorServer(load_cases(), trajectory_for=trajectory_for_model) as sim:
        summary = run_bench(plan_run(BenchOptions.of(case_ids=[CASE],
        model_settings=ModelSettings(model="openai:scripted", base_url=sim.base_url, api_key_env="HB_E2E_KEY"),
                                         db=tmp_path / "e2e.duckdb")))  # fmt: skip
        requests = sim.requests
    (run,) = summary.runs
    d = run.result.decision
    assert (d.outcome.value, getattr(d.fallback_kind, "value", None), getattr(d.stop_reason, "value", None)) == (
        "FALLBACK",
        "INSUFFICIENT_EVIDENCE",
        "INFORMATION_SATURATED",
    )
    assert run.result.error is None and "internal" not in d.reason.lower()
    assert run.metrics.model_calls == 3 == requests, "two searches, then the Draft after STOP_REQUIRED"
    assert run.metrics.tool_invocations == 2 and run.metrics.tool_rejections == 0
    assert run.metrics.input_tokens > 0 and run.metrics.output_tokens > 0
    kinds = [e.kind for e in run.result.events if e.kind is not EventKind.GAIN_APPLIED]
    assert kinds == [
        EventKind.RUN_STARTED,
        EventKind.MODEL_CALL, EventKind.TOOL_INVOCATION,
        EventKind.MODEL_CALL, EventKind.TOOL_INVOCATION, EventKind.STOP_REQUIRED_DELIVERED,
        EventKind.MODEL_CALL, EventKind.DRAFT_RECEIVED,
        EventKind.RELEASED,
    ]  # fmt: skip
    assert d.fallback is not None and all("no records" in fact for fact in d.fallback.checked)
