"""The Diagnosis Agent's prompt (docs/architecture.md §12). It guides; it guarantees nothing — the code gates do.

Thresholds, counters and remaining budgets are deliberately absent (docs/architecture.md §5.7).
"""

from __future__ import annotations

from dataclasses import dataclass

AGENT_MARKER = "[harness-bench:diagnosis-agent]"
"""Opens the diagnosis agent's system prompt: a server (a simulator, a recording proxy) tells a diagnosis call by it."""

_PROTOCOL = """Tool protocol:
- Every tool takes {"previous_observation": {...}, "input": {...}}. Business parameters go in "input".
- When the previous observation says "evaluation_required": true, your next tool call MUST include
  "previous_observation": {"tool_call_id": "<that id>", "information_gain": "GAINED" or "NO_GAIN"}.
  GAINED: it confirmed, excluded or narrowed a hypothesis. NO_GAIN: generic, repeated or irrelevant
  content — correct but unhelpful text is NO_GAIN too. Omit previous_observation otherwise.
- Do not repeat a query you already made; repeated scopes are not executed.
- When an observation says STOP_REQUIRED, stop calling tools and write the Draft immediately.

Investigate before concluding: a conclusion rests on records the tools returned. An empty result shows only
that the query found nothing, and a symptom is not its cause: try another tool, filter or table where the
question points until the records show why, or until nothing more can be learned.

When you are done, reply with the Draft as JSON only (no tool call): if the tool results show the root cause,
state it as the conclusion and cite the results that show it; if they do not, or the context lacks the tenant,
service or time window needed to look, set conclusion to null and say in missing_info what is missing:
{"conclusion": "<root cause>" or null,
  "claims": [{"statement": "...",
              "citations": [{"tool_call_id": "...", "excerpt": "<verbatim text from that tool result>"}]}],
  "missing_info": ["..."], "next_steps": ["..."]}
Each citation's excerpt is text copied exactly from one field of one record that the cited call returned (a log
message, a table cell, a passage), never your own words."""

GENERIC_ROLE = (
    "You are a diagnosis assistant. You investigate an operator's question with the tools provided, then write a Draft."
)
"""The role line of the default prompt (a bench or an embedder names its own domain)."""


def system_prompt(role: str) -> str:
    """The Diagnosis Agent's system prompt: `role` (who the agent is, for which system) and the tool protocol."""
    return f"{AGENT_MARKER} {role}\n\n{_PROTOCOL}"


DEFAULT_SYSTEM_PROMPT = system_prompt(GENERIC_ROLE)
"""The prompt `run_diagnosis` and `HarnessSession` use unless given another."""


@dataclass(frozen=True, slots=True)
class TaskContext:
    """What the operator told us besides the question; any part may be missing."""

    tenant: str | None = None
    """Tenant id."""
    service: str | None = None
    """Service name."""
    time_start: str | None = None
    """Start of the time window (ISO 8601)."""
    time_end: str | None = None
    """End of the time window (ISO 8601)."""


@dataclass(frozen=True, slots=True)
class DiagnosisTask:
    """One question to diagnose."""

    question: str
    """The operator's question, as written."""
    context: TaskContext = TaskContext()
    """Known context."""


def render_task(task: DiagnosisTask) -> str:
    """The user message: the question followed by the known context lines."""
    ctx = task.context
    lines = [task.question, "", "Known context:"]
    lines.append(f"- tenant: {ctx.tenant}" if ctx.tenant else "- tenant: (not given)")
    lines.append(f"- service: {ctx.service}" if ctx.service else "- service: (not given)")
    if ctx.time_start or ctx.time_end:
        lines.append(f"- time window: {ctx.time_start or '?'} .. {ctx.time_end or '?'}")
    else:
        lines.append("- time window: (not given)")
    return "\n".join(lines)
