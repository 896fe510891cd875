"""Benchmark 1: harness overhead per tool call — the same tool called directly vs through the
interceptor (envelope check, gain, scope normalisation, canonical record, trace, projection)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pydantic import BaseModel, ConfigDict

from benchmarks._timing import measure
from harness.config import HarnessConfig
from harness.context import RunContext
from harness.contracts import EvidenceStatus
from harness.interceptor import HarnessToolInterceptor
from harness.models.base import ToolCallRequest
from harness.tools.base import BusinessTool, ToolResult

CALLS = 2_000
PER_RUN = 8  # calls per RunContext (a realistic case run makes 1-10)


class EchoInput(BaseModel):
    """Input."""

    model_config = ConfigDict(extra="forbid")
    query: str
    """Query."""


class EchoTool(BusinessTool[EchoInput]):
    """A trivial in-memory tool: the overhead, not the backend, is measured."""

    name = "echo"
    description = "echo"
    input_model = EchoInput

    def run(self, parsed: EchoInput) -> ToolResult:
        rec = {"line": f"result for {parsed.query}"}
        return ToolResult(EvidenceStatus.EVIDENCE, 1, {"query": parsed.query}, (rec,))


class InlineEchoTool(EchoTool):
    """The same tool, declared latency-bounded: it runs on the loop's thread (like the built-in tools)."""

    runs_inline = True


def direct() -> None:
    tool = EchoTool()
    for i in range(CALLS):
        tool.run(EchoInput(query=f"q{i}"))


def requests() -> list[list[ToolCallRequest]]:
    runs = []
    for r in range(CALLS // PER_RUN):
        calls = []
        for i in range(PER_RUN):
            env: dict[str, object] = {"input": {"query": f"q{r}-{i}"}}
            if i:
                env["previous_observation"] = {"tool_call_id": f"c{i - 1}", "information_gain": "GAINED"}
            calls.append(ToolCallRequest(f"c{i}", "echo", json.dumps(env)))
        runs.append(calls)
    return runs


PREPARED = requests()
CFG = HarnessConfig(max_tool_invocations=PER_RUN + 1)


def through_interceptor(tool: EchoTool | None = None) -> None:
    tool = tool or EchoTool()
    for calls in PREPARED:
        icp = HarnessToolInterceptor(RunContext.create(CFG), {"echo": tool})
        for turn, call in enumerate(calls, 1):
            icp.handle(call, turn)


def main() -> dict[str, float]:
    d = measure(direct, repeats=7)
    h = measure(through_interceptor, repeats=7)
    i = measure(lambda: through_interceptor(InlineEchoTool()), repeats=7)
    per_direct = d.median / CALLS
    print(f"[1] direct tool call:                        {d.fmt(1e6 / CALLS, 'µs/call')}")
    print(f"[1] through the interceptor, worker thread:  {h.fmt(1e6 / CALLS, 'µs/call')}")
    print(f"[1] through the interceptor, inline tool:    {i.fmt(1e6 / CALLS, 'µs/call')}")
    for label, t in (("worker thread (deadline-enforced)", h), ("inline (built-in tools)", i)):
        overhead = t.median / CALLS - per_direct
        print(f"[1] overhead, {label}: {overhead * 1e6:.1f} µs per tool call; ratio {t.median / d.median:.1f}x")
    return {"overhead_us": (h.median / CALLS - per_direct) * 1e6, "ratio": h.median / d.median}


if __name__ == "__main__":
    main()
