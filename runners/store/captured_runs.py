"""A stored case run as `harness-bench capture` reads it: its `case_runs` row and its transcript, typed.

The canonical records a tool returned are not stored; the transcript's observations are what the model saw
(the projection of those records, cut to the observation cap when it was exceeded), and what capture builds
a case from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import duckdb

from runners.store.catalog import has_table

__all__ = [
    "CaptureSourceError",
    "CaptureSourceProblem",
    "CapturedMessage",
    "CapturedRun",
    "RunSetting",
    "load_captured_run",
    "load_captured_runs",
]


class CaptureSourceProblem(StrEnum):
    """Why a case run cannot be captured."""

    UNKNOWN_CASE_RUN = "UNKNOWN_CASE_RUN"
    NO_TRANSCRIPT = "NO_TRANSCRIPT"


class CaptureSourceError(ValueError):
    """The case run is not in the database, or was stored without its transcript (exit 2)."""

    def __init__(self, problem: CaptureSourceProblem, message: str) -> None:
        super().__init__(message)
        self.problem = problem


@dataclass(frozen=True, slots=True)
class CapturedMessage:
    """One transcript row (prompts resolved)."""

    seq: int
    """Order within the case run."""
    purpose: str
    """DIAGNOSIS or SEMANTIC_GUARD."""
    kind: str
    """SYSTEM, USER, ASSISTANT, TOOL_CALL, OBSERVATION, MODEL_ERROR or GUARD_VERDICT."""
    model_call: int | None
    """The model call attempt that sent or produced it."""
    content: str | None
    """The text as the model saw it."""
    tool_call_id: str | None
    """TOOL_CALL / OBSERVATION: the call's id as the model gave it."""
    harness_call_id: str | None
    """TOOL_CALL: the id the Harness answered."""
    tool: str | None
    """TOOL_CALL: the tool named."""
    arguments: str | None
    """TOOL_CALL: the raw arguments text."""
    sent: bool | None
    """OBSERVATION: whether it reached the model."""
    invocation_status: str | None
    """TOOL_CALL: COMPLETED, FAILED or REJECTED."""
    rejection: str | None
    """TOOL_CALL: the rejection reason."""
    violation: str | None
    """TOOL_CALL: the protocol violation."""
    stop_required: bool | None
    """TOOL_CALL: its answer delivered STOP_REQUIRED."""
    guard: str | None
    """GUARD_VERDICT: which guard."""
    verdict: str | None
    """GUARD_VERDICT: its verdict."""


@dataclass(frozen=True, slots=True)
class RunSetting:
    """One setting the run used (a `case_runs` settings column, or a trace's `harness.config.*`)."""

    name: str
    """The setting's public name (`no_gain_threshold`, `max_tool_invocations`, …)."""
    value: int | float | str | bool
    """Its value in that run."""


@dataclass(frozen=True, slots=True)
class CapturedRun:
    """A case run's identity, result and counts, and its transcript."""

    case_run_id: str
    """Its id."""
    bench_run_id: str
    """Its bench run."""
    case_id: str
    """The case it ran."""
    family: str | None
    """The case's family."""
    model: str | None
    """The model it ran with."""
    label: str | None
    """Its bench run's label."""
    outcome: str | None
    """The Release outcome."""
    fallback_kind: str | None
    """FALLBACK only: which."""
    stop_reason: str | None
    """The stop reason, if any."""
    conclusion: str | None
    """The released conclusion."""
    model_calls: int
    """Diagnosis model call attempts."""
    tool_invocations: int
    """Backend invocations."""
    no_gain_count: int
    """NO_GAIN applications."""
    gained_count: int
    """GAINED applications."""
    stop_required_deliveries: int
    """STOP_REQUIRED observations handed to the model."""
    messages: tuple[CapturedMessage, ...]
    """The transcript, in order."""
    settings: tuple[RunSetting, ...] = ()
    """The settings the run used that a replay needs (what it was measured at)."""
    agent: str | None = None
    """The agent loop it ran under (`native`, `plain`, …; None: native, stored before the column existed)."""


_RUN = """SELECT case_run_id, bench_run_id, case_id, family, model, label, outcome, fallback_kind, stop_reason,
       conclusion, coalesce(model_calls, 0), coalesce(tool_invocations, 0), coalesce(no_gain_count, 0),
       coalesce(gained_count, 0), coalesce(stop_required_deliveries, stop_required_delivered::INT, 0),
       (SELECT b.agent FROM bench_runs b WHERE b.bench_run_id = case_runs.bench_run_id)
FROM case_runs WHERE case_run_id IN (SELECT unnest(?))"""
_MESSAGES = """SELECT m.case_run_id, m.seq, m.purpose, m.kind, m.model_call, coalesce(m.content, p.content),
       m.tool_call_id, m.harness_call_id, m.tool, m.arguments, m.sent, m.invocation_status, m.rejection, m.violation,
       m.stop_required, m.guard, m.verdict
FROM messages m LEFT JOIN prompts p USING (prompt_hash) WHERE m.case_run_id IN (SELECT unnest(?))
ORDER BY m.case_run_id, m.seq"""


def load_captured_run(con: duckdb.DuckDBPyConnection, db: str, case_run_id: str) -> CapturedRun:
    """The case run `case_run_id` with its transcript; CaptureSourceError when it is unknown or has none."""
    return load_captured_runs(con, db, [case_run_id])[0]


def load_captured_runs(con: duckdb.DuckDBPyConnection, db: str, case_run_ids: Sequence[str]) -> list[CapturedRun]:
    """Each case run of `case_run_ids` with its transcript, in that order, in four queries whatever their number
    (each query's fixed cost is most of reading one run); CaptureSourceError for the first that is unknown or has
    none."""
    ids = list(case_run_ids)
    rows = {str(r[0]): r for r in con.execute(_RUN, [ids]).fetchall()}
    found: dict[str, list[CapturedMessage]] = {}
    if has_table(con, "messages"):
        for m in con.execute(_MESSAGES, [ids]).fetchall():
            found.setdefault(str(m[0]), []).append(CapturedMessage(int(m[1]), str(m[2]), str(m[3]), *m[4:]))
    for case_run_id in ids:
        if case_run_id not in rows:
            raise CaptureSourceError(
                CaptureSourceProblem.UNKNOWN_CASE_RUN,
                f"CASE_RUN_ID {case_run_id!r}: no such case run in {db} (ids are BENCH_RUN_ID/CASE/EPOCH, as `run`"
                " prints)",
            )
        if case_run_id not in found:
            raise CaptureSourceError(
                CaptureSourceProblem.NO_TRANSCRIPT,
                f"CASE_RUN_ID {case_run_id!r}: no transcript stored in {db} (run with --no-transcripts or before"
                " transcripts were stored); run the case again without --no-transcripts to capture it",
            )
    from runners.plan.settings import case_run_columns

    names = [name for name, _ in case_run_columns()]
    values = {
        str(r[0]): r[1:]
        for r in con.execute(
            f"SELECT case_run_id, {', '.join(names)} FROM case_runs WHERE case_run_id IN (SELECT unnest(?))", [ids]
        ).fetchall()
    }
    out = []
    for case_run_id in ids:
        row = rows[case_run_id]
        settings = tuple(RunSetting(n, v) for n, v in zip(names, values[case_run_id], strict=True) if v is not None)
        out.append(CapturedRun(
            str(row[0]), str(row[1]), str(row[2]), row[3], row[4], row[5], row[6], row[7], row[8], row[9],
            int(row[10]), int(row[11]), int(row[12]), int(row[13]), int(row[14]), tuple(found[case_run_id]), settings,
            None if row[15] is None else str(row[15]),
        ))  # fmt: skip
    return out
