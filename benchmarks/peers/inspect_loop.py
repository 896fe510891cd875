"""Runs inside the Inspect AI venv: a 6-turn tool-calling loop with `mockllm`, N samples."""

import json
import sys
import tempfile
import time

from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.solver import generate, use_tools
from inspect_ai.tool import tool

N = int(sys.argv[1]) if len(sys.argv) > 1 else 500
TURNS = 6  # 5 tool calls, then the answer


@tool
def lookup():  # type: ignore[no-untyped-def]
    async def execute(q: str) -> str:
        """Look something up.

        Args:
            q: the query
        """
        return f"result for {q}"

    return execute


def outputs(messages, tools, tool_choice, config):  # type: ignore[no-untyped-def]
    done = sum(1 for m in messages if m.role == "tool")
    if done < TURNS - 1:
        out = ModelOutput.for_tool_call("mockllm/model", "lookup", {"q": f"q{done}"})
    else:
        out = ModelOutput.from_content("mockllm/model", "done")
    # Report usage so mockllm does not count tokens with tiktoken (which downloads its encoding).
    out.usage = ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)
    return out


task = Task(
    dataset=[Sample(input=f"question {i}", target="done") for i in range(N)],
    solver=[use_tools([lookup()]), generate()],
)
model = get_model("mockllm/model", custom_outputs=outputs)
t0 = time.perf_counter()
logs = eval(task, model=model, display="none", log_dir=tempfile.mkdtemp(), log_level="error")
wall = time.perf_counter() - t0
log = logs[0]
if log.status != "success":
    print(f"inspect eval status {log.status}: {str(log.error)[:300]}", file=sys.stderr)
    sys.exit(1)
from inspect_ai.log import read_eval_log  # noqa: E402

full = read_eval_log(log.location)
samples = full.samples or []
turns = [sum(1 for m in s.messages if m.role == "assistant") for s in samples]
print(json.dumps({"peer": "inspect_ai", "samples": len(samples), "wall": wall, "turns_per_sample": sorted(set(turns))}))
