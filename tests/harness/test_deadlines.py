"""Deadlines are deadlines: every model attempt gets min(model timeout, time left),
the SemanticGuard counts against the model-call budget and the deadline, and no run outlives its
deadline by more than one second — against a real, slow HTTP endpoint on 127.0.0.1."""

from __future__ import annotations

import json
import time

import pytest

from harness.agent import run_diagnosis
from harness.config import HarnessConfig
from harness.contracts import BudgetKind, ModelErrorKind, ModelPurpose, ReleaseOutcome, StopReason
from harness.models.openai_model import OpenAIChatModel
from harness.prompts import DiagnosisTask
from harness.trace import EventKind, GuardVerdict
from tests._fake_endpoint import Endpoint, completion, serve
from tests.conftest import LINES, LookupTool

SLACK = 1.0
DRAFT = {
    "conclusion": "pool exhausted",
    "claims": [{"statement": "s", "citations": [{"tool_call_id": "c1", "excerpt": "db connection pool exhausted"}]}],
}


def _model(base_url: str, monkeypatch: pytest.MonkeyPatch) -> OpenAIChatModel:
    monkeypatch.setenv("HB_TEST_KEY", "sk-test-not-real")
    # the client's own timeout is generous: only the Harness's deadline can cut the call short
    return OpenAIChatModel("m", base_url=base_url, api_key_env="HB_TEST_KEY", timeout_seconds=60)


def _push_lookup_then_draft(ep: Endpoint) -> None:
    """The model's first two answers: one lookup call, then DRAFT citing it (the guard call comes next)."""
    ep.push(200, completion(None, [_call("c1", "pool")]))
    ep.push(200, completion(json.dumps(DRAFT)))


def _call(call_id: str, query: str) -> dict[str, object]:
    args = json.dumps({"input": {"query": query}})
    return {"id": call_id, "type": "function", "function": {"name": "lookup", "arguments": args}}


def test_a_slow_model_call_is_cut_at_the_deadline_and_is_a_budget_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = HarnessConfig(deadline_seconds=1.5, model_timeout_seconds=60, max_model_attempts=3)
    with serve() as ep:
        ep.push(200, completion(None, [_call("c1", "timeout")]))
        ep.push_fault("sleep", 200, completion(json.dumps({"conclusion": None})), seconds=6)
        t0 = time.monotonic()
        r = run_diagnosis(DiagnosisTask("why?"), [LookupTool(LINES)], _model(ep.base_url, monkeypatch), config=cfg)
        elapsed = time.monotonic() - t0
    assert elapsed <= cfg.deadline_seconds + SLACK, f"run took {elapsed:.2f}s against a 1.5 s deadline"
    assert r.decision.stop_reason is StopReason.BUDGET_LIMIT_REACHED and r.usage.budget_hit is BudgetKind.DEADLINE
    # the verified empty-or-not facts survive: the lookup ran and is published as a fallback
    assert r.decision.outcome is ReleaseOutcome.FALLBACK
    timed_out = [e for e in r.events if e.kind is EventKind.MODEL_CALL and e.error_kind is ModelErrorKind.TIMEOUT]
    assert len(timed_out) == 1, "the cut attempt is traced; no retry is started past the deadline"


def test_the_semantic_guard_call_respects_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = HarnessConfig(deadline_seconds=1.5, model_timeout_seconds=60)
    with serve() as ep:
        _push_lookup_then_draft(ep)
        ep.push_fault("sleep", 200, completion('{"verdict": "SUPPORTED", "reason": "late"}'), seconds=6)
        t0 = time.monotonic()
        r = run_diagnosis(DiagnosisTask("why?"), [LookupTool(LINES)], _model(ep.base_url, monkeypatch), config=cfg)
        elapsed = time.monotonic() - t0
    assert elapsed <= cfg.deadline_seconds + SLACK, f"guard kept the run alive {elapsed:.2f}s"
    assert r.decision.outcome is not ReleaseOutcome.SUCCESS, "an unverified conclusion is never published"
    guard = [e for e in r.events if isinstance(e, GuardVerdict)]
    assert guard and "fail closed" in (guard[0].detail or "")
    assert r.error is None, "a deadline is a budget, not an infrastructure failure"
    # never "the agent finished on its own": the deadline stopped the run, as when it cuts a diagnosis call
    assert r.decision.stop_reason is StopReason.BUDGET_LIMIT_REACHED and r.usage.budget_hit is BudgetKind.DEADLINE
    assert [e.budget for e in r.events if e.kind is EventKind.BUDGET_EXHAUSTED] == [BudgetKind.DEADLINE]


def test_a_guard_endpoint_failure_is_an_infrastructure_error_not_a_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SemanticGuard's endpoint answers 500 on every attempt: the Release still fails closed (no SUCCESS),
    and the run says why in `error`, which the bench counts as an infrastructure error, not a model result."""
    with serve() as ep:
        _push_lookup_then_draft(ep)
        for _ in range(3):
            ep.push(500, {"error": {"message": "upstream down"}})
        r = run_diagnosis(
            DiagnosisTask("why?"), [LookupTool(LINES)], _model(ep.base_url, monkeypatch),
            config=HarnessConfig(max_model_attempts=3, retry_backoff_seconds=0),
        )  # fmt: skip
        requests = len(ep.requests)
    assert requests == 5 and r.usage.guard_calls >= 1
    assert r.decision.outcome is not ReleaseOutcome.SUCCESS
    assert r.error is not None and r.error.startswith("SemanticGuard model call failed after 3 attempt(s)")
    assert r.error_kind is ModelErrorKind.SERVER_ERROR and r.error_kind.infrastructure  # typed where it failed


def test_the_semantic_guard_counts_against_the_model_call_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    with serve() as ep:
        _push_lookup_then_draft(ep)
        ep.push(200, completion('{"verdict": "SUPPORTED", "reason": "never asked"}'))
        r = run_diagnosis(
            DiagnosisTask("why?"), [LookupTool(LINES)], _model(ep.base_url, monkeypatch),
            config=HarnessConfig(max_model_calls=2),
        )  # fmt: skip
        requests = len(ep.requests)
    assert requests == 2, "the guard call would have been the third model call of a 2-call budget"
    assert r.usage.model_calls + r.usage.guard_calls <= 2
    assert r.decision.outcome is ReleaseOutcome.FALLBACK
    assert "no MODEL_CALLS budget left for the SemanticGuard" in r.decision.reason
    guard_calls = [e for e in r.events if e.kind is EventKind.MODEL_CALL and e.purpose is ModelPurpose.SEMANTIC_GUARD]
    assert guard_calls == []


def test_with_budget_left_the_guard_runs_and_is_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    with serve() as ep:
        _push_lookup_then_draft(ep)
        ep.push(200, completion('{"verdict": "SUPPORTED", "reason": "log line"}'))
        r = run_diagnosis(
            DiagnosisTask("why?"), [LookupTool(LINES)], _model(ep.base_url, monkeypatch),
            config=HarnessConfig(max_model_calls=3),
        )  # fmt: skip
    assert r.decision.outcome is ReleaseOutcome.SUCCESS and (r.usage.model_calls, r.usage.guard_calls) == (2, 1)
