"""What `harness-bench run` and `harness-bench sweep` share: their flags (settings, cassettes, bench, execution,
run options), the options a command line gives the planner, and what both say when a run is
claimed, interrupted or stopped by a failed write, with the exact command that continues it."""

from __future__ import annotations

import argparse
import dataclasses
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text

from runners.commands._common import EXIT_INTERRUPTED, EXIT_STORAGE, _error, _int_in, _say, err
from runners.plan import run_options, settings
from runners.plan.executor import Executor
from runners.plan.options import BenchOptions, default_epochs, default_of
from runners.plan.rules import MAX_CONCURRENCY
from runners.run import interrupts

if TYPE_CHECKING:
    from harness import CancellationToken

__all__ = [
    "_add_bench",
    "_bench_options",
    "_claim",
    "_endpoint_named",
    "_interrupted",
    "_interrupts",
    "_name_run",
    "_resume_refused",
    "_storage_failed",
    "_warn_unchecked",
]


# -- shared options -----------------------------------------------------------------------------
def _add_bench(p: argparse.ArgumentParser, *, sweep: bool) -> None:
    """The settings, then the run options (declared in runners/plan/run_options.py: flag, type, help) in their
    help groups beside the flags of where and how the command runs."""
    command = "sweep" if sweep else "run"
    settings.add_arguments(p, sweep=sweep)
    g = p.add_argument_group("cassettes")
    run_options.add_argument(g, "cassettes", command)
    run_options.add_argument(g, "record_mode", command)
    g = p.add_argument_group("bench")
    g.add_argument("--db", type=Path, default=default_of("db"), help=f"DuckDB file (default {default_of('db')})")
    run_options.add_argument(g, "label", command)
    run_options.add_argument(g, "epochs", command)
    g.add_argument("--concurrency", type=_int_in(1, MAX_CONCURRENCY), default=default_of("concurrency"), metavar="N",
                   help=f"case runs in flight (default {default_of('concurrency')})")  # fmt: skip
    g.add_argument("--max-in-flight", type=_int_in(1, MAX_CONCURRENCY), default=default_of("max_in_flight"),
                   metavar="N",
                   help="model requests in flight per endpoint over all runs (default: --concurrency)")  # fmt: skip
    what = "SWEEP_ID" if sweep else "BENCH_RUN_ID"
    g.add_argument("--resume", default=None, metavar=what,
                   help="finish an interrupted " + ("sweep" if sweep else "bench run") + " with its stored settings"
                        " (only --db, --concurrency, --executor, --ray-address, --base-url and --api-key-env may be"
                        " given with it)")  # fmt: skip
    run_options.add_argument(g, "transcripts", command)
    # the loop is stored with the run and restored by --resume: a run option, not an execution flag
    run_options.add_argument(g, "agent", command)
    _add_execution(p, command)
    run_options.add_arguments(p, command)


def _add_execution(p: argparse.ArgumentParser, command: str) -> None:
    # Execution options say where and how the work runs; none of them is a setting, so none changes
    # what a run measures (runners/plan/settings.py stays the one declaration of those).
    g = p.add_argument_group("execution (never part of a run's settings)")
    run_options.add_argument(g, "shard", command)
    run_options.add_argument(g, "run_id", command)
    g.add_argument("--executor", default=default_of("executor").value, choices=[e.value for e in Executor],
                   help="local: --concurrency threads in this process (default); processes: one worker process per"
                        " CPU sharing the --concurrency threads (past one process's GIL); ray: Ray tasks; finished"
                        f" case runs stream back to this process's DuckDB writer (ray needs {_RAY_EXTRA})")  # fmt: skip
    g.add_argument("--ray-address", default=None, metavar="ADDRESS",
                   help="with --executor ray: an existing cluster (e.g. ray://head:10001 or auto);"
                        " default: start a local instance")  # fmt: skip


_RAY_EXTRA = "pip install 'harness-bench[ray]'"


# -- checks before any file is created ----------------------------------------------------------
def _resume_refused(args: argparse.Namespace) -> dict[str, object]:
    """The flags given with --resume that a resume would ignore (every setting but the endpoint ones, and the
    run options the stored run fixes)."""
    decl = settings.declaration()
    refused: dict[str, object] = {decl[n].flag: v for n, v in settings.given(args).items() if not decl[n].endpoint}
    refused |= run_options.given_flags(args)
    return refused


def _resume_overrides(args: argparse.Namespace) -> dict[str, settings.SettingValue]:
    """The endpoint settings given with --resume (a new base URL or key variable replaces the stored one)."""
    decl = settings.declaration()
    return {k: v for k, v in settings.given(args).items() if decl[k].endpoint}


def _bench_options(args: argparse.Namespace, run_settings: settings.RunSettings | None, *, command: str,
                   cancellation: CancellationToken) -> BenchOptions:  # fmt: skip
    """The options the flags give, for the flag rules (runners/plan/rules.py) the plan applies (with --resume: only
    where and how it executes, and the flags a resume refuses; the rest is the stored run's)."""
    invocation = BenchOptions(
        db=args.db, concurrency=args.concurrency, max_in_flight=args.max_in_flight, keep_runs=False,
        executor=Executor(args.executor), ray_address=args.ray_address, cancellation=cancellation,
    )  # fmt: skip
    if args.resume:
        return dataclasses.replace(invocation, resume=args.resume, resume_overrides=_resume_overrides(args),
                                   resume_refused=_resume_refused(args))  # fmt: skip
    run_settings = run_settings or settings.RunSettings.of()
    measured = dataclasses.replace(invocation, config=run_settings.config, model_settings=run_settings.model_settings)
    return run_options.options_from_args(args, measured, {"epochs": default_epochs(command)})


# -- what a run or sweep says when it is claimed, interrupted or cannot write ------------------
def _resume_command(command: str, db: Path, run_id: str) -> str:
    """The exact command that continues a bench run (`run`) or sweep (`sweep`), shell-quoted."""
    return f"harness-bench {command} --db {shlex.quote(str(db))} --resume {shlex.quote(run_id)}"


def _say_resume(commands: Sequence[str]) -> None:
    """Each resume command on a line of its own, never wrapped (it is copied into a shell) nor read as markup."""
    for command in commands:
        err.print(Text(f"  {command}"), soft_wrap=True)


def _claim(db: Path) -> None:
    """Open the database as its only writer (clear message if locked) and mark dead runs interrupted."""
    from runners.store.connection import connect
    from runners.store.runs import mark_stale_runs, stale_runs

    if not db.exists():
        return  # nothing to claim; not creating it here lets a failed preflight leave no file behind
    con = connect(db)
    try:
        stale = stale_runs(con)
        mark_stale_runs(con)
    finally:
        con.close()
    if not stale.bench_runs and not stale.sweeps:
        return
    alone = [b for b, sweep in stale.bench_runs if sweep is None]
    named = [f"{b} (sweep {sweep})" if sweep else b for b, sweep in stale.bench_runs]
    named += [f"sweep {s}" for s in stale.sweeps if all(s != sweep for _, sweep in stale.bench_runs)]
    count = f"{len(stale.bench_runs)} bench run(s)" if stale.bench_runs else f"{len(stale.sweeps)} sweep(s)"
    _say(f"{count} left 'running' by a process that died are now 'interrupted': {', '.join(named)};"
         " continue with:", stderr=True)  # fmt: skip
    _say_resume([_resume_command("sweep", db, s) for s in stale.sweeps]
                + [_resume_command("run", db, b) for b in alone])  # fmt: skip


def _interrupted(intr: interrupts.Interrupts, what: str, command: str, db: Path, run_id: str | None,
                 status: str, stored: int, planned: int) -> int:  # fmt: skip
    """Say what an interrupt left (the id, the case runs stored, the exact resume command); its exit code."""
    sig = intr.received.name if intr.received else "interrupt"
    if run_id is None:
        _say(f"{sig}: stopped before anything was written", stderr=True)
    elif status == "completed":
        _say(f"{what} {run_id} completed before {sig} took effect ({stored} of {planned} case runs stored);"
             " nothing to resume", stderr=True)  # fmt: skip
    else:
        _say(f"{what} {run_id} interrupted by {sig}: {stored} of {planned} case runs stored, the ones in flight"
             " discarded; continue with:", stderr=True)  # fmt: skip
        _say_resume([_resume_command(command, db, run_id)])
    return intr.exit_code or EXIT_INTERRUPTED


def _storage_failed(what: str, command: str, db: Path, run_id: str, error: str, stored: int, planned: int,
                    recorded: bool) -> int:  # fmt: skip
    """A write to the database failed (full disk, I/O error): say what is stored and how to continue."""
    state = "recorded 'interrupted'" if recorded else "left 'running' (the next run on it marks it 'interrupted')"
    _error(f"writing {db} failed ({error}): {what} {run_id} stopped, {state}, {stored} of {planned} case runs"
           " stored; free some space (or fix the device), then continue with the command below")  # fmt: skip
    _say_resume([_resume_command(command, db, run_id)])
    return EXIT_STORAGE


def _warn_unchecked(db: Path) -> None:
    """A write-ahead log left next to the database after the writer closed: its checkpoint failed (full
    disk). The rows are safe in it; say so, so that nobody deletes it."""
    wal = db.with_name(db.name + ".wal")
    if wal.exists() and wal.stat().st_size > 0:
        _say(f"warning: {wal} could not be folded into {db} (full disk?); the rows are stored in it: keep it next"
             " to the database (the next writer folds it in once there is room)", stderr=True)  # fmt: skip


def _endpoint_named(run: settings.RunSettings | None, opts: Any) -> str:
    """The endpoint (and the cassettes) a bench run used, for the one-line error when none of it served."""
    from harness import OpenAIChatModel
    from runners.plan.redact import safe_url

    name = safe_url(OpenAIChatModel.resolve_base_url(run.model_settings.base_url if run is not None else None)) or ""
    cassettes = getattr(opts, "cassettes", None)
    return f"{name} (cassettes {cassettes})" if cassettes is not None else name


def _interrupts(args: argparse.Namespace) -> interrupts.Interrupts:
    """The handlers `main` installed for a writing command (a state that never fires when called directly)."""
    intr: interrupts.Interrupts = getattr(args, "interrupts", None) or interrupts.Interrupts()
    intr.exit_note = "nothing had started yet"
    return intr


def _name_run(intr: interrupts.Interrupts, command: str, db: Path, run_id: str) -> None:
    """Once the bench run or sweep exists, a second signal names it and how to continue."""
    what = "sweep" if command == "sweep" else "bench run"
    intr.exit_note = (
        f"{what} {run_id} stays 'running' until the next writer marks it 'interrupted'; continue with:\n"
        f"  {_resume_command(command, db, run_id)}"
    )
