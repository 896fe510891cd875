"""Named queries on the run tables (`bench_runs`, `sweeps`, `shards`, `case_runs`): what a run records about
itself and reads back. The plan and the run reach these tables only through here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import duckdb

from runners.plan import settings

__all__ = ["StaleRuns", "mark_stale_runs", "stale_runs", "store_run_options", "store_settings"]


def mark_stale_runs(con: duckdb.DuckDBPyConnection) -> int:
    """Bench runs and sweeps still marked `running` belong to a process that died (SIGKILL, power
    loss): this process holds the file's exclusive lock, so no one else is writing. Mark them
    `interrupted` so `--resume` and reports see the truth; returns how many bench runs changed."""
    stale = con.execute("SELECT count(*) FROM bench_runs WHERE status = 'running'").fetchone()
    con.execute("UPDATE bench_runs SET status = 'interrupted' WHERE status = 'running'")
    con.execute("UPDATE sweeps SET status = 'interrupted' WHERE status = 'running'")
    con.execute("UPDATE shards SET status = 'interrupted' WHERE status = 'running'")
    return int(stale[0]) if stale else 0


@dataclass(frozen=True, slots=True)
class StaleRuns:
    """Bench runs and sweeps left `running` by a process that died (what `mark_stale_runs` will mark)."""

    bench_runs: tuple[tuple[str, str | None], ...]
    """(bench run id, its sweep id or None), oldest first."""
    sweeps: tuple[str, ...]
    """Sweep ids left `running` and the sweeps of the bench runs above, oldest first."""


def stale_runs(con: duckdb.DuckDBPyConnection) -> StaleRuns:
    """The bench runs and sweeps still marked `running` (call before `mark_stale_runs` to name them)."""
    runs = con.execute(
        "SELECT bench_run_id, sweep_id FROM bench_runs WHERE status = 'running' ORDER BY started_at, bench_run_id"
    ).fetchall()
    sweeps = con.execute(
        "SELECT sweep_id FROM sweeps WHERE status = 'running' ORDER BY started_at, sweep_id"
    ).fetchall()
    ids = dict.fromkeys([str(r[0]) for r in sweeps] + [str(s) for _, s in runs if s is not None])
    return StaleRuns(tuple((str(b), None if s is None else str(s)) for b, s in runs), tuple(ids))


def store_settings(con: duckdb.DuckDBPyConnection, bench_run_id: str, run: settings.RunSettings) -> None:
    """Write every setting of a bench run: one column each and the JSON that resume reads."""
    values = run.stored_values()
    assignments = ", ".join(f'"{name}" = ?' for name in values)
    con.execute(
        f"UPDATE bench_runs SET settings_json = ?, {assignments} WHERE bench_run_id = ?",
        [run.to_json(), *values.values(), bench_run_id],
    )


def store_run_options(con: duckdb.DuckDBPyConnection, bench_run_id: str, values: Mapping[str, object]) -> None:
    """Write a bench run's run options (runners/plan/run_options.py): column -> value."""
    assignments = ", ".join(f'"{name}" = ?' for name in values)
    con.execute(f"UPDATE bench_runs SET {assignments} WHERE bench_run_id = ?", [*values.values(), bench_run_id])
