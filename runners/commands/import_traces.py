"""`harness-bench import TRACES --db D --label L`: runs observed elsewhere (OpenTelemetry GenAI spans as OTLP/JSON,
or the library's event log) stored as an imported bench run, so `show`, `report` and `whatif` read them."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from typing import Annotated, Any

from runners.commands._common import EXIT_OK, _add_db, _fail, _say, _sub
from runners.plan.flags import Flag, FlagModel
from runners.plan.labels import label_arg

__all__ = ["register", "run"]


class _ImportFlags(FlagModel):
    """`import`'s arguments: the file read and the label its bench run gets."""

    traces: Annotated[Path, Flag(positional=True, metavar="TRACES")]
    """the OTLP/JSON or event-log file (JSON Lines)"""
    label: Annotated[
        str,
        Flag(parse=label_arg, metavar="LABEL",
             help="the label of the imported bench run (a label as `run --label` takes it); the same runs imported"
                  " again under one label are refused"),
    ]  # fmt: skip
    """The label of the imported bench run."""


def register(sub: Any) -> None:
    p = _sub(sub, "import", "store runs observed elsewhere (OTLP/JSON spans or the event log) as an imported bench run",
             "TRACES is OTLP/JSON (what `export --otel` writes, one ExportTraceServiceRequest per line, or any"
             " producer of the same invoke_agent/chat/execute_tool spans and harness.* attributes) or the library's"
             " event log (HarnessSession(event_log=...): one typed event per line). Every run becomes a case run of"
             " one new bench run (source imported, no expectations: expected_*, passed and failures are empty), with"
             " its tool_calls and events rows; gate, show and diff give it no verdict. A trace that is not a set of"
             " whole runs (a span missing, an unknown attribute, a run cut off, two runs under one id, malformed JSON)"
             " or holds a value its field does not allow (a count that is not an integer from 0 within BIGINT, a"
             " threshold outside what `run` accepts, a span ending before it starts, misshapen gen_ai messages) is"
             " one line naming the line, span and field, exit 2, and nothing is written. The same runs imported"
             " again under one label are refused.")  # fmt: skip
    _ImportFlags.add_flags(p, "import", only=("traces",))
    _add_db(p)
    _ImportFlags.add_flags(p, "import", only=("label",))
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import uuid
    from datetime import UTC, datetime

    from harness import __version__
    from runners.interchange.otel_import import fingerprint, import_rows, read_traces
    from runners.store.connection import check_database_file, connect
    from runners.store.imported_runs import ImportedBenchRun, imported_before, write_imported_bench_run

    traces: Path = args.traces
    if not traces.is_file():
        _fail(f"{traces}: no such file" if not traces.exists() else f"{traces}: not a file")
    db: Path = args.db
    check_database_file(db, writing=True)
    runs = read_traces(traces)  # every run whole and every value checked before the database is opened
    bench_run_id = f"br-{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"
    rows = import_rows(runs, bench_run_id, args.label)
    models = {str(r.case_run["model"]) for r, _ in rows}
    bench = ImportedBenchRun(bench_run_id, args.label, models.pop() if len(models) == 1 else None, str(traces),
                             tuple(r.case_id for r in runs), max(r.epoch for r in runs), __version__,
                             fingerprint(runs))  # fmt: skip
    if db.exists():  # read-only: a refused import leaves the file as it was, byte for byte
        con = connect(db, read_only=True)
        try:
            earlier = imported_before(con, args.label, str(bench.fingerprint))
        finally:
            con.close()
        if earlier is not None:
            _fail(f"{traces}: these {len(runs)} runs are already imported under label {args.label!r} (bench run"
                  f" {earlier.bench_run_id}, from {earlier.traces}); nothing imported — give another --label to"
                  " import them again")  # fmt: skip
    existed = db.exists()
    try:
        con = connect(db)
        try:
            written = write_imported_bench_run(con, bench, rows)
        finally:
            con.close()
    except BaseException:
        if not existed:  # nothing half-imported: a database this import created goes with it
            for leftover in (db, Path(f"{db}.wal")):
                with contextlib.suppress(OSError):  # a read-only file system refuses even removing nothing
                    leftover.unlink(missing_ok=True)
        raise
    _say(f"imported {len(rows)} case runs from {traces} into {db} as bench run {bench_run_id} (label"
         f" {args.label}, {written} rows)")  # fmt: skip
    return EXIT_OK
