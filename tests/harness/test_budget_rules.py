"""Budget rules: every budget stop is BUDGET_LIMIT_REACHED with the budget that was hit, whichever call hit
it; an earlier stop reason stands; the run-wide observation budget counts and caps every byte the model reads.

Each test below fails when the rule it names is broken (a one-line change in harness/ each).
"""

from __future__ import annotations

import json

import pytest

from harness.agent import run_diagnosis
from harness.config import HarnessConfig
from harness.context import RunContext
from harness.contracts import (
    BudgetKind,
    ModelErrorKind,
    ReleaseOutcome,
    SemanticVerdict,
    StopReason,
    ViolationKind,
)
from harness.draft import Draft
from harness.evidence_guard import VerifiedEvidence
from harness.interceptor import HarnessToolInterceptor
from harness.models.base import ChatRequest, ModelCallError, ModelResponse, ToolCallRequest
from harness.models.openai_model import OpenAIChatModel
from harness.prompts import DiagnosisTask
from harness.semantic_guard import review
from harness.trace import EventKind
from runners.domain.tools.db_query import DatabaseQuery, TableFixture
from tests._fake_endpoint import completion, serve
from tests.conftest import LINES, LookupTool, call

LONG = [f"2026-07-01T14:{i:02d}:00Z ERROR settlement tenant=t1 pool exhausted " + "x" * 150 for i in range(40)]


def _tool_call(call_id: str, args: dict[str, object], name: str = "lookup") -> dict[str, object]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def _http_model(base_url: str, monkeypatch: pytest.MonkeyPatch) -> OpenAIChatModel:
    monkeypatch.setenv("HB_TEST_KEY", "sk-test-not-real")
    return OpenAIChatModel("m", base_url=base_url, api_key_env="HB_TEST_KEY", timeout_seconds=5)


# -- the run-wide observation-bytes budget -------------------------------------------------------------------------
def test_a_result_is_capped_by_what_is_left_of_the_run_wide_budget() -> None:
    cfg = HarnessConfig(max_observation_bytes=4096, max_run_observation_bytes=6000)
    ctx = RunContext.create(cfg)
    icpt = HarnessToolInterceptor(ctx, {"lookup": LookupTool(LONG)})
    first = icpt.handle(call("c1", "pool"), turn=1).observation
    assert 3500 < first.bytes <= 4096 and first.truncated  # the per-observation cap
    ctx.usage.observation_bytes = cfg.max_run_observation_bytes - 1500  # 1,500 bytes left
    second = icpt.handle(call("c2", "settlement", prev=("c1", "GAINED")), turn=2).observation
    assert second.bytes <= 1500, f"{second.bytes} bytes delivered with 1500 bytes of budget left"
    assert ctx.usage.observation_bytes <= cfg.max_run_observation_bytes


def test_rejection_answers_are_charged_to_and_capped_by_the_run_wide_budget() -> None:
    cfg = HarnessConfig(max_run_observation_bytes=4000, protocol_violation_threshold=9)
    ctx = RunContext.create(cfg)
    icpt = HarnessToolInterceptor(ctx, {"lookup": LookupTool(LINES)})
    sent = 0
    # c1 executes (pending), c2 in the same message is AWAITING, then two violations in later messages
    turn1 = icpt.handle_turn([call("c1", "timeout"), call("c2", "pool")], turn=1)
    turn2 = icpt.handle_turn([call("c3", "pool")], turn=2)  # missing previous_observation
    turn3 = icpt.handle_turn([call("c4", "pool", prev=("nope", "GAINED"))], turn=3)  # wrong id
    for t in (turn1, turn2, turn3):
        sent += sum(len(a.observation.text.encode()) for a in t.answers)
    assert [json.loads(a.observation.text)["reason"] for a in turn1.answers[1:]] == ["AWAITING_EVALUATION"]
    assert ctx.usage.observation_bytes == sent, "every byte sent to the model is charged"
    # with little left, a rejection answer is cut to what is left (not to the per-observation cap)
    ctx.usage.observation_bytes = cfg.max_run_observation_bytes - 300
    big = icpt.handle(call("c5", "pool", prev=("x" * 3000, "GAINED")), turn=4).observation
    assert big.bytes <= 300


# -- model calls: the guard's, and those retries use up ------------------------------------------------------------
class _Always:
    name = "always-429"

    def __init__(self) -> None:
        self.requests: list[ChatRequest] = []

    def complete(self, request: ChatRequest) -> ModelResponse:
        self.requests.append(request)
        raise ModelCallError(ModelErrorKind.RATE_LIMIT, "429")


def test_semantic_guard_retries_never_take_the_run_past_max_model_calls() -> None:
    cfg = HarnessConfig(max_model_calls=3, max_model_attempts=6, retry_backoff_seconds=0)
    ctx = RunContext.create(cfg)
    ctx.usage.model_calls = 1
    draft = Draft.model_validate({"conclusion": "pool exhausted", "claims": []})
    result = review(ctx, _Always(), "why?", draft, (VerifiedEvidence("c1", "lookup", "pool exhausted"),))
    assert ctx.usage.model_calls + ctx.usage.guard_calls == cfg.max_model_calls
    assert result.verdict is SemanticVerdict.UNSUPPORTED and result.budget is BudgetKind.MODEL_CALLS
    assert result.call_error is None, "a budget, not the endpoint, ended the guard's retries"


def test_model_calls_used_up_by_retries_are_a_budget_stop_not_an_endpoint_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with serve() as ep:
        ep.push(200, completion(tool_calls=[_tool_call("c1", {"input": {"query": "pool"}})]))
        for _ in range(5):
            ep.push(429, {"error": {"message": "slow down"}}, {"retry-after": "0"})
        cfg = HarnessConfig(max_model_calls=3, max_model_attempts=5, retry_backoff_seconds=0)
        r = run_diagnosis(DiagnosisTask("why?"), [LookupTool(LINES)], _http_model(ep.base_url, monkeypatch), config=cfg)
    assert r.usage.model_calls == 3 and len(ep.requests) == 3
    assert r.decision.stop_reason is StopReason.BUDGET_LIMIT_REACHED
    assert r.usage.budget_hit is BudgetKind.MODEL_CALLS
    assert r.error is None, f"counted as an endpoint error: {r.error}"
    assert r.decision.outcome is ReleaseOutcome.FALLBACK  # the tool's evidence is still published


# -- a Draft on the call that hits a budget ------------------------------------------------------------------------
_DRAFT = {
    "conclusion": "the settlement db pool was exhausted",
    "claims": [{"statement": "pool exhausted", "citations": [{"tool_call_id": "c1", "excerpt": "pool exhausted"}]}],
    "missing_info": [],
    "next_steps": [],
}


@pytest.mark.parametrize(
    ("cfg", "budget"),
    [
        (HarnessConfig(max_total_tokens=1000), BudgetKind.TOKENS),  # the Draft's call: 1,120 of 1,000
        (HarnessConfig(max_model_calls=2), BudgetKind.MODEL_CALLS),  # the Draft used the last model call
    ],
    ids=["tokens", "model_calls"],
)
def test_a_draft_whose_call_hits_a_budget_records_that_budget(
    cfg: HarnessConfig, budget: BudgetKind, monkeypatch: pytest.MonkeyPatch
) -> None:
    usage = {"prompt_tokens": 500, "completion_tokens": 60}
    with serve() as ep:
        ep.push(200, completion(tool_calls=[_tool_call("c1", {"input": {"query": "pool"}})], usage=usage))
        ep.push(200, completion(content=json.dumps(_DRAFT), usage=usage))
        r = run_diagnosis(DiagnosisTask("why?"), [LookupTool(LINES)], _http_model(ep.base_url, monkeypatch), config=cfg)
        assert len(ep.requests) == 2, "no SemanticGuard call past the budget"
    assert r.decision.stop_reason is StopReason.BUDGET_LIMIT_REACHED
    assert r.usage.budget_hit is budget
    assert [e.budget for e in r.events if e.kind is EventKind.BUDGET_EXHAUSTED] == [budget]
    assert r.decision.outcome is ReleaseOutcome.FALLBACK


def test_a_draft_without_conclusion_over_the_token_budget_is_the_agent_finishing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No budget forbade anything the run needed (no guard call): the agent stopped on its own."""
    draft = {"conclusion": None, "claims": [], "missing_info": ["the tenant"], "next_steps": []}
    with serve() as ep:
        ep.push(200, completion(content=json.dumps(draft), usage={"prompt_tokens": 1000, "completion_tokens": 120}))
        cfg = HarnessConfig(max_total_tokens=1000)
        r = run_diagnosis(DiagnosisTask("why?"), [LookupTool(LINES)], _http_model(ep.base_url, monkeypatch), config=cfg)
    assert r.usage.total_tokens == 1120
    assert r.decision.stop_reason is None and r.usage.budget_hit is None
    assert r.decision.outcome is ReleaseOutcome.FALLBACK


# -- an earlier stop reason stands -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("first_call", "cfg", "reason"),
    [
        (
            _tool_call("c1", {"input": {"query": "no-such-line"}}),
            HarnessConfig(max_model_calls=1, no_gain_threshold=1),
            StopReason.INFORMATION_SATURATED,
        ),
        (
            {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{not json"}},
            HarnessConfig(max_model_calls=1, protocol_violation_threshold=1),
            StopReason.PROGRESS_PROTOCOL_VIOLATED,
        ),
    ],
    ids=["saturated", "protocol"],
)
def test_a_budget_hit_after_stop_required_never_overwrites_the_stop_reason(
    first_call: dict[str, object], cfg: HarnessConfig, reason: StopReason, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serve() as ep:
        ep.push(200, completion(tool_calls=[first_call]))
        r = run_diagnosis(DiagnosisTask("why?"), [LookupTool(LINES)], _http_model(ep.base_url, monkeypatch), config=cfg)
    assert [e.stop_reason for e in r.events if e.kind is EventKind.STOP_REQUIRED_DELIVERED] == [reason]
    assert r.decision.stop_reason is reason, "the budget hit overwrote the run's stop reason"
    assert r.usage.budget_hit is BudgetKind.MODEL_CALLS


# -- invalid business input: a protocol violation (the project's choice) -------------------------------------------
def test_a_db_query_outside_the_sql_allowlist_is_an_invalid_input_violation() -> None:
    """The input the envelope carries does not match the tool's schema: the request is rejected as a whole
    (a protocol violation, INVALID_INPUT), so the evaluation it carried is not applied and no budget is used."""
    tool = DatabaseQuery([TableFixture(name="payments", columns=("id", "status"), rows=((1, "TIMEOUT"),))])
    ctx = RunContext.create(HarnessConfig(protocol_violation_threshold=9))
    icpt = HarnessToolInterceptor(ctx, {"db_query": tool, "lookup": LookupTool(LINES)})
    icpt.handle(call("c1", "timeout"), turn=1)  # pending
    bad = ToolCallRequest(
        "c2",
        "db_query",
        json.dumps(
            {
                "previous_observation": {"tool_call_id": "c1", "information_gain": "GAINED"},
                "input": {"sql": "DELETE FROM payments"},
            }
        ),
    )
    body = json.loads(icpt.handle(bad, turn=2).observation.text)
    assert body["reason"] == "PROTOCOL_VIOLATION" and body["violation"] == ViolationKind.INVALID_INPUT.value
    assert ctx.tracker.consecutive_violations == 1
    assert ctx.tracker.pending == "c1", "the evaluation a rejected request carried is not applied"
    assert ctx.usage.tool_invocations == 1
