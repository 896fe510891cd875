"""Multi-call turns over a real OpenAI-compatible server on 127.0.0.1.

A model that puts several tool calls in one message did nothing wrong: it could not evaluate a
result it had not seen. One pending call at a time, no protocol violation, every tool_call_id
answered once — checked on the wire and in DuckDB.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from harness.agent import run_diagnosis
from harness.config import HarnessConfig
from harness.contracts import RejectionReason, ReleaseOutcome, StopReason
from harness.models.openai_model import OpenAIChatModel
from harness.prompts import DiagnosisTask
from harness.trace import EventKind
from runners.endpoints.simulator import SimulatorServer
from runners.plan.options import BenchOptions
from runners.plan.run_plan import select_cases
from runners.plan.settings import ModelSettings
from runners.run.bench import plan_run, run_bench
from runners.run.case_runner import run_case
from tests._db import open_read_only
from tests._fake_endpoint import completion, serve
from tests.conftest import LINES, LookupTool


def _call(call_id: str, query: str, prev: tuple[str, str] | None = None) -> dict[str, object]:
    envelope: dict[str, object] = {"input": {"query": query}}
    if prev:
        envelope["previous_observation"] = {"tool_call_id": prev[0], "information_gain": prev[1]}
    return {"id": call_id, "type": "function", "function": {"name": "lookup", "arguments": json.dumps(envelope)}}


def _model(base_url: str, monkeypatch: pytest.MonkeyPatch, **kw: object) -> OpenAIChatModel:
    monkeypatch.setenv("HB_TEST_KEY", "sk-test-not-real")
    return OpenAIChatModel("m", base_url=base_url, api_key_env="HB_TEST_KEY", timeout_seconds=5, **kw)  # type: ignore[arg-type]


def _tool_messages(request: dict[str, object]) -> list[dict[str, object]]:
    return [m for m in request["messages"] if m["role"] == "tool"]  # type: ignore[index, union-attr]


def test_three_calls_in_one_message_one_pending_window_no_violation(monkeypatch: pytest.MonkeyPatch) -> None:
    tool = LookupTool(LINES)
    with serve() as ep:
        # one message, three calls: the first has evidence, so the other two must wait
        ep.push(200, completion(None, [_call("c_a", "timeout"), _call("c_b", "pool"), _call("c_c", "nothing")]))
        # the model read c_a, evaluates it, and sends the two again (one pending window each)
        ep.push(
            200, completion(None, [_call("c_d", "pool", ("c_a", "GAINED")), _call("c_e", "nothing", ("c_a", "GAINED"))])
        )
        ep.push(200, completion(None, [_call("c_f", "nothing", ("c_d", "GAINED"))]))
        draft = {
            "conclusion": "settlement db pool exhausted",
            "claims": [
                {"statement": "pool", "citations": [{"tool_call_id": "c_d", "excerpt": "db connection pool exhausted"}]}
            ],
        }
        ep.push(200, completion(json.dumps(draft)))
        ep.push(200, completion('{"verdict": "SUPPORTED", "reason": "ok"}'))
        r = run_diagnosis(DiagnosisTask("why?"), [tool], _model(ep.base_url, monkeypatch))
    assert r.decision.outcome is ReleaseOutcome.SUCCESS, r.decision.reason
    rejected = [e for e in r.events if e.kind is EventKind.TOOL_REQUEST_REJECTED]
    assert Counter(e.rejection for e in rejected) == {RejectionReason.AWAITING_EVALUATION: 3}
    assert not any(e.violation for e in rejected), "a multi-call message is not a protocol violation"
    # at most one backend call per pending window: c_a, then c_d, then c_f
    assert tool.calls == 3 and [e.tool_call_id for e in r.events if e.kind is EventKind.TOOL_INVOCATION] == [
        "c_a",
        "c_d",
        "c_f",
    ]
    # on the wire: every tool_call_id of a message gets exactly one tool message, in order
    for i, ids in ((1, ["c_a", "c_b", "c_c"]), (2, ["c_a", "c_b", "c_c", "c_d", "c_e"])):
        assert [m["tool_call_id"] for m in _tool_messages(ep.requests[i])] == ids
    waiting = json.loads(_tool_messages(ep.requests[1])[1]["content"])  # type: ignore[arg-type]
    assert waiting["reason"] == "AWAITING_EVALUATION" and waiting["evaluate_first"] == "c_a"
    assert "evaluate c_a first" in waiting["message"] and waiting["backend_called"] is False
    # the schema states the pending id exactly while c_a (then c_d) awaits evaluation; c_f was empty
    # (the Harness's NO_GAIN), so the Draft request offers no previous_observation at all
    pending_ids = [
        r["tools"][0]["function"]["parameters"]["properties"]
        .get("previous_observation", {})  # type: ignore[index]
        .get("properties", {})
        .get("tool_call_id", {})
        .get("enum")
        for r in ep.requests[:4]
    ]
    assert pending_ids == [None, ["c_a"], ["c_d"], None]


def test_tool_choice_none_after_stop_required_and_forced_choice_before(monkeypatch: pytest.MonkeyPatch) -> None:
    with serve() as ep:
        ep.push(200, completion(None, [_call("c1", "nothing")]))
        ep.push(200, completion(None, [_call("c2", "absent")]))  # second NO_GAIN: STOP_REQUIRED rides on it
        ep.push(200, completion(json.dumps({"conclusion": None, "missing_info": ["tenant"]})))
        model = _model(ep.base_url, monkeypatch, tool_choice="lookup")
        r = run_diagnosis(DiagnosisTask("why?"), [LookupTool(LINES)], model, config=HarnessConfig(no_gain_threshold=2))
    assert r.decision.stop_reason is StopReason.INFORMATION_SATURATED
    forced = {"type": "function", "function": {"name": "lookup"}}
    assert [req.get("tool_choice") for req in ep.requests] == [forced, forced, "none"]
    stop = json.loads(_tool_messages(ep.requests[2])[-1]["content"])  # type: ignore[arg-type]
    assert stop["control"] == "STOP_REQUIRED"


def test_parallel_tool_calls_is_configurable_on_the_wire(monkeypatch: pytest.MonkeyPatch) -> None:
    for setting, expected in ((False, False), (True, True), (None, "absent")):
        with serve() as ep:
            ep.push(200, completion(json.dumps({"conclusion": None, "missing_info": ["x"]})))
            model = _model(ep.base_url, monkeypatch, parallel_tool_calls=setting)
            run_diagnosis(DiagnosisTask("why?"), [LookupTool(LINES)], model)
        assert ep.requests[0].get("parallel_tool_calls", "absent") == expected


def test_multi_call_cases_over_http_match_in_process_and_duckdb_agrees(tmp_path: Path) -> None:
    cases = select_cases(["multi_call_turns"], [])
    expected = {c.id: run_case(c) for c in cases}
    db = tmp_path / "mc.duckdb"
    with SimulatorServer(cases) as sim:
        summary = run_bench(plan_run(BenchOptions.of(
            evalsets=["multi_call_turns"],
            model_settings=ModelSettings(
                model="openai:scripted", base_url=sim.base_url, api_key_env="HB_UNSET_KEY_FOR_TEST",
            ), db=db,

        )))  # fmt: skip
    assert summary.executed == len(cases) and summary.failed == 0
    con = open_read_only(db)
    try:
        rows = con.execute(
            """SELECT c.case_id, c.outcome, c.tool_invocations, c.tool_rejections, c.protocol_violations,
                      count(t.tool_call_id), count(DISTINCT t.tool_call_id),
                      count(*) FILTER (WHERE t.invocation_status <> 'REJECTED'),
                      count(*) FILTER (WHERE t.rejection_reason = 'AWAITING_EVALUATION')
               FROM case_runs c JOIN tool_calls t USING (case_run_id) GROUP BY ALL"""
        ).fetchall()
    finally:
        con.close()
    assert len(rows) == len(cases)
    for case_id, outcome, inv, rej, violations, n_calls, n_distinct, n_inv, n_await in rows:
        run = expected[case_id]
        assert outcome == run.result.decision.outcome.value, case_id
        assert (inv, rej) == (run.metrics.tool_invocations, run.metrics.tool_rejections), case_id
        assert violations == 0, f"{case_id}: a multi-call message counted as a protocol violation"
        assert n_calls == n_distinct == inv + rej, f"{case_id}: every tool_call_id answered exactly once"
        assert n_inv == inv and n_await == run.metrics.awaiting_rejections, case_id
