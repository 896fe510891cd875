"""Every call the model makes reaches the Harness first, under every agent loop: a reused `tool_call_id` and a
tool name the agent does not have are the Harness's own rejections (REUSED_TOOL_CALL_ID, UNKNOWN_TOOL and their
corrective observations) under pydantic-ai and the OpenAI Agents SDK exactly as under the native loop — never an
old observation handed back by the framework, never the framework's own error ending the run.

Scripted conversations (named ones and generated ones: reused ids, unknown names, several calls per message,
empty and invalid finals, small budgets) go through the three loops; the Release, the stop, the violations, the
tool invocations, the rejections, every event and the transcript must be the same.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.agent import run_diagnosis
from harness.config import HarnessConfig
from harness.contracts import (
    ModelErrorKind,
    ModelPurpose,
    RejectionReason,
    ReleaseOutcome,
    StopReason,
    ViolationKind,
)
from harness.models.base import (
    AssistantMessage,
    ChatRequest,
    ModelCallError,
    ModelResponse,
    ToolCallRequest,
    Usage,
)
from harness.prompts import DiagnosisTask
from harness.session import HarnessSession, RunResult
from harness.trace import EventKind, ToolInvocation, ToolRequestRejected
from runners.domain.evalset import load_cases
from runners.plan.agent import AgentFramework
from runners.run.agents import loop_for
from runners.run.case_runner import CaseRun, run_case
from runners.store.schema import TOOL_CALL_COLUMNS, case_run_rows, event_columns
from tests.conftest import LINES, LookupTool

SYSTEM_PROMPT = "You diagnose payment incidents."
TASK = DiagnosisTask("Why did payments time out at 14:00?")
SUPPORTED = '{"verdict": "SUPPORTED", "reason": "the excerpt says so"}'
_TIMING = {"t_ms", "latency_ms"}
CASES = load_cases()


Turn = AssistantMessage | ModelCallError
"""One scripted diagnosis attempt: the model's answer, or the failure the call raises."""


def _no_wait(_seconds: float) -> None:
    """The retry backoff, skipped: the runs are compared, not timed."""


class ScriptedTurns:
    """A model that answers the diagnosis attempts with fixed turns (the last one repeated) and the guard with
    SUPPORTED; every diagnosis answer costs the same tokens, so token budgets bite at the same call."""

    name = "scripted-turns"

    def __init__(self, turns: Sequence[Turn], tokens: int = 40) -> None:
        self._turns = tuple(turns)
        self._tokens = tokens
        self._i = 0

    def complete(self, request: ChatRequest) -> ModelResponse:
        if request.purpose is not ModelPurpose.DIAGNOSIS:
            return ModelResponse(AssistantMessage(SUPPORTED), Usage(5, 5))
        turn = self._turns[min(self._i, len(self._turns) - 1)]
        self._i += 1
        if isinstance(turn, ModelCallError):
            raise turn
        return ModelResponse(turn, Usage(self._tokens // 2, self._tokens - self._tokens // 2))


def _native(tools: list[LookupTool], model: ScriptedTurns, config: HarnessConfig) -> RunResult:
    return run_diagnosis(TASK, tools, model, config=config, system_prompt=SYSTEM_PROMPT, sleep=_no_wait)


def _pydantic_ai(tools: list[LookupTool], model: ScriptedTurns, config: HarnessConfig) -> RunResult:
    from harness.adapters.pydantic_ai import run_agent

    session = HarnessSession(tools, model_name=model.name, config=config, system_prompt=SYSTEM_PROMPT, sleep=_no_wait)
    return run_agent(session, TASK, tools, model, system_prompt=SYSTEM_PROMPT)


def _openai_agents(tools: list[LookupTool], model: ScriptedTurns, config: HarnessConfig) -> RunResult:
    from harness.adapters.openai_agents import run_agent

    session = HarnessSession(tools, model_name=model.name, config=config, system_prompt=SYSTEM_PROMPT, sleep=_no_wait)
    return run_agent(session, TASK, tools, model, system_prompt=SYSTEM_PROMPT)


Loop = Callable[[list[LookupTool], ScriptedTurns, HarnessConfig], RunResult]
ADAPTERS: dict[str, Loop] = {"pydantic-ai": _pydantic_ai, "openai-agents": _openai_agents}


@dataclass(frozen=True)
class Observed:
    """What a run produced, timings aside: what must not depend on the loop."""

    outcome: ReleaseOutcome
    """The Release outcome."""
    stop_reason: StopReason | None
    """Why the collection stopped."""
    reason: str
    """The Release's reason text."""
    error: str | None
    """The run's model-call failure."""
    violations: Counter[ViolationKind]
    """Protocol violations by kind."""
    invocations: tuple[tuple[str, str, str], ...]
    """(tool_call_id, tool, status) of every backend invocation, in order."""
    rejections: tuple[tuple[str, str, str, str | None], ...]
    """(tool_call_id, tool, rejection, violation) of every rejected request, in order."""
    backend_calls: int
    """Calls that reached the business tool."""
    events: tuple[dict[str, Any], ...]
    """Every event, timings aside."""
    transcript: tuple[dict[str, Any], ...]
    """What the model was sent and answered."""


def observe(
    loop: Loop, turns: Sequence[Turn], config: HarnessConfig, tokens: int = 40, *, failing: bool = False
) -> Observed:
    tool = LookupTool(LINES, fail=failing)
    r = loop([tool], ScriptedTurns(turns, tokens), config)
    rejected = [e for e in r.events if isinstance(e, ToolRequestRejected)]
    return Observed(
        outcome=r.decision.outcome,
        stop_reason=r.decision.stop_reason,
        reason=r.decision.reason,
        error=r.error,
        violations=Counter(e.violation for e in rejected if e.violation is not None),
        invocations=tuple(
            (e.tool_call_id, e.tool, str(e.invocation_status)) for e in r.events if isinstance(e, ToolInvocation)
        ),
        rejections=tuple((e.tool_call_id, e.tool, str(e.rejection), e.violation) for e in rejected),
        backend_calls=tool.calls,
        events=tuple(
            {"kind": e.kind, **{k: v for k, v in dataclasses.asdict(e).items() if k not in _TIMING}} for e in r.events
        ),
        transcript=tuple(dataclasses.asdict(t) for t in r.transcript),
    )


def call(
    call_id: str, query: str = "timeout", prev: tuple[str, str] | None = None, tool: str = "lookup"
) -> ToolCallRequest:
    envelope: dict[str, Any] = {"input": {"query": query}}
    if prev is not None:
        envelope["previous_observation"] = {"tool_call_id": prev[0], "information_gain": prev[1]}
    return ToolCallRequest(call_id, tool, json.dumps(envelope))


def calls(*requests: ToolCallRequest) -> AssistantMessage:
    return AssistantMessage(None, requests)


def draft(cite: str) -> AssistantMessage:
    claim = {"statement": "the pool was exhausted", "citations": [{"tool_call_id": cite, "excerpt": "pool exhausted"}]}
    return AssistantMessage(json.dumps({"conclusion": "the settlement db pool was exhausted", "claims": [claim]}))


def assert_same_as_native(
    turns: Sequence[Turn], config: HarnessConfig, tokens: int = 40, *, failing: bool = False
) -> Observed:
    want = observe(_native, turns, config, tokens, failing=failing)
    for name, loop in ADAPTERS.items():
        got = observe(loop, turns, config, tokens, failing=failing)
        for field in dataclasses.fields(Observed):
            assert getattr(got, field.name) == getattr(want, field.name), f"{name}: {field.name} differs from native"
    return want


DEFAULT = HarnessConfig()

# -- the conversations the built-in cases do not have ----------------------------------------------------------


def test_a_reused_id_in_a_later_turn_is_the_harness_violation_not_the_old_observation() -> None:
    turns = [
        calls(call("c1", "timeout")),
        calls(call("c1", "pool", ("c1", "GAINED"))),  # the model reuses c1 for a new query
        calls(call("c2", "pool", ("c1", "GAINED"))),
        draft("c2"),
    ]
    seen = assert_same_as_native(turns, DEFAULT)
    assert seen.violations == {ViolationKind.REUSED_TOOL_CALL_ID: 1}
    assert seen.backend_calls == 2 and seen.outcome is ReleaseOutcome.SUCCESS
    # the model was told its reuse was rejected, not that the new query completed with the old result
    answers = [t["content"] for t in seen.transcript if t["kind"] == "OBSERVATION" and t["tool_call_id"] == "c1"]
    assert len(answers) == 2 and "REUSED_TOOL_CALL_ID" in answers[1] and "COMPLETED" not in answers[1]


def test_a_reused_id_within_one_message_still_ends_in_one_release() -> None:
    turns = [calls(call("c1", "timeout"), call("c1", "pool")), calls(call("c2", "pool", ("c1", "GAINED"))), draft("c2")]
    seen = assert_same_as_native(turns, DEFAULT)
    assert seen.rejections and seen.outcome is ReleaseOutcome.SUCCESS
    assert [e["kind"] for e in seen.events].count(EventKind.RELEASED) == 1


def test_a_reused_id_with_an_invalid_final_falls_back_as_native() -> None:
    turns = [calls(call("c1", "timeout")), calls(call("c1", "pool", ("c1", "GAINED"))), AssistantMessage("no draft")]
    seen = assert_same_as_native(turns, DEFAULT)
    assert seen.outcome is ReleaseOutcome.FALLBACK


def test_a_reused_id_in_a_budget_limited_run_keeps_its_budget_stop() -> None:
    turns = [
        calls(call("c1", "timeout")),
        calls(call("c1", "pool", ("c1", "GAINED"))),
        calls(call("c2", "pool", ("c1", "GAINED"))),
    ]
    seen = assert_same_as_native(turns, HarnessConfig(max_model_calls=3))
    assert seen.stop_reason is StopReason.BUDGET_LIMIT_REACHED
    assert seen.violations == {ViolationKind.REUSED_TOOL_CALL_ID: 1}


def test_an_unknown_tool_is_corrected_by_the_harness_and_the_run_continues() -> None:
    turns = [
        calls(call("c1", "timeout", tool="grep_everything")),
        calls(call("c2", "timeout")),
        calls(call("c3", "pool", ("c2", "GAINED"))),
        draft("c3"),
    ]
    seen = assert_same_as_native(turns, DEFAULT)
    assert seen.violations == {ViolationKind.UNKNOWN_TOOL: 1}
    assert seen.rejections[0][:3] == ("c1", "grep_everything", str(RejectionReason.PROTOCOL_VIOLATION))
    assert seen.backend_calls == 2 and seen.outcome is ReleaseOutcome.SUCCESS


def test_an_unknown_tool_named_like_the_catch_all_is_still_unknown() -> None:
    from harness.adapters._batch import CATCH_ALL_TOOL

    turns = [calls(call("c1", tool=CATCH_ALL_TOOL), call("c2", tool="lookup")), draft("c2")]
    seen = assert_same_as_native(turns, DEFAULT)
    assert seen.violations == {ViolationKind.UNKNOWN_TOOL: 1}


# -- generated conversations ---------------------------------------------------------------------------------

_IDS = st.sampled_from(["c1", "c2", "c3", ""])  # few ids: reuse is frequent; "" gets a Harness id
_QUERIES = st.sampled_from(["timeout", "pool", "nothing", "order"])
_NAMES = st.sampled_from(["lookup", "lookup", "lookup", "nosuch", "Lookup", "harness_unknown_tool"])


@st.composite
def _tool_call(draw: st.DrawFn) -> ToolCallRequest:
    call_id, name = draw(_IDS), draw(_NAMES)
    if draw(st.integers(0, 9)) == 0:
        return ToolCallRequest(call_id, name, draw(st.sampled_from(["{not json", "[]", "", '{"input": 3}'])))
    prev = draw(st.none() | st.tuples(_IDS, st.sampled_from(["GAINED", "NO_GAIN"])))
    return call(call_id, draw(_QUERIES), prev, name)


_MESSAGE = st.one_of(
    st.builds(lambda cs: AssistantMessage(None, tuple(cs)), st.lists(_tool_call(), min_size=1, max_size=3)),
    st.builds(lambda cs: AssistantMessage("thinking", tuple(cs)), st.lists(_tool_call(), min_size=1, max_size=2)),
)
_FINAL = st.sampled_from(["c1", "c2", "c3"]).map(draft) | st.sampled_from(["", " ", "\n", "not a draft", "{}"]).map(
    AssistantMessage
)
_FAILURE = st.builds(
    lambda kind: ModelCallError(kind, f"scripted {kind}"),
    st.sampled_from([ModelErrorKind.SERVER_ERROR, ModelErrorKind.RATE_LIMIT, ModelErrorKind.CLIENT_ERROR]),
)
_CONFIG = st.builds(
    lambda m, t, k, v: HarnessConfig(max_model_calls=m, max_tool_invocations=t, max_total_tokens=k,
                                     protocol_violation_threshold=v),
    st.integers(1, 8), st.integers(1, 6), st.integers(30, 600), st.integers(1, 4),
)  # fmt: skip


@settings(max_examples=100, deadline=None)
@given(
    body=st.lists(_MESSAGE | _FAILURE, min_size=1, max_size=6),
    final=_FINAL | st.none(),
    config=_CONFIG,
    tokens=st.integers(10, 120),
    failing=st.booleans(),
)
def test_generated_conversations_give_the_native_run_under_every_adapter(
    body: list[Turn], final: AssistantMessage | None, config: HarnessConfig, tokens: int, failing: bool
) -> None:
    assert_same_as_native([*body, *([final] if final is not None else [])], config, tokens, failing=failing)


_BENCH_CONFIG = st.builds(
    lambda m, t, v: HarnessConfig(max_model_calls=m, max_tool_invocations=t, protocol_violation_threshold=v,
                                  max_model_attempts=1),
    st.integers(1, 8), st.integers(1, 6), st.integers(1, 4),
)  # fmt: skip
_TIMING_COLUMNS = [i for i, c in enumerate(event_columns()) if c in _TIMING]


def _bench_rows(run: CaseRun) -> tuple[dict[str, Any], list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The case_runs, tool_calls and events rows the bench stores for `run`, timings aside."""
    rows = case_run_rows("br", "cr", "scripted-turns", None, 1, {}, run)
    case_row, event_rows = rows.case_run, rows.events
    tool_rows = [r.cells() for r in rows.tool_calls]
    events = [tuple(v for i, v in enumerate(r[2:]) if i not in _TIMING_COLUMNS) for r in event_rows]
    return (
        {k: v for k, v in case_row.items() if k not in {"wall_ms", "finished_at"}},
        [tuple(v for i, v in enumerate(r) if i != TOOL_CALL_COLUMNS.index("latency_ms")) for r in tool_rows],
        events,
    )


@settings(max_examples=25, deadline=None)
@given(body=st.lists(_MESSAGE, min_size=1, max_size=5), final=_FINAL, config=_BENCH_CONFIG)
def test_generated_conversations_write_the_native_rows_under_every_agent(
    body: list[Turn], final: AssistantMessage, config: HarnessConfig
) -> None:
    """Through the bench's own `--agent` loops (`loop_for`): the stored rows and the transcript are native's."""
    case = CASES[0]

    def bench_run(agent: AgentFramework) -> CaseRun:
        model = ScriptedTurns([*body, final])
        return run_case(case, model, config=config, tools=[LookupTool(LINES)], loop=loop_for(agent))

    native = bench_run(AgentFramework.NATIVE)
    for agent in (AgentFramework.PYDANTIC_AI, AgentFramework.OPENAI_AGENTS):
        run = bench_run(agent)
        assert _bench_rows(run) == _bench_rows(native), agent
        assert run.result.transcript == native.result.transcript, agent


def test_the_framework_never_sees_the_models_ids_or_unknown_names() -> None:
    """The framework's own tool list holds one catch-all beside the business tools, and the ids it carries are
    the adapter's (unique), so neither its id bookkeeping nor its name lookup can answer for the Harness."""
    from harness.adapters._batch import MessageAnswers, catch_all_name

    session = HarnessSession([LookupTool(LINES)], model_name="m")
    answers = MessageAnswers(session, [LookupTool(LINES)])
    assert [t.name for t in answers.framework_tools()] == ["lookup", catch_all_name(["lookup"])]
    carried = answers.expect([call("c1"), call("c1", tool="nosuch"), call("c1", tool="lookup")])
    assert [c.name for c in carried] == ["lookup", catch_all_name(["lookup"]), "lookup"]
    assert len({c.id for c in carried}) == 3 and "c1" not in {c.id for c in carried}
    assert [answers.call(c.id).name for c in carried] == ["lookup", "nosuch", "lookup"]
    assert catch_all_name(["harness_unknown_tool"]) != "harness_unknown_tool"


def test_a_framework_that_gives_up_still_leaves_exactly_one_release(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the framework raises of its own (pydantic-ai's AgentRunError, the SDK's AgentsException), the
    adapter's run ends in one Release, as the native loop's always does."""
    from agents import Runner
    from agents.exceptions import ModelBehaviorError
    from pydantic_ai import Agent
    from pydantic_ai.exceptions import UnexpectedModelBehavior

    def pydantic_ai_gives_up(*_args: Any, **_kwargs: Any) -> Any:
        raise UnexpectedModelBehavior("the framework's own error")

    def openai_agents_gives_up(*_args: Any, **_kwargs: Any) -> Any:
        raise ModelBehaviorError("the framework's own error")

    monkeypatch.setattr(Agent, "run_sync", pydantic_ai_gives_up)
    monkeypatch.setattr(Runner, "run_sync", openai_agents_gives_up)
    for loop in ADAPTERS.values():
        r = loop([LookupTool(LINES)], ScriptedTurns([draft("c1")]), DEFAULT)
        assert [e.kind for e in r.events].count(EventKind.RELEASED) == 1
        assert r.decision.outcome is ReleaseOutcome.FAILED, "no Draft and no evidence: fail closed"
