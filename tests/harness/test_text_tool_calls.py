"""`ToolCallFormat.JSON`: calls a model writes as one JSON object in its reply text reach the Harness as calls,
counted apart, under a `response_format` that allows exactly the offered calls and (unless a call is required)
the Draft — a real round trip through the SDK to a server on 127.0.0.1, and through the bench into DuckDB."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.agent import run_diagnosis
from harness.contracts import ReleaseOutcome
from harness.draft import DRAFT_JSON_SCHEMA
from harness.models.base import ChatRequest, ToolCallFormat, ToolSpec
from harness.models.openai_model import OpenAIChatModel, json_reply_format, text_tool_call
from harness.prompts import DiagnosisTask
from harness.trace import ModelCall
from runners.cli import main
from tests._db import open_read_only
from tests._fake_endpoint import completion, serve
from tests.conftest import LINES, LookupTool

_CALL = {"name": "lookup", "arguments": {"input": {"query": "pool"}}}
_DRAFT = {
    "conclusion": "settlement DB pool exhausted",
    "claims": [{"statement": "s", "citations": [{"tool_call_id": "call_harness_1",
                                                 "excerpt": "connection pool exhausted"}]}],
}  # fmt: skip


def _model(base_url: str, fmt: ToolCallFormat, tool_choice: str = "auto") -> OpenAIChatModel:
    return OpenAIChatModel("m", base_url=base_url, timeout_seconds=5, tool_choice=tool_choice, tool_call_format=fmt)


def test_a_call_written_as_text_reaches_the_backend_and_is_counted_apart() -> None:
    with serve() as ep:
        ep.push(200, completion(json.dumps(_CALL)))
        ep.push(200, completion(json.dumps(_DRAFT)))
        ep.push(200, completion('{"verdict": "SUPPORTED", "reason": "the log line says so"}'))
        r = run_diagnosis(DiagnosisTask("why?"), [LookupTool(LINES)], _model(ep.base_url, ToolCallFormat.JSON))
    assert r.decision.outcome is ReleaseOutcome.SUCCESS, r.decision.reason
    calls = [e for e in r.events if isinstance(e, ModelCall)]
    assert [e.text_tool_calls for e in calls] == [1, 0, 0]
    first, second, guard = ep.requests
    # what the server was asked for: one JSON object, a call of an offered tool or the Draft
    options = first["response_format"]["json_schema"]["schema"]["anyOf"]
    assert options[0]["properties"]["name"] == {"const": "lookup"}
    assert options[0]["properties"]["arguments"] == first["tools"][0]["function"]["parameters"]
    assert options[1]["title"] == "Draft" and "$defs" in first["response_format"]["json_schema"]["schema"]
    # the model's text was the call: echoed back as a call with the Harness's id, not twice
    assistant = next(m for m in second["messages"] if m["role"] == "assistant")
    assert assistant["content"] == "" and assistant["tool_calls"][0]["id"] == "call_harness_1"
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == _CALL["arguments"]
    assert "response_format" not in guard, "SemanticGuard's verdict has no answer schema: nothing constrained"


def test_native_format_reads_the_same_text_as_an_invalid_draft() -> None:
    with serve() as ep:
        ep.push(200, completion(json.dumps(_CALL)))
        r = run_diagnosis(DiagnosisTask("why?"), [LookupTool(LINES)], _model(ep.base_url, ToolCallFormat.NATIVE))
    assert "response_format" not in ep.requests[0]
    assert r.decision.outcome is ReleaseOutcome.FAILED and "invalid Draft" in r.decision.reason
    assert [e.text_tool_calls for e in r.events if isinstance(e, ModelCall)] == [0]


def _request(*names: str) -> ChatRequest:
    tools = tuple(ToolSpec(n, "d", {"type": "object", "properties": {"input": {"type": "object"}}}) for n in names)
    return ChatRequest((), tools, answer_schema=DRAFT_JSON_SCHEMA)


def test_the_reply_format_follows_tool_choice() -> None:
    req = _request("a", "b")

    def names(choice: str | dict[str, object]) -> list[str]:
        fmt = json_reply_format(req, choice)
        assert fmt is not None
        schema = fmt["json_schema"]["schema"]
        return [
            o.get("properties", {}).get("name", {}).get("const", o.get("title")) for o in schema.get("anyOf", [schema])
        ]

    assert names("auto") == ["a", "b", "Draft"]
    assert names("required") == ["a", "b"], "a required call leaves no Draft to write"
    assert names({"type": "function", "function": {"name": "b"}}) == ["b"]
    assert names("none") == ["Draft"], "after STOP_REQUIRED only the Draft"
    assert json_reply_format(ChatRequest(()), "auto") is None


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
                    max_leaves=8))  # fmt: skip
def test_only_exactly_a_call_object_is_a_call(value: object) -> None:
    text = json.dumps(value)
    call = text_tool_call(text)
    is_call = (
        isinstance(value, dict) and set(value) == {"name", "arguments"} and isinstance(value["name"], str)
        and isinstance(value["arguments"], dict | str)
    )  # fmt: skip
    assert (call is not None) == is_call
    if call is not None:
        assert call.written_as_text and call.id == "" and call.name == value["name"]  # type: ignore[index]


def test_unknown_tool_written_as_text_is_the_harness_s_rejection() -> None:
    with serve() as ep:
        ep.push(200, completion(json.dumps({"name": "nope", "arguments": {}})))
        ep.push(200, completion(json.dumps({"conclusion": None})))
        r = run_diagnosis(DiagnosisTask("why?"), [LookupTool(LINES)], _model(ep.base_url, ToolCallFormat.JSON))
    kinds = [e.kind.value for e in r.events]
    assert "TOOL_REQUEST_REJECTED" in kinds and "TOOL_INVOCATION" not in kinds


def test_the_bench_stores_the_count_and_the_setting(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    case = "diagnosable_gateway_risk_pool_exhausted_t1"
    db = tmp_path / "j.duckdb"
    with serve() as ep:
        ep.push(200, completion(json.dumps({"name": "log_search", "arguments": {"input": {
            "start": "2026-06-12T09:00:00Z", "end": "2026-06-12T09:30:00Z", "tenant": "t1"}}})))  # fmt: skip
        ep.push(200, completion(json.dumps({"conclusion": None})))
        code = main(["run", "--case", case, "--model", "openai:m", "--base-url", ep.base_url, "--db", str(db),
                     "--tool-call-format", "json", "--tool-choice", "required", "--epochs", "1"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert ep.requests[0]["tool_choice"] == "required"
    assert "anyOf" not in ep.requests[0]["response_format"]["json_schema"]["schema"] or all(
        "name" in o["properties"] for o in ep.requests[0]["response_format"]["json_schema"]["schema"]["anyOf"]
    )
    con = open_read_only(db)
    assert con.execute("SELECT text_tool_calls, tool_invocations FROM case_runs").fetchall() == [(1, 1)]
    assert con.execute("SELECT tool_call_format FROM bench_runs").fetchall() == [("json",)]
    con.close()


def test_required_first_asks_for_a_call_once_then_lets_the_model_call_or_finish() -> None:
    """`tool_choice="required-first"` on the wire: `required` (and a reply that can only be a call) on the first
    turn, `auto` (a call or the Draft) after it — so a model that has its evidence may finish on its own."""
    with serve() as ep:
        ep.push(200, completion(json.dumps(_CALL)))
        ep.push(200, completion(json.dumps({"name": "lookup", "arguments": {
            "previous_observation": {"tool_call_id": "call_harness_1", "information_gain": "GAINED"},
            "input": {"query": "gateway"}}})))  # fmt: skip
        ep.push(200, completion(json.dumps(_DRAFT)))
        ep.push(200, completion('{"verdict": "SUPPORTED", "reason": "the log line says so"}'))
        model = _model(ep.base_url, ToolCallFormat.JSON, tool_choice="required-first")
        r = run_diagnosis(DiagnosisTask("why?"), [LookupTool(LINES)], model)
    assert r.decision.outcome is ReleaseOutcome.SUCCESS, r.decision.reason
    first, second, third, _guard = ep.requests
    assert [first["tool_choice"], second["tool_choice"], third["tool_choice"]] == ["required", "auto", "auto"]
    offered = [[o.get("title") or o["properties"]["name"]["const"]
                for o in body["response_format"]["json_schema"]["schema"].get("anyOf", [body["response_format"]
                                                                                    ["json_schema"]["schema"]])]
               for body in (first, second)]  # fmt: skip
    assert offered == [["lookup"], ["lookup", "Draft"]]


def test_required_until_evidence_asks_for_calls_until_an_observation_held_records() -> None:
    """`required-until-evidence`: an empty result keeps a call required; once an observation held records the model
    may call or finish (`auto`)."""
    with serve() as ep:
        ep.push(200, completion(json.dumps({"name": "lookup", "arguments": {"input": {"query": "nothing-matches"}}})))
        ep.push(200, completion(json.dumps(_CALL)))
        ep.push(200, completion(json.dumps(_DRAFT).replace("call_harness_1", "call_harness_2")))
        ep.push(200, completion('{"verdict": "SUPPORTED", "reason": "the log line says so"}'))
        model = _model(ep.base_url, ToolCallFormat.JSON, tool_choice="required-until-evidence")
        r = run_diagnosis(DiagnosisTask("why?"), [LookupTool(LINES)], model)
    assert r.decision.outcome is ReleaseOutcome.SUCCESS, r.decision.reason
    assert [body["tool_choice"] for body in ep.requests[:3]] == ["required", "required", "auto"]
