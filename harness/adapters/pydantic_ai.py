"""The Harness under pydantic-ai: the framework runs the agent loop, the Harness decides everything else.

- **Tools**: each business tool becomes a pydantic-ai tool with the envelope schema and no argument
  validation; the raw arguments the model sent reach the Harness, which answers every call of a message
  in order (envelope, admission, duplicate scopes, NO_GAIN, STOP_REQUIRED, the controlled stop) exactly as
  the native loop does. The framework is handed arguments that always validate (`{}`), so its own
  validation and retries can never hide a protocol violation: the Harness's retries are the only retries.
- **Model**: a `FunctionModel` whose function asks the session for each model call (budgets, deadline,
  retries, tool_choice after STOP_REQUIRED), reading the conversation from the framework's history.
  When the session has ended the loop (a stop, a budget, a failure), the function answers the run's end
  and no model call is made or counted.
- **Ids and names**: pydantic-ai is handed every call under a fresh id of the adapter's own, and a call to a
  tool the agent does not have under a catch-all tool, so a reused `tool_call_id` or an unknown name reaches
  the Harness (REUSED_TOOL_CALL_ID, UNKNOWN_TOOL and their corrective observations) instead of being answered
  from an old result or raised by the framework; its history is read back with the model's own ids and names.
- **Release**: the agent's final text output goes to the session as the Draft.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic_ai import Agent, Tool
from pydantic_ai import RunContext as AgentRunContext
from pydantic_ai.exceptions import AgentRunError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from harness.adapters._batch import EMPTY_FINAL, END_OF_RUN, MessageAnswers, StableHistory
from harness.models.base import (
    AssistantMessage,
    ChatMessage,
    ChatModel,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from harness.prompts import DiagnosisTask, render_task
from harness.session import HarnessSession, RunResult
from harness.tools.base import BusinessTool

__all__ = ["END_OF_RUN", "HarnessBridge", "run_agent"]


class HarnessBridge:
    """Connects one HarnessSession to one pydantic-ai agent run: its tools and its model function."""

    def __init__(self, session: HarnessSession, model: ChatModel, tools: Sequence[BusinessTool[Any]]) -> None:
        self.session = session
        self._model = model
        self._tools = tuple(tools)
        self._answers = MessageAnswers(session, self._tools)
        self._stable = StableHistory()
        self.final_text: str | None = None
        """The model's own final message, when it wrote one (None: the Harness ended the loop)."""
        self.model_answered_final = False

    # -- the framework's tools --------------------------------------------------------------
    def tools(self) -> list[Tool[None]]:
        """One pydantic-ai tool per business tool (the envelope schema, no validation, the Harness's answer), and
        the catch-all that carries calls to names the agent has no tool for."""
        return [
            Tool.from_schema(self._tool_function(spec.name), spec.name, spec.description, dict(spec.parameters),
                             takes_ctx=True, sequential=True)
            for spec in self._answers.framework_tools()
        ]  # fmt: skip

    def _tool_function(self, name: str) -> Any:
        def call(ctx: AgentRunContext[None], **_ignored: Any) -> str:
            return self._answers.answer(ctx.tool_call_id or "")

        call.__name__ = name
        return call

    # -- the framework's model --------------------------------------------------------------
    def function_model(self) -> FunctionModel:
        """The FunctionModel whose every call is a HarnessSession model call."""
        return FunctionModel(self._respond, model_name=self._model.name)

    def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = self.session.complete(self._model, self.history(messages))
        if turn.message is None:
            return ModelResponse(parts=[TextPart(END_OF_RUN)])
        if turn.final:
            self.model_answered_final = True
            self.final_text = turn.message.content
            return ModelResponse(parts=[TextPart(turn.message.content or EMPTY_FINAL)])
        carried = self._answers.expect(turn.message.tool_calls)
        parts: list[TextPart | ToolCallPart] = [TextPart(turn.message.content)] if turn.message.content else []
        parts += [ToolCallPart(c.name, "{}", tool_call_id=c.id) for c in carried]
        return ModelResponse(parts=parts)

    def history(self, messages: list[ModelMessage]) -> list[ChatMessage]:
        """The framework's history as the Harness's chat messages (the model's ids, names and raw arguments)."""
        out: list[ChatMessage] = []
        for message in messages:
            if isinstance(message, ModelRequest):
                for part in message.parts:
                    if isinstance(part, SystemPromptPart):
                        out.append(SystemMessage(part.content))
                    elif isinstance(part, UserPromptPart):
                        out.append(UserMessage(part.content if isinstance(part.content, str) else str(part.content)))
                    elif isinstance(part, ToolReturnPart):
                        out.append(ToolMessage(self._answers.call(part.tool_call_id).id, str(part.content)))
                    elif isinstance(part, RetryPromptPart):  # never produced: the Harness answers every call
                        out.append(ToolMessage(self._answers.call(part.tool_call_id).id, part.model_response()))
            elif isinstance(message, ModelResponse):
                text = "".join(p.content for p in message.parts if isinstance(p, TextPart))
                calls = tuple(self._answers.call(p.tool_call_id) for p in message.parts if isinstance(p, ToolCallPart))
                if calls:
                    out.append(AssistantMessage(text, calls))
        return self._stable(out)


def run_agent(
    session: HarnessSession,
    task: DiagnosisTask,
    tools: Sequence[BusinessTool[Any]],
    model: ChatModel,
    *,
    system_prompt: str,
    guard_model: ChatModel | None = None,
) -> RunResult:
    """Run `task` as a pydantic-ai Agent under the Harness and release its single outcome."""
    bridge = HarnessBridge(session, model, tools)
    agent: Agent[None, str] = Agent(
        bridge.function_model(), system_prompt=system_prompt, tools=bridge.tools(), retries=0, output_type=str
    )
    history: list[ChatMessage] = []
    try:
        result = agent.run_sync(render_task(task))
        history = bridge.history(result.all_messages())
        if bridge.model_answered_final:
            output = result.output
            session.receive_final(None if output == EMPTY_FINAL else output)
    except AgentRunError:  # the framework gave up on its own: the run still ends in exactly one Release
        pass
    return session.finish(question=task.question, guard_model=guard_model or model, messages=history)
