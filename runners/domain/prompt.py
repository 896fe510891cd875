"""The bench's Diagnosis Agent prompt: the Harness's tool protocol, for the bench's payment platform."""

from __future__ import annotations

from harness import system_prompt

PAYMENT_PLATFORM_ROLE = (
    "You are a diagnosis assistant for a multi-tenant payment and order platform (gateway, order, settlement, risk "
    "and notification services). You investigate an operator's question with the tools provided, then write a Draft."
)
"""Who the bench's agent is (the evaluation sets' incidents are on this platform)."""

BENCH_SYSTEM_PROMPT = system_prompt(PAYMENT_PLATFORM_ROLE)
"""The system prompt of every bench run (recorded cassettes hold it verbatim)."""
