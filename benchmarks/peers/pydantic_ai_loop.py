"""Runs inside the pydantic-ai venv: a 6-turn tool-calling loop with `FunctionModel`, N samples."""

import json
import sys
import time

from pydantic_ai import Agent
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

N = int(sys.argv[1]) if len(sys.argv) > 1 else 500
TURNS = 6


def respond(messages: list, info: AgentInfo) -> ModelResponse:  # type: ignore[type-arg]
    done = sum(1 for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart))
    if done < TURNS - 1:
        return ModelResponse(parts=[ToolCallPart("lookup", {"q": f"q{done}"})])
    return ModelResponse(parts=[TextPart("done")])


agent = Agent(FunctionModel(respond))


@agent.tool_plain
def lookup(q: str) -> str:
    """Look something up."""
    return f"result for {q}"


t0 = time.perf_counter()
turns = set()
for i in range(N):
    result = agent.run_sync(f"question {i}")
    turns.add(sum(1 for m in result.all_messages() if isinstance(m, ModelResponse)))
wall = time.perf_counter() - t0
print(json.dumps({"peer": "pydantic_ai", "samples": N, "wall": wall, "turns_per_sample": sorted(turns)}))
