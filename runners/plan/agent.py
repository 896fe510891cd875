"""Which agent loop drives each case run, as a run option (`--agent`): the vocabulary (the loops themselves
are in `runners.run.agents`)."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ADAPTERS_EXTRA", "AgentFramework"]

ADAPTERS_EXTRA = "pip install 'harness-bench[adapters]'"


class AgentFramework(StrEnum):
    """The agent loops a bench run can drive its cases through."""

    NATIVE = "native"
    """`run_diagnosis`, the Harness's own loop."""
    PYDANTIC_AI = "pydantic-ai"
    """A pydantic-ai Agent over the case's model, the Harness through `harness.adapters.pydantic_ai`."""
    OPENAI_AGENTS = "openai-agents"
    """An OpenAI Agents SDK Agent over the case's model, the Harness through `harness.adapters.openai_agents`."""
