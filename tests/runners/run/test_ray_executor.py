"""The Ray executor: case runs as Ray tasks on a real local Ray instance (one per module:
start-up takes seconds), finished case runs streamed back to the one DuckDB writer in the driver."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

try:
    import ray
except ImportError as exc:  # `make venv` installs the [ray] extra: a missing Ray is a broken set-up, not a skip
    raise ImportError(f"{exc}; the Ray executor's tests need `pip install -e '.[ray]'` (make venv does it)") from exc

from runners.plan.options import BenchOptions
from runners.plan.settings import ModelSettings
from runners.run.bench import plan_run, run_bench, run_point
from runners.run.executors import Executor
from runners.store.connection import connect
from tests._rows import assert_a_broken_cassette_fails_the_run, behaviour_rows, cli_run_missing_context

ROOT = Path(__file__).resolve().parents[3]
FAMILIES = ["empty_logs", "diagnosable", "protocol_violations", "tool_failures"]
_rows = behaviour_rows


@pytest.fixture(scope="module")
def local_ray() -> Iterator[str]:
    """A local Ray instance for this module (2 CPUs, no dashboard); yields its address."""
    ctx = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield str(ctx.address_info["address"])
    finally:
        ray.shutdown()


def test_ray_tasks_write_what_the_local_executor_writes(local_ray: str, tmp_path: Path) -> None:
    common: dict[str, Any] = {"evalsets": FAMILIES, "epochs": 1, "run_id": "same"}
    local = run_bench(plan_run(BenchOptions.of(db=tmp_path / "local.duckdb", **common)))
    remote = run_bench(
        plan_run(BenchOptions.of(db=tmp_path / "ray.duckdb", executor=Executor.RAY, concurrency=2, **common))
    )
    assert remote.status == "completed" and remote.executed == local.executed == local.planned > 30
    assert remote.failed == local.failed
    for table in ("case_runs", "tool_calls", "events"):
        assert _rows(tmp_path / "ray.duckdb", table) == _rows(tmp_path / "local.duckdb", table), table
    # the workers were other processes: Ray ran the case runs, not this one
    assert ray.is_initialized()


def test_finished_case_runs_stream_to_duckdb_while_tasks_still_run(local_ray: str, tmp_path: Path) -> None:
    """Each case run is handed to the writer as its task finishes: the first arrives long before the last,
    and rows are in DuckDB while later tasks are still queued (a gather-at-the-end would do neither)."""
    db = tmp_path / "stream.duckdb"
    con = connect(db)
    seen: list[tuple[float, int, int]] = []  # (time, done, rows in DuckDB)

    def hook(done: int, total: int, run: object) -> None:
        if run is None:
            return
        rows = con.execute("SELECT count(*) FROM case_runs").fetchone()
        seen.append((time.perf_counter(), done, int(rows[0]) if rows else 0))
        if done == 10:
            time.sleep(1.1)  # past the writer's one-second batch: the next finished run flushes the buffer

    t0 = time.perf_counter()
    try:
        # on the connection the hook reads (run_point: what a sweep runs each grid point through)
        summary = run_point(
            con, plan_run(BenchOptions.of(db=db, evalsets=FAMILIES, epochs=3, executor=Executor.RAY)),
            on_progress=hook,
        )  # fmt: skip
    finally:
        con.close()
    t_end = time.perf_counter()
    assert summary.executed == summary.planned == len(seen) > 90
    first = seen[0][0] - t0
    assert first < 0.5 * (t_end - t0), f"first case run after {first:.1f}s of {t_end - t0:.1f}s"
    written_early = [(done, rows) for _, done, rows in seen if rows > 0 and done < summary.planned - 20]
    assert written_early, "rows reached DuckDB while at least 20 case runs were still to come"
    assert all(rows <= done for _, done, rows in seen)


def test_cassette_replay_runs_in_ray_workers(local_ray: str, tmp_path: Path) -> None:
    """vcrpy patches the HTTP transport of a whole process; each Ray worker is its own process, so cassette
    replays run side by side and still match the in-process run case by case."""
    common: dict[str, Any] = {"evalsets": ["empty_logs", "diagnosable"], "run_id": "replay"}
    replay = {"model_settings": ModelSettings(model="openai:scripted", base_url="http://127.0.0.1:9/v1"),
              "cassettes": ROOT / "cassettes", "record_mode": "none"}  # fmt: skip
    run_bench(plan_run(BenchOptions.of(db=tmp_path / "local.duckdb", **common, **replay)))
    summary = run_bench(
        plan_run(BenchOptions.of(db=tmp_path / "ray.duckdb", executor=Executor.RAY, **common, **replay))
    )
    assert summary.errors == []
    assert _rows(tmp_path / "ray.duckdb", "case_runs") == _rows(tmp_path / "local.duckdb", "case_runs")


def test_a_task_error_reaches_the_driver_as_itself(local_ray: str, tmp_path: Path) -> None:
    assert_a_broken_cassette_fails_the_run(tmp_path, Executor.RAY)


def test_cli_runs_on_an_existing_cluster_by_address(local_ray: str, tmp_path: Path) -> None:
    """`--executor ray --ray-address` from another process joins the cluster this module started."""
    cli_run_missing_context(tmp_path, "--executor", "ray", "--ray-address", local_ray)


def test_without_ray_installed_the_executor_is_one_line_exit_2(tmp_path: Path) -> None:
    """`harness-bench` works without Ray; `--executor ray` then names the extra, before any file exists."""
    code = (
        "import sys; sys.modules['ray'] = None\n"  # what an environment without the extra sees
        "from runners.cli import main\n"
        "assert main(['run', '--evalset', 'missing_context', '--db', 'ok.duckdb']) == 0\n"
        "sys.exit(main(['run', '--executor', 'ray', '--db', 'x.duckdb']))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "error: --executor ray: Ray is not installed in this environment; pip install 'harness-bench[ray]'"
    ]
    assert [p.name for p in tmp_path.iterdir()] == ["ok.duckdb"], "the plain run worked; nothing else was written"
