"""The bench's Diagnosis Agent prompt: the Harness's tool protocol, for the bench's payment platform or a suite's
own role (`case_system_prompt`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness import AGENT_MARKER, system_prompt

if TYPE_CHECKING:
    from runners.domain.case_model import EvalCase

PAYMENT_PLATFORM_ROLE = (
    "You are a diagnosis assistant for a multi-tenant payment and order platform (gateway, order, settlement, risk "
    "and notification services). You investigate an operator's question with the tools provided, then write a Draft."
)
"""Who the bench's agent is (the evaluation sets' incidents are on this platform)."""

BENCH_SYSTEM_PROMPT = system_prompt(PAYMENT_PLATFORM_ROLE)
"""The system prompt of every bench run (recorded cassettes hold it verbatim)."""

PLAIN_SYSTEM_PROMPT = f"""{AGENT_MARKER} {PAYMENT_PLATFORM_ROLE}

Investigate before concluding: a conclusion rests on records the tools returned. An empty result shows only
that the query found nothing, and a symptom is not its cause: try another tool, filter or table where the
question points until the records show why, or until nothing more can be learned.

When you are done, reply with the Draft as JSON only (no tool call): if the tool results show the root cause,
state it as the conclusion and cite the results that show it; if they do not, or the context lacks the tenant,
service or time window needed to look, set conclusion to null and say in missing_info what is missing:
{{"conclusion": "<root cause>" or null,
  "claims": [{{"statement": "...",
              "citations": [{{"tool_call_id": "...", "excerpt": "<verbatim text from that tool result>"}}]}}],
  "missing_info": ["..."], "next_steps": ["..."]}}
Each citation's excerpt is text copied exactly from one field of one record that the cited call returned (a log
message, a table cell, a passage), never your own words."""
"""The plain loop's prompt (`--agent plain`): the Harness's prompt without its tool protocol (no envelope, no gain,
no STOP_REQUIRED), the same role, investigation and Draft instructions, so the two loops differ by the protocol."""


def case_system_prompt(case: EvalCase) -> str:
    """The system prompt of a case's run: its suite's role with the Harness's tool protocol, or the bench's."""
    role = case.suite.role if case.suite is not None else None
    return BENCH_SYSTEM_PROMPT if role is None else system_prompt(role)


def plain_prompt(harness_prompt: str) -> str:
    """The plain loop's prompt for a run whose Harness prompt is `harness_prompt`: the same role (a suite's, or the
    payment platform's, which gives `PLAIN_SYSTEM_PROMPT` itself)."""
    role = harness_prompt.removeprefix(f"{AGENT_MARKER} ").split("\n\n", 1)[0]
    return PLAIN_SYSTEM_PROMPT.replace(PAYMENT_PLATFORM_ROLE, role, 1)
