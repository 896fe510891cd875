"""What `capture` reads of the tools a run offered (their names; the database tool's tables) and makes of a suite's
run: each call of a declared tool as a fixture of the case's results (its input as the match, what the observation
showed as the output, a failure as an error).

The records are what the model was shown (an observation is capped), so a fixture holds those lines, not the tool's
whole output; the replay shows the same lines again for the same arguments.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from harness import EntryKind, InvocationStatus, JsonValue
from runners.domain.case_model import TOOL_NAMES
from runners.domain.suite import SuiteSpec
from runners.domain.tools.db_query import tables_in_description
from runners.store.captured_runs import CapturedMessage

__all__ = ["CaptureError", "SuiteCall", "offered_tables", "offered_tools", "suite_fields", "suite_results"]


class CaptureError(ValueError):
    """The run cannot be made into a case (exit 2); the message names what is missing."""


@dataclass(frozen=True, slots=True)
class SuiteCall:
    """One call of a declared tool, as the transcript holds it."""

    tool: str
    """The tool called."""
    status: str | None
    """Its invocation status (COMPLETED, FAILED; None: never reached the backend)."""
    input: dict[str, JsonValue] | None
    """Its business input (None: not sent whole)."""
    observation: dict[str, JsonValue] | None
    """The observation that answered it."""


def _line(record: JsonValue) -> str:
    if isinstance(record, dict) and set(record) == {"line"} and isinstance(record["line"], str):
        return record["line"]
    return json.dumps(record, ensure_ascii=False, sort_keys=True)


def suite_results(calls: Sequence[SuiteCall]) -> list[JsonValue]:
    """The case's `fixtures.results`: one per call that reached the backend, in order."""
    out: list[JsonValue] = []
    for call in calls:
        obs = call.observation or {}
        if call.input is None:
            continue
        if call.status == InvocationStatus.FAILED.value:
            error = str(obs.get("error") or "backend failed").removeprefix("ToolExecutionError: ")
            out.append({"tool": call.tool, "match": dict(call.input), "status": "error", "error": error})
        elif call.status == InvocationStatus.COMPLETED.value:
            records = obs.get("records")
            text = "\n".join(line for r in (records if isinstance(records, list) else []) if (line := _line(r)).strip())
            fixture: dict[str, JsonValue] = {"tool": call.tool, "match": dict(call.input)}
            fixture.update({"output": text} if text else {"status": "no_data"})
            out.append(fixture)
    return out


def offered_tools(tools_entry: str | None) -> list[JsonValue] | None:
    """The names of the tools the run offered (its TOOLS entry; None when the transcript has none: all of them)."""
    try:
        offered = json.loads(tools_entry or "")
    except ValueError:
        return None
    names = (
        [t["name"] for t in offered if isinstance(t, dict) and isinstance(t.get("name"), str)]
        if isinstance(offered, list)
        else []
    )
    return names or None


def suite_fields(
    case_run_id: str,
    suite: SuiteSpec | None,
    calls: Sequence[SuiteCall],
    tools_entry: str | None,
    fixtures: dict[str, JsonValue],
) -> dict[str, JsonValue]:
    """The captured case's suite and offered tools, its declared tools' calls added to `fixtures` as its results;
    CaptureError when the run called tools the bench does not have and no suite declares them."""
    ran = (InvocationStatus.COMPLETED.value, InvocationStatus.FAILED.value)  # a call refused never named a real tool
    declared = [c for c in calls if c.tool not in TOOL_NAMES and c.status in ran]
    if suite is None:
        if declared:
            raise CaptureError(
                f"case run {case_run_id!r} called a suite's tools ({', '.join(sorted({c.tool for c in declared}))}):"
                " write it into the suite's folder (--out DIR/FILE.yaml, DIR holding the suite.yaml declaring them)"
            )
        return {}
    fixtures["results"] = suite_results(declared)
    return {"suite": suite.model_dump(mode="json", exclude_none=True), "tools": offered_tools(tools_entry)}


def offered_tables(messages: Sequence[CapturedMessage]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The tables (and columns) the database tool's description listed, as the run was shown them (its TOOLS entry;
    nothing when the transcript has none)."""
    for m in messages:
        if m.kind != EntryKind.TOOLS.value or not m.content:
            continue
        try:
            offered = json.loads(m.content)
        except ValueError:
            continue
        for tool in offered if isinstance(offered, list) else []:
            if isinstance(tool, dict) and tool.get("name") == "db_query" and isinstance(tool.get("description"), str):
                return tables_in_description(tool["description"])
    return ()
