"""`--agent`: which agent loop drives each case run — the native loop or an agent framework's, through its adapter."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from harness import (
    AgentLoop,
    BusinessTool,
    ChatModel,
    DiagnosisTask,
    HarnessSession,
    RunContext,
    RunResult,
    run_diagnosis,
)
from runners.plan.agent import AgentFramework


class _AdapterRun(Protocol):
    """An adapter's `run_agent`: the task as the framework's Agent under the session."""

    def __call__(
        self,
        session: HarnessSession,
        task: DiagnosisTask,
        tools: Sequence[BusinessTool[Any]],
        model: ChatModel,
        *,
        system_prompt: str,
        guard_model: ChatModel | None = None,
    ) -> RunResult: ...


@dataclass(frozen=True, slots=True)
class AdapterLoop:
    """The agent loop of a framework adapter: a HarnessSession over the case's tools and model, driven by the
    adapter's `run_agent` (an AgentLoop)."""

    adapter: Callable[[], _AdapterRun]
    """The adapter's `run_agent`, imported when a run needs it (the frameworks are optional extras)."""

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
        """The case's run as the framework's Agent (over the case's model) under the Harness."""
        session = HarnessSession(tools, model_name=model.name, ctx=ctx, system_prompt=system_prompt)
        return self.adapter()(session, task, tools, model, system_prompt=system_prompt, guard_model=guard_model)


def _pydantic_ai() -> _AdapterRun:
    from harness import run_pydantic_ai_agent

    return run_pydantic_ai_agent


def _openai_agents() -> _AdapterRun:
    from harness import run_openai_agents_agent

    return run_openai_agents_agent


pydantic_ai_loop = AdapterLoop(_pydantic_ai)
"""A pydantic-ai Agent (FunctionModel over the case's model)."""
openai_agents_loop = AdapterLoop(_openai_agents)
"""An OpenAI Agents SDK Agent (a Model over the case's model)."""


def loop_for(agent: AgentFramework) -> AgentLoop:
    """The loop behind `--agent`."""
    if agent is AgentFramework.PYDANTIC_AI:
        return pydantic_ai_loop
    if agent is AgentFramework.OPENAI_AGENTS:
        return openai_agents_loop
    if agent is AgentFramework.PLAIN:
        from runners.run.plain_loop import plain_loop

        return plain_loop
    return run_diagnosis
