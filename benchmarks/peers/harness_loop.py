"""harness-bench on the same loop: the Harness around a scripted model, 5 tool calls then the Draft."""

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pydantic import BaseModel, ConfigDict

from harness import DiagnosisTask, run_diagnosis
from harness.contracts import EvidenceStatus
from harness.tools.base import BusinessTool, ToolResult
from runners.domain.scripted import ScriptedChatModel, Trajectory

N = int(sys.argv[1]) if len(sys.argv) > 1 else 500
TURNS = 6


class LookupInput(BaseModel):
    """Input."""

    model_config = ConfigDict(extra="forbid")
    q: str
    """Query."""


class Lookup(BusinessTool[LookupInput]):
    """Trivial tool."""

    name = "lookup"
    description = "Look something up."
    input_model = LookupInput
    runs_inline = True  # in memory, like the peers' tools: no worker-thread hand-off

    def run(self, parsed: LookupInput) -> ToolResult:
        return ToolResult(EvidenceStatus.EVIDENCE, 1, {"q": parsed.q}, ({"text": f"result for {parsed.q}"},))


TRAJ = Trajectory.model_validate({
    "steps": [{"tool": "lookup", "input": {"q": f"q{i}"}, "gain": "GAINED"} for i in range(TURNS - 1)],
    "draft": {"conclusion": None, "missing_info": ["nothing"]},
})  # fmt: skip
tool = Lookup()
t0 = time.perf_counter()
turns = set()
for i in range(N):
    r = run_diagnosis(DiagnosisTask(f"question {i}"), [tool], ScriptedChatModel(TRAJ))
    turns.add(r.usage.model_calls)
wall = time.perf_counter() - t0
print(json.dumps({"peer": "harness_bench", "samples": N, "wall": wall, "turns_per_sample": sorted(turns)}))
