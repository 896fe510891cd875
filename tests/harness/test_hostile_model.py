"""Hypothesis-generated hostile model turns never crash the loop: every run ends in exactly one
ReleaseOutcome with a readable reason."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.agent import run_diagnosis
from harness.config import HarnessConfig
from harness.contracts import ModelErrorKind, ReleaseOutcome
from harness.models.base import AssistantMessage, ChatRequest, ModelCallError, ModelResponse, ToolCallRequest, Usage
from harness.prompts import DiagnosisTask
from harness.trace import EventKind
from tests.conftest import LINES, LookupTool

names = st.sampled_from(["lookup", "lookup", "unknown_tool", "", "x" * 300, "LOOKUP"])
valid_args = st.builds(
    lambda q, prev: json.dumps({"input": {"query": q}, **({"previous_observation": prev} if prev else {})}),
    st.sampled_from(["timeout", "pool", "nothing", "t1"]),
    st.one_of(
        st.none(),
        st.fixed_dictionaries(
            {
                "tool_call_id": st.sampled_from(["call_1", "c1", "h0", ""]),
                "information_gain": st.sampled_from(["GAINED", "NO_GAIN", "gained", 3]),
            }
        ),
    ),
)
hostile_args = st.one_of(
    valid_args,
    st.text(max_size=50),
    st.just("[" * 5000),  # deep nesting
    st.just(json.dumps({"input": {"query": "y" * 50_000}})),  # huge
    st.just("null"),
    st.just('{"input": {"query": "a", "limit": 1e309}}'),
)
tool_calls = st.lists(
    st.builds(
        ToolCallRequest, st.sampled_from(["", "h0", "h1", "dup"]) | st.text(min_size=1, max_size=8), names, hostile_args
    ),
    min_size=1,
    max_size=12,
)
drafts = st.one_of(
    st.text(max_size=80),
    st.just(
        json.dumps(
            {
                "conclusion": "pool",
                "claims": [{"statement": "s", "citations": [{"tool_call_id": "h0", "excerpt": "pool"}]}],
            }
        )
    ),
    st.just('{"conclusion": null, "missing_info": ["tenant"]}'),
    st.just(None),
)
errors = st.sampled_from(list(ModelErrorKind))
turns = st.lists(
    st.one_of(
        tool_calls.map(lambda c: ("tools", c)),
        drafts.map(lambda d: ("draft", d)),
        errors.map(lambda e: ("error", e)),
        st.integers(0, 10**7).map(lambda n: ("tokens", n)),
    ),
    min_size=1,
    max_size=15,
)


class HostileModel:
    name = "hostile"

    def __init__(self, script: list[tuple[str, object]]) -> None:
        self.script = script
        self.i = 0

    def complete(self, request: ChatRequest) -> ModelResponse:
        if self.i >= len(self.script):
            return ModelResponse(AssistantMessage("final words, not JSON"))
        kind, value = self.script[self.i]
        self.i += 1
        if kind == "error":
            assert isinstance(value, ModelErrorKind)
            raise ModelCallError(value, f"injected {value.value}", retry_after=0.0)
        if kind == "tools":
            return ModelResponse(AssistantMessage(None, tuple(value)), Usage(10, 10))  # type: ignore[arg-type]
        if kind == "tokens":
            return ModelResponse(
                AssistantMessage(None, (ToolCallRequest("t", "lookup", '{"input":{"query":"q"}}'),)),
                Usage(int(value), 0),
            )  # type: ignore[call-overload]
        return ModelResponse(AssistantMessage(value))  # type: ignore[arg-type]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns)
def test_hostile_turns_end_in_exactly_one_release(script: list[tuple[str, object]]) -> None:
    tool = LookupTool(LINES)
    cfg = HarnessConfig(retry_backoff_seconds=0, max_total_tokens=100_000)
    r = run_diagnosis(DiagnosisTask("why?"), [tool], HostileModel(script), config=cfg, sleep=lambda s: None)
    released = [e for e in r.events if e.kind is EventKind.RELEASED]
    assert len(released) == 1
    assert r.decision.outcome in set(ReleaseOutcome)
    assert r.decision.reason.strip()
    assert r.usage.model_calls <= cfg.max_model_calls
    assert tool.calls == r.usage.tool_invocations <= cfg.max_tool_invocations
    assert len([e for e in r.events if e.kind is EventKind.STOP_REQUIRED_DELIVERED]) <= 1
    if r.decision.outcome is ReleaseOutcome.SUCCESS:
        assert r.decision.draft is not None and r.decision.draft.conclusion
