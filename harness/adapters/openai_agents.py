"""The Harness under the OpenAI Agents SDK: the SDK's Runner drives the loop, the Harness decides the rest.

- **Tools**: each business tool becomes a `FunctionTool` with the envelope schema (not strict) whose
  invoker receives the raw argument text the model sent; the Harness answers every call of a message in
  order (envelope, admission, duplicate scopes, NO_GAIN, STOP_REQUIRED, the controlled stop) exactly as the
  native loop does. The SDK never validates or retries them: the Harness's retries are the only retries.
- **Model**: a `Model` implementation whose every `get_response` is a HarnessSession model call (budgets,
  deadline, retries, tool_choice after STOP_REQUIRED), reading the conversation from the SDK's input items.
  Once the session has ended the loop it answers the run's end: no model call is made or counted.
- **Ids and names**: the SDK is handed every call under a fresh call id of the adapter's own, and a call to a
  tool the agent does not have under a catch-all tool, so a reused `tool_call_id` or an unknown name reaches
  the Harness (REUSED_TOOL_CALL_ID, UNKNOWN_TOOL and their corrective observations) instead of ending the run
  in the SDK; its input items are read back with the model's own ids and names.
- **Release**: the run's final output goes to the session as the Draft. The Runner's own turn limit is
  lifted (the Harness's budgets bound the run) and tracing is off (no export leaves the process).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

from agents import Agent, FunctionTool, RunConfig, Runner
from agents.agent_output import AgentOutputSchemaBase
from agents.exceptions import AgentsException
from agents.handoffs import Handoff
from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
from agents.model_settings import ModelSettings
from agents.models.interface import Model, ModelTracing
from agents.tool import Tool
from agents.tool_context import ToolContext
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from harness.adapters._batch import EMPTY_FINAL, END_OF_RUN, MessageAnswers, StableHistory
from harness.models.base import AssistantMessage, ChatMessage, ChatModel, SystemMessage, ToolMessage, UserMessage
from harness.prompts import DiagnosisTask, render_task
from harness.session import HarnessSession, RunResult
from harness.tools.base import BusinessTool

__all__ = ["END_OF_RUN", "HarnessAgentsModel", "harness_tools", "run_agent"]

_NO_TURN_LIMIT = 1_000_000
"""The Runner's max_turns: the Harness's budgets end the run, never the SDK's turn count."""


def harness_tools(answers: MessageAnswers) -> list[Tool]:
    """One FunctionTool per business tool (the envelope schema, not strict, the Harness's answer), and the
    catch-all that carries calls to names the agent has no tool for."""

    async def invoke(ctx: ToolContext[Any], _arguments: str) -> str:  # the raw arguments stay with the adapter
        return answers.answer(ctx.tool_call_id)

    return [
        FunctionTool(spec.name, spec.description, dict(spec.parameters), invoke, strict_json_schema=False)
        for spec in answers.framework_tools()
    ]


class HarnessAgentsModel(Model):
    """An Agents SDK Model whose every response is a HarnessSession model call on `model`."""

    def __init__(self, session: HarnessSession, model: ChatModel, answers: MessageAnswers):
        self._session = session
        self._model = model
        self._answers = answers
        self._stable = StableHistory()
        self.final_text: str | None = None
        """The model's own final message (None until it writes one)."""
        self.model_answered_final = False

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> ModelResponse:
        """The next assistant message, through the Harness."""
        turn = self._session.complete(self._model, self.history(system_instructions, input))
        if turn.message is None:
            return _response([_text(END_OF_RUN)])
        if turn.final:
            self.model_answered_final = True
            self.final_text = turn.message.content
            return _response([_text(turn.message.content or EMPTY_FINAL)])
        carried = self._answers.expect(turn.message.tool_calls)
        items: list[Any] = [_text(turn.message.content)] if turn.message.content else []
        items += [
            ResponseFunctionToolCall(type="function_call", call_id=c.id, name=c.name, arguments="{}", id=c.id)
            for c in carried
        ]
        return _response(items)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        """Not offered: the Harness's calls are whole responses."""
        raise NotImplementedError("the Harness's Agents SDK model does not stream")

    def history(self, system: str | None, items: str | list[TResponseInputItem]) -> list[ChatMessage]:
        """The SDK's input items as the Harness's chat messages (one assistant message per model response, the
        model's own ids, names and raw arguments)."""
        out: list[ChatMessage] = [SystemMessage(system)] if system else []
        if isinstance(items, str):
            return self._stable([*out, UserMessage(items)])
        text, calls = "", []
        for raw in items:
            item: dict[str, Any] = dict(raw) if isinstance(raw, dict) else dict(raw.model_dump())
            kind = item.get("type")
            if kind == "function_call":
                calls.append(self._answers.call(str(item["call_id"])))
                continue
            if kind == "message" and item.get("role") == "assistant":
                text += "".join(str(c.get("text", "")) for c in item.get("content", []) if isinstance(c, dict))
                continue
            if calls:
                out.append(AssistantMessage(text, tuple(calls)))
                text, calls = "", []
            if kind == "function_call_output":
                out.append(ToolMessage(self._answers.call(str(item["call_id"])).id, str(item.get("output", ""))))
            elif item.get("role") == "user":
                content = item.get("content")
                out.append(UserMessage(content if isinstance(content, str) else str(content)))
        if calls:
            out.append(AssistantMessage(text, tuple(calls)))
        return self._stable(out)


def _text(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        type="message", role="assistant", status="completed", id=f"msg_{uuid.uuid4().hex[:12]}",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )  # fmt: skip


def _response(items: list[Any]) -> ModelResponse:
    return ModelResponse(output=items, usage=Usage(requests=1), response_id=None)


def run_agent(
    session: HarnessSession,
    task: DiagnosisTask,
    tools: Sequence[BusinessTool[Any]],
    model: ChatModel,
    *,
    system_prompt: str,
    guard_model: ChatModel | None = None,
) -> RunResult:
    """Run `task` as an Agents SDK Agent under the Harness and release its single outcome."""
    answers = MessageAnswers(session, tools)
    sdk_model = HarnessAgentsModel(session, model, answers)
    agent: Agent[Any] = Agent(
        name="diagnosis", instructions=system_prompt, model=sdk_model, tools=harness_tools(answers),
        reset_tool_choice=False,
    )  # fmt: skip
    history: list[ChatMessage] = []
    try:
        result = Runner.run_sync(
            agent, render_task(task), max_turns=_NO_TURN_LIMIT, run_config=RunConfig(tracing_disabled=True)
        )
        history = sdk_model.history(system_prompt, result.to_input_list())
        if sdk_model.model_answered_final:
            output = str(result.final_output)
            session.receive_final(None if output == EMPTY_FINAL else output)
    except AgentsException:  # the SDK gave up on its own: the run still ends in exactly one Release
        pass
    return session.finish(question=task.question, guard_model=guard_model or model, messages=history)
