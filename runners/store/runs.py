"""Named queries on the run tables (`bench_runs`, `sweeps`, `shards`, `case_runs`): what a run records about
itself and reads back. The plan and the run reach these tables only through here."""

from __future__ import annotations

import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import duckdb

from runners.plan.flags import StoredValue
from runners.plan.settings import SettingValue
from runners.plan.shard import ShardSpec
from runners.plan.stored_plan import StoredBenchRun, StoredSweep
from runners.store.catalog import has_table
from runners.store.errors import MetricsWriteError
from runners.store.writer import commit, write_statement

__all__ = [
    "BenchRunStart", "FamilyRow", "RunTable", "StaleRuns", "StoredPoint", "SweepStart", "TakenId", "bench_run_exists",
    "case_run_ids_in_order", "completed_sweeps", "family_rows", "find_point", "finish_bench_run", "finish_sweep",
    "label_sweep_ids", "mark_stale_runs", "stale_runs", "start_bench_run", "start_sweep", "store_run_options",
    "store_settings", "stored_bench_run", "stored_case_run_ids", "stored_sweep", "sweep_ids", "taken_ids",
]  # fmt: skip


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


def store_settings(
    con: duckdb.DuckDBPyConnection, bench_run_id: str, values: Mapping[str, SettingValue], settings_json: str
) -> None:
    """Write every setting of a bench run: one column each (`values`, as stored) and the JSON that resume reads."""
    assignments = ", ".join(f'"{name}" = ?' for name in values)
    con.execute(
        f"UPDATE bench_runs SET settings_json = ?, {assignments} WHERE bench_run_id = ?",
        [settings_json, *values.values(), bench_run_id],
    )


def store_run_options(con: duckdb.DuckDBPyConnection, bench_run_id: str, values: Mapping[str, StoredValue]) -> None:
    """Write the options a bench run keeps in columns (declared with `Stored`, runners/plan/options.py): column ->
    value."""
    assignments = ", ".join(f'"{name}" = ?' for name in values)
    con.execute(f"UPDATE bench_runs SET {assignments} WHERE bench_run_id = ?", [*values.values(), bench_run_id])


# -- bench runs ------------------------------------------------------------------------------------------
def stored_bench_run(con: duckdb.DuckDBPyConnection, bench_run_id: str) -> StoredBenchRun | None:
    """The stored bench run `bench_run_id`, or None when the file has none."""
    cur = con.execute("SELECT * FROM bench_runs WHERE bench_run_id = ?", [bench_run_id])
    row = cur.fetchone()
    if row is None:
        return None
    columns = dict(zip([d[0] for d in cur.description], row, strict=True))
    sweep = columns["sweep_id"]
    return StoredBenchRun(
        bench_run_id, str(columns["status"]), None if sweep is None else str(sweep), columns,
        _stored_shards(con, bench_run_id),
    )  # fmt: skip


def _stored_shards(con: duckdb.DuckDBPyConnection, bench_run_id: str) -> tuple[ShardSpec, ...]:
    if not has_table(con, "shards"):
        return ()  # a file older than schema v4, looked at read-only before the writer migrates it
    rows = con.execute(
        "SELECT shard_index, shard_count FROM shards WHERE bench_run_id = ? ORDER BY shard_index", [bench_run_id]
    ).fetchall()
    return tuple(ShardSpec(int(index), int(count)) for index, count in rows)


def bench_run_exists(con: duckdb.DuckDBPyConnection, bench_run_id: str) -> bool:
    """Whether the file holds the bench run `bench_run_id`."""
    return con.execute("SELECT 1 FROM bench_runs WHERE bench_run_id = ?", [bench_run_id]).fetchone() is not None


def case_run_ids_in_order(con: duckdb.DuckDBPyConnection, bench_run_id: str) -> list[str]:
    """The ids of a bench run's stored case runs, by epoch then case."""
    rows = con.execute(
        "SELECT case_run_id FROM case_runs WHERE bench_run_id = ? ORDER BY epoch, case_id", [bench_run_id]
    ).fetchall()
    return [str(r[0]) for r in rows]


def stored_case_run_ids(con: duckdb.DuckDBPyConnection, bench_run_id: str) -> frozenset[str]:
    """The ids of the case runs stored for a bench run."""
    rows = con.execute("SELECT case_run_id FROM case_runs WHERE bench_run_id = ?", [bench_run_id]).fetchall()
    return frozenset(str(r[0]) for r in rows)


@dataclass(frozen=True, slots=True)
class BenchRunStart:
    """What a bench run records when it starts (or restarts, resumed)."""

    bench_run_id: str
    """Its id."""
    resumes: bool
    """A resume: the stored row is set running again, nothing else of it is inserted."""
    sweep_id: str | None
    """The sweep it is a point of."""
    git_commit: str | None
    """The commit the bench ran from."""
    evalset_hash: str
    """Content hash of the selected cases."""
    planned: int
    """Case runs planned (this shard's share)."""
    version: str
    """The harness-bench version."""
    shard: ShardSpec | None
    """The shard this file runs, if sharded."""
    settings_json: str
    """Every setting as stored, as canonical JSON (on resume: a new base URL is recorded)."""
    settings: Mapping[str, SettingValue]
    """Every setting as stored, by column."""
    options: Mapping[str, StoredValue]
    """The options the run keeps in columns, by column (runners/plan/options.py)."""


def start_bench_run(con: duckdb.DuckDBPyConnection, start: BenchRunStart) -> None:
    """Record the start of a bench run in one transaction: its row (or its row set running again), its shard row,
    its settings and run options. A storage failure raises MetricsWriteError with nothing recorded."""
    con.execute("BEGIN")
    try:
        if not start.resumes:
            con.execute(
                "INSERT INTO bench_runs (bench_run_id, sweep_id, started_at, status, git_commit,"
                " evalset_hash, planned_case_runs, harness_bench_version) VALUES (?, ?, now(), 'running', ?, ?, ?, ?)",
                [start.bench_run_id, start.sweep_id, start.git_commit, start.evalset_hash, start.planned,
                 start.version],
            )  # fmt: skip
            if start.shard is not None:
                con.execute(  # this file's shard row (one per shard file; `merge` gathers them)
                    "INSERT INTO shards VALUES (?, ?, ?, ?, 'running', now(), NULL, ?)",
                    [start.bench_run_id, start.shard.index, start.shard.count, start.planned, socket.gethostname()],
                )
        else:
            con.execute(
                "UPDATE bench_runs SET status = 'running', finished_at = NULL WHERE bench_run_id = ?",
                [start.bench_run_id],
            )
            _set_shard_status(con, start.bench_run_id, "running", finished=False)
        store_settings(con, start.bench_run_id, start.settings, start.settings_json)
        store_run_options(con, start.bench_run_id, start.options)
        commit(con)  # a full disk here: MetricsWriteError, nothing started
    except MetricsWriteError:
        raise
    except BaseException:
        con.execute("ROLLBACK")
        raise


def finish_bench_run(con: duckdb.DuckDBPyConnection, bench_run_id: str, status: str, error: str | None) -> None:
    """Record a bench run's end status (and its shard row's); raises what `WRITE_FAILURES` names on a storage
    failure (the row stays `running`: the next writer marks it `interrupted`)."""
    write_statement(
        con, "UPDATE bench_runs SET status = ?, finished_at = now(), error = ? WHERE bench_run_id = ?",
        [status, error, bench_run_id],
    )  # fmt: skip
    _set_shard_status(con, bench_run_id, status, finished=True)


def _set_shard_status(con: duckdb.DuckDBPyConnection, bench_run_id: str, status: str, *, finished: bool) -> None:
    """Mirror the bench run's status on its shard row (no row: not a sharded run, nothing to do)."""
    con.execute(
        "UPDATE shards SET status = ?, finished_at = CASE WHEN ? THEN now() END, host = ? WHERE bench_run_id = ?",
        [status, finished, socket.gethostname(), bench_run_id],
    )


@dataclass(frozen=True, slots=True)
class FamilyRow:
    """One family of one bench run (the end-of-run table)."""

    family: str
    """Family name."""
    runs: int
    """Case runs."""
    pass_rate: float | None
    """Share of the judged case runs that met their expectations (None: none was judged)."""
    outcomes: dict[str, int]
    """Case runs per outcome (`FALLBACK/INSUFFICIENT_EVIDENCE` style)."""
    stop_reasons: dict[str, int]
    """Case runs per stop reason (`NONE`: the agent finished on its own; `ERROR`: none, a failed model call
    ended the case run)."""
    mean_tools: float
    """Mean tool invocations."""
    mean_rejections: float
    """Mean rejected tool requests."""
    mean_wasted: float
    """Mean wasted invocations."""
    bench_failures: int = 0
    """Case runs that ended on the bench's failure, not the model's (unjudged: runners/run/verdict.py), left out of
    `pass_rate`."""


def family_rows(con: duckdb.DuckDBPyConnection, bench_run_id: str) -> list[FamilyRow]:
    """Per-family summary of one bench run, with counts per outcome and stop reason."""
    # Counted per (family, outcome, stop reason) and added up here: DuckDB's `histogram` builds a map per group, and
    # two of them made this summary, read at the end of every run, three times as costly (about 4 ms more a call).
    rows = con.execute(
        """
        SELECT family, outcome || coalesce('/' || fallback_kind, ''),
               coalesce(stop_reason, CASE WHEN error IS NULL THEN 'NONE' ELSE 'ERROR' END),
               count(*), sum(passed::INT), count(passed), sum(tool_invocations), count(tool_invocations),
               sum(tool_rejections), count(tool_rejections), sum(wasted_invocations), count(wasted_invocations)
        FROM case_runs WHERE bench_run_id = ? GROUP BY ALL
        """,
        [bench_run_id],
    ).fetchall()
    families: dict[str, _FamilyCounts] = {}
    for family, outcome, stop, n, passed, judged, tools, n_tools, rej, n_rej, wasted, n_wasted in rows:
        families.setdefault(str(family), _FamilyCounts()).add(
            outcome, stop, n, passed or 0, judged, _Sum(tools or 0, n_tools), _Sum(rej or 0, n_rej),
            _Sum(wasted or 0, n_wasted),
        )  # fmt: skip
    return [c.row(family) for family, c in sorted(families.items())]


@dataclass
class _Sum:
    """A column's sum and how many values it adds (NULLs in neither, as `avg` counts them)."""

    value: int = 0
    """The sum."""
    count: int = 0
    """The values summed."""

    def mean(self) -> float:
        """The sum over the count, as `avg` divides them."""
        if not self.count:  # `avg` over no value is NULL, which no mean of the table can be
            raise ValueError("no value to average")
        return self.value / self.count


@dataclass
class _FamilyCounts:
    """One family's counts as `family_rows` adds them up, group by group."""

    runs: int = 0
    """Case runs."""
    outcomes: dict[str, int] = field(default_factory=dict)
    """Case runs per outcome."""
    stop_reasons: dict[str, int] = field(default_factory=dict)
    """Case runs per stop reason."""
    passed: int = 0
    """Judged case runs that met their expectations."""
    judged: int = 0
    """Judged case runs."""
    tools: _Sum = field(default_factory=_Sum)
    """Tool invocations."""
    rejections: _Sum = field(default_factory=_Sum)
    """Rejected tool requests."""
    wasted: _Sum = field(default_factory=_Sum)
    """Wasted invocations."""

    def add(self, outcome: str | None, stop: str, n: int, passed: int, judged: int, tools: _Sum, rejections: _Sum,
            wasted: _Sum) -> None:  # fmt: skip
        """Add one (outcome, stop reason) group of `n` case runs, its passed and judged counts and its sums."""
        self.runs += n
        if outcome is not None:  # as `histogram` leaves a NULL out
            self.outcomes[outcome] = self.outcomes.get(outcome, 0) + n
        self.stop_reasons[stop] = self.stop_reasons.get(stop, 0) + n
        self.passed += passed
        self.judged += judged
        for total, part in ((self.tools, tools), (self.rejections, rejections), (self.wasted, wasted)):
            total.value += part.value
            total.count += part.count

    def row(self, family: str) -> FamilyRow:
        """The family's row of the end-of-run table."""
        return FamilyRow(
            family, self.runs, self.passed / self.judged if self.judged else None, dict(sorted(self.outcomes.items())),
            dict(sorted(self.stop_reasons.items())), self.tools.mean(), self.rejections.mean(), self.wasted.mean(),
            self.runs - self.judged,
        )  # fmt: skip


# -- sweeps ----------------------------------------------------------------------------------------------
def stored_sweep(con: duckdb.DuckDBPyConnection, sweep_id: str) -> StoredSweep | None:
    """The stored sweep `sweep_id`, or None when the file has none."""
    row = con.execute("SELECT grid_json, options_json, status FROM sweeps WHERE sweep_id = ?", [sweep_id]).fetchone()
    return None if row is None else StoredSweep(sweep_id, _text(row[0]), _text(row[1]), str(row[2]))


def completed_sweeps(con: duckdb.DuckDBPyConnection, model: str) -> list[StoredSweep]:
    """The completed sweeps of `model`, the earliest started first."""
    rows = con.execute(
        "SELECT sweep_id, grid_json, options_json, status FROM sweeps WHERE model = ? AND status = 'completed'"
        " ORDER BY started_at, sweep_id",
        [model],
    ).fetchall()
    return [StoredSweep(str(r[0]), _text(r[1]), _text(r[2]), str(r[3])) for r in rows]


@dataclass(frozen=True, slots=True)
class StoredPoint:
    """The latest bench run of one grid point of a sweep."""

    bench_run_id: str
    """Its id."""
    status: str
    """Its status."""


def find_point(con: duckdb.DuckDBPyConnection, sweep_id: str, settings_json: str) -> StoredPoint | None:
    """The latest bench run of the sweep with exactly the settings `settings_json` (as stored), if any."""
    row = con.execute(
        "SELECT bench_run_id, status FROM bench_runs WHERE sweep_id = ? AND settings_json = ? "
        "ORDER BY started_at DESC LIMIT 1",
        [sweep_id, settings_json],
    ).fetchone()
    return StoredPoint(str(row[0]), str(row[1])) if row else None


@dataclass(frozen=True, slots=True)
class SweepStart:
    """What a sweep records when it starts (a resumed sweep is only set running again)."""

    sweep_id: str
    """Its id."""
    model: str
    """The model every point runs."""
    label: str | None
    """The label every point carries."""
    grid_json: str
    """The grid axes as JSON."""
    options_json: str
    """What every point shares, as JSON (read back by resume)."""


def start_sweep(con: duckdb.DuckDBPyConnection, start: SweepStart, *, resumes: bool) -> None:
    """Record a sweep's start: its row, or (`resumes`) its row set running again."""
    if resumes:
        con.execute("UPDATE sweeps SET status = 'running', finished_at = NULL WHERE sweep_id = ?", [start.sweep_id])
    else:
        con.execute(
            "INSERT INTO sweeps VALUES (?, now(), NULL, 'running', ?, ?, ?, ?)",
            [start.sweep_id, start.model, start.label, start.grid_json, start.options_json],
        )


def finish_sweep(con: duckdb.DuckDBPyConnection, sweep_id: str, status: str) -> None:
    """Record a sweep's end status; a storage failure raises MetricsWriteError."""
    write_statement(con, "UPDATE sweeps SET status = ?, finished_at = now() WHERE sweep_id = ?", [status, sweep_id])


def sweep_ids(con: duckdb.DuckDBPyConnection) -> Sequence[str]:
    """Known sweep ids, newest first."""
    return [str(r[0]) for r in con.execute("SELECT sweep_id FROM sweeps ORDER BY started_at DESC").fetchall()]


def label_sweep_ids(con: duckdb.DuckDBPyConnection, label: str) -> list[str]:
    """The sweeps that hold case runs of `label` (no order)."""
    rows = con.execute(
        "SELECT DISTINCT b.sweep_id FROM bench_runs b JOIN case_runs c USING (bench_run_id)"
        " WHERE c.label = ? AND b.sweep_id IS NOT NULL",
        [label],
    ).fetchall()
    return [str(r[0]) for r in rows]


# -- ids a named run may not reuse -----------------------------------------------------------------------
class RunTable(StrEnum):
    """A table whose rows a named run (`--run-id`) names."""

    BENCH_RUNS = "bench_runs"
    """Bench runs, by `bench_run_id`."""
    SWEEPS = "sweeps"
    """Sweeps, by `sweep_id`."""

    @property
    def id_column(self) -> str:
        """The column that names a row."""
        return "bench_run_id" if self is RunTable.BENCH_RUNS else "sweep_id"


@dataclass(frozen=True, slots=True)
class TakenId:
    """An id already in the file, and the status of what it names."""

    id: str
    """The id."""
    status: str
    """The status of its row."""


def taken_ids(con: duckdb.DuckDBPyConnection, table: RunTable, ids: Sequence[str]) -> tuple[TakenId, ...]:
    """The ids of `ids` already in `table`, in the order given (none when the file has no such table)."""
    if not has_table(con, table.value):
        return ()
    taken: list[TakenId] = []
    for value in ids:
        row = con.execute(f"SELECT status FROM {table.value} WHERE {table.id_column} = ?", [value]).fetchone()
        if row is not None:
            taken.append(TakenId(value, str(row[0])))
    return tuple(taken)


def _text(value: object) -> str | None:
    return None if value is None else str(value)
