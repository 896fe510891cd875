"""`--agent`: which agent loop drives each case run — the native loop or an agent framework's, through its adapter."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.agent import run_diagnosis
from harness.context import RunContext
from harness.models.base import ChatModel
from harness.prompts import DiagnosisTask
from harness.session import HarnessSession, RunResult
from harness.tools.base import BusinessTool
from runners.plan.agent import AgentFramework
from runners.run.case_runner import AgentLoop


def pydantic_ai_loop(
    task: DiagnosisTask,
    tools: Sequence[BusinessTool[Any]],
    model: ChatModel,
    *,
    ctx: RunContext,
    guard_model: ChatModel | None,
    system_prompt: str,
) -> RunResult:
    """The case's run as a pydantic-ai Agent (FunctionModel over the case's model) under the Harness."""
    from harness.adapters.pydantic_ai import run_agent

    session = HarnessSession(tools, model_name=model.name, ctx=ctx, system_prompt=system_prompt)
    return run_agent(session, task, tools, model, system_prompt=system_prompt, guard_model=guard_model)


def openai_agents_loop(
    task: DiagnosisTask,
    tools: Sequence[BusinessTool[Any]],
    model: ChatModel,
    *,
    ctx: RunContext,
    guard_model: ChatModel | None,
    system_prompt: str,
) -> RunResult:
    """The case's run as an OpenAI Agents SDK Agent (a Model over the case's model) under the Harness."""
    from harness.adapters.openai_agents import run_agent

    session = HarnessSession(tools, model_name=model.name, ctx=ctx, system_prompt=system_prompt)
    return run_agent(session, task, tools, model, system_prompt=system_prompt, guard_model=guard_model)


def loop_for(agent: AgentFramework) -> AgentLoop:
    """The loop behind `--agent`."""
    if agent is AgentFramework.PYDANTIC_AI:
        return pydantic_ai_loop
    if agent is AgentFramework.OPENAI_AGENTS:
        return openai_agents_loop
    return run_diagnosis
