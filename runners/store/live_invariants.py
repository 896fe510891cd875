"""What the live check reads back from its metrics database: the facts behind its structural invariants, the
figures of what the model did, the deadline cuts, and the rows a replay is compared with.

Every query here reads; the live check decides what a fact means and words the violation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from runners.store._host import attach

__all__ = [
    "BudgetFacts",
    "DuplicateExecution",
    "LiveFigures",
    "LiveStructure",
    "Released",
    "StoredRow",
    "case_run_count",
    "comparable_rows",
    "deadline_cut_count",
    "live_figures",
    "live_structure",
]

_IDS = "(SELECT unnest(?::VARCHAR[]))"
"""The bench run ids passed as one list parameter."""


@dataclass(frozen=True, slots=True)
class BudgetFacts:
    """One live case run's outcome, its counts against their budgets, and its wall time."""

    case_run_id: str
    """The case run."""
    outcome: str | None
    """Its stored outcome, as written."""
    model_calls: int
    """Model calls made."""
    max_model_calls: int
    """The model-call budget it ran under."""
    tool_invocations: int
    """Tool invocations that reached a backend."""
    max_tool_invocations: int
    """The tool-invocation budget it ran under."""
    wall_ms: int
    """Its wall time, milliseconds."""


@dataclass(frozen=True, slots=True)
class Released:
    """How many RELEASED events one case run has (exactly one is the invariant)."""

    case_run_id: str
    """The case run."""
    released: int
    """Its RELEASED events."""


@dataclass(frozen=True, slots=True)
class DuplicateExecution:
    """A tool scope a case run executed more than once (a duplicate that reached the backend)."""

    case_run_id: str
    """The case run."""
    tool: str
    """The tool."""
    scope: str | None
    """The scope executed more than once."""
    executions: int
    """How many times it completed."""


@dataclass(frozen=True, slots=True)
class LiveStructure:
    """Every fact the structural invariants are checked on, for a set of bench runs."""

    budgets: tuple[BudgetFacts, ...]
    """Each case run's counts and wall time."""
    released: tuple[Released, ...]
    """Each case run's RELEASED count."""
    duplicates: tuple[DuplicateExecution, ...]
    """Scopes executed more than once."""
    disagreeing: tuple[str, ...]
    """Case runs whose case_runs, tool_calls and events counts disagree."""


_BUDGETS_SQL = (
    "SELECT case_run_id, outcome, model_calls, max_model_calls, tool_invocations, max_tool_invocations, wall_ms "
    "FROM case_runs JOIN ids USING (bench_run_id)"
)
_RELEASED_SQL = (
    "SELECT c.case_run_id, count(e.kind) FILTER (WHERE e.kind = 'RELEASED') FROM case_runs c "
    "JOIN ids USING (bench_run_id) LEFT JOIN events e USING (case_run_id) GROUP BY 1"
)
_DUPLICATES_SQL = (
    "SELECT case_run_id, tool, scope, count(*) FROM tool_calls JOIN ids USING (bench_run_id) "
    "WHERE invocation_status = 'COMPLETED' GROUP BY ALL HAVING count(*) > 1"
)
_DISAGREEING_SQL = """SELECT c.case_run_id FROM case_runs c JOIN ids USING (bench_run_id)
   LEFT JOIN (SELECT case_run_id, count(*) FILTER (WHERE invocation_status <> 'REJECTED') inv,
                     count(*) FILTER (WHERE invocation_status = 'REJECTED') rej
              FROM tool_calls GROUP BY 1) t USING (case_run_id)
   LEFT JOIN (SELECT case_run_id, count(*) FILTER (WHERE kind = 'TOOL_INVOCATION') inv_ev,
                     count(*) FILTER (WHERE kind = 'TOOL_REQUEST_REJECTED') rej_ev,
                     count(*) FILTER (WHERE kind = 'MODEL_CALL' AND purpose = 'DIAGNOSIS') calls
              FROM events GROUP BY 1) e USING (case_run_id)
   WHERE coalesce(t.inv, 0) <> c.tool_invocations OR coalesce(t.rej, 0) <> c.tool_rejections
      OR coalesce(e.inv_ev, 0) <> c.tool_invocations OR coalesce(e.rej_ev, 0) <> c.tool_rejections
      OR coalesce(e.calls, 0) <> c.model_calls"""


def live_structure(db: Path, bench_run_ids: Sequence[str]) -> LiveStructure:
    """The facts of these bench runs' case runs, read in one read-only connection."""
    con = attach(str(db), read_only=True)
    try:
        con.execute("CREATE TEMP TABLE ids AS SELECT unnest(?::VARCHAR[]) AS bench_run_id", [list(bench_run_ids)])
        budgets = tuple(
            BudgetFacts(str(r[0]), r[1], int(r[2]), int(r[3]), int(r[4]), int(r[5]), int(r[6]))
            for r in con.execute(_BUDGETS_SQL).fetchall()
        )
        released = tuple(Released(str(r[0]), int(r[1])) for r in con.execute(_RELEASED_SQL).fetchall())
        duplicates = tuple(
            DuplicateExecution(str(r[0]), str(r[1]), None if r[2] is None else str(r[2]), int(r[3]))
            for r in con.execute(_DUPLICATES_SQL).fetchall()
        )
        disagreeing = tuple(str(r[0]) for r in con.execute(_DISAGREEING_SQL).fetchall())
    finally:
        con.close()
    return LiveStructure(budgets, released, duplicates, disagreeing)


class LiveFigures(TypedDict):
    """What the model did under one label, derived from case_runs and events."""

    runs: int
    with_model_call: int
    with_backend_call: int
    judged: int
    gained_judgements: int
    no_gain_judgements: int
    saturated: int
    stop_required: int
    valid_draft: int
    model_calls: int
    tool_invocations: int
    rejections: int
    violations: int
    median_call_ms: float | None
    max_call_ms: float | None
    max_wall_ms: int
    total_wall_ms: int
    outcomes: str | None


FIGURES_SQL = """
WITH runs AS (SELECT * FROM case_runs WHERE label = ? AND bench_run_id IN (SELECT unnest(?::VARCHAR[]))),
agent AS (SELECT case_run_id, count(*) FILTER (WHERE gain = 'GAINED') gained,
                 count(*) FILTER (WHERE gain = 'NO_GAIN') no_gain
          FROM events WHERE kind = 'GAIN_APPLIED' AND producer = 'AGENT' GROUP BY 1),
draft AS (SELECT DISTINCT case_run_id FROM events WHERE kind = 'DRAFT_RECEIVED' AND draft_valid),
lat AS (SELECT case_run_id, latency_ms FROM events WHERE kind = 'MODEL_CALL' AND purpose = 'DIAGNOSIS'
          AND latency_ms IS NOT NULL AND error_kind IS NULL)
SELECT count(*) AS runs,
       count(*) FILTER (WHERE model_calls > 0) AS with_model_call,
       count(*) FILTER (WHERE tool_invocations > 0) AS with_backend_call,
       count(*) FILTER (WHERE agent.case_run_id IS NOT NULL) AS judged,
       coalesce(sum(agent.gained), 0) AS gained_judgements,
       coalesce(sum(agent.no_gain), 0) AS no_gain_judgements,
       count(*) FILTER (WHERE stop_reason IN ('INFORMATION_SATURATED', 'PROGRESS_PROTOCOL_VIOLATED')) AS saturated,
       count(*) FILTER (WHERE stop_required_delivered) AS stop_required,
       count(*) FILTER (WHERE draft.case_run_id IS NOT NULL) AS valid_draft,
       coalesce(sum(model_calls), 0) AS model_calls,
       coalesce(sum(tool_invocations), 0) AS tool_invocations,
       coalesce(sum(tool_rejections), 0) AS rejections,
       coalesce(sum(protocol_violations), 0) AS violations,
       (SELECT median(latency_ms) FROM lat WHERE case_run_id IN (SELECT case_run_id FROM runs)) AS median_call_ms,
       (SELECT max(latency_ms) FROM lat WHERE case_run_id IN (SELECT case_run_id FROM runs)) AS max_call_ms,
       coalesce(max(wall_ms), 0) AS max_wall_ms,
       coalesce(sum(wall_ms), 0) AS total_wall_ms,
       array_to_string(list_sort(list(outcome || coalesce('/' || stop_reason, ''))), ', ') AS outcomes
FROM runs LEFT JOIN agent USING (case_run_id) LEFT JOIN draft USING (case_run_id)
"""


def live_figures(db: Path, label: str, bench_run_ids: Sequence[str]) -> LiveFigures:
    """What the model did under one label: derived from case_runs and events, nothing else."""
    con = attach(str(db), read_only=True)
    try:
        row = con.execute(FIGURES_SQL, [label, list(bench_run_ids)]).fetchone()
    finally:
        con.close()
    assert row is not None  # an aggregate always returns one row
    (runs, with_model_call, with_backend_call, judged, gained, no_gain, saturated, stop_required, valid_draft,
     model_calls, tool_invocations, rejections, violations, median_call_ms, max_call_ms, max_wall_ms, total_wall_ms,
     outcomes) = row  # fmt: skip
    return LiveFigures(
        runs=runs, with_model_call=with_model_call, with_backend_call=with_backend_call, judged=judged,
        gained_judgements=gained, no_gain_judgements=no_gain, saturated=saturated, stop_required=stop_required,
        valid_draft=valid_draft, model_calls=model_calls, tool_invocations=tool_invocations, rejections=rejections,
        violations=violations, median_call_ms=median_call_ms, max_call_ms=max_call_ms, max_wall_ms=max_wall_ms,
        total_wall_ms=total_wall_ms, outcomes=outcomes,
    )  # fmt: skip


def case_run_count(db: Path, bench_run_ids: Sequence[str]) -> int:
    """How many case runs these bench runs stored."""
    con = attach(str(db), read_only=True)
    try:
        (count,) = con.execute(
            f"SELECT count(*) FROM case_runs WHERE bench_run_id IN {_IDS}", [list(bench_run_ids)]
        ).fetchone() or (0,)
    finally:
        con.close()
    return int(count)


def deadline_cut_count(db: Path, bench_run_ids: Sequence[str]) -> int:
    """Case runs of these bench runs the deadline stopped (BUDGET_LIMIT_REACHED / DEADLINE)."""
    if not bench_run_ids:
        return 0
    con = attach(str(db), read_only=True)
    try:
        row = con.execute(
            f"SELECT count(*) FROM case_runs WHERE budget_hit = 'DEADLINE' AND bench_run_id IN {_IDS}",
            [list(bench_run_ids)],
        ).fetchone()
    finally:
        con.close()
    return int(row[0]) if row else 0


StoredRow = dict[str, object]
"""One stored row by column name (the columns a comparison keeps)."""

COMPARED_TABLES = ("case_runs", "tool_calls", "events")
"""The tables `comparable_rows` reads: a table name is never taken from elsewhere."""


def comparable_rows(
    db: Path, table: str, bench_run_ids: Sequence[str], volatile: frozenset[str]
) -> dict[str, list[StoredRow]]:
    """Per case id, the rows of `table` for these bench runs in their stored order, without the `volatile`
    columns (those that differ by nature between two runs of the same case)."""
    if table not in COMPARED_TABLES:
        raise ValueError(f"not a comparable table: {table!r}")
    con = attach(str(db), read_only=True)
    try:
        cols = [c[0] for c in con.execute(f"DESCRIBE {table}").fetchall() if c[0] not in volatile]
        order = "seq" if "seq" in cols else "case_run_id"
        rows = con.execute(
            f"SELECT c.case_id, {', '.join(f't.{c}' for c in cols)} FROM {table} t "
            f"JOIN case_runs c USING (case_run_id) WHERE t.bench_run_id IN {_IDS} "
            f"ORDER BY c.case_id, t.{order}",
            [list(bench_run_ids)],
        ).fetchall()
    finally:
        con.close()
    out: dict[str, list[StoredRow]] = {}
    for row in rows:
        out.setdefault(str(row[0]), []).append(dict(zip(cols, row[1:], strict=True)))
    return out
