"""The rows of the metrics tables as the writer stores them: one row type per table written case run by case run,
each table's column list derived from it (the table itself is created by the migrations, `migrations.py`; a test
keeps the two in step).

`case_runs` has one column per sweepable setting besides the fixed ones, so its row is keyed by column; the
`events` columns are every field of every event class (`event_columns`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime

from harness import (
    EVENT_TYPES,
    GainApplied,
    InvocationStatus,
    RunResult,
    ToolInvocation,
    ToolRequestRejected,
    TraceEvent,
)
from runners.domain.case_run import CaseMetrics, CaseRun
from runners.plan import settings

__all__ = [
    "EVENT_COLUMNS", "OBSERVED_FAMILY", "TOOL_CALL_COLUMNS", "CaseRunRows", "ToolCallRow", "case_run_rows",
    "event_columns", "observed_case_run_rows",
]  # fmt: skip


def event_columns(types: Sequence[type[TraceEvent]] = EVENT_TYPES) -> tuple[str, ...]:
    """The `events` table's columns: `kind`, then the union of the fields of every event class of `types`, in
    first-seen order."""
    names: list[str] = ["kind"]
    for cls in types:
        for f in fields(cls):
            if f.name not in names:
                names.append(f.name)
    return tuple(names)


EVENT_COLUMNS: tuple[str, ...] = event_columns()
"""The events table's columns after the two ids: every field of every event class (harness.EVENT_TYPES)."""


@dataclass(frozen=True, slots=True)
class ToolCallRow:
    """One `tool_calls` row: a tool request (invocation or rejection), with the gain applied *to* that call."""

    bench_run_id: str
    """The bench run."""
    case_run_id: str
    """The case run."""
    seq: int
    """The request's event sequence number in the trace."""
    tool_call_id: str | None
    """The call id the Harness answered."""
    tool: str | None
    """The tool asked for."""
    scope: str | None
    """The scope asked for."""
    invocation_status: str | None
    """COMPLETED | FAILED | REJECTED."""
    evidence_status: str | None
    """The evidence status of an invocation."""
    result_count: int | None
    """Results an invocation returned."""
    gain: str | None
    """The gain applied to this call."""
    gain_producer: str | None
    """Who applied it."""
    rejection_reason: str | None
    """Why a rejected request was rejected."""
    violation: str | None
    """The protocol violation of a rejected request."""
    observation_bytes: int | None
    """Observation bytes of an invocation."""
    truncated: bool | None
    """Whether an invocation's observation was truncated."""
    latency_ms: float | None
    """An invocation's backend latency."""
    carries_evidence: bool | None
    """Whether a completed invocation's records carry the case's evidence (the truth its gain tag is scored
    against); None where it is not known (a rejection, a failure, an imported run)."""

    def cells(self) -> tuple[object, ...]:
        """The row's values in `TOOL_CALL_COLUMNS` order."""
        return tuple(getattr(self, name) for name in TOOL_CALL_COLUMNS)


TOOL_CALL_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(ToolCallRow))
"""The `tool_calls` columns, in table order."""


@dataclass(frozen=True, slots=True)
class CaseRunRows:
    """Every row one case run stores, written in one transaction."""

    case_run: Mapping[str, object]
    """The `case_runs` row by column (the fixed columns and one per sweepable setting)."""
    tool_calls: tuple[ToolCallRow, ...]
    """Its `tool_calls` rows."""
    events: tuple[tuple[object, ...], ...]
    """Its `events` rows: the two ids, then `EVENT_COLUMNS`."""


def _enum(v: object) -> object:
    """An enum as its stored value; any other value as it is."""
    return getattr(v, "value", v)


def case_run_rows(
    bench_run_id: str, case_run_id: str, model: str, label: str | None, epoch: int,
    swept: Mapping[str, settings.SettingValue], run: CaseRun,
) -> CaseRunRows:  # fmt: skip
    """The case_runs row, tool_calls rows and events rows of one case run (`swept`: the sweepable settings)."""
    exp = run.case.expect
    verdict: dict[str, object] = {
        "expected_outcome": exp.outcome.value, "expected_fallback_kind": _enum(exp.fallback_kind),
        "expected_stop_reason": _enum(exp.stop_reason), "passed": run.passed,
        "outcome_passed": run.verdicts.outcome_passed, "trajectory_passed": run.verdicts.trajectory_passed,
        "failures": json.dumps(list(run.failures), ensure_ascii=False) if run.failures else None,
    }  # fmt: skip
    return _rows(bench_run_id, case_run_id, run.case.id, run.case.family, model, label, epoch, swept,
                 run.result, run.metrics, verdict, run.evidence_calls)  # fmt: skip


OBSERVED_FAMILY = "observed"
"""The `family` of an imported case run (a run observed elsewhere belongs to no family of the evaluation set)."""


def observed_case_run_rows(
    bench_run_id: str, case_run_id: str, case_id: str, model: str, label: str | None, epoch: int,
    swept: Mapping[str, settings.SettingValue], result: RunResult, metrics: CaseMetrics,
) -> CaseRunRows:  # fmt: skip
    """The rows of a case run observed elsewhere (imported from its trace): a bench case run's rows without its
    verdict (`expected_*`, `passed`, `failures` NULL: it was held to no expectation)."""
    verdict = dict.fromkeys(("expected_outcome", "expected_fallback_kind", "expected_stop_reason", "passed",
                             "outcome_passed", "trajectory_passed", "failures"))  # fmt: skip
    return _rows(bench_run_id, case_run_id, case_id, OBSERVED_FAMILY, model, label, epoch, swept, result, metrics,
                 verdict, None)  # fmt: skip


def _rows(
    bench_run_id: str, case_run_id: str, case_id: str, family: str, model: str, label: str | None, epoch: int,
    swept: Mapping[str, settings.SettingValue], r: RunResult, m: CaseMetrics, verdict: Mapping[str, object],
    evidence: frozenset[str] | None,
) -> CaseRunRows:  # fmt: skip
    d = r.decision
    case_row: dict[str, object] = {
        "bench_run_id": bench_run_id, "case_run_id": case_run_id, "case_id": case_id,
        "family": family, "model": model, "label": label, "epoch": epoch, **swept,
        "outcome": d.outcome.value, "fallback_kind": _enum(d.fallback_kind), "stop_reason": _enum(d.stop_reason),
        **verdict,
        "model_calls": m.model_calls, "guard_calls": m.guard_calls, "tool_invocations": m.tool_invocations,
        "failed_invocations": m.failed_invocations, "tool_rejections": m.tool_rejections,
        "duplicate_scope_rejections": m.duplicate_scope_rejections, "protocol_violations": m.protocol_violations,
        "no_gain_count": m.no_gain_count, "gained_count": m.gained_count,
        "stop_required_delivered": m.stop_required_delivered, "wasted_invocations": m.wasted_invocations,
        "awaiting_rejections": m.awaiting_rejections, "stop_required_deliveries": m.stop_required_deliveries,
        "observation_bytes": m.observation_bytes, "budget_hit": _enum(m.budget_hit),
        "text_tool_calls": m.text_tool_calls,
        "input_tokens": m.input_tokens, "output_tokens": m.output_tokens, "wall_ms": r.wall_ms,
        "reason": d.reason[:500], "conclusion": (d.draft.conclusion if d.draft else None),
        "error": r.error, "error_kind": _enum(r.error_kind),
        "finished_at": datetime.now(UTC).replace(tzinfo=None),
    }  # fmt: skip
    events = tuple((bench_run_id, case_run_id, *(_enum(getattr(e, c, None)) for c in EVENT_COLUMNS)) for e in r.events)
    return CaseRunRows(case_row, _tool_call_rows(bench_run_id, case_run_id, r.events, evidence), events)


def _tool_call_rows(
    bench_run_id: str, case_run_id: str, events: Sequence[TraceEvent], evidence: frozenset[str] | None
) -> tuple[ToolCallRow, ...]:
    """One row per tool request: invocation or rejection, with the gain applied *to* that call and, for a completed
    invocation of a judged run, whether its records carry the case's evidence."""
    gains = {e.tool_call_id: e for e in events if isinstance(e, GainApplied)}
    rows: list[ToolCallRow] = []
    for e in events:
        if not isinstance(e, ToolInvocation | ToolRequestRejected):
            continue
        g = gains.get(e.tool_call_id)
        invoked = e if isinstance(e, ToolInvocation) else None
        rejected = e if isinstance(e, ToolRequestRejected) else None
        rows.append(ToolCallRow(
            bench_run_id=bench_run_id, case_run_id=case_run_id, seq=e.seq, tool_call_id=e.tool_call_id, tool=e.tool,
            scope=e.scope, invocation_status=_str(e.invocation_status),
            evidence_status=_str(invoked.evidence_status) if invoked else None,
            result_count=invoked.count if invoked else None,
            gain=_str(g.gain) if g else None, gain_producer=_str(g.producer) if g else None,
            rejection_reason=_str(rejected.rejection) if rejected else None,
            violation=_str(rejected.violation) if rejected else None,
            observation_bytes=invoked.observation_bytes if invoked else None,
            truncated=invoked.truncated if invoked else None, latency_ms=invoked.latency_ms if invoked else None,
            carries_evidence=(e.tool_call_id in evidence if evidence is not None and invoked is not None
                              and invoked.invocation_status is InvocationStatus.COMPLETED else None),
        ))  # fmt: skip
    return tuple(rows)


def _str(value: object) -> str | None:
    """An enum (or text) cell as its stored text."""
    stored = _enum(value)
    return None if stored is None else str(stored)
