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
import re
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.text import Text

from harness import __version__
from runners.analysis import tables
from runners.plan import run_options, settings
from runners.plan.agent import AgentFramework
from runners.plan.executor import Executor
from runners.plan.rules import DEFAULT_DB, MAX_CONCURRENCY, MAX_EPOCHS, RECORD_MODES, UsageError
from runners.run import interrupts

EXIT_OK, EXIT_REGRESSION, EXIT_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_INCONCLUSIVE = 3
"""The gate had not the power to pass (too few cases, or an MDE above --max-mde)."""
EXIT_STORAGE = 74
"""The database could not be written (full disk, I/O error): the run stopped `interrupted` (sysexits EX_IOERR)."""

out = tables.make_console()
err = tables.make_console(stderr=True)


def _fail(message: str) -> NoReturn:
    raise UsageError(message)


def _say(text: str, *, stderr: bool = False) -> None:
    """Print plain text: never read as markup; wrapped between words at the console width."""
    (err if stderr else out).print(Text(text))


def _error(text: str) -> None:
    """One line on stderr."""
    err.print(Text.assemble(("error: ", "red"), " ".join(text.split())), soft_wrap=True)


# -- argument types: refused by argparse with one line naming the flag, before anything runs ---------
def _int_in(lo: int, hi: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: must be an integer from {lo} to {hi}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{text}: must be an integer from {lo} to {hi}")
        return value

    parse.__name__ = "integer"
    return parse


def _float_in(lo: float, hi: float) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: must be a number from {lo:g} to {hi:g}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{text}: must be a number from {lo:g} to {hi:g}")
        return value

    parse.__name__ = "number"
    return parse


class _ArgumentError(Exception):
    """A flag argparse refused: one line naming it, exit 2 (main prints it)."""


class _Parser(argparse.ArgumentParser):
    """argparse whose errors reach `main` as one line (`--flag VALUE: what is allowed`), not a usage dump."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A value that starts with '-' and a digit is a value, never an option: `--no-gain-threshold -1,2`
        # reaches the flag's own check ("must be ≥ 1") instead of "expected one argument".
        self._negative_number_matcher = re.compile(r"^-\d[\d.,eE+-]*$")

    def error(self, message: str) -> NoReturn:
        m = re.fullmatch(r"argument ([^:]+): (.*)", message, flags=re.S)
        if m:
            flag = m.group(1).split("/")[-1]
            message = f"{flag} {m.group(2)}"
        raise _ArgumentError(f"{message} (see {self.prog} --help)")


# -- shared options -----------------------------------------------------------------------------
def _add_selection(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--evalset", action="append", default=None, metavar="PATH|FAMILY",
        help="evaluation file, folder or family name (repeatable; default: every built-in case)",
    )  # fmt: skip
    p.add_argument("--case", action="append", default=None, metavar="ID", help="only this case id (repeatable)")


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
def _check_db(path: Path, *, must_exist: bool) -> None:
    from runners.store.metrics_db import check_database_file

    check_database_file(path, must_exist=must_exist)


def _check_output_file(flag: str, path: Path) -> None:
    if path.is_dir():
        _fail(f"{flag} {path} is a folder; give a file path")
    for parent in path.parents:
        if parent.exists() and not parent.is_dir():
            _fail(f"{flag} {path}: {parent} is a file, not a folder")


def _resume_refused(args: argparse.Namespace) -> dict[str, object]:
    """The flags given with --resume that a resume would ignore (every setting but the endpoint ones, and the
    run options the stored run fixes)."""
    decl = settings.declaration()
    refused: dict[str, object] = {decl[n].flag: v for n, v in settings.given(args).items() if not decl[n].endpoint}
    refused |= run_options.given_flags(args)
    return refused


def _check_request(args: argparse.Namespace, model: str, base_url: str | None) -> None:
    """Every flag rule (runners/plan/rules.py) before anything is opened or written."""
    from runners.plan.executor import Executor
    from runners.plan.rules import RunRequest, check_run_request

    check_run_request(RunRequest(
        model=model, base_url=base_url, epochs=args.epochs, concurrency=args.concurrency, cassettes=args.cassettes,
        record_mode=args.record_mode, shard=args.shard, run_id=args.run_id, executor=Executor(args.executor),
        ray_address=args.ray_address, resume=args.resume,
        resume_refused=_resume_refused(args) if args.resume else {},
    ))  # fmt: skip


def _resume_overrides(args: argparse.Namespace) -> dict[str, settings.SettingValue]:
    """The endpoint settings given with --resume (a new base URL or key variable replaces the stored one)."""
    decl = settings.declaration()
    return {k: v for k, v in settings.given(args).items() if decl[k].endpoint}


def _bench_options(args: argparse.Namespace, run_settings: settings.RunSettings | None, *, epochs: int) -> Any:
    from runners.plan.options import BenchOptions
    from runners.run.executors import Executor

    run_settings = run_settings or settings.RunSettings.of()
    return BenchOptions(
        db=args.db,
        concurrency=args.concurrency,
        max_in_flight=args.max_in_flight,
        config=run_settings.config,
        model_settings=run_settings.model_settings,
        keep_runs=False,
        executor=Executor(args.executor),
        ray_address=args.ray_address,
        **run_options.options_from_args(args, {"epochs": epochs}),
    )


def _check_new_ids(args: argparse.Namespace, ids: list[str], table: str, column: str) -> None:
    """A named run must not reuse an id already in --db (checked read-only, before anything is written)."""
    from runners.plan.shard import refuse_existing
    from runners.store.metrics_db import connect

    if not args.db.exists():
        return
    con = connect(args.db, read_only=True)
    try:
        if con.execute(f"SELECT count(*) FROM information_schema.tables WHERE table_name = '{table}'").fetchone() != (
            0,
        ):
            refuse_existing(con, table, column, ids, args.db)
    finally:
        con.close()


# -- commands -------------------------------------------------------------------------------------
def cmd_cases(args: argparse.Namespace) -> int:
    from runners.domain.evalset import spool_cases

    cases = _load_with_progress(lambda: spool_cases(args.evalset or [], args.case or []))
    if len(cases) <= tables.STREAM_CASES_ABOVE:
        out.print(tables.cases_table(cases, out.width))
        return EXIT_OK
    for line in tables.cases_lines(cases, out.width):
        out.file.write(line + "\n")
    out.file.flush()
    return EXIT_OK


def _load_with_progress(load: Callable[[], Sequence[Any]]) -> Sequence[Any]:
    """`load()` with a progress bar on stderr for the cases being validated, when stderr is a terminal and the
    load lasts more than a second (rich shows nothing before then: `transient`, drawn once a file reports);
    in a pipe nothing is drawn."""
    if not sys.stderr.isatty():
        return load()
    import time

    from runners.domain.evalset import reporting_progress

    started = time.monotonic()
    progress = Progress(
        TextColumn("validating {task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
        console=tables.make_console(stderr=True), transient=True,
    )  # fmt: skip
    tasks: dict[Path, Any] = {}

    def report(path: Path, done: int, total: int) -> None:
        if path not in tasks:
            if time.monotonic() - started < 1.0 and done == total:
                return  # a small file: no bar at all
            if not progress.live.is_started:
                progress.start()
            tasks[path] = progress.add_task(path.name, total=total)
        progress.update(tasks[path], completed=done)

    try:
        with reporting_progress(report):
            return load()
    finally:
        progress.stop()


def _print_family_table(db: Path, bench_run_id: str) -> None:
    from runners.run.bench import family_rows
    from runners.store.metrics_db import connect

    con = connect(db, read_only=True)
    try:
        rows = family_rows(con, bench_run_id)
    finally:
        con.close()
    out.print(tables.family_table(f"bench run {bench_run_id}", rows))


def _progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[passed]}"),
        TimeElapsedColumn(), TimeRemainingColumn(), console=err, disable=not err.is_terminal,
    )  # fmt: skip


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
    from runners.plan.options import BenchOptions
    from runners.run.bench import check_options, load_resume, run_bench
    from runners.run.executors import Executor
    from runners.store.metrics_db import connect

    if args.resume:
        _check_request(args, "", None)
        overrides = _resume_overrides(args)
        _check_db(args.db, must_exist=True)
        opts = BenchOptions(db=args.db, resume=args.resume, concurrency=args.concurrency, keep_runs=False,
                            max_in_flight=args.max_in_flight, resume_overrides=overrides,
                            executor=Executor(args.executor), ray_address=args.ray_address)  # fmt: skip
        con = connect(args.db, read_only=True)
        try:
            resumed = load_resume(con, opts)[0]
            check_options(resumed)
        finally:
            con.close()
        shard_spec = resumed.shard
    else:
        run_settings = settings.settings_from_args(args)
        _check_request(args, run_settings.model_settings.model, run_settings.model_settings.base_url)
        _check_db(args.db, must_exist=False)
        opts = _bench_options(args, run_settings, epochs=1)
        check_options(opts)
        shard_spec = opts.shard
        if args.run_id:
            from runners.plan.shard import bench_run_id

            new_id = bench_run_id(args.run_id, run_settings, in_sweep=False)
            _check_new_ids(args, [new_id], "bench_runs", "bench_run_id")
    intr = _interrupts(args)
    if intr.received:
        return _interrupted(intr, "bench run", "run", args.db, None, "", 0, 0)
    opts.cancellation = intr.token
    _claim(args.db)
    passed = [0]
    with _progress() as progress:
        task = progress.add_task("cases", total=None, passed="")

        def hook(done: int, total: int, run: Any) -> None:
            if run is not None and run.passed:
                passed[0] += 1
            progress.update(task, completed=done, total=total, passed=f"{passed[0]} passed")

        summary = run_bench(opts, on_progress=hook, on_start=lambda run_id: _name_run(intr, "run", args.db, run_id))
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
            _error(f"the endpoint {_endpoint_named(summary.settings, opts)} served no case run (exit 2)")
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


def cmd_serve_sim(args: argparse.Namespace) -> int:
    from runners.domain.profiles import trajectory_for_model
    from runners.endpoints.simulator import SimulatorServer
    from runners.plan.run_plan import select_cases

    cases = select_cases(args.evalset or [], args.case or [])
    try:
        server = SimulatorServer(cases, args.host, args.port, trajectory_for=trajectory_for_model,
                                 log=(lambda line: _say(line, stderr=True)) if args.verbose else None,
                                 latency_ms=args.latency_ms, jitter_ms=args.jitter_ms)  # fmt: skip
    except OSError as exc:
        import errno

        if exc.errno in (errno.EADDRINUSE, errno.EACCES):
            _fail(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}; choose another --port"
                  " (0 = any free)")  # fmt: skip
        _fail(f"--host {args.host}: cannot listen there ({exc.strerror or exc}); give an address of this machine,"
              " e.g. 127.0.0.1")  # fmt: skip
    delay = f", latency {args.latency_ms:g}±{args.jitter_ms:g} ms" if args.latency_ms or args.jitter_ms else ""
    _say(f"serve-sim: {len(cases)} cases on {server.base_url}{delay} (Ctrl-C to stop)")
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        server.stop()
        return EXIT_INTERRUPTED
    return EXIT_OK


def cmd_sweep(args: argparse.Namespace) -> int:
    from runners.plan.options import BenchOptions
    from runners.run.executors import Executor
    from runners.run.preflight import preflight
    from runners.run.sweep import SweepGrid, SweepOptions, check_sweep, load_sweep, run_sweep
    from runners.store.metrics_db import connect

    if args.resume:
        _check_request(args, "", None)
        overrides = _resume_overrides(args)
        _check_db(args.db, must_exist=True)
        base = BenchOptions(db=args.db, concurrency=args.concurrency, max_in_flight=args.max_in_flight,
                            keep_runs=False, resume_overrides=overrides, executor=Executor(args.executor),
                            ray_address=args.ray_address)  # fmt: skip
        con = connect(args.db, read_only=True)
        try:
            check_sweep(*load_sweep(con, args.resume, base))
        finally:
            con.close()
        grid = SweepGrid()
    else:
        base_settings = settings.settings_from_args(args)
        _check_request(args, base_settings.model_settings.model, base_settings.model_settings.base_url)
        _check_db(args.db, must_exist=False)
        base = _bench_options(args, base_settings, epochs=3)
        grid = SweepGrid(settings.axes_from_args(args))
        check_sweep(grid, base)
        if args.run_id:
            from runners.plan.shard import sweep_id

            _check_new_ids(args, [sweep_id(args.run_id)], "sweeps", "sweep_id")
        preflight(base)  # before the sweeps row: an unusable endpoint writes nothing
    intr = _interrupts(args)
    if intr.received:
        return _interrupted(intr, "sweep", "sweep", args.db, None, "", 0, 0)
    base.cancellation = intr.token
    _claim(args.db)
    counts = [0, 0]  # case runs stored, planned (the progress callback's view)

    def on_progress(done: int, total: int) -> None:
        counts[:] = [done, total]
        progress.update(task, completed=done, total=total)

    with _progress() as progress:
        task = progress.add_task("sweep", total=None, passed="")
        summary = run_sweep(SweepOptions(grid, base, args.resume), on_progress=on_progress,
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


def cmd_recommend(args: argparse.Namespace) -> int:
    from runners.analysis.recommend import METRIC_DEFINITIONS, Objective, Rule, measure, recommend
    from runners.run.sweep import sweep_ids
    from runners.store.metrics_db import connect

    con = connect(args.db, read_only=True)
    try:
        known = sweep_ids(con)
        sweep = args.sweep or (known[0] if known else None)
        if sweep is None:
            _fail(f"{args.db} holds no sweeps; run `harness-bench sweep` first")
        if sweep not in known:
            _fail(f"--sweep: unknown sweep {sweep!r} in {args.db}; known: {', '.join(known[:5]) or 'none'}")
        stats = measure(con, sweep)
    finally:
        con.close()
    if not stats:
        _fail(f"sweep {sweep} has no case runs yet")
    rec = recommend(stats, Objective(args.objective), rule=Rule(args.rule), margin=args.margin)
    picked = rec.chosen.label(rec.columns) if rec.separable else "none — the sweep is too small to separate them"
    out.print(Text.assemble(("Recommendation: ", "bold"), picked))
    _say(rec.reasoning)
    out.print(tables.stats_table(f"sweep {sweep}: {len(stats)} configurations", rec, stats))
    for name, definition in METRIC_DEFINITIONS.items():
        _say(f"  {name}: {definition.split(' — ')[-1]}")
    return EXIT_OK


def cmd_gate(args: argparse.Namespace) -> int:
    from runners.analysis.gate import GateInputError, evaluate, load_pairs, markdown, validate_flags, write_outputs
    from runners.store.metrics_db import connect

    _check_output_file("--summary", args.summary)
    _check_output_file("--junit", args.junit)
    if args.json is not None:
        _check_output_file("--json", args.json)
    try:  # a bad flag is refused before the database is opened
        validate_flags(k=args.k, max_recall_drop=args.max_recall_drop, max_cost_increase=args.max_cost_increase,
                       alpha=args.alpha, max_mde=args.max_mde)  # fmt: skip
        _check_power_flags(args)
    except GateInputError as exc:
        _fail(str(exc))
    con = connect(args.db, read_only=True)
    try:
        picked = list(args.bench_run or [])
        if len(picked) > 2:
            _fail(f"--bench-run given {len(picked)} times; at most one for the baseline and one for the candidate")
        chosen: dict[str, str] = {}
        for run_id in picked:  # each picks the run of the label it carries (the same label: baseline first)
            row = con.execute("SELECT any_value(label) FROM case_runs WHERE bench_run_id = ?", [run_id]).fetchone()
            label = row[0] if row else None
            role = next((r for r, lab in (("baseline", args.baseline), ("candidate", args.candidate))
                         if lab == label and r not in chosen), None)  # fmt: skip
            if role is None:
                _fail(f"--bench-run {run_id}: not a bench run of --baseline {args.baseline!r} or --candidate"
                      f" {args.candidate!r} (its label: {label!r})")  # fmt: skip
            chosen[role] = run_id
        pairs = load_pairs(con, args.baseline, args.candidate, baseline_run=chosen.get("baseline"),
                           candidate_run=chosen.get("candidate"))  # fmt: skip
    except GateInputError as exc:
        _fail(str(exc))
    finally:
        con.close()
    from runners.analysis.gate import Verdict, evaluate_sequential, plan

    common: dict[str, Any] = dict(k=args.k, max_recall_drop=args.max_recall_drop,
                                  max_cost_increase=args.max_cost_increase, alpha=args.alpha,
                                  max_mde=args.max_mde)  # fmt: skip
    try:
        if args.sequential:
            result = evaluate_sequential(pairs, args.baseline, args.candidate, budget=args.budget, stage=args.stage,
                                         target_mde=args.target_mde, **common)  # fmt: skip
        else:
            result = evaluate(pairs, args.baseline, args.candidate, **common)
    except GateInputError as exc:
        _fail(str(exc))
    if args.plan:  # advice only: no verdict, nothing written
        _say(plan(result, args.target_mde or args.max_mde))
        return EXIT_OK
    from runners.store._files import OutputWriteError

    if result.verdict is Verdict.INCONCLUSIVE:
        verdict = EXIT_OK if args.allow_inconclusive else EXIT_INCONCLUSIVE
    else:
        verdict = EXIT_OK if result.passed else EXIT_REGRESSION
    result.db = str(args.db)  # the summary's `harness-bench diff` commands name this file
    out.print(Text(markdown(result)), soft_wrap=True)  # the verdict first; table rows never hard-wrapped
    try:
        write_outputs(result, args.summary, args.junit, json_path=args.json, allow_inconclusive=args.allow_inconclusive)
    except OutputWriteError as exc:
        _error(f"{exc} (the verdict above stands)")
        return verdict if verdict == EXIT_REGRESSION else EXIT_INPUT  # a regression stays 1; else the file error
    written = f"{args.summary}, {args.junit} and {args.json}" if args.json else f"{args.summary} and {args.junit}"
    _say(f"wrote {written}")
    return verdict


def _check_power_flags(args: argparse.Namespace) -> None:
    from runners.analysis.gate import GateInputError, sequential_looks

    if args.target_mde is not None and not 0.0 < args.target_mde <= 1.0:
        raise GateInputError(f"--target-mde {args.target_mde:g}: a pass-rate drop must be within (0, 1] (e.g. 0.05)")
    if args.sequential:
        sequential_looks(args.budget, args.stage)
    elif args.target_mde is not None and not args.plan:
        raise GateInputError("--target-mde needs --plan or --sequential")
    if args.plan and args.sequential:
        raise GateInputError("--plan and --sequential: give one (--plan estimates epochs from a pilot)")


def cmd_report(args: argparse.Namespace) -> int:
    from runners.analysis.recommend import Objective, Rule
    from runners.analysis.report import build_report
    from runners.run.sweep import sweep_ids
    from runners.store.metrics_db import connect

    if args.sweep and args.bench_run:
        _fail("give --sweep or --bench-run, not both")
    if args.out.exists() and not args.out.is_dir():
        _fail(f"--out {args.out} is a file; give a folder (it will hold report.md, report.html and figures)")
    _check_output_file("--out", args.out / "report.md")
    con = connect(args.db, read_only=True)
    try:
        known = sweep_ids(con)
        if args.sweep == "latest":
            if not known:
                _fail(f"--sweep latest: {args.db} holds no sweeps")
            args.sweep = known[0]
        if args.sweep and args.sweep not in known:
            _fail(f"--sweep: unknown sweep {args.sweep!r} in {args.db}")
        if (
            args.bench_run
            and not con.execute("SELECT 1 FROM bench_runs WHERE bench_run_id = ?", [args.bench_run]).fetchone()
        ):
            _fail(f"--bench-run: unknown bench run {args.bench_run!r} in {args.db}")
    finally:
        con.close()
    md, page = build_report(args.db, args.out, sweep_id=args.sweep, bench_run_id=args.bench_run,
                            objective=Objective(args.objective), rule=Rule(args.rule), margin=args.margin)  # fmt: skip
    _say(f"wrote {md} and {page}")
    return EXIT_OK


def cmd_merge(args: argparse.Namespace) -> int:
    from runners.store.merge import merge

    summary = merge(args.out, args.shards, partial=args.partial)
    for line in summary.runs + summary.sweeps:
        _say(line)
    _say(
        f"merged {len(summary.inputs)} file(s) → {summary.out}: {summary.case_runs_added} case runs added,"
        f" {summary.case_runs_present} already there"
    )
    return EXIT_OK


def cmd_migrate(args: argparse.Namespace) -> int:
    from runners.store.metrics_db import SCHEMA_VERSION, _current_version, check_database_file, connect

    check_database_file(args.db, must_exist=True)
    before = connect(args.db, read_only=True, upgrade=False)
    try:
        version = _current_version(before)
    finally:
        before.close()
    connect(args.db).close()
    _say(f"{args.db}: schema version {version} → {SCHEMA_VERSION}" if version != SCHEMA_VERSION
         else f"{args.db}: already at schema version {SCHEMA_VERSION}")  # fmt: skip
    return EXIT_OK


def cmd_schema(args: argparse.Namespace) -> int:
    from runners.domain.evalset import json_schema

    sys.stdout.write(json_schema())
    return EXIT_OK


# -- parser ---------------------------------------------------------------------------------------
def _sub(sub: Any, name: str, summary: str, description: str | None = None) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=summary.replace("%", "%%"), description=description or summary + "."
    )
    return parser


def _margin_arg(text: str) -> float:
    from runners.analysis.choices import RecommendInputError, check_margin

    try:
        return check_margin(float(text))
    except RecommendInputError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--margin ")) from None
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def _add_recommend_choices(p: argparse.ArgumentParser) -> None:
    """--objective, --rule and --margin of `recommend` and `report`, from their one declaration."""
    from runners.analysis.choices import DEFAULT_MARGIN, Objective, Rule

    p.add_argument("--objective", default=Objective.TOKENS.value, choices=[o.value for o in Objective],
                   help=f"what 'cheapest' means (default {Objective.TOKENS.value})")  # fmt: skip
    p.add_argument("--rule", default=Rule.NON_INFERIORITY.value, choices=[r.value for r in Rule],
                   help="non-inferiority: the cheapest configuration shown within --margin of the best recall and"
                        " honest fallback (default); max-recall: the highest recall first")  # fmt: skip
    p.add_argument("--margin", type=_margin_arg, default=DEFAULT_MARGIN, metavar="RATE",
                   help=f"non-inferiority margin in [0, 1] (default {DEFAULT_MARGIN:g} ="
                        f" {DEFAULT_MARGIN * 100:g} points)")  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="harness-bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"harness-bench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = _sub(sub, "cases", "list evaluation cases with their family and expectations (and validate the files)")
    _add_selection(p)
    p.set_defaults(func=cmd_cases)

    p = _sub(sub, "run", "run cases through the harness and write metrics to DuckDB",
             "Run every selected case (default: all built-in cases, scripted model) into a DuckDB file.")  # fmt: skip
    _add_selection(p)
    _add_bench(p, sweep=False)
    p.add_argument("--strict", action="store_true", help="exit 1 when any case run misses its expectations")
    p.set_defaults(func=cmd_run)

    p = _sub(sub, "serve-sim", "serve an OpenAI-compatible simulator that plays the cases' trajectories over HTTP")
    _add_selection(p)
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=_int_in(0, 65535), default=8765, help="port (default 8765; 0 picks a free one)")
    p.add_argument("--verbose", action="store_true", help="log every request")
    p.add_argument("--latency-ms", type=_float_in(0, 600_000), default=0.0, metavar="MS",
                   help="each chat answer arrives this long after its request (default 0)")  # fmt: skip
    p.add_argument("--jitter-ms", type=_float_in(0, 600_000), default=0.0, metavar="MS",
                   help="latency varies uniformly by ± this much (default 0)")  # fmt: skip
    p.set_defaults(func=cmd_serve_sim)

    p = _sub(sub, "sweep", "run a grid of thresholds and budgets, each point a bench run tagged with one sweep id",
             "Each comma list of a sweepable setting is one axis of the grid; every combination is one bench run."
             " The other settings take one value shared by every point.")  # fmt: skip
    _add_selection(p)
    _add_bench(p, sweep=True)
    p.set_defaults(func=cmd_sweep)

    p = _sub(sub, "recommend", "recommend thresholds and budgets from a sweep, with 95% intervals")
    p.add_argument("--db", type=Path, default=DEFAULT_DB, help=f"DuckDB file (default {DEFAULT_DB})")
    p.add_argument("--sweep", default=None, metavar="SWEEP_ID", help="sweep id (default: the newest)")
    _add_recommend_choices(p)
    p.set_defaults(func=cmd_recommend)

    p = _sub(
        sub,
        "gate",
        "compare a candidate label with a baseline label; exit 1 on regression",
        "Pairs the two labels on the same cases and epochs. Exit 0 pass, 1 regression, 2 unusable input, "
        "3 inconclusive (the comparison could not have detected a drop of --max-mde; the verdict line says how many "
        "cases or epochs would).",
    )
    p.add_argument("--db", type=Path, default=DEFAULT_DB, help=f"DuckDB file (default {DEFAULT_DB})")
    p.add_argument("--baseline", required=True, metavar="LABEL", help="label of the baseline runs")
    p.add_argument("--candidate", required=True, metavar="LABEL", help="label of the candidate runs")
    p.add_argument("--k", type=int, default=3, help="k of pass^k, at most the epochs per case (default 3)")
    p.add_argument(
        "--max-pass-rate-drop", "--max-recall-drop", dest="max_recall_drop", type=float, default=0.0, metavar="RATE",
        help="pass-rate drop in [0, 1] tolerated even when significant (default 0.0; --max-recall-drop is the old"
        " name: the gate compares pass rates, not recommend's SUCCESS share)",
    )  # fmt: skip
    p.add_argument(
        "--max-cost-increase", type=float, default=0.25, metavar="RATE",
        help="relative increase (>= 0) of mean tool calls, model calls or tokens tolerated (default 0.25)",
    )  # fmt: skip
    p.add_argument(
        "--alpha", type=float, default=0.05, metavar="A",
        help="false-alarm rate of the whole gate, Holm-corrected over all tests (default 0.05)",
    )  # fmt: skip
    p.add_argument("--bench-run", action="append", default=None, metavar="BENCH_RUN_ID",
                   help="the bench run to take a label's case runs from, when the label is used by several"
                        " (once per label; twice to compare two runs of one label, baseline first)")  # fmt: skip
    p.add_argument("--summary", type=Path, default=Path("gate-summary.md"),
                   help="Markdown summary path (default ./gate-summary.md, overwritten)")  # fmt: skip
    p.add_argument("--junit", type=Path, default=Path("gate-junit.xml"),
                   help="JUnit XML path (default ./gate-junit.xml, overwritten)")  # fmt: skip
    p.add_argument("--json", type=Path, default=None, help="also write the result (verdict, p, MDE) as JSON here")
    g = p.add_argument_group("power (README: Power — MDE, INCONCLUSIVE and the plan)")
    g.add_argument("--max-mde", type=float, default=0.10, metavar="RATE",
                   help="a pass needs the overall test to detect this pass-rate drop with 80%% probability, else"
                        " INCONCLUSIVE, exit 3 (default 0.10 = 10 points)")  # fmt: skip
    g.add_argument("--allow-inconclusive", action="store_true",
                   help="an INCONCLUSIVE verdict exits 0 (JUnit: skipped instead of error)")  # fmt: skip
    g.add_argument("--plan", action="store_true",
                   help="treat the labels' epochs as a pilot: print how many epochs reach --target-mde"
                        " (default --max-mde); writes nothing")  # fmt: skip
    g.add_argument("--target-mde", type=float, default=None, metavar="RATE",
                   help="with --plan: the MDE to plan for; with --sequential: stop with a pass once the overall"
                        " MDE at 90%% power is at most this")  # fmt: skip
    g.add_argument("--sequential", action="store_true",
                   help="group-sequential gate: a look every --stage epochs up to --budget, each at its"
                        " O'Brien–Fleming nominal α; exit 3 while undecided, naming the next --epochs")  # fmt: skip
    g.add_argument("--budget", type=int, default=20, metavar="EPOCHS",
                   help="with --sequential: most epochs to run (default 20)")  # fmt: skip
    g.add_argument("--stage", type=int, default=4, metavar="EPOCHS",
                   help="with --sequential: epochs between looks (default 4)")  # fmt: skip
    p.set_defaults(func=cmd_gate)

    p = _sub(sub, "report", "write a Markdown + HTML report with figures from DuckDB")
    p.add_argument("--db", type=Path, default=DEFAULT_DB, help=f"DuckDB file (default {DEFAULT_DB})")
    p.add_argument("--sweep", default=None, metavar="SWEEP_ID",
                   help="report on one sweep, 'latest' for the newest (adds the sweep figures)")  # fmt: skip
    p.add_argument("--bench-run", default=None, metavar="BENCH_RUN_ID", help="report on one bench run")
    p.add_argument("--out", type=Path, default=Path("reports/out"), help="output folder (default reports/out)")
    _add_recommend_choices(p)
    p.set_defaults(func=cmd_report)

    p = _sub(sub, "merge", "merge shard files (or any harness-bench databases) into one DuckDB file",
             "Copy the bench runs, sweeps, shards, case runs, tool calls and events of every SHARD file into OUT"
             " (created if missing). Idempotent: a case run OUT already holds is never copied twice. Refused,"
             " before OUT is touched: files that are not harness-bench databases of this schema version, copies"
             " of one run or sweep with different settings, cases, epochs or shard counts, and (without"
             " --partial) a sharded run missing a shard or an unfinished run.")  # fmt: skip
    p.add_argument("out", type=Path, metavar="OUT", help="the merged DuckDB file (created, or added to)")
    p.add_argument("shards", type=Path, nargs="+", metavar="SHARD", help="DuckDB files written by run/sweep --shard")
    p.add_argument("--partial", action="store_true",
                   help="merge runs with missing or unfinished shards too (their status says so)")  # fmt: skip
    p.set_defaults(func=cmd_merge)

    p = _sub(sub, "migrate", "upgrade a metrics database in place to this harness-bench's schema version",
             "Reading commands read older databases through an upgraded temporary copy; this upgrades the file"
             " itself (what every writing command does first).")  # fmt: skip
    p.add_argument("--db", type=Path, default=DEFAULT_DB, help=f"DuckDB file (default {DEFAULT_DB})")
    p.set_defaults(func=cmd_migrate)

    from runners.transcript_cli import register as register_transcript_commands

    register_transcript_commands(sub, _sub)  # show, diff, export

    p = _sub(sub, "schema", "print the JSON Schema of evaluation files")
    p.set_defaults(func=cmd_schema)
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
