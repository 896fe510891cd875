"""harness-bench: run diagnosis-agent evaluation cases through the Harness and
record metrics.

Exit codes: 0 ok · 1 regression (gate) or failing cases with --strict · 2
unusable input · 3 inconclusive (gate without the power to pass;
--allow-inconclusive makes it 0) · 74 the database could not be written (full
disk, I/O error) · 130 interrupted (Ctrl-C) · 143 terminated (SIGTERM);
interrupted runs and sweeps continue with --resume.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text

from harness import __version__
from runners.analysis import tables
from runners.commands import cases, gate, merge, migrate, recommend, report, schema, serve_sim, transcripts
from runners.commands._common import (
    EXIT_INCONCLUSIVE,
    EXIT_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_REGRESSION,
    EXIT_STORAGE,
    _add_selection,
    _ArgumentError,
    _error,
    _int_in,
    _Parser,
    _progress,
    _say,
    _sub,
    err,
    out,
)
from runners.plan import run_options, settings
from runners.plan.agent import AgentFramework
from runners.plan.executor import Executor
from runners.plan.rules import DEFAULT_DB, MAX_CONCURRENCY, MAX_EPOCHS, RECORD_MODES, RunRequest, UsageError
from runners.run import interrupts

if TYPE_CHECKING:
    from harness.context import CancellationToken
    from runners.plan.options import BenchOptions

__all__ = [
    "EXIT_OK",
    "EXIT_REGRESSION",
    "EXIT_INPUT",
    "EXIT_INTERRUPTED",
    "EXIT_INCONCLUSIVE",
    "EXIT_STORAGE",
    "build_parser",
    "cmd_run",
    "cmd_sweep",
    "main",
]


# -- shared options -----------------------------------------------------------------------------
def _add_bench(p: argparse.ArgumentParser, *, sweep: bool) -> None:
    settings.add_arguments(p, sweep=sweep)
    g = p.add_argument_group("cassettes")
    g.add_argument("--cassettes", type=Path, default=None, metavar="DIR",
                   help="record/replay the model's HTTP with vcrpy (openai:<model-name> only)")  # fmt: skip
    g.add_argument("--record-mode", default=None, choices=RECORD_MODES,
                   help="vcrpy record mode with --cassettes (default none: replay only, no network; all: re-record,"
                        " replacing stale episodes)")  # fmt: skip
    g = p.add_argument_group("bench")
    g.add_argument("--db", type=Path, default=DEFAULT_DB, help=f"DuckDB file (default {DEFAULT_DB})")
    g.add_argument("--label", type=_label_arg, default=None,
                   help="label stored with every case run (the gate pairs labels)")  # fmt: skip
    epochs = 3 if sweep else 1
    g.add_argument("--epochs", type=_int_in(1, MAX_EPOCHS), default=None, metavar="K",
                   help=f"repeat every case K times (default {epochs})")  # fmt: skip
    g.add_argument("--concurrency", type=_int_in(1, MAX_CONCURRENCY), default=1, metavar="N",
                   help="case runs in flight (default 1)")  # fmt: skip
    g.add_argument("--max-in-flight", type=_int_in(1, MAX_CONCURRENCY), default=None, metavar="N",
                   help="model requests in flight per endpoint over all runs (default: --concurrency)")  # fmt: skip
    what = "SWEEP_ID" if sweep else "BENCH_RUN_ID"
    g.add_argument("--resume", default=None, metavar=what,
                   help="finish an interrupted " + ("sweep" if sweep else "bench run") + " with its stored settings"
                        " (only --db, --concurrency, --executor, --ray-address, --base-url and --api-key-env may be"
                        " given with it)")  # fmt: skip
    g.add_argument("--no-transcripts", dest="transcripts", action="store_false",
                   help="do not store each case run's conversation (the `messages` table that `show`, `diff` and"
                        " `export --inspect` read); for very large sweeps")  # fmt: skip
    run_options.add_arguments(p)
    _add_execution(p, sweep=sweep)


def _shard_arg(text: str) -> Any:
    from runners.plan.shard import ShardError, ShardSpec

    try:
        return ShardSpec.parse(text)
    except ShardError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--shard").strip()) from None


def _label_arg(text: str) -> str:
    """A label is shown in tables, Markdown headings and JUnit names: printable, one line, at most 200 chars."""
    if not text or len(text) > 200 or not text.isprintable():
        shown = repr(text) if len(text) <= 60 else f"{text[:60]!r}… ({len(text)} characters)"
        raise argparse.ArgumentTypeError(f"{shown}: a label is 1-200 printable characters on one line")
    return text


def _run_id_arg(text: str) -> str:
    from runners.plan.shard import ShardError, check_run_id

    try:
        return check_run_id(text)
    except ShardError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--run-id").strip()) from None


def _add_execution(p: argparse.ArgumentParser, *, sweep: bool) -> None:
    # Execution options say where and how the work runs; none of them is a setting, so none changes
    # what a run measures (runners/plan/settings.py stays the one declaration of those).
    what = "sweep" if sweep else "run"
    g = p.add_argument_group("execution (never part of a run's settings)")
    g.add_argument("--shard", type=_shard_arg, default=None, metavar="I/N",
                   help=f"run only shard I of N (1-based) of the (grid point, case, epoch) work into --db; every"
                        f" shard of one {what} takes the same flags and --run-id; `harness-bench merge` joins"
                        " the files")  # fmt: skip
    g.add_argument("--run-id", type=_run_id_arg, default=None, metavar="NAME",
                   help=f"name the {what}: its id becomes {'sw-NAME' if sweep else 'br-NAME'} on every machine"
                        " (required with --shard; e.g. the CI run number)")  # fmt: skip
    g.add_argument("--executor", default=Executor.LOCAL.value, choices=[e.value for e in Executor],
                   help="local: --concurrency threads in this process (default); processes: one worker process per"
                        " CPU sharing the --concurrency threads (past one process's GIL); ray: Ray tasks; finished"
                        f" case runs stream back to this process's DuckDB writer (ray needs {_RAY_EXTRA})")  # fmt: skip
    g.add_argument("--agent", default=AgentFramework.NATIVE.value, choices=[a.value for a in AgentFramework],
                   help="the agent loop each case run goes through: native (run_diagnosis, default), pydantic-ai"
                        " or openai-agents (that framework's agent over the case's model, the Harness through its"
                        " adapter; needs the `adapters` extra, which make venv installs)")  # fmt: skip
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


def _request(args: argparse.Namespace, run_settings: settings.RunSettings | None) -> RunRequest:
    """What the command line asks, flag by flag, for the flag rules (runners/plan/rules.py) the plan applies
    (`run_settings` None: a resume, whose model is the stored run's)."""
    ms = run_settings.model_settings if run_settings is not None else None
    return RunRequest(
        model=ms.model if ms else "", base_url=ms.base_url if ms else None,
        api_key_env=ms.api_key_env if ms else "OPENAI_API_KEY", epochs=args.epochs, concurrency=args.concurrency,
        cassettes=args.cassettes, record_mode=args.record_mode, shard=args.shard, run_id=args.run_id,
        executor=Executor(args.executor), ray_address=args.ray_address, resume=args.resume,
        resume_refused=_resume_refused(args) if args.resume else {},
    )  # fmt: skip


def _resume_overrides(args: argparse.Namespace) -> dict[str, settings.SettingValue]:
    """The endpoint settings given with --resume (a new base URL or key variable replaces the stored one)."""
    decl = settings.declaration()
    return {k: v for k, v in settings.given(args).items() if decl[k].endpoint}


def _bench_options(args: argparse.Namespace, run_settings: settings.RunSettings | None, *, epochs: int,
                   cancellation: CancellationToken) -> BenchOptions:  # fmt: skip
    """The options the flags give (with --resume: only where and how it executes; the rest is the stored run's)."""
    from runners.plan.options import BenchOptions

    invocation: dict[str, Any] = {
        "db": args.db, "concurrency": args.concurrency, "max_in_flight": args.max_in_flight, "keep_runs": False,
        "executor": Executor(args.executor), "ray_address": args.ray_address, "cancellation": cancellation,
    }  # fmt: skip
    if args.resume:
        return BenchOptions(resume=args.resume, resume_overrides=_resume_overrides(args), **invocation)
    run_settings = run_settings or settings.RunSettings.of()
    return BenchOptions(config=run_settings.config, model_settings=run_settings.model_settings, **invocation,
                        **run_options.options_from_args(args, {"epochs": epochs}))  # fmt: skip


# -- run and sweep (every other command is a module of runners/commands) --------------------------
def _print_family_table(db: Path, bench_run_id: str) -> None:
    from runners.run.bench import family_rows
    from runners.store.metrics_db import connect

    con = connect(db, read_only=True)
    try:
        rows = family_rows(con, bench_run_id)
    finally:
        con.close()
    out.print(tables.family_table(f"bench run {bench_run_id}", rows))


def _resume_command(command: str, db: Path, run_id: str) -> str:
    """The exact command that continues a bench run (`run`) or sweep (`sweep`), shell-quoted."""
    return f"harness-bench {command} --db {shlex.quote(str(db))} --resume {shlex.quote(run_id)}"


def _say_resume(commands: Sequence[str]) -> None:
    """Each resume command on a line of its own, never wrapped (it is copied into a shell) nor read as markup."""
    for command in commands:
        err.print(Text(f"  {command}"), soft_wrap=True)


def _claim(db: Path) -> None:
    """Open the database as its only writer (clear message if locked) and mark dead runs interrupted."""
    from runners.store.metrics_db import connect, mark_stale_runs, stale_runs

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


def cmd_run(args: argparse.Namespace) -> int:
    from runners.plan.run_plan import plan_run
    from runners.run.bench import run_bench

    intr = _interrupts(args)
    run_settings = None if args.resume else settings.settings_from_args(args)
    opts = _bench_options(args, run_settings, epochs=1, cancellation=intr.token)
    plan = plan_run(opts, request=_request(args, run_settings))
    shard_spec = plan.shard
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

        summary = run_bench(plan, on_progress=hook, on_start=lambda run_id: _name_run(intr, "run", args.db, run_id))
    if summary.storage_error is not None:
        return _storage_failed("bench run", "run", args.db, summary.bench_run_id, summary.storage_error,
                               summary.skipped + summary.executed, summary.planned,
                               summary.status_recorded)  # fmt: skip
    if intr.received:
        return _interrupted(intr, "bench run", "run", args.db, summary.bench_run_id, summary.status,
                            summary.skipped + summary.executed, summary.planned)  # fmt: skip
    _warn_unchecked(args.db)
    _print_family_table(args.db, summary.bench_run_id)
    rate = summary.executed / summary.wall_seconds if summary.wall_seconds else 0.0
    share = summary.write_seconds / summary.wall_seconds if summary.wall_seconds else 0.0
    part = f"shard {shard_spec} of " if shard_spec else ""
    _say(
        f"{part}bench run {summary.bench_run_id} {summary.status}: {summary.executed} case runs executed"
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
            f" not on the model's answer; see case_runs.error in {args.db}", style="red",
        ))  # fmt: skip
        if summary.infra_errors == summary.executed:
            _error(f"the endpoint {_endpoint_named(summary.settings, plan.options)} served no case run (exit 2)")
            return EXIT_INPUT
    failing = summary.failed
    if failing and args.strict:
        _say(f"{failing} case run(s) did not meet their expectations (--strict)", stderr=True)
        return EXIT_REGRESSION
    return EXIT_OK


def _warn_unchecked(db: Path) -> None:
    """A write-ahead log left next to the database after the writer closed: its checkpoint failed (full
    disk). The rows are safe in it; say so, so that nobody deletes it."""
    wal = db.with_name(db.name + ".wal")
    if wal.exists() and wal.stat().st_size > 0:
        _say(f"warning: {wal} could not be folded into {db} (full disk?); the rows are stored in it: keep it next"
             " to the database (the next writer folds it in once there is room)", stderr=True)  # fmt: skip


def _endpoint_named(run: settings.RunSettings | None, opts: Any) -> str:
    """The endpoint (and the cassettes) a bench run used, for the one-line error when none of it served."""
    from harness.models.openai_model import endpoint_key

    name = endpoint_key(run.model_settings.base_url if run is not None else None)
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


def cmd_sweep(args: argparse.Namespace) -> int:
    from runners.run.preflight import preflight
    from runners.run.sweep import SweepGrid, SweepOptions, plan_sweep, run_sweep

    intr = _interrupts(args)
    base_settings = None if args.resume else settings.settings_from_args(args)
    base = _bench_options(args, base_settings, epochs=3, cancellation=intr.token)
    grid = SweepGrid() if args.resume else SweepGrid(settings.axes_from_args(args))
    plan = plan_sweep(SweepOptions(grid, base, args.resume), request=_request(args, base_settings))
    if not plan.resumes:
        preflight(plan.base.options)  # before the sweeps row: an unusable endpoint writes nothing
    if intr.received:
        return _interrupted(intr, "sweep", "sweep", args.db, None, "", 0, 0)
    _claim(args.db)
    counts = [0, 0]  # case runs stored, planned (the progress callback's view)

    def on_progress(done: int, total: int) -> None:
        counts[:] = [done, total]
        progress.update(task, completed=done, total=total)

    with _progress() as progress:
        task = progress.add_task("sweep", total=None, passed="")
        summary = run_sweep(plan, on_progress=on_progress,
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


# -- parser ---------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    """Every command's parser, in the order `--help` lists them; each command module adds its own."""
    parser = _Parser(prog="harness-bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"harness-bench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    cases.register(sub)

    p = _sub(sub, "run", "run cases through the harness and write metrics to DuckDB",
             "Run every selected case (default: all built-in cases, scripted model) into a DuckDB file.")  # fmt: skip
    _add_selection(p)
    _add_bench(p, sweep=False)
    p.add_argument("--strict", action="store_true", help="exit 1 when any case run misses its expectations")
    p.set_defaults(func=cmd_run)

    serve_sim.register(sub)

    p = _sub(sub, "sweep", "run a grid of thresholds and budgets, each point a bench run tagged with one sweep id",
             "Each comma list of a sweepable setting is one axis of the grid; every combination is one bench run."
             " The other settings take one value shared by every point.")  # fmt: skip
    _add_selection(p)
    _add_bench(p, sweep=True)
    p.set_defaults(func=cmd_sweep)

    for command in (recommend, gate, report, merge, migrate, transcripts, schema):  # transcripts: show, diff, export
        command.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):  # an ASCII-only terminal gets '?' for '…', never an exit 2
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", "strict") == "strict":
            reconfigure(errors="replace")
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except _ArgumentError as exc:
        _error(str(exc))
        return EXIT_INPUT
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_OK
    if args.command in ("run", "sweep"):
        # They write metrics: Ctrl-C and SIGTERM set one flag and never raise (runners/run/interrupts.py); the
        # command stops, keeps finished case runs and exits 130 or 143 with the resume command.
        with interrupts.installed() as args.interrupts:
            return _dispatch(args)
    return _dispatch(args)


def _dispatch(args: argparse.Namespace) -> int:
    """Run the command; unusable input is one line and exit 2."""
    import duckdb

    from runners.domain.evalset import EvalSetError
    from runners.plan.rules import BenchInputError
    from runners.store._files import OutputWriteError
    from runners.store.metrics_db import MetricsDbError, MetricsWriteError

    try:
        result: int = args.func(args)
        return result
    except KeyboardInterrupt:
        _say("interrupted", stderr=True)
        return EXIT_INTERRUPTED
    except EvalSetError as exc:
        if len(exc.problems) == 1:
            _error(exc.problems[0])
            return EXIT_INPUT
        err.print(Text.assemble(("error: ", "red"), f"{len(exc.problems)} problem(s) in the evaluation set:"))
        for problem in exc.problems:
            err.print(Text(f"  - {problem}"), soft_wrap=True)
        return EXIT_INPUT
    except (UsageError, BenchInputError, MetricsDbError, OutputWriteError, ValueError) as exc:
        _error(str(exc))
        return EXIT_INPUT
    except MetricsWriteError as exc:  # before a bench run or sweep started: nothing of it is stored
        where = getattr(args, "db", None) or "the database"
        _error(f"writing {where} failed ({exc}): nothing was started; free some space (or fix the device) and"
               " run the command again")  # fmt: skip
        return EXIT_STORAGE
    except duckdb.Error as exc:  # a file DuckDB opened but cannot read or write (truncated, damaged)
        where = getattr(args, "db", None) or getattr(args, "out", None) or "the database"
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        _error(f"{where}: DuckDB cannot read or write it ({first}); use another --db or restore the file")
        return EXIT_INPUT


if __name__ == "__main__":
    sys.exit(main())
