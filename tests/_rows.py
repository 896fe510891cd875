"""Helpers shared by the tests that compare two executions of the same work (executors, shards)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runners.plan.options import BenchOptions
from runners.plan.rules import BenchInputError
from runners.plan.settings import ModelSettings
from runners.run.bench import plan_run, run_bench
from runners.run.executors import Executor
from tests._db import open_read_only

ROOT = Path(__file__).resolve().parent.parent
# columns that measure time, not behaviour: they differ between any two executions
TIMING = {"case_runs": {"wall_ms", "finished_at"}, "tool_calls": {"latency_ms"}, "events": {"t_ms", "latency_ms"}}
ORDER = {"case_runs": "case_run_id", "tool_calls": "case_run_id, seq", "events": "case_run_id, seq"}


def behaviour_query(table: str) -> str:
    """The query of every row of `table` without its timing columns, in a stable order."""
    return f"SELECT * EXCLUDE ({', '.join(sorted(TIMING[table]))}) FROM {table} ORDER BY {ORDER[table]}"


def behaviour_rows(db: Path, table: str) -> list[tuple[Any, ...]]:
    """Every row of `table` without its timing columns, in a stable order (`behaviour_query`)."""
    con = open_read_only(db)
    try:
        return con.execute(behaviour_query(table)).fetchall()
    finally:
        con.close()


def cli_run_missing_context(tmp_path: Path, *executor_args: str) -> None:
    """`harness-bench run --evalset missing_context` in a real subprocess with the given executor flags:
    exit 0, the run completed with its 7 case runs, each stored once."""
    db = tmp_path / "cli.duckdb"
    proc = subprocess.run(
        [sys.executable, "-m", "runners.cli", "run", *executor_args, "--evalset", "missing_context", "--db", str(db)],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    con = open_read_only(db)
    try:
        assert con.execute("SELECT status, planned_case_runs FROM bench_runs").fetchall() == [("completed", 7)]
        assert con.execute("SELECT count(DISTINCT case_run_id) FROM case_runs").fetchall() == [(7,)]
    finally:
        con.close()


def assert_a_broken_cassette_fails_the_run(tmp_path: Path, executor: Executor, concurrency: int = 1) -> None:
    """A corrupted cassette read in a worker: the driver raises the worker's own BenchInputError (with its
    re-record command, not a wrapper) and the bench run is stored `failed`."""
    case = "empty_logs_gateway_timeout_t1"
    broken = tmp_path / "cas" / "openai_scripted" / case / "epoch1.json"
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"\x00\xff" * 50)
    with pytest.raises(BenchInputError, match="re-record with"):
        run_bench(plan_run(BenchOptions.of(case_ids=[case], db=tmp_path / "d.duckdb",
        model_settings=ModelSettings(model="openai:scripted", base_url="http://127.0.0.1:9/v1"),
                               cassettes=tmp_path / "cas",
                               executor=executor, concurrency=concurrency)))  # fmt: skip
    con = open_read_only(tmp_path / "d.duckdb")
    try:
        assert con.execute("SELECT status FROM bench_runs").fetchall() == [("failed",)]
    finally:
        con.close()


# a case run's identity and timing: what differs between a live run and its replay
VOLATILE = {"bench_run_id", "case_run_id", "label", "wall_ms", "finished_at"}


def case_runs_by_case(db: Path) -> dict[str, dict[str, object]]:
    """Every case_runs row of `db` by case id, without the columns in VOLATILE."""
    con = open_read_only(db)
    try:
        cur = con.execute("SELECT * FROM case_runs ORDER BY case_id")
        cols = [d[0] for d in cur.description]
        return {row[cols.index("case_id")]: {c: v for c, v in zip(cols, row, strict=True) if c not in VOLATILE}
                for row in cur.fetchall()}  # fmt: skip
    finally:
        con.close()


def query(db: Path, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    """The rows of `sql` on the DuckDB file `db`, opened read-only (and closed: the next writer may open it)."""
    con = open_read_only(db)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()
