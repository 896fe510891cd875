"""`harness-bench sweep`: run a grid of thresholds and budgets, each point one bench run tagged with the sweep's id;
interrupted or cut by a failed write, say how to resume; then name the `recommend` command."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from runners.commands._bench import (
    _add_bench,
    _bench_options,
    _claim,
    _interrupted,
    _interrupts,
    _name_run,
    _storage_failed,
    _warn_unchecked,
)
from runners.commands._common import EXIT_OK, _progress, _say, _sub
from runners.plan import settings
from runners.plan.agent import CONTRACT_SETTINGS, AgentFramework

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    p = _sub(sub, "sweep", "run a grid of thresholds and budgets, each point a bench run tagged with one sweep id",
             "Each comma list of a sweepable setting is one axis of the grid; every combination is one bench run."
             " The other settings take one value shared by every point.")  # fmt: skip
    _add_bench(p, sweep=True)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Plan the sweep (its grid points and the shared run plan), claim the database, run every point."""
    from runners.plan.sweep_plan import SweepGrid, SweepOptions, plan_sweep
    from runners.run.sweep import run_sweep
    from runners.store.resume import STORED_RUNS

    intr = _interrupts(args)
    options = _bench_options(args, command="sweep")
    axes = settings.axes_from_args(args)
    if options.execution.agent is AgentFramework.PLAIN:  # the contract's default axes: one point, not a sweep of
        axes = {n: v for n, v in axes.items() if n not in CONTRACT_SETTINGS or getattr(args, n, None) is not None}
    grid = SweepGrid() if options.resume else SweepGrid(axes)
    plan = plan_sweep(SweepOptions(grid, replace(options, resume=None), options.resume), STORED_RUNS)
    if intr.received:
        return _interrupted(intr, "sweep", "sweep", args.db, None, "", 0, 0)
    _claim(args.db)
    counts = [0, 0]  # case runs stored, planned (the progress callback's view)

    def on_progress(done: int, total: int) -> None:
        counts[:] = [done, total]
        progress.update(task, completed=done, total=total)

    with _progress() as progress:
        task = progress.add_task("sweep", total=None, passed="")
        summary = run_sweep(plan, cancellation=intr.token, on_progress=on_progress,
                            on_start=lambda sweep_id: _name_run(intr, "sweep", args.db, sweep_id))  # fmt: skip
    failed = next((b for b in summary.bench_runs if b.storage_error is not None), None)
    if failed is not None and failed.storage_error is not None:
        return _storage_failed("sweep", "sweep", args.db, summary.sweep_id, failed.storage_error, counts[0], counts[1],
                               failed.status_recorded)  # fmt: skip
    if intr.received:
        return _interrupted(intr, "sweep", "sweep", args.db, summary.sweep_id, summary.status, *counts)
    _warn_unchecked(args.db)
    part = f"shard {args.shard} of " if args.shard else ""
    _say(f"{part}sweep {summary.sweep_id} {summary.status}: {summary.points} grid points → {args.db}")
    if args.shard:
        _say(f"next, with every shard's file: harness-bench merge OUT.duckdb {args.db} …")
    else:
        _say(f"next: harness-bench recommend --db {args.db} --sweep {summary.sweep_id}")
    return EXIT_OK
