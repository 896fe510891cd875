"""The reads of the analysis (`report`, `recommend`, the real-models report, the Inspect and OpenTelemetry exports),
as named queries returning typed rows: per-family counts and tool requests of one bench run or sweep configuration,
the bench runs a report covers, every case run of a sweep with its configuration, the per-threshold counts of a
label, and the stored rows the exports read by column. Parameters, never SQL text, cross this boundary; a schema
change is made here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import duckdb

from harness import ReleaseOutcome, StopReason
from runners.plan.settings import SettingValue, swept_names

__all__ = [
    "BenchRunScope",
    "BenchRunSummary",
    "CaseRunScope",
    "FamilyCounts",
    "LabelCaseRun",
    "StoredRow",
    "SweepCaseRun",
    "SweepPointScope",
    "ThresholdCounts",
    "ToolRequests",
    "bench_run_rows",
    "bench_run_summaries",
    "case_run_rows_of",
    "family_counts",
    "label_case_runs_at",
    "sweep_case_runs",
    "threshold_counts",
    "tool_requests",
]


# -- which case runs ------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class BenchRunScope:
    """The case runs of one bench run."""

    bench_run_id: str
    """The bench run."""


@dataclass(frozen=True, slots=True)
class SweepPointScope:
    """The case runs of one configuration of a sweep."""

    sweep_id: str
    """The sweep."""
    config: tuple[SettingValue, ...]
    """A value per swept setting, in declaration order."""


CaseRunScope = BenchRunScope | SweepPointScope
"""The case runs a per-family table or a tool-request histogram covers."""


def _where(scope: CaseRunScope) -> tuple[str, list[object]]:
    """The filter over `case_runs c JOIN bench_runs b` that selects `scope`, and its parameters."""
    if isinstance(scope, BenchRunScope):
        return "b.bench_run_id = ?", [scope.bench_run_id]
    columns = swept_names()  # the one settings declaration: an allowlist of column names
    if len(scope.config) != len(columns):
        raise ValueError(f"a configuration has {len(columns)} values ({', '.join(columns)}), not {len(scope.config)}")
    # NULL-safe: case runs stored before a setting was declared hold NULL for it (and their point says so)
    config = " AND ".join(f"c.{c} IS NOT DISTINCT FROM ?" for c in columns)
    return f"b.sweep_id = ? AND {config}", [scope.sweep_id, *scope.config]


# -- the report ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class FamilyCounts:
    """One family of the case runs of a scope: the report's per-family table."""

    family: str
    """Family name."""
    cases: int
    """Distinct cases."""
    case_runs: int
    """Case runs."""
    pass_rate: float | None
    """Share of case runs that met their expectations, rounded to 3 places."""
    success: int
    """Case runs released as SUCCESS."""
    fallback: int
    """Case runs released as FALLBACK."""
    failed: int
    """Case runs released as anything else (FAILED, CANCELLED)."""
    saturated: int
    """Case runs the Harness stopped as information saturated."""
    budget: int
    """Case runs stopped at a budget."""
    protocol: int
    """Case runs stopped for protocol violations."""
    on_its_own: int
    """Case runs without a Harness stop."""
    mean_tool_invocations: float | None
    """Mean tool invocations, rounded to 2 places."""
    mean_rejections: float | None
    """Mean rejected tool requests, rounded to 2 places."""
    mean_wasted: float | None
    """Mean wasted invocations, rounded to 2 places."""
    outcome_pass_rate: float | None = None
    """Share of case runs that passed the outcome verdict (None: no verdict stored), rounded to 3 places."""
    trajectory_pass_rate: float | None = None
    """Share of the case runs judged on the trajectory that passed it (None: none was judged), rounded to 3 places."""
    bench_failures: int = 0
    """Case runs that ended on the bench's failure, not the model's (a model call timed out on a loaded machine, was
    refused, 5xx, a cassette miss: runners/run/verdict.py): unjudged, and left out of every pass rate above."""


_FAMILY_COUNTS = """
    SELECT family, count(DISTINCT case_id) AS cases, count(*) AS case_runs,
           round(avg(passed::INT), 3) AS pass_rate,
           count(*) FILTER (WHERE outcome = 'SUCCESS') AS success,
           count(*) FILTER (WHERE outcome = 'FALLBACK') AS fallback,
           count(*) FILTER (WHERE outcome NOT IN ('SUCCESS', 'FALLBACK')) AS failed,
           count(*) FILTER (WHERE stop_reason = 'INFORMATION_SATURATED') AS saturated,
           count(*) FILTER (WHERE stop_reason = 'BUDGET_LIMIT_REACHED') AS budget,
           count(*) FILTER (WHERE stop_reason = 'PROGRESS_PROTOCOL_VIOLATED') AS protocol,
           count(*) FILTER (WHERE stop_reason IS NULL) AS on_its_own,
           round(avg(tool_invocations), 2) AS mean_tool_invocations,
           round(avg(tool_rejections), 2) AS mean_rejections,
           round(avg(wasted_invocations), 2) AS mean_wasted,
           round(avg(outcome_passed::INT), 3) AS outcome_pass_rate,
           round(avg(trajectory_passed::INT), 3) AS trajectory_pass_rate,
           -- the verdict leaves the bench's failures unjudged (passed NULL); an imported run has no expectation
           count(*) FILTER (WHERE passed IS NULL AND expected_outcome IS NOT NULL) AS bench_failures
    FROM case_runs c JOIN bench_runs b USING (bench_run_id)
    WHERE {where}
    GROUP BY family ORDER BY family
"""


def family_counts(con: duckdb.DuckDBPyConnection, scope: CaseRunScope) -> tuple[FamilyCounts, ...]:
    """Per family of the case runs of `scope`, by family: cases, pass rate, outcome mix, stop reasons, means."""
    where, params = _where(scope)
    rows = con.execute(_FAMILY_COUNTS.format(where=where), params).fetchall()
    return tuple(
        FamilyCounts(
            family=str(r[0]), cases=int(r[1]), case_runs=int(r[2]), pass_rate=_float(r[3]), success=int(r[4]),
            fallback=int(r[5]), failed=int(r[6]), saturated=int(r[7]), budget=int(r[8]), protocol=int(r[9]),
            on_its_own=int(r[10]), mean_tool_invocations=_float(r[11]), mean_rejections=_float(r[12]),
            mean_wasted=_float(r[13]), outcome_pass_rate=_float(r[14]), trajectory_pass_rate=_float(r[15]),
            bench_failures=int(r[16]),
        )
        for r in rows
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class ToolRequests:
    """The tool requests of one case run."""

    tool_invocations: int | None
    """Tool invocations (None: not recorded)."""
    tool_rejections: int | None
    """Rejected tool requests (None: not recorded)."""


def tool_requests(con: duckdb.DuckDBPyConnection, scope: CaseRunScope) -> tuple[ToolRequests, ...]:
    """The tool invocations and rejections of each case run of `scope`."""
    where, params = _where(scope)
    rows = con.execute(
        "SELECT tool_invocations, tool_rejections FROM case_runs c JOIN bench_runs b USING (bench_run_id) "
        f"WHERE {where}",
        params,
    ).fetchall()
    return tuple(ToolRequests(_int(r[0]), _int(r[1])) for r in rows)


@dataclass(frozen=True, slots=True)
class BenchRunSummary:
    """One bench run a report covers."""

    bench_run_id: str
    """The bench run."""
    model: str | None
    """Its model."""
    label: str | None
    """Its label."""
    case_runs: int
    """Its stored case runs."""
    started_at: datetime | None
    """When it started."""


def bench_run_summaries(con: duckdb.DuckDBPyConnection, bench_run_id: str | None) -> tuple[BenchRunSummary, ...]:
    """The bench runs holding case runs (`bench_run_id`: that one only), the newest first."""
    where, params = ("b.bench_run_id = ?", [bench_run_id]) if bench_run_id else ("TRUE", [])
    rows = con.execute(
        f"""SELECT b.bench_run_id, any_value(b.model), any_value(b.label), count(*), any_value(b.started_at)
            FROM case_runs c JOIN bench_runs b USING (bench_run_id) WHERE {where}
            GROUP BY 1 ORDER BY 5 DESC""",
        params,
    ).fetchall()
    return tuple(BenchRunSummary(str(r[0]), _str(r[1]), _str(r[2]), int(r[3]), r[4]) for r in rows)


# -- recommend ----------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SweepCaseRun:
    """One case run of a sweep grid point, as stored (`recommend` reads its vocabularies)."""

    config: tuple[SettingValue, ...]
    """Its configuration: a value per swept setting, in declaration order."""
    case_id: str
    """The case."""
    family: str
    """The case's evaluation family."""
    expected_outcome: str
    """The outcome the case expects."""
    expected_fallback_kind: str | None
    """The fallback kind the case expects (None unless a fallback)."""
    outcome: str
    """The outcome the run released."""
    fallback_kind: str | None
    """The fallback kind it released (None unless a fallback)."""
    wasted_invocations: int | None
    """Tool invocations after the first NO_GAIN (None: not recorded)."""
    tokens: int | None
    """Input plus output tokens (None: not recorded)."""
    model_calls: int | None
    """Model calls (None: not recorded)."""
    tool_invocations: int | None
    """Tool invocations (None: not recorded)."""
    passed: bool
    """Whether it met all of the case's expectations."""
    epoch: int | None
    """The epoch, from 1 (None: not recorded)."""
    outcome_passed: bool | None = None
    """The outcome verdict (None: stored before there were two verdicts)."""


def sweep_case_runs(con: duckdb.DuckDBPyConnection, sweep_id: str) -> tuple[SweepCaseRun, ...]:
    """Every case run of a sweep, by configuration then case."""
    names = swept_names()  # the one settings declaration: an allowlist of column names
    cols = ", ".join(f"c.{c}" for c in names)
    n = len(names)
    rows = con.execute(
        f"""
        SELECT {cols}, c.case_id, c.family, c.expected_outcome, c.expected_fallback_kind, c.outcome, c.fallback_kind,
               c.wasted_invocations, c.input_tokens + c.output_tokens, c.model_calls, c.tool_invocations, c.passed,
               c.epoch, c.outcome_passed
        FROM case_runs c JOIN bench_runs b USING (bench_run_id)
        WHERE b.sweep_id = ? AND c.passed IS NOT NULL  -- unjudged: the bench's failure, not the model's
        ORDER BY {cols}, c.case_id
        """,
        [sweep_id],
    ).fetchall()
    return tuple(
        SweepCaseRun(
            config=tuple(r[:n]), case_id=str(r[n]), family=str(r[n + 1]), expected_outcome=str(r[n + 2]),
            expected_fallback_kind=_str(r[n + 3]), outcome=str(r[n + 4]), fallback_kind=_str(r[n + 5]),
            wasted_invocations=r[n + 6], tokens=r[n + 7], model_calls=r[n + 8], tool_invocations=r[n + 9],
            passed=bool(r[n + 10]), epoch=r[n + 11], outcome_passed=None if r[n + 12] is None else bool(r[n + 12]),
        )
        for r in rows
    )  # fmt: skip


# -- the real-models report ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ThresholdCounts:
    """Per NO_GAIN threshold of a label, over its newest case run per (case, threshold, epoch)."""

    no_gain_threshold: int
    """The threshold."""
    requested: int
    """Tool calls requested (the `tool_calls` rows)."""
    text: int
    """Tool calls the model wrote as text."""
    runs_with_text: int
    """Case runs with at least one call written as text."""
    fallbacks: int
    """Case runs released as FALLBACK."""
    failed: int
    """Case runs released as FAILED."""
    saturations: int
    """Case runs stopped as information saturated."""


_THRESHOLD_COUNTS = """
    WITH newest AS (
        SELECT *, row_number() OVER (PARTITION BY case_id, no_gain_threshold, epoch
                                     ORDER BY finished_at DESC, case_run_id DESC) AS k
        FROM case_runs WHERE label = ?
    ), asked AS (SELECT case_run_id, count(*) AS n FROM tool_calls GROUP BY case_run_id)
    SELECT n.no_gain_threshold, coalesce(sum(a.n), 0), coalesce(sum(n.text_tool_calls), 0),
           count(*) FILTER (WHERE n.text_tool_calls > 0),
           count(*) FILTER (WHERE n.outcome = ?), count(*) FILTER (WHERE n.outcome = ?),
           count(*) FILTER (WHERE n.stop_reason = ?)
    FROM newest n LEFT JOIN asked a USING (case_run_id) WHERE n.k = 1
    GROUP BY n.no_gain_threshold ORDER BY n.no_gain_threshold
"""


def threshold_counts(con: duckdb.DuckDBPyConnection, label: str) -> tuple[ThresholdCounts, ...]:
    """Per threshold of `label`, by threshold: the calls requested and written as text, the case runs with one,
    fallbacks, failures and saturations (newest case run per case, threshold and epoch)."""
    rows = con.execute(
        _THRESHOLD_COUNTS,
        [label, ReleaseOutcome.FALLBACK.value, ReleaseOutcome.FAILED.value, StopReason.INFORMATION_SATURATED.value],
    ).fetchall()
    return tuple(
        ThresholdCounts(no_gain_threshold=int(r[0]), requested=int(r[1]), text=int(r[2]), runs_with_text=int(r[3]),
                        fallbacks=int(r[4]), failed=int(r[5]), saturations=int(r[6]))
        for r in rows
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class LabelCaseRun:
    """A case run of a label: where it is stored and which case it ran."""

    bench_run_id: str
    """Its bench run."""
    case_id: str
    """Its case."""


def label_case_runs_at(con: duckdb.DuckDBPyConnection, label: str, no_gain_threshold: int) -> tuple[LabelCaseRun, ...]:
    """The case runs of `label` at one NO_GAIN threshold, in stored order."""
    rows = con.execute(
        "SELECT bench_run_id, case_id FROM case_runs WHERE label = ? AND no_gain_threshold = ?",
        [label, no_gain_threshold],
    ).fetchall()
    return tuple(LabelCaseRun(str(r[0]), str(r[1])) for r in rows)


# -- the exports: stored rows by column ---------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class StoredRow:
    """One stored row of `bench_runs` or `case_runs` by column: the exports carry every column, the settings
    columns (one per declared setting) included."""

    columns: Mapping[str, object]
    """Column name to its stored value."""


def bench_run_rows(
    con: duckdb.DuckDBPyConnection, *, bench_run_id: str | None = None, label: str | None = None
) -> tuple[StoredRow, ...]:
    """The stored bench runs, the earliest started first: one (`bench_run_id`), those of a label (`label`), or
    every one."""
    sql, params = "SELECT * FROM bench_runs", []
    if bench_run_id is not None:
        sql, params = sql + " WHERE bench_run_id = ?", [bench_run_id]
    elif label is not None:
        sql, params = sql + " WHERE label = ?", [label]
    return _stored_rows(con, sql + " ORDER BY started_at", params)


def case_run_rows_of(con: duckdb.DuckDBPyConnection, bench_run_id: str) -> tuple[StoredRow, ...]:
    """The stored case runs of one bench run, by epoch then case."""
    return _stored_rows(con, "SELECT * FROM case_runs WHERE bench_run_id = ? ORDER BY epoch, case_id", [bench_run_id])


def _stored_rows(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[object]) -> tuple[StoredRow, ...]:
    cur = con.execute(sql, params)
    names = [d[0] for d in cur.description or ()]
    return tuple(StoredRow(dict(zip(names, r, strict=True))) for r in cur.fetchall())


def _float(value: float | None) -> float | None:
    return None if value is None else float(value)


def _int(value: int | None) -> int | None:
    return None if value is None else int(value)


def _str(value: object) -> str | None:
    return None if value is None else str(value)
