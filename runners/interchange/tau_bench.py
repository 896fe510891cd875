"""`import --format tau-bench FILE`: tau-bench's recorded runs (its `historical_trajectories/*.json`) as imported
case runs.

A file is a JSON list of runs `{task_id, trial, reward, info, traj}`, `traj` the run's OpenAI chat messages
(`system`, `user`, `assistant` with `tool_calls`, `tool` results answering them by `tool_call_id`). Each run is a
case run: case `task_id`, epoch `trial + 1`, run id `TASK/TRIAL`; each assistant message one model call (tau-bench
records no tokens or times: not known), the messages since the one before its transcript; each tool result one tool
call in the order it came back, failed when it starts with `Error:` (what tau-bench's environment answers a failing
action with); what the Harness would have decided of each result inferred by its rules (`_foreign_events`). Its
reward is its verdict: passed when it is 1, as tau-bench counts a task done; a passing run is expected to end in
SUCCESS.

The list is read an item at a time (`_json_stream`): memory holds one run, never the file. A file that is not that
shape is one line naming the file, the run (its position, task and trial) and the field; nothing is imported.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from runners.domain.input_files import MAX_TRACE_BYTES, InputPathError, check_input_path
from runners.interchange._event_log import opened
from runners.interchange._foreign_events import ForeignModelCall, ForeignToolCall, foreign_events
from runners.interchange._json_stream import JsonCursor, JsonStreamError
from runners.interchange._trace_values import ChatMessage, TextPart, ToolCallPart, ToolCallResponsePart
from runners.interchange.observed_runs import Contents, ObservedRun, TraceImportError
from runners.interchange.outcomes import REWARD_PASSES, RunVerdict

__all__ = ["TAU_BENCH_MODEL", "TauBenchRun", "TauBenchRuns", "read_tau_bench", "stream_tau_bench"]

TAU_BENCH_MODEL = "tau-bench agent"
"""The model a tau-bench run names (the file does not say which model ran it)."""
_FAILED = "Error:"
"""How tau-bench's environment begins the answer to an action that failed."""


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow", frozen=True)


class _Function(_Strict):
    name: Annotated[str, Field(min_length=1)]
    arguments: str


class _ToolCall(_Strict):
    id: Annotated[str, Field(min_length=1)]
    function: _Function


class _Message(_Strict):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: list[_ToolCall] | None = None
    tool_call_id: str | None = None


class _Run(_Strict):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)
    task_id: Annotated[int, Field(ge=0, le=10**9)]
    trial: Annotated[int, Field(ge=0, le=10**8)]
    reward: float | int
    info: dict[str, pydantic.JsonValue] = Field(default_factory=dict)
    traj: list[_Message]


_RUNS: pydantic.TypeAdapter[list[pydantic.JsonValue]] = pydantic.TypeAdapter(list[pydantic.JsonValue])


@dataclass(frozen=True, slots=True)
class TauBenchRuns:
    """The runs of a tau-bench file and their verdicts."""

    runs: tuple[ObservedRun, ...]
    """Every run, in file order."""
    verdicts: dict[str, RunVerdict]
    """Each run's verdict from its reward, by run id."""


def _where(loc: tuple[int | str, ...]) -> str:
    out = ""
    for item in loc:
        out += f"[{item}]" if isinstance(item, int) else f".{item}"
    return out.lstrip(".")


@dataclass(frozen=True, slots=True)
class TauBenchRun:
    """One recorded run of a tau-bench file and its verdict."""

    run: ObservedRun
    """The run."""
    verdict: RunVerdict
    """Its verdict, from its reward."""


def read_tau_bench(path: Path) -> TauBenchRuns:
    """Every run of the tau-bench file `path`, whole; else a TraceImportError naming the run and field."""
    runs: list[ObservedRun] = []
    verdicts: dict[str, RunVerdict] = {}
    for one in stream_tau_bench(path):
        runs.append(one.run)
        verdicts[one.run.run_id] = one.verdict
    return TauBenchRuns(tuple(runs), verdicts)


def stream_tau_bench(path: Path) -> Iterator[TauBenchRun]:
    """The runs of the tau-bench file `path` and their verdicts, a run at a time (the list is read an item at a time:
    memory holds one run, never the file); a TraceImportError naming the run and field at the first that is not
    one, after the runs before it were given."""
    try:
        check_input_path("", path, max_bytes=MAX_TRACE_BYTES)
    except InputPathError as exc:
        raise TraceImportError(str(exc)) from None
    seen: set[str] = set()
    with opened(path) as f:
        cursor = JsonCursor(f)
        try:
            if cursor.peek() != "[":
                raw = cursor.value()
                raise TraceImportError(f"{path}: a JSON {type(raw).__name__} where tau-bench's list of runs is due")
            for i in cursor.items("tau-bench's list of runs"):
                yield _observed(path, i, cursor.value(), seen)
            if not seen:
                raise TraceImportError(f"{path}: an empty list: no run to import")
            if cursor.peek():
                raise JsonStreamError(cursor.line, "not JSON (extra data after the list)")
        except JsonStreamError as exc:
            raise TraceImportError(f"{path}:{exc}") from None


def _observed(path: Path, i: int, item: object, seen: set[str]) -> TauBenchRun:
    """The `i`th run of the file, checked, and its verdict (`seen`: the run ids before it; its own is added)."""
    try:
        run = _Run.model_validate(item)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        named = ""
        if isinstance(item, dict):
            named = f" (task_id {str(item.get('task_id'))[:20]}, trial {str(item.get('trial'))[:20]})"
        field = _where(tuple(first["loc"])) or "the run"
        raise TraceImportError(f"{path}: run {i}{named}: {field}: {first['msg']}") from None
    where = f"{path}: run {i} (task_id {run.task_id}, trial {run.trial})"
    reward = float(run.reward)
    if not math.isfinite(reward) or not 0.0 <= reward <= 1.0:
        raise TraceImportError(f"{where}: reward: {run.reward}: must be a number from 0 to 1")
    run_id = f"{run.task_id}/{run.trial}"
    if run_id in seen:
        raise TraceImportError(f"{where}: task {run.task_id} trial {run.trial} twice in the file")
    seen.add(run_id)
    steps, contents = _steps(where, run)
    answers = [p.content for c in contents for m in c.answered or () for p in m.parts if isinstance(p, TextPart)]
    observed = ObservedRun(run_id, str(run.task_id), run.trial + 1, foreign_events(TAU_BENCH_MODEL, steps, end_ms=0.0),
                           None, answers[-1] if answers else None, contents, source=where,
                           harnessed=False)  # fmt: skip
    return TauBenchRun(observed, RunVerdict(passed=abs(reward - REWARD_PASSES) <= 1e-6, reward=reward))


def _steps(where: str, run: _Run) -> tuple[list[ForeignModelCall | ForeignToolCall], tuple[Contents, ...]]:
    """The run's model calls and tool calls in order (a tool call where its result came back), and per model call
    the messages it was given since the one before (system, user, tool results) and its answer, as the GenAI
    conventions shape them (what `show` prints). tau-bench's recorded runs reuse a call id once its call is
    answered: a result answers the open call of its id, and a reused id is stored with `~N` after it (N: its use,
    from 2), so that every call of the run has an id of its own."""
    steps: list[ForeignModelCall | ForeignToolCall] = []
    contents: list[Contents] = []
    given: list[ChatMessage] = []
    open_calls: dict[str, tuple[str, _ToolCall]] = {}
    uses: dict[str, int] = {}
    for n, m in enumerate(run.traj):
        if m.role == "assistant":
            steps.append(ForeignModelCall(t_ms=0.0))
            parts: list[TextPart | ToolCallPart] = [TextPart(type="text", content=m.content)] if m.content else []
            for call in m.tool_calls or ():
                if call.id in open_calls:
                    raise TraceImportError(f"{where}: traj[{n}].tool_calls: call id {call.id[:60]!r} asked again"
                                           " before its result came back")  # fmt: skip
                uses[call.id] = uses.get(call.id, 0) + 1
                stored = call.id if uses[call.id] == 1 else f"{call.id}~{uses[call.id]}"
                open_calls[call.id] = (stored, call)
                parts.append(ToolCallPart(type="tool_call", name=call.function.name, id=stored,
                                          arguments=call.function.arguments))  # fmt: skip
            finish = "tool_calls" if m.tool_calls else "stop"
            answer = ChatMessage(role="assistant", parts=tuple(parts), finish_reason=finish)
            contents.append(Contents(tuple(given), (answer,)))
            given = []
        elif m.role == "tool":
            if m.tool_call_id is None:
                raise TraceImportError(f"{where}: traj[{n}].tool_call_id: missing (a tool result answers a call)")
            asking = open_calls.pop(m.tool_call_id, None)
            if asking is None:
                raise TraceImportError(f"{where}: traj[{n}].tool_call_id: {m.tool_call_id[:60]!r}: no call of that"
                                       " id is waiting for its result")  # fmt: skip
            stored, call = asking
            result = m.content or ""
            steps.append(ForeignToolCall(tool_call_id=stored, tool=call.function.name,
                                         arguments=call.function.arguments, result=result,
                                         failed=result.startswith(_FAILED), t_ms=0.0))  # fmt: skip
            given.append(ChatMessage(role="tool", parts=(ToolCallResponsePart(type="tool_call_response", id=stored,
                                                                              response=result),)))  # fmt: skip
        else:
            given.append(ChatMessage(role=m.role, parts=(TextPart(type="text", content=m.content or ""),)))
    return steps, tuple(contents)
