"""The native Diagnosis Agent loop: a short user of `HarnessSession`.

The model decides hypotheses, tools and the Draft; every tool request passes the interceptor,
every model call passes the Harness retry, and the loop always ends in exactly one Release.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, TextIO

from harness.config import HarnessConfig
from harness.context import RunContext
from harness.models.base import ChatModel, ToolMessage
from harness.prompts import DEFAULT_SYSTEM_PROMPT, DiagnosisTask
from harness.retry import Sleep
from harness.session import HarnessSession, RunResult, tool_specs
from harness.tools.base import BusinessTool

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

__all__ = ["AgentLoop", "RunResult", "run_diagnosis", "tool_specs"]


class AgentLoop(Protocol):
    """A loop that drives one run to its Release: `run_diagnosis`, or a framework adapter's equivalent."""

    def __call__(
        self,
        task: DiagnosisTask,
        tools: Sequence[BusinessTool[Any]],
        model: ChatModel,
        *,
        ctx: RunContext,
        guard_model: ChatModel | None,
        system_prompt: str,
    ) -> RunResult:
        """Run `task` with `tools` and `model` in `ctx` (the Harness's session) and return the result."""
        ...


def run_diagnosis(
    task: DiagnosisTask,
    tools: Sequence[BusinessTool[Any]],
    model: ChatModel,
    *,
    config: HarnessConfig | None = None,
    guard_model: ChatModel | None = None,
    ctx: RunContext | None = None,
    sleep: Sleep = time.sleep,
    system_prompt: str = DEFAULT_SYSTEM_PROMPT,
    tracer: Tracer | None = None,
    event_log: TextIO | None = None,
) -> RunResult:
    """Run one diagnosis to exactly one Release outcome. Never raises for model or tool misbehaviour.
    `tracer`: an OpenTelemetry tracer for the run's GenAI spans; `event_log`: a stream for its typed events, a
    JSON line each (see `HarnessSession`)."""
    session = HarnessSession(
        tools, model_name=model.name, config=config, ctx=ctx, sleep=sleep, system_prompt=system_prompt,
        tracer=tracer, event_log=event_log,
    )  # fmt: skip
    messages = session.initial_messages(task)
    while not session.ended:
        turn = session.complete(model, messages)
        if turn.message is None:
            break
        if turn.final:
            session.receive_final(turn.message.content)
            break
        messages.append(turn.message)
        outcome = session.handle_tool_calls(turn.message.tool_calls)
        messages.extend(ToolMessage(a.tool_call_id, a.observation.text) for a in outcome.answers)
    return session.finish(question=task.question, guard_model=guard_model or model, messages=messages)
