"""The gate's reads of the metrics database, as named queries returning typed rows: which labels and bench runs
exist, each label's latest case run per (case, epoch) to pair, and the failing case runs of one sweep
configuration (the report's cases behind a recommendation). Parameters, never SQL text, cross this boundary."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import duckdb

from runners.plan.settings import SettingValue, swept_names

__all__ = [
    "FailingCaseRun",
    "agent_of_bench_run",
    "LabelRun",
    "PairedRun",
    "failing_case_runs",
    "label_of_bench_run",
    "judged",
    "label_runs",
    "labels",
    "latest_case_runs",
]


@dataclass(frozen=True, slots=True)
class LabelRun:
    """One bench run a label's case runs come from."""

    bench_run_id: str
    """The bench run."""
    case_runs: int
    """Case runs of the label in it."""
    epochs: int
    """Its largest epoch."""


@dataclass(frozen=True, slots=True)
class PairedRun:
    """The latest case run of one (case, epoch) of a label: what the gate pairs."""

    case_id: str
    """Case."""
    epoch: int
    """Epoch."""
    family: str
    """Family."""
    passed: bool | None
    """It met its expectations (None: unjudged, the bench's failure: runners/run/verdict.py)."""
    tool_invocations: float
    """Tool invocations."""
    model_calls: float
    """Model calls."""
    tokens: float
    """Input plus output tokens."""


@dataclass(frozen=True, slots=True)
class FailingCaseRun:
    """A case run that did not meet its expectations."""

    case_run_id: str
    """The case run (what `harness-bench show` opens)."""
    case_id: str
    """Case."""
    epoch: int
    """Epoch."""
    outcome: str
    """Its outcome."""
    stop_reason: str | None
    """Why the loop stopped (None: not recorded)."""


def labels(con: duckdb.DuckDBPyConnection) -> frozenset[str]:
    """Every label of a case run in the database."""
    rows = con.execute("SELECT DISTINCT label FROM case_runs WHERE label IS NOT NULL").fetchall()
    return frozenset(str(r[0]) for r in rows)


def label_of_bench_run(con: duckdb.DuckDBPyConnection, bench_run_id: str) -> str | None:
    """The label of a bench run's case runs (None: no case run of that id)."""
    row = con.execute("SELECT any_value(label) FROM case_runs WHERE bench_run_id = ?", [bench_run_id]).fetchone()
    return None if row is None or row[0] is None else str(row[0])


def agent_of_bench_run(con: duckdb.DuckDBPyConnection, bench_run_id: str) -> str:
    """The agent loop (`--agent`) a bench run's cases went through (`native` for a run stored before it was kept)."""
    row = con.execute("SELECT agent FROM bench_runs WHERE bench_run_id = ?", [bench_run_id]).fetchone()
    return "native" if row is None or row[0] is None else str(row[0])


def label_runs(con: duckdb.DuckDBPyConnection, label: str) -> list[LabelRun]:
    """The bench runs holding case runs of `label`, the earliest finished first."""
    rows = con.execute(
        "SELECT bench_run_id, count(*), max(epoch), min(finished_at) FROM case_runs WHERE label = ?"
        " GROUP BY bench_run_id ORDER BY min(finished_at)",
        [label],
    ).fetchall()
    return [LabelRun(str(r[0]), int(r[1]), int(r[2])) for r in rows]


def judged(con: duckdb.DuckDBPyConnection, label: str, bench_run_id: str | None = None) -> bool:
    """Whether any case run of `label` (in `bench_run_id`, when given) was held to expectations: an imported run
    is observed, not judged (`passed` NULL)."""
    where = " AND bench_run_id = ?" if bench_run_id is not None else ""
    params = [label] if bench_run_id is None else [label, bench_run_id]
    sql = f"SELECT count(*) FROM case_runs WHERE label = ?{where} AND passed IS NOT NULL"
    row = con.execute(sql, params).fetchone()
    return bool(row and row[0])


def latest_case_runs(con: duckdb.DuckDBPyConnection, label: str, bench_run_id: str) -> list[PairedRun]:
    """The latest case run of each (case, epoch) of `label` in one bench run (a resumed run may hold two)."""
    rows = con.execute(
        """
        SELECT case_id, epoch, family, passed, tool_invocations, model_calls, input_tokens + output_tokens
        FROM (SELECT *, row_number() OVER (PARTITION BY case_id, epoch ORDER BY finished_at DESC) AS rn
              FROM case_runs WHERE label = ? AND bench_run_id = ?)
        WHERE rn = 1
        """,
        [label, bench_run_id],
    ).fetchall()
    return [PairedRun(str(r[0]), int(r[1]), str(r[2]), None if r[3] is None else bool(r[3]), float(r[4]), float(r[5]),
                      float(r[6])) for r in rows]  # fmt: skip


def failing_case_runs(
    con: duckdb.DuckDBPyConnection, *, sweep_id: str, config: Sequence[SettingValue]
) -> list[FailingCaseRun]:
    """The failing case runs of one configuration of a sweep (`config`: a value per swept setting, in declaration
    order), by case and epoch."""
    columns = swept_names()  # the one settings declaration: an allowlist of column names
    if len(config) != len(columns):
        raise ValueError(f"a configuration has {len(columns)} values ({', '.join(columns)}), not {len(config)}")
    # NULL-safe: case runs stored before a setting was declared hold NULL for it
    where = "".join(f" AND c.{c} IS NOT DISTINCT FROM ?" for c in columns)
    rows = con.execute(
        "SELECT c.case_run_id, c.case_id, c.epoch, c.outcome, c.stop_reason FROM case_runs c JOIN bench_runs b"
        f" USING (bench_run_id) WHERE b.sweep_id = ?{where} AND NOT c.passed ORDER BY c.case_id, c.epoch",
        [sweep_id, *config],
    ).fetchall()
    return [
        FailingCaseRun(str(r[0]), str(r[1]), int(r[2]), str(r[3]), None if r[4] is None else str(r[4])) for r in rows
    ]
