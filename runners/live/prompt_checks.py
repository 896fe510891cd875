"""Does the protocol reach the model? The server's chat template renders each request body (`POST /apply-template`),
and the rendered prompt must show every tool definition, every observation and the STOP_REQUIRED text, neither
empty nor HTML-escaped. The reference bodies are the Harness's own conversations against serve-sim.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypedDict

from runners.live.proxy import Recorded, RecordingProxy
from runners.live.server import LlamaServer, post_json
from runners.plan.settings import WIRE_TOOL_CHOICES

__all__ = [
    "STOP_TEXT", "ConversationsCheck", "PromptCheck", "PromptTotals", "check_conversations", "check_rendered",
    "excerpt", "probe_tool_choice", "reference_conversations", "render",
]  # fmt: skip

STOP_TEXT = "Stop calling tools. Write your final Draft now"
"""The instruction STOP_REQUIRED carries (harness/observation.py); it must reach the model."""


def _shown(text: str, prompt: str) -> str | None:
    """How `text` appears in the rendered prompt: verbatim, JSON-quoted (as a string value), or not at all."""
    if text in prompt:
        return "verbatim"
    for ascii_only in (False, True):
        if json.dumps(text, ensure_ascii=ascii_only)[1:-1] in prompt:
            return "json-quoted"
    return None


_HTML_ESCAPES = ("&#34;", "&quot;", "&#39;", "&lt;", "&gt;")


@dataclass
class PromptCheck:
    """What of one request's protocol text reached the rendered prompt."""

    tools: int = 0
    tools_missing: list[str] = field(default_factory=list)
    observations: int = 0
    observations_missing: int = 0
    observations_json_quoted: int = 0
    stop_required: int = 0
    stop_required_missing: int = 0
    html_escaped: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        """Every way the model did not see what the Harness sent."""
        out = [f"tool definition not in the prompt: {t}" for t in self.tools_missing]
        if self.observations_missing:
            out.append(f"{self.observations_missing} of {self.observations} tool observations not in the prompt")
        if self.stop_required_missing:
            out.append(f"{self.stop_required_missing} STOP_REQUIRED observations not in the prompt")
        if self.html_escaped:
            out.append(f"the prompt is HTML-escaped ({', '.join(self.html_escaped)})")
        return out


def check_rendered(body: dict[str, Any], prompt: str) -> PromptCheck:
    """Compare a chat request body with the prompt the server's template rendered from it."""
    check = PromptCheck()
    for tool in body.get("tools") or []:
        fn = tool.get("function") or {}
        name, description = str(fn.get("name") or ""), str(fn.get("description") or "")
        check.tools += 1
        first_line = description.strip().splitlines()[0][:80] if description.strip() else ""
        if not name or name not in prompt or (first_line and _shown(first_line, prompt) is None):
            check.tools_missing.append(name or "<unnamed>")
    for msg in body.get("messages") or []:
        if msg.get("role") != "tool":
            continue
        text = str(msg.get("content") or "")
        check.observations += 1
        how = _shown(text, prompt) if text else None
        if how is None:
            check.observations_missing += 1
        elif how == "json-quoted":
            check.observations_json_quoted += 1
        if "STOP_REQUIRED" in text:
            check.stop_required += 1
            if how is None or _shown(STOP_TEXT, prompt) is None:
                check.stop_required_missing += 1
    sent = json.dumps(body, ensure_ascii=False)
    check.html_escaped = [e for e in _HTML_ESCAPES if e in prompt and e not in sent]
    return check


def excerpt(prompt: str, needle: str, before: int = 360, after: int = 420) -> str:
    """The part of the prompt around the last occurrence of `needle` (one line per prompt line)."""
    at = prompt.rfind(needle)
    if at < 0:
        return prompt[-(before + after) :]
    return prompt[max(0, at - before) : at + after]


def render(server_root: str, body: dict[str, Any]) -> str:
    """llama-server's rendered prompt for a chat request body (`POST /apply-template`)."""
    status, data = post_json(f"{server_root}/apply-template", body, timeout=60)
    if status != 200 or not isinstance(data, dict) or not isinstance(data.get("prompt"), str):
        raise RuntimeError(f"/apply-template answered {status}: {str(data)[:300]}")
    return str(data["prompt"])


class PromptTotals(TypedDict):
    """What the rendered-prompt check saw over a set of requests."""

    requests: int
    """Requests rendered and checked (answered, carrying tool observations)."""
    observations: int
    """Tool observations in them."""
    json_quoted: int
    """Observations the template showed JSON-quoted rather than verbatim."""
    stop_required: int
    """STOP_REQUIRED observations in them."""
    tools: int
    """The most tool definitions one request carried."""
    refused: int
    """Requests the server refused (HTTP >= 400): they reached no model and are not checked."""


class ConversationsCheck(NamedTuple):
    """The rendered-prompt check over a set of recorded requests."""

    totals: PromptTotals
    """What was checked."""
    problems: list[str]
    """Every way the model did not see what the Harness sent, one line each."""
    shown: str
    """One rendered prompt that carried STOP_REQUIRED without a problem ("" when none did)."""


def check_conversations(server_root: str, records: Sequence[Recorded]) -> ConversationsCheck:
    """Render every answered request that carries tool observations; totals, problems, one STOP_REQUIRED prompt.

    A request the server refused (HTTP >= 400) reached no model: it is counted under `refused`, not checked. One
    the client gave up on (its call timeout or the run's deadline) was rendered and begun on: it is checked like an
    answered one.
    """
    totals = PromptTotals(requests=0, observations=0, json_quoted=0, stop_required=0, tools=0, refused=0)
    problems: list[str] = []
    shown = ""
    for i, rec in enumerate(records):
        if rec.refused:
            totals["refused"] += 1
            continue
        if not any(m.get("role") == "tool" for m in rec.body.get("messages") or []):
            continue
        try:
            prompt = render(server_root, rec.body)
        except (RuntimeError, OSError) as exc:
            problems.append(f"{rec.label} request {i}: {exc}")
            continue
        check = check_rendered(rec.body, prompt)
        totals["requests"] += 1
        totals["observations"] += check.observations
        totals["json_quoted"] += check.observations_json_quoted
        totals["stop_required"] += check.stop_required
        totals["tools"] = max(totals["tools"], check.tools)
        problems += [f"{rec.label} request {i}: {p}" for p in check.problems()]
        if check.stop_required and not check.problems():
            shown = prompt
    return ConversationsCheck(totals, problems, shown)


def reference_conversations(case_ids: Sequence[str]) -> list[Recorded]:
    """The Harness's own wire bodies for scripted reference runs (serve-sim over HTTP, recorded)."""
    from harness import OpenAIChatModel
    from runners.endpoints.simulator import SimulatorServer
    from runners.plan.run_plan import select_cases
    from runners.run.case_runner import run_case

    cases = select_cases([], list(case_ids))
    with SimulatorServer(cases) as sim, RecordingProxy(sim.base_url.removesuffix("/v1")) as proxy:
        proxy.label = "reference"
        model = OpenAIChatModel("scripted", base_url=proxy.base_url, api_key_env="HARNESS_BENCH_LIVE_KEY")
        for case in cases:
            run_case(case, model)
        proxy.settle()
        return list(proxy.records)


def probe_tool_choice(server: LlamaServer, body: dict[str, Any]) -> dict[str, str]:
    """Send the same request to /apply-template with each tool_choice form; name what the server did."""
    name = body["tools"][0]["function"]["name"]
    out: dict[str, str] = {}
    for label, value in (
        *((mode, mode) for mode in WIRE_TOOL_CHOICES),
        (f"named {name}", {"type": "function", "function": {"name": name}}),
    ):  # fmt: skip
        before = len(server.log_text())
        status, _ = post_json(f"{server.root}/apply-template", {**body, "tool_choice": value}, timeout=60)
        ignored = "Wrong type supplied for parameter 'tool_choice'" in server.log_text()[before:]
        out[label] = f"HTTP {status}" + (" but ignored (falls back to auto)" if ignored else "")
    return out
