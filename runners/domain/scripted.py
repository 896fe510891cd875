"""ScriptedChatModel: plays a reference trajectory deterministically.

The policy is a pure function of (trajectory, conversation): it re-derives where it is from the
observations it received, exactly as a real model would have to. The OpenAI-compatible simulator
(`harness-bench serve-sim`) calls the same `next_turn`, so in-process and over-HTTP runs agree.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from harness import (
    AssistantMessage,
    ChatMessage,
    ChatRequest,
    ControlSignal,
    InformationGain,
    InvocationStatus,
    JsonObject,
    JsonValue,
    ModelPurpose,
    ModelResponse,
    RejectionReason,
    SemanticVerdict,
    ToolCallRequest,
    ToolMessage,
    ToolSpec,
    Usage,
)
from runners.domain.truth_grades import ObservationTruth


class Mistake(StrEnum):
    """A deliberate protocol mistake a scripted step makes."""

    MISSING_PREVIOUS_OBSERVATION = "missing_previous_observation"
    WRONG_TOOL_CALL_ID = "wrong_tool_call_id"
    UNEXPECTED_PREVIOUS_OBSERVATION = "unexpected_previous_observation"
    INVALID_GAIN_VALUE = "invalid_gain_value"
    MALFORMED_JSON = "malformed_json"
    MISSING_INPUT = "missing_input"
    UNKNOWN_TOOL = "unknown_tool"
    INVALID_INPUT = "invalid_input"  # the step's input is deliberately invalid for its tool (INVALID_INPUT)


class RejectionReaction(StrEnum):
    """What the scripted model does after a protocol rejection."""

    CORRECT = "correct"
    """Retry the same step without the mistake (the corrective observation worked)."""
    REPEAT = "repeat"
    """Make the same mistake again (the seed's 9-rejections incident)."""
    SKIP = "skip"
    """Give up on that step and move on."""


class StopReaction(StrEnum):
    """What the scripted model does after STOP_REQUIRED."""

    DRAFT = "draft"
    """Write the Draft at once (the contract)."""
    IGNORE = "ignore"
    """Keep calling tools (the Harness must end the loop with a controlled stop)."""


class ScriptStep(BaseModel):
    """One tool call of the reference trajectory."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool: str
    """Tool to call."""
    input: dict[str, JsonValue] = Field(default_factory=dict)
    """Business input."""
    gain: InformationGain = InformationGain.NO_GAIN
    """The evaluation this call gives the previous observation, when one is pending."""
    mistake: Mistake | None = None
    """A deliberate protocol mistake made on this call."""
    on_rejection: RejectionReaction | None = None
    """Overrides the trajectory's reaction to a rejection of this step."""
    same_turn: bool = False
    """Sent in the same assistant message as the previous step (parallel tool calls); such calls echo
    the evaluation the message's first call carries, as parallel-calling models do."""
    note: str | None = None
    """Why the step is there (documentation only)."""
    truth: ObservationTruth | None = None
    """What this step's observation really held (its truth grade and the records it rests on): what a model's
    GAINED / NO_GAIN on it is scored against (`harness-bench tag-probe`). Every step of a case file has one."""


class Trajectory(BaseModel):
    """A scripted model's whole behaviour for one case."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    steps: list[ScriptStep] = Field(default_factory=list)
    """Tool calls in order (zero is legal)."""
    on_rejection: RejectionReaction = RejectionReaction.CORRECT
    """Reaction to a protocol rejection."""
    on_stop_required: StopReaction = StopReaction.DRAFT
    """Reaction to STOP_REQUIRED."""
    draft: dict[str, JsonValue] | None = None
    """The final Draft; citation ids may be `@stepN` (1-based) placeholders."""
    draft_text: str | None = None
    """A raw final message instead of `draft` (to play an invalid Draft)."""
    semantic_verdict: SemanticVerdict = SemanticVerdict.SUPPORTED
    """What the scripted SemanticGuard answers."""


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


def _observation(content: str) -> JsonObject:
    try:
        data = json.loads(content)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


class _Position:
    """Where the policy is, re-derived from the conversation."""

    __slots__ = ("calls", "corrected", "done", "last_completed", "pending", "step_ids", "stop_seen")

    def __init__(self) -> None:
        self.calls = 0
        self.done: set[int] = set()
        self.pending: str | None = None
        self.stop_seen = False
        self.step_ids: dict[int, str] = {}
        self.corrected: set[int] = set()
        self.last_completed: str | None = None


def _group(traj: Trajectory, pos: _Position) -> list[int]:
    """The steps the next assistant message carries: the first one not done, plus the not-done steps
    sent in the same message with it (`same_turn`)."""
    first = next((i for i in range(len(traj.steps)) if i not in pos.done), None)
    if first is None:
        return []
    group = [first]
    for i in range(first + 1, len(traj.steps)):
        if not traj.steps[i].same_turn:
            break
        if i not in pos.done:
            group.append(i)
    return group


def _replay(traj: Trajectory, messages: Sequence[ChatMessage]) -> _Position:
    pos = _Position()
    results = {m.tool_call_id: m.content for m in messages if isinstance(m, ToolMessage)}
    for m in messages:
        if not isinstance(m, AssistantMessage) or not m.tool_calls:
            continue
        group = _group(traj, pos)  # what this policy sent in that message, call by call
        for n, call in enumerate(m.tool_calls):
            pos.calls += 1
            obs = _observation(results.get(call.id, ""))
            if obs.get("control") == ControlSignal.STOP_REQUIRED or obs.get("reason") == RejectionReason.SATURATED:
                pos.stop_seen = True
            if n >= len(group):
                continue
            idx = group[n]
            status = obs.get("status")
            if status == InvocationStatus.REJECTED and obs.get("reason") == RejectionReason.AWAITING_EVALUATION:
                continue  # not executed: sent again in the next message, with the evaluation
            if status == InvocationStatus.REJECTED and (
                obs.get("reason") == RejectionReason.PROTOCOL_VIOLATION or obs.get("violation")
            ):
                reaction = traj.steps[idx].on_rejection or traj.on_rejection
                if reaction is RejectionReaction.CORRECT:
                    pos.corrected.add(idx)
                elif reaction is RejectionReaction.SKIP:
                    pos.done.add(idx)
                continue
            # executed, failed, duplicate or saturated: this step is done
            pos.done.add(idx)
            pos.step_ids[idx + 1] = call.id
            if status == InvocationStatus.COMPLETED:
                pos.last_completed = call.id
            pos.pending = call.id if obs.get("evaluation_required") is True else None
    return pos


def step_call_ids(traj: Trajectory, messages: Sequence[ChatMessage]) -> dict[int, str]:
    """Which call carried each step of `traj` done so far in `messages` (1-based step -> tool_call_id)."""
    return dict(_replay(traj, messages).step_ids)


def _resolve(value: JsonValue, ids: dict[int, str]) -> JsonValue:
    if isinstance(value, str) and value.startswith("@step"):
        try:
            return ids.get(int(value[5:]), "call_unresolved")
        except ValueError:
            return value
    if isinstance(value, list):
        return [_resolve(v, ids) for v in value]
    if isinstance(value, dict):
        return {k: _resolve(v, ids) for k, v in value.items()}
    return value


def plain_tools(tools: Sequence[ToolSpec]) -> bool:
    """Whether the offered tools take their business input as it is (a loop without the Harness's envelope)."""

    def enveloped(spec: ToolSpec) -> bool:
        properties = spec.parameters.get("properties")
        return isinstance(properties, dict) and "input" in properties

    return bool(tools) and not any(enveloped(t) for t in tools)


def next_turn(traj: Trajectory, messages: Sequence[ChatMessage], *, plain: bool = False) -> AssistantMessage:
    """The scripted model's next assistant turn for this conversation (`plain`: the tools take no envelope)."""
    pos = _replay(traj, messages)
    group = _group(traj, pos)
    if (pos.stop_seen and traj.on_stop_required is StopReaction.DRAFT) or not group:
        return AssistantMessage(render_draft(traj, pos.step_ids))
    return AssistantMessage(
        "", tuple(_call(traj, pos, idx, pos.calls + 1 + n, plain=plain) for n, idx in enumerate(group))
    )


def _call(traj: Trajectory, pos: _Position, idx: int, number: int, *, plain: bool = False) -> ToolCallRequest:
    """One tool call of step `idx` with its envelope (and its deliberate mistake, if any); `plain`: the business
    input alone, the envelope's mistakes not made (there is no envelope to get wrong)."""
    step = traj.steps[idx]
    mistake = None if idx in pos.corrected else step.mistake
    name = "search_everything" if mistake is Mistake.UNKNOWN_TOOL else step.tool
    if plain:
        arguments = json.dumps({} if mistake is Mistake.MISSING_INPUT else dict(step.input), ensure_ascii=False)
        if mistake is Mistake.MALFORMED_JSON:
            arguments = arguments[: max(1, len(arguments) // 2)]
        return ToolCallRequest(f"call_{number}", name, arguments)
    envelope: JsonObject = {}
    if mistake is Mistake.WRONG_TOOL_CALL_ID:
        envelope["previous_observation"] = {"tool_call_id": f"call_{number + 99}", "information_gain": step.gain.value}
    elif mistake is Mistake.UNEXPECTED_PREVIOUS_OBSERVATION:
        envelope["previous_observation"] = {
            "tool_call_id": pos.last_completed or "call_0",
            "information_gain": step.gain.value,
        }
    elif mistake is Mistake.INVALID_GAIN_VALUE:
        envelope["previous_observation"] = {"tool_call_id": pos.pending or "call_0", "information_gain": "MAYBE"}
    elif pos.pending is not None and mistake is not Mistake.MISSING_PREVIOUS_OBSERVATION:
        envelope["previous_observation"] = {"tool_call_id": pos.pending, "information_gain": step.gain.value}
    if mistake is not Mistake.MISSING_INPUT:
        envelope["input"] = dict(step.input)
    arguments = json.dumps(envelope, ensure_ascii=False)
    if mistake is Mistake.MALFORMED_JSON:
        arguments = arguments[: max(1, len(arguments) // 2)]
    return ToolCallRequest(f"call_{number}", name, arguments)


def render_draft(traj: Trajectory, step_ids: dict[int, str]) -> str:
    """The final message: the Draft with `@stepN` placeholders resolved."""
    if traj.draft_text is not None:
        return traj.draft_text
    draft = traj.draft if traj.draft is not None else {"conclusion": None, "missing_info": [], "next_steps": []}
    return json.dumps(_resolve(draft, step_ids), ensure_ascii=False)


def guard_answer(traj: Trajectory) -> str:
    """What the scripted SemanticGuard replies."""
    return json.dumps({"verdict": traj.semantic_verdict.value, "reason": "scripted verdict"})


def estimate_usage(request: ChatRequest, answer: AssistantMessage) -> Usage:
    """Deterministic token estimate (characters / 4) so budgets behave like a real endpoint."""
    prompt = sum(len(getattr(m, "content", "") or "") for m in request.messages)
    prompt += sum(len(t.description) + 200 for t in request.tools)
    out = len(answer.content or "") + sum(len(c.arguments) + len(c.name) for c in answer.tool_calls)
    return Usage(max(1, prompt // 4), _estimate_tokens(" " * max(out, 1)))


class ScriptedChatModel:
    """A deterministic in-process model for one case's trajectory."""

    def __init__(self, trajectory: Trajectory, name: str = "scripted") -> None:
        self._trajectory = trajectory
        self._name = name

    @property
    def name(self) -> str:
        """Label for metrics."""
        return self._name

    @property
    def trajectory(self) -> Trajectory:
        """The trajectory being played."""
        return self._trajectory

    def complete(self, request: ChatRequest) -> ModelResponse:
        """Play the next turn (or the scripted guard verdict)."""
        if request.purpose is ModelPurpose.SEMANTIC_GUARD:
            answer = AssistantMessage(guard_answer(self._trajectory))
        else:
            answer = next_turn(self._trajectory, request.messages, plain=plain_tools(request.tools))
        return ModelResponse(answer, estimate_usage(request, answer), "tool_calls" if answer.tool_calls else "stop")
