"""`harness-bench import TRACES --db D --label L`: runs observed elsewhere (OpenTelemetry GenAI spans as OTLP/JSON,
or the library's event log) stored as an imported bench run, so `show`, `report` and `whatif` read them."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Annotated, Any

from runners.commands._common import EXIT_OK, _add_db, _fail, _say, _sub
from runners.plan.flags import Flag, FlagModel

__all__ = ["register", "run"]


class _ImportFlags(FlagModel):
    """`import`'s arguments: the file read and the label its bench run gets."""

    traces: Annotated[Path, Flag(positional=True, metavar="TRACES")]
    """the OTLP/JSON or event-log file (JSON Lines)"""
    label: str
    """the label of the imported bench run"""


def register(sub: Any) -> None:
    p = _sub(sub, "import", "store runs observed elsewhere (OTLP/JSON spans or the event log) as an imported bench run",
             "TRACES is OTLP/JSON (what `export --otel` writes, one ExportTraceServiceRequest per line, or any"
             " producer of the same invoke_agent/chat/execute_tool spans and harness.* attributes) or the library's"
             " event log (HarnessSession(event_log=...): one typed event per line). Every run becomes a case run of"
             " one new bench run (source imported, no expectations: expected_*, passed and failures are empty), with"
             " its tool_calls and events rows. A trace that is not a set of whole runs (a span missing, an unknown"
             " attribute, a run cut off, two runs under one id, malformed JSON) is one line naming the line and"
             " span, exit 2, and nothing is written.")  # fmt: skip
    _ImportFlags.add_flags(p, "import", only=("traces",))
    _add_db(p)
    _ImportFlags.add_flags(p, "import", only=("label",))
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import uuid
    from datetime import UTC, datetime

    from harness import __version__
    from runners.interchange.otel_import import import_rows, read_traces
    from runners.store.connection import check_database_file, connect
    from runners.store.imported_runs import ImportedBenchRun, write_imported_bench_run

    if not args.label.strip():
        _fail("--label: empty")
    traces: Path = args.traces
    if not traces.is_file():
        _fail(f"{traces}: no such file" if not traces.exists() else f"{traces}: not a file")
    check_database_file(args.db)
    runs = read_traces(traces)  # every run whole before the database is opened
    bench_run_id = f"br-{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"
    rows = import_rows(runs, bench_run_id, args.label)
    models = {str(r.case_run["model"]) for r, _ in rows}
    bench = ImportedBenchRun(bench_run_id, args.label, models.pop() if len(models) == 1 else None, str(traces),
                             tuple(r.case_id for r in runs), max(r.epoch for r in runs), __version__)  # fmt: skip
    db: Path = args.db
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
                leftover.unlink(missing_ok=True)
        raise
    _say(f"imported {len(rows)} case runs from {traces} into {db} as bench run {bench_run_id} (label"
         f" {args.label}, {written} rows)")  # fmt: skip
    return EXIT_OK
