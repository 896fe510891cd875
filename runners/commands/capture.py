"""`harness-bench capture`: write an evaluation case from a stored case run or an exported trace, marked for review."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Annotated, Any

from runners.commands._common import EXIT_OK, _check_outputs, _fail, _say, _sub
from runners.domain.input_files import MAX_TRACE_BYTES, check_input_path
from runners.plan.flags import Flag, FlagModel
from runners.plan.rules import DEFAULT_DB
from runners.store.output_files import NamedPath, OutputKind, check_output_path

__all__ = ["register", "run"]


class _CaptureFlags(FlagModel):
    """`capture`'s arguments: the case run (stored, or a run of a trace file) and the evaluation file written."""

    case_run: Annotated[str | None, Flag(positional=True, metavar="CASE_RUN_ID")] = None
    """the case run to capture (BENCH_RUN_ID/CASE/EPOCH)"""
    db: Annotated[Path | None, Flag(help=f"DuckDB file holding CASE_RUN_ID (default {DEFAULT_DB})")] = None
    """The database holding the case run (None: the default one)."""
    trace: Annotated[Path | None, Flag(metavar="FILE")] = None
    """an OTLP/JSON file (one trace per line) instead of --db"""
    run: Annotated[str | None, Flag(metavar="ID")] = None
    """with --trace: the run's gen_ai.conversation.id"""
    out: Annotated[Path, Flag(metavar="FILE")]
    """the evaluation file to write (.yaml; /dev/stdout: to stdout)"""
    force: bool = False
    """overwrite --out if it exists"""


def register(sub: Any) -> None:
    p = _sub(sub, "capture", "write an evaluation case from a stored case run (its calls, records and Draft)",
             "Builds one case from the case run's transcript (CASE_RUN_ID in --db), or from one run of an"
             " OTLP/JSON trace file written with message contents (--trace FILE --run ID: `export --otel FILE"
             " --otel-content`): the question and context, fixtures from the records its observations showed and"
             " each call's result (served again for the same scope), a trajectory replaying its calls, evaluations"
             " and Draft, and expectations from its outcome and counts, all marked for review. Replays with"
             " `harness-bench run --evalset FILE --model scripted` to the same outcome, stop reason and"
             " counts.")  # fmt: skip
    _CaptureFlags.add_flags(p, "capture")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from runners.domain.suite import SuiteError, find_suite
    from runners.interchange.capture import CaptureError, build_case, case_yaml, replay_argv
    from runners.store.output_files import write_text

    if args.trace is not None or args.run is not None:
        if args.case_run is not None or args.db is not None:
            _fail("give CASE_RUN_ID [--db D] or --trace FILE --run ID, not both")
        if args.trace is None or args.run is None:
            _fail("--trace FILE and --run ID go together")
        source = NamedPath("--trace", args.trace)
        check_input_path("--trace", args.trace, max_bytes=MAX_TRACE_BYTES)  # a FIFO blocks, /dev/zero never ends
    elif args.case_run is None:
        _fail("name the run: CASE_RUN_ID [--db D], or --trace FILE --run ID")
    else:
        source = NamedPath("--db", args.db if args.db is not None else DEFAULT_DB)
    out = NamedPath("--out", args.out, stream=True)  # /dev/stdout: the case printed, the notes on stderr
    _check_outputs([out], [source])
    streamed = check_output_path(out) is OutputKind.STREAM
    if args.out.exists() and not args.force and not streamed:
        _fail(f"--out {args.out} exists; give --force to overwrite it or choose another path")
    if args.trace is not None:
        captured = _from_trace(args.trace, str(args.run))
    else:
        captured = _from_db(source.path, str(args.case_run))
    try:  # written into a suite's folder: its declared tools' calls become the case's results
        found = None if streamed else find_suite(args.out.absolute())
    except SuiteError as exc:
        _fail(str(exc))
    suite = found[1] if found is not None and not found[1].builtin_only else None
    try:
        case = build_case(captured, suite)
    except CaptureError as exc:
        _fail(str(exc))
    write_text(out, case_yaml(captured, case, str(args.out)))
    steps = len(case.trajectory.steps)
    _say(
        f"wrote {args.out} (case {case.id}: {steps} steps, expectations marked for review)", stderr=streamed, wrap=False
    )
    _say(f"replay: {shlex.join(replay_argv(captured, str(args.out)))}", stderr=streamed, wrap=False)
    return EXIT_OK


def _from_db(db: Path, case_run: str) -> Any:
    from runners.store.captured_runs import CaptureSourceError, load_captured_run
    from runners.store.connection import connect

    con = connect(db, read_only=True)
    try:
        return load_captured_run(con, str(db), case_run)
    except CaptureSourceError as exc:
        _fail(str(exc))
    finally:
        con.close()


def _from_trace(path: Path, run_id: str) -> Any:
    from runners.interchange.otel_trace import TraceError, captured_run_from_trace

    try:
        return captured_run_from_trace(path, run_id)
    except TraceError as exc:
        _fail(str(exc))
