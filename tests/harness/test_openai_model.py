"""OpenAIChatModel against an OpenAI-compatible server on 127.0.0.1: a real round trip through the SDK."""

from __future__ import annotations

import json

import pytest

from harness.agent import run_diagnosis
from harness.config import HarnessConfig
from harness.contracts import ModelErrorKind, ReleaseOutcome
from harness.models.base import AssistantMessage, ChatRequest, ModelCallError, ToolCallRequest, ToolMessage, UserMessage
from harness.models.openai_model import ModelConfigError, OpenAIChatModel
from harness.prompts import DiagnosisTask
from harness.trace import EventKind
from tests._fake_endpoint import completion, serve
from tests.conftest import LINES, LookupTool


def _tool_call(call_id: str, args: dict[str, object]) -> dict[str, object]:
    return {"id": call_id, "type": "function", "function": {"name": "lookup", "arguments": json.dumps(args)}}


def _model(base_url: str, monkeypatch: pytest.MonkeyPatch) -> OpenAIChatModel:
    monkeypatch.setenv("HB_TEST_KEY", "sk-test-canary-not-real")
    return OpenAIChatModel("test-model", base_url=base_url, api_key_env="HB_TEST_KEY", timeout_seconds=5)


def test_full_run_with_429_then_success(monkeypatch: pytest.MonkeyPatch) -> None:
    sleeps: list[float] = []
    with serve() as ep:
        ep.push(429, {"error": {"message": "slow down"}}, {"retry-after": "0.25"})
        ep.push(
            200,
            completion(
                None,
                [_tool_call("call_a", {"input": {"query": "pool"}})],
                {"prompt_tokens": 50, "completion_tokens": 7},
            ),
        )
        draft = {
            "conclusion": "settlement DB pool exhausted",
            "claims": [
                {"statement": "s", "citations": [{"tool_call_id": "call_a", "excerpt": "connection pool exhausted"}]}
            ],
        }
        ep.push(200, completion(json.dumps(draft), None, {"prompt_tokens": 80, "completion_tokens": 30}))
        ep.push(200, completion('{"verdict": "SUPPORTED", "reason": "log line says so"}'))  # no usage: tolerated
        model = _model(ep.base_url, monkeypatch)
        r = run_diagnosis(DiagnosisTask("why?"), [LookupTool(LINES)], model, sleep=sleeps.append)
    assert r.decision.outcome is ReleaseOutcome.SUCCESS, r.decision.reason
    assert sleeps == [0.25], "Retry-After is honoured"
    calls = [e for e in r.events if e.kind is EventKind.MODEL_CALL]
    assert [(e.attempt, e.error_kind) for e in calls] == [
        (1, ModelErrorKind.RATE_LIMIT),
        (2, None),
        (1, None),
        (1, None),
    ]
    assert r.usage.model_calls == 3 and r.usage.guard_calls == 1
    assert (r.usage.input_tokens, r.usage.output_tokens) == (130, 37)
    # wire format: tools wrapped in the envelope; assistant content "" (not null) with tool calls
    second_diag = ep.requests[2]
    assistant = next(m for m in second_diag["messages"] if m["role"] == "assistant")
    assert assistant["content"] == "" and assistant["tool_calls"][0]["id"] == "call_a"
    tool_msg = next(m for m in second_diag["messages"] if m["role"] == "tool")
    assert json.loads(tool_msg["content"])["evaluation_required"] is True
    # adaptive envelope schema: nothing pending -> no previous_observation at all; call_a pending ->
    # previous_observation required, its id pinned to call_a, gain restricted to the two values
    schema = ep.requests[0]["tools"][0]["function"]["parameters"]
    assert set(schema["properties"]) == {"input"} and schema["additionalProperties"] is False
    pending_schema = ep.requests[2]["tools"][0]["function"]["parameters"]
    assert pending_schema["required"] == ["previous_observation", "input"]
    prev = pending_schema["properties"]["previous_observation"]["properties"]
    assert prev["tool_call_id"]["enum"] == ["call_a"]
    assert prev["information_gain"]["enum"] == ["GAINED", "NO_GAIN"]
    # tool_choice is always sent with tools (auto included), one call per message is asked for
    assert [(r.get("tool_choice"), r.get("parallel_tool_calls")) for r in ep.requests[:3]] == [
        ("auto", False),
        ("auto", False),
        ("auto", False),
    ]
    guard = ep.requests[3]
    assert "tools" not in guard and len(guard["messages"]) == 2
    assert ep.headers[0]["authorization"] == "Bearer sk-test-canary-not-real"


def test_500_exhausts_harness_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    with serve() as ep:
        for _ in range(5):
            ep.push(500, {"error": {"message": "upstream down"}})
        model = _model(ep.base_url, monkeypatch)
        cfg = HarnessConfig(max_model_attempts=3, retry_backoff_seconds=0.01)
        sleeps: list[float] = []
        r = run_diagnosis(DiagnosisTask("why?"), [LookupTool(LINES)], model, config=cfg, sleep=sleeps.append)
    assert len(ep.requests) == 3, "exactly max_model_attempts HTTP requests: the SDK itself never retries"
    assert sleeps == [0.01, 0.02]
    assert r.decision.outcome is ReleaseOutcome.FAILED
    assert r.error is not None and "SERVER_ERROR" in r.error
    assert [e.error_kind for e in r.events if e.kind is EventKind.MODEL_CALL] == [ModelErrorKind.SERVER_ERROR] * 3


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (
            200,
            {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": []},
            ModelErrorKind.NOT_A_COMPLETION,
        ),
        (200, b"{not json", ModelErrorKind.NOT_A_COMPLETION),
        (200, [1, 2], ModelErrorKind.NOT_A_COMPLETION),
        (400, {"error": {"message": "bad request"}}, ModelErrorKind.CLIENT_ERROR),
        (503, {"error": {"message": "overloaded"}}, ModelErrorKind.SERVER_ERROR),
    ],
)
def test_bad_responses_are_classified(
    monkeypatch: pytest.MonkeyPatch, status: int, body: object, kind: ModelErrorKind
) -> None:
    with serve() as ep:
        ep.push(status, body)  # type: ignore[arg-type]
        model = _model(ep.base_url, monkeypatch)
        with pytest.raises(ModelCallError) as err:
            model.complete(ChatRequest((UserMessage("hi"),)))
    assert err.value.kind is kind


def test_non_json_tool_arguments_reach_the_harness_as_text(monkeypatch: pytest.MonkeyPatch) -> None:
    with serve() as ep:
        ep.push(
            200,
            completion(None, [{"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{oops"}}]),
        )
        model = _model(ep.base_url, monkeypatch)
        resp = model.complete(
            ChatRequest(
                (
                    UserMessage("hi"),
                    AssistantMessage(None, (ToolCallRequest("c0", "lookup", "{}"),)),
                    ToolMessage("c0", "{}"),
                )
            )
        )
    assert resp.message.tool_calls == (ToolCallRequest("c1", "lookup", "{oops"),)
    assert ep.requests[0]["messages"][1]["content"] == ""


def test_connection_refused_is_connection_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with serve() as ep:
        url = ep.base_url
    model = _model(url, monkeypatch)
    with pytest.raises(ModelCallError) as err:
        model.complete(ChatRequest((UserMessage("hi"),)))
    assert err.value.kind is ModelErrorKind.CONNECTION


def test_missing_key_for_the_official_api_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HB_NOPE_KEY", raising=False)
    with pytest.raises(ModelConfigError, match="HB_NOPE_KEY"):
        OpenAIChatModel("gpt-x", api_key_env="HB_NOPE_KEY")


def test_unparseable_arguments_are_echoed_as_a_json_string(monkeypatch: pytest.MonkeyPatch) -> None:
    """llama.cpp's server answers 500 to a history holding invalid JSON arguments: they go back as a string."""
    broken = '{"input": {"query": "pool"'
    with serve() as ep:
        call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": broken}}
        ep.push(200, completion(None, [call]))
        ep.push(200, completion(json.dumps({"conclusion": None, "missing_info": ["x"]})))
        run_diagnosis(DiagnosisTask("why?"), [LookupTool(LINES)], _model(ep.base_url, monkeypatch))
    assistant = next(m for m in ep.requests[1]["messages"] if m["role"] == "assistant")
    sent = assistant["tool_calls"][0]["function"]["arguments"]
    assert json.loads(sent) == broken, "valid JSON on the wire, the model's text preserved"
    tool = next(m for m in ep.requests[1]["messages"] if m["role"] == "tool")
    assert json.loads(tool["content"])["violation"] == "MALFORMED_ENVELOPE"


def test_a_response_body_nested_too_deep_is_not_a_completion(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 2xx body of 100,000 nested lists (json.loads raises RecursionError) is the endpoint's fault, one typed
    error — not a traceback."""
    with serve() as ep:
        ep.push(200, "[" * 100_000 + "]" * 100_000)
        model = _model(ep.base_url, monkeypatch)
        with pytest.raises(ModelCallError) as err:
            model.complete(ChatRequest((UserMessage("hi"),)))
    assert err.value.kind is ModelErrorKind.NOT_A_COMPLETION
