"""The `processes` executor: case runs in spawned worker processes on this machine, past
one process's GIL, streamed back to the one DuckDB writer in the driver. Rows must equal the local
executor's, replay must work in workers, and a cancellation must stop the workers without a wrong row."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path
from typing import Any

import duckdb

from harness.context import CancellationToken
from runners.plan.options import BenchOptions
from runners.plan.settings import ModelSettings
from runners.run.bench import plan_run, run_bench
from runners.run.executors import Executor
from tests._rows import assert_a_broken_cassette_fails_the_run, behaviour_rows, cli_run_missing_context

ROOT = Path(__file__).resolve().parents[3]
FAMILIES = ["empty_logs", "diagnosable", "protocol_violations", "multi_call_turns"]
_rows = behaviour_rows


def test_worker_processes_write_what_the_local_executor_writes(tmp_path: Path) -> None:
    common: dict[str, Any] = {"evalsets": FAMILIES, "epochs": 2, "run_id": "same"}
    local = run_bench(plan_run(BenchOptions.of(db=tmp_path / "local.duckdb", **common)))
    procs = run_bench(plan_run(BenchOptions.of(db=tmp_path / "procs.duckdb", executor=Executor.PROCESSES, concurrency=4,
                                   **common)))  # fmt: skip
    assert procs.status == "completed" and procs.executed == local.executed == local.planned > 40
    assert procs.failed == local.failed
    for table in ("case_runs", "tool_calls", "events"):
        assert _rows(tmp_path / "procs.duckdb", table) == _rows(tmp_path / "local.duckdb", table), table


def test_cassette_replay_runs_in_worker_processes(tmp_path: Path) -> None:
    """vcrpy patches a whole process's transport; each worker is its own process, so replays run side by
    side (concurrency 2 is not clamped to 1 here) and match the in-process replay case by case."""
    common: dict[str, Any] = {"evalsets": ["empty_logs", "diagnosable"], "run_id": "replay"}
    replay = {"model_settings": ModelSettings(model="openai:scripted", base_url="http://127.0.0.1:9/v1"),
              "cassettes": ROOT / "cassettes", "record_mode": "none"}  # fmt: skip
    run_bench(plan_run(BenchOptions.of(db=tmp_path / "local.duckdb", **common, **replay)))
    summary = run_bench(plan_run(BenchOptions.of(db=tmp_path / "procs.duckdb", executor=Executor.PROCESSES,
                                                 concurrency=2, **common, **replay)))  # fmt: skip
    assert summary.errors == [] and summary.executed > 10
    assert _rows(tmp_path / "procs.duckdb", "case_runs") == _rows(tmp_path / "local.duckdb", "case_runs")


def test_a_worker_error_reaches_the_driver_as_itself(tmp_path: Path) -> None:
    assert_a_broken_cassette_fails_the_run(tmp_path, Executor.PROCESSES, concurrency=2)


def test_a_cancellation_stops_the_workers_and_resume_completes_the_same_rows(tmp_path: Path) -> None:
    """Cancelled after 10 finished case runs, read slowly so the workers' finished runs pile up unread in
    the results pipe: `run_bench` returns promptly with no worker left behind (a worker blocked on its
    unread results, or one that ignores SIGTERM, would hang the CLI at exit), the run is `interrupted`,
    every stored row is a finished case run (none CANCELLED), and `--resume` completes it to exactly the
    rows of an uninterrupted run."""
    db = tmp_path / "cut.duckdb"
    opts = BenchOptions.of(db=db, evalsets=FAMILIES, epochs=4, run_id="same",
                        executor=Executor.PROCESSES, concurrency=4)  # fmt: skip

    cancelled_at: list[float] = []
    token = CancellationToken()

    def hook(done: int, total: int, run: object) -> None:
        if run is None:
            return
        if done >= 10:
            cancelled_at.append(time.monotonic())
            token.cancel()
        else:
            time.sleep(0.2)  # the workers run ahead: their results fill the pipe while the driver sleeps

    cut = run_bench(plan_run(opts), cancellation=token, on_progress=hook)
    stopped_after = time.monotonic() - cancelled_at[0]
    assert multiprocessing.active_children() == [], "every worker process has exited"
    # workers that finished their share into an unread pipe used to wait for the driver's kill, 10 s each
    assert stopped_after < 5, f"run_bench returned {stopped_after:.1f}s after the cancellation"
    assert cut.status == "interrupted" and 10 <= cut.executed < cut.planned
    con = duckdb.connect(str(db), read_only=True)
    try:
        stored = con.execute("SELECT count(*), count(*) FILTER (outcome = 'CANCELLED') FROM case_runs").fetchone()
    finally:
        con.close()
    assert stored == (cut.executed, 0)
    resumed = run_bench(plan_run(BenchOptions.of(db=db, resume=cut.bench_run_id,
                                     executor=Executor.PROCESSES, concurrency=2)))  # fmt: skip
    assert resumed.status == "completed" and resumed.skipped == cut.executed
    run_bench(plan_run(BenchOptions.of(db=tmp_path / "whole.duckdb", evalsets=FAMILIES, epochs=4, run_id="same")))
    for table in ("case_runs", "tool_calls"):
        assert _rows(db, table) == _rows(tmp_path / "whole.duckdb", table), table


def test_cli_accepts_the_processes_executor(tmp_path: Path) -> None:
    cli_run_missing_context(tmp_path, "--executor", "processes", "--concurrency", "4")
