"""`harness-bench run`: run the selected cases through the Harness (epochs, cassettes, shard, executor) into a DuckDB
file, print the family table and the run's summary; interrupted or cut by a failed write, say how to resume."""

from __future__ import annotations

import argparse
from typing import Any

from rich.text import Text

from runners.commands._bench import (
    _add_bench,
    _bench_options,
    _claim,
    _endpoint_named,
    _interrupted,
    _interrupts,
    _name_run,
    _storage_failed,
    _warn_unchecked,
)
from runners.commands._common import (
    EXIT_INPUT,
    EXIT_OK,
    EXIT_REGRESSION,
    _error,
    _progress,
    _say,
    _sub,
    err,
    out,
)
from runners.plan.flags import FlagModel
from runners.rendering import tables

__all__ = ["register", "run"]


class _RunFlags(FlagModel):
    """`run`'s flag of its own, beside every option of a run (runners/plan/options.py)."""

    strict: bool = False
    """exit 1 when any case run misses its expectations"""


def register(sub: Any) -> None:
    p = _sub(sub, "run", "run cases through the harness and write metrics to DuckDB",
             "Run every selected case (default: all built-in cases, scripted model) into a DuckDB file.")  # fmt: skip
    _add_bench(p, sweep=False)
    _RunFlags.add_flags(p, "run")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Plan the run from the flags (every rule checked before a file is touched), claim the database, run the plan."""
    from runners.plan.run_plan import plan_run
    from runners.run.bench import run_bench
    from runners.store.resume import STORED_RUNS

    intr = _interrupts(args)
    opts = _bench_options(args, command="run")
    plan = plan_run(opts, STORED_RUNS)
    shard_spec = plan.options.execution.shard
    if intr.received:
        return _interrupted(intr, "bench run", "run", args.db, None, "", 0, 0)
    _claim(args.db)
    passed = [0]
    with _progress() as progress:
        task = progress.add_task("cases", total=None, passed="")

        def hook(done: int, total: int, run: Any) -> None:
            if run is not None and run.passed:
                passed[0] += 1
            progress.update(task, completed=done, total=total, passed=f"{passed[0]} passed")

        summary = run_bench(plan, cancellation=intr.token, keep_runs=False, on_progress=hook,
                            on_start=lambda run_id: _name_run(intr, "run", args.db, run_id))  # fmt: skip
    if summary.storage_error is not None:
        return _storage_failed("bench run", "run", args.db, summary.bench_run_id, summary.storage_error,
                               summary.skipped + summary.executed, summary.planned,
                               summary.status_recorded)  # fmt: skip
    if intr.received:
        return _interrupted(intr, "bench run", "run", args.db, summary.bench_run_id, summary.status,
                            summary.skipped + summary.executed, summary.planned)  # fmt: skip
    _warn_unchecked(args.db)
    out.print(tables.family_table(f"bench run {summary.bench_run_id}", summary.families))
    rate = summary.executed / summary.wall_seconds if summary.wall_seconds else 0.0
    share = summary.write_seconds / summary.wall_seconds if summary.wall_seconds else 0.0
    part = f"shard {shard_spec} of " if shard_spec else ""
    status = summary.status
    if summary.executed and summary.infra_errors == summary.executed:  # every case run executed, none measured
        status += ", but every case run ended on an endpoint or cassette error"
    _say(
        f"{part}bench run {summary.bench_run_id} {status}: {summary.executed} case runs executed"
        f" ({summary.skipped} already done) in {summary.wall_seconds:.2f}s, {rate:.1f} runs/s;"
        f" DuckDB writes {share:.1%} of wall time → {args.db}"
    )
    if shard_spec:
        _say(f"next, with every shard's file: harness-bench merge OUT.duckdb {args.db} …")
    for case_id, error in summary.errors[:5]:
        err.print(Text.assemble((f"{case_id}: ", "yellow"), error))
    if len(summary.errors) > 5:
        _say(f"… and more case runs with errors (see case_runs.error in {args.db})", stderr=True)
    if summary.infra_errors:
        # An endpoint or cassette failure is not a model verdict: never let it pass as a bad model.
        err.print(Text(
            f"{summary.infra_errors} of {summary.executed} case run(s) ended on an endpoint or cassette error"
            f" (rate limit, 5xx, timeout, connection, 4xx, a 2xx that is not a chat completion, cassette miss),"
            f" not on the model's answer: the bench's failure, unjudged and left out of every pass figure; see"
            f" case_runs.error in {args.db}", style="red",
        ))  # fmt: skip
        if summary.infra_errors == summary.executed:
            _error(f"the endpoint {_endpoint_named(summary.settings, plan.options)} served no case run (exit 2)")
            return EXIT_INPUT
    failing = summary.failed
    if failing and args.strict:
        _say(f"{failing} case run(s) did not meet their expectations (--strict)", stderr=True)
        return EXIT_REGRESSION
    return EXIT_OK
