"""Sweeps: the full grid of sweepable settings, each point a bench run tagged with one sweep id. `run_sweep`
executes a `SweepPlan` (runners/plan/sweep_plan.py: the shared `RunPlan` and one per grid point, a resume's read
from the stored sweep); each point's plan runs through `run_point` on the sweep's connection.

The axes are the sweepable settings of the one declaration (`runners/plan/settings.py`); a setting
declared sweepable later is an axis with no edit here. Resumable as a whole: `--resume SWEEP_ID`
skips completed points, resumes interrupted ones and runs the missing ones, so an interrupted sweep
loses nothing already written.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import duckdb

from harness import CancellationToken
from runners.plan import sweep_plan
from runners.plan.run_plan import RunPlan
from runners.plan.stored_plan import saved_sweep_options
from runners.plan.sweep_plan import SweepGrid, SweepOptions, SweepPlan
from runners.run.bench import BenchSummary, StartHook, run_point
from runners.run.preflight import preflight
from runners.store.connection import connect
from runners.store.errors import WRITE_FAILURES
from runners.store.runs import SweepStart, find_point, finish_sweep, start_sweep, sweep_ids

__all__ = ["SweepGrid", "SweepOptions", "SweepPlan", "SweepSummary", "plan_sweep", "run_sweep", "sweep_ids"]


@dataclass
class SweepSummary:
    """What a sweep did."""

    sweep_id: str
    """Its id."""
    status: str
    """completed | interrupted | failed."""
    points: int
    """Grid points."""
    bench_runs: list[BenchSummary]
    """One per point run by this invocation."""


SweepProgress = Callable[[int, int], None]


def plan_sweep(opts: SweepOptions) -> SweepPlan:
    """`runners.plan.sweep_plan.plan_sweep` reading a stored sweep through the store. What `run_sweep` takes."""
    from runners.store.resume import STORED_RUNS

    return sweep_plan.plan_sweep(opts, STORED_RUNS)


def run_sweep(
    plan: SweepPlan, *, cancellation: CancellationToken | None = None, on_progress: SweepProgress | None = None,
    on_start: StartHook | None = None,
) -> SweepSummary:  # fmt: skip
    """Run (or resume) every grid point of `plan` (from `plan_sweep`). Once `cancellation` is set, no new point
    starts and the sweep ends `interrupted` (unless every point had already completed)."""
    if not isinstance(plan, SweepPlan):
        raise TypeError("run_sweep runs a SweepPlan: run_sweep(plan_sweep(SweepOptions(...)))")
    # once for every point, before the sweeps row: an unusable endpoint writes nothing
    preflight(plan.base)
    con = connect(plan.base.options.storage.db, columns=plan.base.record.columns)
    try:
        return _sweep(con, plan, cancellation or CancellationToken(), on_progress, on_start)
    finally:
        con.close()


def _sweep(
    con: duckdb.DuckDBPyConnection, plan: SweepPlan, cancellation: CancellationToken,
    on_progress: SweepProgress | None, on_start: StartHook | None = None,
) -> SweepSummary:  # fmt: skip
    base = plan.base.options
    sweep_id = plan.sweep_id or f"sw-{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"
    start = SweepStart(sweep_id, base.settings.model_settings.model.raw, base.storage.label, plan.grid.to_json(),
                       saved_sweep_options(base))  # fmt: skip
    start_sweep(con, start, resumes=plan.resumes)
    if on_start:
        on_start(sweep_id)
    total = sum(len(p.work) for p in plan.points)  # this shard's share of each point (every item unsharded)
    if on_progress:
        on_progress(0, total)
    done_before = 0
    summaries: list[BenchSummary] = []
    status = "failed"
    stopped = False  # Ctrl-C/SIGTERM (`cancellation`): no new point starts
    try:
        for point in plan.points:
            if cancellation.cancelled:
                stopped = True
                break
            found = find_point(con, sweep_id, point.record.settings_json)
            if found and found.status == "completed":
                done_before += len(point.work)
                if on_progress:
                    on_progress(done_before, total)
                continue
            offset = done_before

            def hook(done: int, _total: int, _run: object, offset: int = offset) -> None:
                if on_progress:
                    on_progress(offset + done, total)

            at = _at(point, sweep_id, found.bench_run_id if found else None)
            summaries.append(run_point(con, at, cancellation=cancellation, on_progress=hook))
            if summaries[-1].status != "completed":
                stopped = True
                break
            done_before += len(point.work)
        status = "interrupted" if stopped else "completed"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        try:
            finish_sweep(con, sweep_id, status)
        except WRITE_FAILURES:
            if not summaries or summaries[-1].storage_error is None:
                raise  # (else left `running`: the next writer marks it `interrupted`)
            status = "interrupted"
    return SweepSummary(sweep_id, status, len(plan.points), summaries)


def _at(point: RunPlan, sweep_id: str, stored: str | None) -> RunPlan:
    """A point's plan in sweep `sweep_id`: resuming its stored bench run `stored`, if any."""
    if stored is None:
        return replace(point, sweep_id=sweep_id)
    return replace(point, sweep_id=sweep_id, bench_run_id=stored, resumes=True)
