"""The `processes` executor: case runs in spawned worker processes on this machine, past
one process's GIL, streamed back to the one DuckDB writer in the driver. Rows must equal the local
executor's, replay must work in workers, and a cancellation must stop the workers without a wrong row."""

from __future__ import annotations

import multiprocessing
import os
import struct
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from harness.context import CancellationToken
from runners.domain.evalset import load_cases
from runners.domain.profiles import trajectory_for_model
from runners.endpoints.simulator import SimulatorServer
from runners.plan.options import BenchOptions
from runners.plan.settings import ModelSettings
from runners.run import executors
from runners.run.bench import plan_run, run_bench
from runners.run.executors import Executor, ExecutorError, iterate_processes
from tests._db import open_read_only
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


def test_workers_see_the_environment_the_run_starts_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers are forked from a fork server, which keeps the environment this process had when it started (at its
    first run on worker processes): an API key and an endpoint set since (`OPENAI_BASE_URL`, no `--base-url`, so the
    key is required) reach them all the same."""
    first = run_bench(plan_run(BenchOptions.of(db=tmp_path / "first.duckdb", evalsets=["empty_logs"],
                                               executor=Executor.PROCESSES, concurrency=2)))  # fmt: skip
    assert first.errors == [] and first.executed > 0
    with SimulatorServer(load_cases(), trajectory_for=trajectory_for_model) as sim:
        monkeypatch.setenv("HB_KEY_SET_AFTER_THE_FIRST_WORKERS", "x")
        monkeypatch.setenv("OPENAI_BASE_URL", sim.base_url)
        summary = run_bench(plan_run(BenchOptions.of(
            db=tmp_path / "later.duckdb", evalsets=["empty_logs"], executor=Executor.PROCESSES, concurrency=2,
            model_settings=ModelSettings(model="openai:scripted", api_key_env="HB_KEY_SET_AFTER_THE_FIRST_WORKERS"),
        )))  # fmt: skip
        served = len(sim.log)
    assert summary.errors == [] and all(r.result.error is None for r in summary.runs), summary.errors
    assert summary.executed == first.executed and served >= summary.executed


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
    con = open_read_only(db)
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


def _leave_a_message_half_written(
    plan: Any, tasks: Any, results: Any, stop: Any, threads: int, environ: dict[str, str]
) -> None:
    """A worker that exits between a message's header and its body, as a worker killed, or one whose pipe feeder is
    cut off at exit once `stop` is set, can: 20,000 bytes announced, none sent. It exits at once (code 0), or first
    waits for `stop` like a real worker when the driver sets `HB_TEST_WAIT_FOR_STOP` (in the environment it hands
    its workers)."""
    os.write(results._writer.fileno(), struct.pack("!i", 20_000))
    while environ.get("HB_TEST_WAIT_FOR_STOP") and not stop.value:
        time.sleep(0.05)
    os._exit(0)


def _drive(todo_plan: Any, token: CancellationToken) -> tuple[threading.Thread, list[BaseException | int]]:
    """Runs the driver on a thread, so a driver that hangs fails the test instead of the suite."""
    todo, plan = todo_plan
    outcome: list[BaseException | int] = []

    def drive() -> None:
        try:
            outcome.append(sum(1 for _ in iterate_processes(todo, plan, token)))
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=drive, daemon=True)
    thread.start()
    return thread, outcome


@pytest.fixture
def half_writing_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(executors, "_process_worker", _leave_a_message_half_written)
    plan = plan_run(BenchOptions.of(db=tmp_path / "x.duckdb", evalsets=["empty_logs"], executor=Executor.PROCESSES,
                                    concurrency=2))  # fmt: skip
    return list(plan.work), plan


def test_a_worker_that_dies_mid_message_fails_the_run_instead_of_hanging_it(half_writing_workers: Any) -> None:
    """The driver's read of that message would block for good (it holds a write end of the pipe itself, so no
    end-of-file comes); the run must end with the worker's death, exit code 0 included, within a few polls."""
    thread, outcome = _drive(half_writing_workers, CancellationToken())
    thread.join(timeout=20)
    assert not thread.is_alive(), "the driver hangs on a half-written message"
    assert len(outcome) == 1 and isinstance(outcome[0], ExecutorError), outcome
    assert "worker harness-bench-worker-" in str(outcome[0]) and "died (exit code 0)" in str(outcome[0])


def test_a_cancellation_with_a_message_half_written_returns_and_leaves_no_worker(
    half_writing_workers: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hang once seen in this module's cancellation test: workers cut off mid-message once `stop` was set, and
    the driver, draining the pipe after the cancel, blocked on the body that never came."""
    monkeypatch.setenv("HB_TEST_WAIT_FOR_STOP", "1")
    token = CancellationToken()
    thread, outcome = _drive(half_writing_workers, token)
    time.sleep(1.5)
    assert thread.is_alive() and outcome == [], "the driver waits while the workers are alive"
    token.cancel()
    thread.join(timeout=20)
    assert not thread.is_alive(), "the driver hangs on a half-written message after the cancellation"
    assert outcome == [0] and multiprocessing.active_children() == []
