"""What planning a resume or a named run reads back from a metrics file, each read through a read-only connection
opened for it: a stored bench run, a stored sweep, the ids already taken."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from runners.plan.stored_plan import StoredBenchRun, StoredRuns, StoredSweep
from runners.store import runs
from runners.store.connection import check_database_file, connect

__all__ = ["STORED_RUNS", "load_bench_run", "load_sweep", "taken_ids"]


def load_bench_run(db: Path, bench_run_id: str) -> StoredBenchRun | None:
    """The bench run `bench_run_id` stored in `db`, or None."""
    con = connect(db, read_only=True)
    try:
        return runs.stored_bench_run(con, bench_run_id)
    finally:
        con.close()


def load_sweep(db: Path, sweep_id: str) -> StoredSweep | None:
    """The sweep `sweep_id` stored in `db`, or None."""
    con = connect(db, read_only=True)
    try:
        return runs.stored_sweep(con, sweep_id)
    finally:
        con.close()


def taken_ids(db: Path, table: runs.RunTable, ids: Sequence[str]) -> dict[str, str]:
    """The ids of `ids` already in `table` of `db`, in the order given, to the status of what each names."""
    con = connect(db, read_only=True)
    try:
        return {t.id: t.status for t in runs.taken_ids(con, table, ids)}
    finally:
        con.close()


class _StoreReads:
    """The plan's `StoredRuns`, read from the metrics file."""

    def check_file(self, db: Path, *, must_exist: bool) -> None:
        """Refuse a path that is not a DuckDB database (a missing one unless `must_exist`)."""
        check_database_file(db, must_exist=must_exist, writing=True)

    def bench_run(self, db: Path, bench_run_id: str) -> StoredBenchRun | None:
        """The stored bench run, or None."""
        return load_bench_run(db, bench_run_id)

    def sweep(self, db: Path, sweep_id: str) -> StoredSweep | None:
        """The stored sweep, or None."""
        return load_sweep(db, sweep_id)

    def taken(self, db: Path, table: str, ids: Sequence[str]) -> dict[str, str]:
        """The ids already taken in `table`, to their status."""
        return taken_ids(db, runs.RunTable(table), ids)


STORED_RUNS: StoredRuns = _StoreReads()
"""What planning reads back from a metrics file, for `plan_run` and `plan_sweep`."""
