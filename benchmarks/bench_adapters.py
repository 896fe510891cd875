"""Per-tool-call overhead of each agent-framework adapter beside the native loop.

The same scripted run (a trivial in-memory tool, TOOL_CALLS calls judged GAINED, then the Draft) goes
through `run_diagnosis`, the pydantic-ai adapter and the OpenAI Agents SDK adapter; the figure is the wall
time of a run divided by its tool calls, and the adapter's overhead is that minus the native loop's.

    python benchmarks/bench_adapters.py [--runs 200] [--repeats 5]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydantic import BaseModel, ConfigDict

from benchmarks._timing import measure
from harness import (
    BusinessTool,
    DiagnosisTask,
    HarnessConfig,
    HarnessSession,
    RunResult,
    ToolResult,
    run_diagnosis,
)
from harness.contracts import EvidenceStatus
from runners.domain.scripted import ScriptedChatModel, Trajectory


class LookupInput(BaseModel):
    """Input."""

    model_config = ConfigDict(extra="forbid")
    q: str
    """Query."""


class Lookup(BusinessTool[LookupInput]):
    """Trivial in-memory tool (no worker-thread hand-off), as in benchmarks/peers/harness_loop.py."""

    name = "lookup"
    description = "Look something up."
    input_model = LookupInput
    runs_inline = True

    def run(self, parsed: LookupInput) -> ToolResult:
        return ToolResult(EvidenceStatus.EVIDENCE, 1, {"q": parsed.q}, ({"text": f"result for {parsed.q}"},))


TOOL_CALLS = 10
CONFIG = HarnessConfig(max_tool_invocations=TOOL_CALLS + 2, max_model_calls=TOOL_CALLS + 4)
TRAJ = Trajectory.model_validate({
    "steps": [{"tool": "lookup", "input": {"q": f"q{i}"}, "gain": "GAINED"} for i in range(TOOL_CALLS)],
    "draft": {"conclusion": None, "missing_info": ["nothing"]},
})  # fmt: skip
TASK = DiagnosisTask("why?")
TOOL = Lookup()


def native() -> RunResult:
    return run_diagnosis(TASK, [TOOL], ScriptedChatModel(TRAJ), config=CONFIG)


def pydantic_ai() -> RunResult:
    from harness.adapters.pydantic_ai import run_agent

    model = ScriptedChatModel(TRAJ)
    session = HarnessSession([TOOL], model_name=model.name, config=CONFIG)
    return run_agent(session, TASK, [TOOL], model, system_prompt="You diagnose.")


def openai_agents() -> RunResult:
    from harness.adapters.openai_agents import run_agent

    model = ScriptedChatModel(TRAJ)
    session = HarnessSession([TOOL], model_name=model.name, config=CONFIG)
    return run_agent(session, TASK, [TOOL], model, system_prompt="You diagnose.")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=200, help="runs per repeat")
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    loops: dict[str, Callable[[], RunResult]] = {
        "native": native, "pydantic-ai": pydantic_ai, "openai-agents": openai_agents,
    }  # fmt: skip
    per_call: dict[str, float] = {}
    for name, loop in loops.items():
        r = loop()
        assert r.usage.tool_invocations == TOOL_CALLS, (name, r.usage)

        def batch(loop: Callable[[], RunResult] = loop) -> None:
            for _ in range(args.runs):
                loop()

        t = measure(batch, repeats=args.repeats)
        calls = args.runs * TOOL_CALLS
        per_call[name] = t.median / calls
        spread = f"min {t.low / calls * 1e6:.1f}, max {t.high / calls * 1e6:.1f}"
        print(f"{name:14} {per_call[name] * 1e6:8.1f} µs per tool call ({spread}; {args.runs}×{TOOL_CALLS} calls)")
    for name in ("pydantic-ai", "openai-agents"):
        extra = (per_call[name] - per_call["native"]) * 1e6
        print(f"{name:14} overhead {extra:8.1f} µs per tool call ({per_call[name] / per_call['native']:.1f}× native)")


if __name__ == "__main__":
    main()
