"""A bench run: cases × epochs through one model at one config, every case run into DuckDB."""

from __future__ import annotations

import functools
import os
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextvars import copy_context
from dataclasses import dataclass, field
from datetime import UTC, datetime

import duckdb

from harness import CancellationToken, __version__
from runners.domain.case_setup import import_tool_backends
from runners.domain.evalset import EvalCase
from runners.domain.redaction import redact
from runners.plan import run_plan
from runners.plan.executor import Executor
from runners.plan.options import BenchOptions
from runners.plan.run_plan import RunPlan
from runners.plan.settings import RunSettings
from runners.run._execute import ModelFactory, execute_case
from runners.run.case_runner import CaseRun
from runners.run.executors import iterate_processes, iterate_ray
from runners.run.preflight import preflight
from runners.store.connection import connect
from runners.store.errors import WRITE_FAILURES, MetricsWriteError
from runners.store.runs import (
    BenchRunStart,
    FamilyRow,
    family_rows,
    finish_bench_run,
    start_bench_run,
    stored_case_run_ids,
)
from runners.store.schema import case_run_rows
from runners.store.transcripts import transcript_rows
from runners.store.writer import MetricsWriter

__all__ = [
    "BenchSummary", "FamilyRow", "ProgressHook", "StartHook", "case_run_id", "family_rows",
    "git_commit", "plan_run", "run_bench", "run_point",
]  # fmt: skip


@dataclass
class BenchSummary:
    """What a bench run did."""

    bench_run_id: str
    """Its id."""
    status: str
    """completed | interrupted | failed."""
    planned: int
    """Case runs planned in total."""
    executed: int
    """Case runs executed by this invocation."""
    skipped: int
    """Case runs already present (resume)."""
    wall_seconds: float
    """Wall time of this invocation."""
    write_seconds: float
    """Time spent writing DuckDB."""
    rows_written: int
    """Rows written (case_runs + tool_calls + events)."""
    runs: list[CaseRun] = field(default_factory=list)
    """The case runs executed by this invocation (when `keep_runs`)."""
    failed: int = 0
    """Case runs that missed their expectations."""
    errors: list[tuple[str, str]] = field(default_factory=list)
    """(case id, error) of case runs that hit a loop-level error (first 50)."""
    settings: RunSettings | None = None
    """The settings the case runs were made with (restored ones on resume)."""
    infra_errors: int = 0
    """Case runs that ended on an endpoint or cassette error (not a model verdict)."""
    storage_error: str | None = None
    """Why writing the database failed (full disk, I/O error): the run stopped, `interrupted`."""
    status_recorded: bool = True
    """False when even the final status could not be written (the row stays `running` until the next
    writer marks it `interrupted`)."""
    families: list[FamilyRow] = field(default_factory=list)
    """The per-family summary of the whole bench run as stored (`run_bench`, once its rows are stored; empty
    after a storage failure and for a sweep's points)."""


def git_commit() -> str | None:
    """The current commit of the working directory's repository, if any (asked once per folder and process: a
    sweep of many bench runs, or a test process of hundreds, starts one git instead of one a run)."""
    return _git_commit_in(os.getcwd())


@functools.lru_cache(maxsize=64)
def _git_commit_in(folder: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
            cwd=folder,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _new_id() -> str:
    return f"br-{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"


ProgressHook = Callable[[int, int, CaseRun | None], None]
StartHook = Callable[[str], None]
"""Called with the bench run (or sweep) id once its row is committed (the CLI names it if killed)."""


def plan_run(opts: BenchOptions) -> RunPlan:
    """`runners.plan.run_plan.plan_run` reading stored runs through the store: the plan of `opts` (every flag rule
    applied, a resume's stored run read). What `run_bench` takes."""
    from runners.store.resume import STORED_RUNS

    return run_plan.plan_run(opts, STORED_RUNS)


def run_bench(
    plan: RunPlan, *, cancellation: CancellationToken | None = None, keep_runs: bool = True,
    on_progress: ProgressHook | None = None, on_start: StartHook | None = None,
) -> BenchSummary:  # fmt: skip
    """Run the bench run `plan` (from `plan_run`: a new run, or the resume of a stored one). Once `cancellation`
    is set (the CLI's one Ctrl-C/SIGTERM flag, runners/run/interrupts.py; or on KeyboardInterrupt), no case run
    starts, finished ones are kept, the ones in flight discarded, and the bench run is marked interrupted.
    `keep_runs`: keep every CaseRun in the summary (off for large runs: memory stays flat)."""
    if not isinstance(plan, RunPlan):
        raise TypeError("run_bench runs a RunPlan: run_bench(plan_run(BenchOptions(...)))")
    t0 = time.perf_counter()
    preflight(plan)  # an unusable endpoint is exit 2 before the database is even opened
    own = connect(plan.options.storage.db, columns=plan.record.columns)
    try:
        summary = _run(own, plan, t0, cancellation or CancellationToken(), keep_runs, on_progress, on_start)
        if summary.storage_error is None:  # read on the writer's connection: the CLI prints it without reopening
            summary.families = family_rows(own, summary.bench_run_id)
        return summary
    finally:
        own.close()


def run_point(
    con: duckdb.DuckDBPyConnection, plan: RunPlan, *, cancellation: CancellationToken | None = None,
    on_progress: ProgressHook | None = None,
) -> BenchSummary:  # fmt: skip
    """One grid point of a sweep: the bench run `plan` on the sweep's open connection, its endpoint already probed
    once for the whole sweep (`run_sweep`)."""
    return _run(con, plan, time.perf_counter(), cancellation or CancellationToken(), False, on_progress, None)


def case_run_id(bench_run_id: str, case_id: str, epoch: int) -> str:
    """Deterministic id: resuming can never duplicate a case run."""
    return f"{bench_run_id}/{case_id}/{epoch}"


def _run(
    con: duckdb.DuckDBPyConnection, plan: RunPlan, t0: float, cancellation: CancellationToken, keep_runs: bool,
    on_progress: ProgressHook | None, on_start: StartHook | None,
) -> BenchSummary:  # fmt: skip
    opts, record = plan.options, plan.record
    bench_run_id = plan.bench_run_id or _new_id()
    done: set[str] = set()
    if plan.resumes:
        done = set(stored_case_run_ids(con, bench_run_id))
    factory = ModelFactory(plan)
    spec = plan.model
    planned = plan.work
    start_bench_run(con, BenchRunStart(
        bench_run_id, plan.resumes, plan.sweep_id, git_commit(), record.evalset_hash, len(planned), __version__,
        opts.execution.shard, record.settings_json, record.setting_columns, record.option_columns,
    ))  # fmt: skip
    if on_start:
        on_start(bench_run_id)
    todo = [(c, e) for c, e in planned if case_run_id(bench_run_id, c.id, e) not in done]
    secrets = plan.secrets
    writer = MetricsWriter(con, secrets=secrets)
    summary = BenchSummary(bench_run_id, "running", len(planned), 0, len(planned) - len(todo), 0.0, 0.0, 0)
    summary.settings = opts.settings
    status = "failed"
    error: str | None = None
    try:
        if on_progress:
            on_progress(summary.skipped, len(planned), None)
        for run, epoch in _iterate(todo, factory, plan, cancellation):
            if cancellation.cancelled:
                # In flight when Ctrl-C/SIGTERM came: discarded, never a row shaped by the interrupt
                # (CANCELLED, or a backend cut short); --resume re-runs it under the same id.
                continue
            run_id = case_run_id(bench_run_id, run.case.id, epoch)
            rows = case_run_rows(bench_run_id, run_id, spec.raw, opts.storage.label, epoch, record.swept, run)
            if opts.storage.transcripts:  # buffered with the case run's rows: one transaction
                writer.add_transcript(*transcript_rows(bench_run_id, run_id, run.result))
            writer.add(rows)
            summary.executed += 1
            summary.failed += run.passed is False  # None: the bench's failure, counted in infra_errors
            # typed where the call failed (an endpoint, network or cassette failure), never read from the text
            kind = run.result.error_kind
            summary.infra_errors += kind is not None and kind.infrastructure
            if run.result.error and len(summary.errors) < 50:
                summary.errors.append((run.case.id, redact(run.result.error, secrets)))  # printed on stderr
            if keep_runs:
                summary.runs.append(run)
            if on_progress:
                on_progress(summary.skipped + summary.executed, len(planned), run)
        writer.flush()  # before the status: a run whose last rows were not stored is never `completed`
        status = "completed" if summary.executed == len(todo) else "interrupted"
    except MetricsWriteError as exc:  # full disk, I/O error: stop, keep what is stored, resumable
        cancellation.cancel()  # no new case run starts; the ones in flight are discarded
        status, summary.storage_error = "interrupted", str(exc)
        summary.executed = writer.cases_written  # what this invocation stored
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    except BaseException as exc:
        error = redact(f"{type(exc).__name__}: {exc}", secrets)
        raise
    finally:
        try:
            writer.flush()
        except MetricsWriteError as exc:
            status, summary.storage_error = "interrupted", summary.storage_error or str(exc)
            summary.executed = writer.cases_written
        try:
            finish_bench_run(
                con,
                bench_run_id,
                status,
                error or (f"storage: {summary.storage_error}" if summary.storage_error else None),
            )
        except WRITE_FAILURES as exc:
            # left `running` (never `completed`): the next writer marks it `interrupted`
            status, summary.status_recorded = "interrupted", False
            summary.storage_error = summary.storage_error or str(exc).splitlines()[0]
        summary.status = status
        summary.wall_seconds = time.perf_counter() - t0
        summary.write_seconds = writer.write_seconds
        summary.rows_written = writer.rows_written
    return summary


def _iterate(
    todo: Sequence[tuple[EvalCase, int]], factory: ModelFactory, plan: RunPlan, cancellation: CancellationToken
) -> Iterator[tuple[CaseRun, int]]:
    execution = plan.options.execution
    concurrency = execution.concurrency
    if execution.executor is Executor.RAY:
        yield from iterate_ray(todo, plan, cancellation)
        return
    if execution.executor is Executor.PROCESSES:
        yield from iterate_processes(todo, plan, cancellation)
        return
    if concurrency == 1:
        for case, epoch in todo:
            if cancellation.cancelled:  # once set, no case run starts
                return
            yield execute_case(case, epoch, factory, cancellation), epoch
        return
    import_tool_backends()
    # Each case run in the context of the run: the declarations in effect (runners/plan/declarations.py) hold there.
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="case")
    pending: dict[Future[CaseRun], int] = {}
    it = iter(todo)
    try:
        for case, epoch in it:
            if cancellation.cancelled:
                break
            pending[pool.submit(copy_context().run, execute_case, case, epoch, factory, cancellation)] = epoch
            if len(pending) >= concurrency * 2:
                break
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in finished:
                epoch = pending.pop(fut)
                yield fut.result(), epoch
                nxt = None if cancellation.cancelled else next(it, None)
                if nxt is not None:
                    case, epoch = nxt
                    pending[pool.submit(copy_context().run, execute_case, case, epoch, factory, cancellation)] = epoch
    finally:
        for fut in pending:
            fut.cancel()
        pool.shutdown(wait=True, cancel_futures=True)
