"""Runs observed elsewhere as the bench stores them: each `ObservedRun` as a `RunResult` (its outcome from RELEASED,
its usage counted from its events, its transcript as far as the source carries messages) and as the rows of a case
run (`runners.store.schema`), with the verdict `--outcomes` gives it or none. Every number checked to fit its column
before a database is opened."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from harness import (
    BudgetExhausted,
    BudgetUsage,
    EntryKind,
    ModelCall,
    ModelPurpose,
    Released,
    ReleaseDecision,
    ReleaseOutcome,
    RunResult,
    RunStarted,
    ToolInvocation,
    ToolRequestRejected,
    TranscriptEntry,
    parse_draft,
)
from runners.interchange._trace_values import INT64_MAX, TextPart, ToolCallPart, ToolCallResponsePart
from runners.interchange.observed_runs import Contents, ObservedRun, TraceImportError, short
from runners.interchange.outcomes import RunVerdict

if TYPE_CHECKING:
    from runners.plan.settings import SettingValue
    from runners.store.schema import CaseRunRows

__all__ = ["import_rows", "observed_result"]


def observed_result(run: ObservedRun) -> RunResult:
    """The run as a `RunResult`: the outcome from RELEASED, the usage counted from its events."""
    released = run.events[-1]
    assert isinstance(released, Released)  # read_traces returns whole runs only
    calls = [e for e in run.events if isinstance(e, ModelCall)]
    budgets = [e for e in run.events if isinstance(e, BudgetExhausted)]
    usage = BudgetUsage(
        model_calls=sum(c.purpose is ModelPurpose.DIAGNOSIS for c in calls),
        guard_calls=sum(c.purpose is ModelPurpose.SEMANTIC_GUARD for c in calls),
        tool_invocations=sum(isinstance(e, ToolInvocation) for e in run.events),
        input_tokens=sum(c.input_tokens or 0 for c in calls),
        output_tokens=sum(c.output_tokens or 0 for c in calls),
        observation_bytes=sum(e.observation_bytes for e in run.events if isinstance(e, ToolInvocation)),
        budget_hit=budgets[0].budget if budgets else None,
    )
    failed = [c for c in calls if c.error_kind is not None]
    draft = None
    if released.outcome is ReleaseOutcome.SUCCESS and run.final_text is not None:  # only SUCCESS publishes it
        draft = parse_draft(run.final_text).draft
    decision = ReleaseDecision(released.outcome, released.fallback_kind, released.stop_reason, draft, None, None,
                               released.detail or "")  # fmt: skip
    last = failed[-1] if failed and failed[-1] is calls[-1] else None
    return RunResult(run.run_id, decision, usage, run.events, sum(c.error_kind is None for c in calls), None,
                     last.detail if last else None, released.t_ms,
                     error_kind=last.error_kind if last else None, transcript=_transcript(run))  # fmt: skip


_ROLES = {"system": EntryKind.SYSTEM, "user": EntryKind.USER, "tool": EntryKind.OBSERVATION}


def _extra_text(part: Any, key: str) -> str | None:
    """A string field a part of another type carries beyond its `type` (None: absent or not a string)."""
    value = (part.model_extra or {}).get(key)
    return value if isinstance(value, str) else None


def _given_text(part: Any) -> str | None:
    """What a part sent to the model says: a text's content, a tool answer's response when it is text."""
    if isinstance(part, TextPart):
        return part.content
    if isinstance(part, ToolCallResponsePart):
        return part.response if isinstance(part.response, str) else None
    return _extra_text(part, "content")


def _part_id(part: Any) -> str | None:
    if isinstance(part, ToolCallPart | ToolCallResponsePart):
        return part.id
    return _extra_text(part, "id")


def _arguments(part: ToolCallPart) -> str | None:
    """A tool call's arguments as stored: the text the model sent, or a JSON value written as JSON."""
    args = part.arguments
    return args if isinstance(args, str) or args is None else json.dumps(args, ensure_ascii=False)


def _offered(definitions: str | None) -> str | None:
    """A TOOLS entry's content (`[{"name", "description"}]`) from `gen_ai.tool.definitions` (None: none given)."""
    if definitions is None:
        return None
    try:
        parsed = json.loads(definitions)
    except (ValueError, RecursionError):
        return None
    tools = [{"name": str(d.get("name")), "description": str(d.get("description") or "")}
             for d in (parsed if isinstance(parsed, list) else []) if isinstance(d, dict)]  # fmt: skip
    return json.dumps(tools, ensure_ascii=False, separators=(",", ":")) if tools else None


def _transcript(run: ObservedRun) -> tuple[TranscriptEntry, ...]:
    """What the model was sent and answered, as far as the trace says: with message contents, every message of
    every call; without, one entry per model answer or failure and per tool call (no text), so each tool call's
    decision has its place."""
    out: list[TranscriptEntry] = []

    def add(purpose: ModelPurpose, kind: EntryKind, call: int, content: str | None, **fields: Any) -> None:
        out.append(TranscriptEntry(len(out), purpose, kind, call, content, **fields))

    contents = iter(run.contents)
    call = diagnosis_call = 0
    for e in run.events:
        if isinstance(e, ModelCall):
            call += 1
            if e.purpose is ModelPurpose.DIAGNOSIS:
                diagnosis_call = call
            carried = next(contents, Contents(None, None))
            offered = _offered(carried.tools)
            if offered is not None:
                add(e.purpose, EntryKind.TOOLS, call, offered)
            for m in carried.given or ():
                kind = _ROLES.get(m.role)
                if kind is None:
                    continue  # an assistant's own earlier words, or a role the transcript has no entry for
                for part in m.parts:
                    add(e.purpose, kind, call, _given_text(part),
                        tool_call_id=_part_id(part) if kind is EntryKind.OBSERVATION else None)  # fmt: skip
            if e.error_kind is not None:
                add(e.purpose, EntryKind.MODEL_ERROR, call, e.detail, error_kind=e.error_kind)
                continue
            answer = [m for m in carried.answered or () if m.role == "assistant"]
            texts = [p.content for m in answer for p in m.parts if isinstance(p, TextPart)]
            add(e.purpose, EntryKind.ASSISTANT, call, texts[0] if texts else None,
                input_tokens=e.input_tokens, output_tokens=e.output_tokens,
                finish_reason=answer[0].finish_reason if answer else None)  # fmt: skip
            for m in answer:
                for p in m.parts:
                    if isinstance(p, ToolCallPart):
                        add(e.purpose, EntryKind.TOOL_CALL, call, None, tool_call_id=p.id, tool=p.name,
                            arguments=_arguments(p))  # fmt: skip
        elif isinstance(e, ToolInvocation | ToolRequestRejected) and not run.contents:
            add(ModelPurpose.DIAGNOSIS, EntryKind.TOOL_CALL, diagnosis_call, None, tool_call_id=e.tool_call_id,
                tool=e.tool)  # fmt: skip
    return tuple(out)


def import_rows(
    runs: Sequence[ObservedRun], bench_run_id: str, label: str, verdicts: Mapping[str, RunVerdict] | None = None
) -> list[tuple[CaseRunRows, tuple[list[tuple[Any, ...]], dict[str, str]]]]:
    """Every table's rows of the runs, as the bench stores a case run (`runners.store.schema`): case run
    `BENCH/CASE/EPOCH` with the run's own thresholds and budgets where its trace names them, and the verdict
    `verdicts` gives its run id (`--outcomes`; none: held to no expectation); each with its `messages` rows and
    prompts (`runners.store.transcripts.transcript_rows`)."""
    from runners.run.bench import case_run_id
    from runners.run.case_runner import metrics_of
    from runners.store.schema import observed_case_run_rows
    from runners.store.transcripts import transcript_rows

    out = []
    for run in runs:
        result = observed_result(run)
        started = run.events[0]
        assert isinstance(started, RunStarted)
        lim = run.limits
        swept: dict[str, SettingValue] = {
            "no_gain_threshold": lim.no_gain_threshold if lim else None,
            "protocol_violation_threshold": lim.protocol_violation_threshold if lim else None,
            "max_model_calls": lim.max_model_calls if lim else None,
            "max_tool_invocations": lim.max_tool_invocations if lim else None,
            "max_total_tokens": lim.max_total_tokens if lim else None,
            "schema_mode": lim.schema_mode if lim else None,
        }
        rows = observed_case_run_rows(bench_run_id, case_run_id(bench_run_id, run.case_id, run.epoch), run.case_id,
                                      started.model, label, run.epoch, swept, result, metrics_of(result))  # fmt: skip
        if any(isinstance(e, ToolRequestRejected) for e in run.events):
            # a rejection's answer has a size too, which no event records: the run's total is not known
            rows = dataclasses.replace(rows, case_run={**rows.case_run, "observation_bytes": None})
        if not run.harnessed:  # another agent's gain tags were never given: how many gained is not known
            rows = dataclasses.replace(rows, case_run={**rows.case_run, "gained_count": None})
        verdict = (verdicts or {}).get(run.run_id)
        if verdict is not None:
            rows = dataclasses.replace(rows, case_run={**rows.case_run, **verdict.columns()})
        transcript = transcript_rows(bench_run_id, str(rows.case_run["case_run_id"]), result)
        _storable(run, rows, transcript[0])
        out.append((rows, transcript))
    return out


def _storable(run: ObservedRun, rows: CaseRunRows, messages: Sequence[tuple[Any, ...]]) -> None:
    """Every number the run's rows hold fits its column (a BIGINT, a finite DOUBLE) — what the readers' checks
    already ensure, checked once more on what is about to be written, so that no value the database cannot hold
    is found after it has been opened."""
    cells: list[tuple[str, object]] = [(f"case_runs.{k}", v) for k, v in rows.case_run.items()]
    cells += [(f"tool_calls.{f.name}", getattr(r, f.name)) for r in rows.tool_calls for f in dataclasses.fields(r)]
    cells += [("events", v) for row in rows.events for v in row]
    cells += [("messages", v) for row in messages for v in row]
    for column, value in cells:
        if isinstance(value, bool):
            continue
        if (isinstance(value, int) and not -(2**63) <= value <= INT64_MAX) or (
            isinstance(value, float) and not math.isfinite(value)
        ):
            raise TraceImportError(f"{run.source}: run {short(run.run_id)}: {column} would be {value}, which the"
                                   " database cannot store")  # fmt: skip
