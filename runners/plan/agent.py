"""Which agent loop drives each case run, as a run option (`--agent`): the vocabulary (the loops themselves
are in `runners.run.agents`)."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ADAPTERS_EXTRA", "CONTRACT_SETTINGS", "AgentFramework"]

ADAPTERS_EXTRA = "pip install 'harness-bench[adapters]'"

CONTRACT_SETTINGS = frozenset({"no_gain_threshold", "protocol_violation_threshold", "schema_mode"})
"""The settings only the Harness's envelope and contract read: the plain loop has neither, so sweeping them over
plain-loop runs would give identical points and a threshold recommended from nothing."""


class AgentFramework(StrEnum):
    """The agent loops a bench run can drive its cases through."""

    NATIVE = "native"
    """`run_diagnosis`, the Harness's own loop."""
    PYDANTIC_AI = "pydantic-ai"
    """A pydantic-ai Agent over the case's model, the Harness through `harness.adapters.pydantic_ai`."""
    OPENAI_AGENTS = "openai-agents"
    """An OpenAI Agents SDK Agent over the case's model, the Harness through `harness.adapters.openai_agents`."""
    PLAIN = "plain"
    """No Harness: the plain loop most teams run (plain tools, the same budgets, no envelope, no information-gain
    contract, no guards on what it publishes), to measure what the protocol costs and buys."""

    @property
    def harnessed(self) -> bool:
        """Whether the Harness drives the run (every loop but the plain one): its invariants are then judged."""
        return self is not AgentFramework.PLAIN
