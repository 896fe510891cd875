"""`harness-bench import TRACES --db D --label L [--format tau-bench] [--outcomes FILE]`: runs observed elsewhere
(OpenTelemetry GenAI spans as OTLP/JSON — the bench's own or any instrumented agent's —, the library's event log, or
tau-bench's recorded runs) stored as an imported bench run, with the verdicts `--outcomes` gives them, so `show`,
`report`, `compare-stops`, `whatif` and `gate` read them."""

from __future__ import annotations

import argparse
import contextlib
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

from runners.commands._common import EXIT_OK, _add_db, _fail, _say, _sub
from runners.plan.flags import Flag, FlagModel
from runners.plan.labels import label_arg

__all__ = ["register", "run"]


class ImportFormat(StrEnum):
    """What the file `import` reads holds."""

    TRACES = "traces"
    """OTLP/JSON spans or the library's event log (told apart by the first line)."""
    TAU_BENCH = "tau-bench"
    """tau-bench's recorded runs (a JSON list of `{task_id, trial, reward, info, traj}`)."""


class _ImportFlags(FlagModel):
    """`import`'s arguments: the file read, its format, the runs' verdicts and the label its bench run gets."""

    traces: Annotated[Path, Flag(positional=True, metavar="TRACES")]
    """the OTLP/JSON or event-log file (JSON Lines), or a tau-bench file with --format tau-bench"""
    format: ImportFormat = ImportFormat.TRACES
    """what TRACES holds: traces (OTLP/JSON spans of the bench or of any GenAI-instrumented agent, or the event log)
    or tau-bench (its recorded runs; each run's reward is its verdict)"""
    outcomes: Annotated[Path | None, Flag(metavar="FILE")] = None
    """the runs' verdicts: CSV or JSON Lines, one row per run — trace_id or run_id, passed or reward (passed at 1),
    optionally expected_outcome (SUCCESS or FALLBACK); runs without a row are held to no expectation"""
    label: Annotated[
        str,
        Flag(parse=label_arg, metavar="LABEL",
             help="the label of the imported bench run (a label as `run --label` takes it); the same runs imported"
                  " again under one label are refused"),
    ]  # fmt: skip
    """The label of the imported bench run."""


def register(sub: Any) -> None:
    p = _sub(sub, "import", "store runs observed elsewhere (OTLP/JSON spans, the event log, tau-bench's runs) as an"
             " imported bench run",
             "TRACES is OTLP/JSON (what `export --otel` writes, one ExportTraceServiceRequest per line, or any"
             " producer of the same invoke_agent/chat/execute_tool spans — with the harness.* attributes, or any"
             " GenAI-instrumented agent's spans without them), the library's event log (HarnessSession(event_log=...):"
             " one typed event per line), or with --format tau-bench tau-bench's recorded runs (a JSON list of"
             " {task_id, trial, reward, info, traj}; each reward is its run's verdict). Every run becomes a case run of"
             " one new bench run (source imported), with its tool_calls and events rows. Another agent's run is"
             " stored as the plain loop: every call ran, the Harness's NO_GAIN inferred by its rules (an empty or"
             " repeated result), the model's gain tags and the limits it ran under unknown. --outcomes FILE gives"
             " runs their verdicts (CSV or JSON Lines: trace_id or run_id, passed or reward, optionally"
             " expected_outcome); runs without one are held to no expectation (expected_*, passed and failures"
             " empty) and gate, show and diff give them no verdict. A trace that is not a set of whole runs (a span"
             " missing, an unknown attribute, a run cut off, two runs under one id, malformed JSON) or holds a value"
             " its field does not allow (a count that is not an integer from 0 within BIGINT, a threshold outside"
             " what `run` accepts, a span ending before it starts, misshapen gen_ai messages), and an outcome row"
             " that is not one, is one line naming the file, line, span or run and field, exit 2, and nothing is"
             " written. The same runs imported again under one label are refused. The file is read twice, a piece"
             " at a time (checked, then stored): memory does not grow with its size.")  # fmt: skip
    _ImportFlags.add_flags(p, "import", only=("traces",))
    _add_db(p)
    _ImportFlags.add_flags(p, "import", only=("label", "format", "outcomes"))
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import uuid
    from collections.abc import Iterator
    from datetime import UTC, datetime

    from harness import __version__
    from runners.interchange.observed_rows import import_rows
    from runners.interchange.observed_runs import Fingerprint, ObservedRun, TraceImportError
    from runners.interchange.otel_import import stream_traces
    from runners.interchange.outcomes import RunVerdict, match_outcomes, read_outcomes
    from runners.interchange.tau_bench import stream_tau_bench
    from runners.interchange.trace_survey import survey_runs
    from runners.plan.agent import AgentFramework
    from runners.run.interrupts import HeldInterrupts
    from runners.store.connection import check_database_file, connect
    from runners.store.imported_runs import ImportedBenchRun, imported_before, write_imported_bench_run

    flags = _ImportFlags.from_args(args, "import")
    traces = flags.traces
    for given in (traces, flags.outcomes):
        if given is not None and not given.is_file():
            _fail(f"{given}: no such file" if not given.exists() else f"{given}: not a file")
    db: Path = args.db
    check_database_file(db, writing=True)
    verdicts: dict[str, RunVerdict] = {}
    if flags.format is ImportFormat.TAU_BENCH:

        def runs() -> Iterator[ObservedRun]:  # each run's reward is its verdict, unless --outcomes gives another
            for one in stream_tau_bench(traces):
                verdicts.setdefault(one.run.run_id, one.verdict)
                yield one.run
    else:

        def runs() -> Iterator[ObservedRun]:  # a trace file is read twice, a piece at a time: never held whole
            return stream_traces(traces)

    bench_run_id = f"br-{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"
    # the first reading: every run whole, every value and every verdict checked before the database is opened
    survey = survey_runs(traces, runs(), bench_run_id, args.label)
    if flags.outcomes is not None:
        judged_rows = read_outcomes(flags.outcomes)
        verdicts.update(match_outcomes(flags.outcomes, judged_rows, survey.trace_ids))
    bench = ImportedBenchRun(bench_run_id, args.label, survey.models.pop() if len(survey.models) == 1 else None,
                             str(traces), tuple(survey.case_ids), survey.epochs, __version__,
                             survey.fingerprint.value,
                             None if survey.harnessed else AgentFramework.PLAIN.value)  # fmt: skip
    if db.exists():  # read-only: a refused import leaves the file as it was, byte for byte
        con = connect(db, read_only=True)
        try:
            earlier = imported_before(con, args.label, str(bench.fingerprint))
        finally:
            con.close()
        if earlier is not None:
            _fail(f"{traces}: these {survey.runs} runs are already imported under label {args.label!r} (bench run"
                  f" {earlier.bench_run_id}, from {earlier.traces}); nothing imported — give another --label to"
                  " import them again")  # fmt: skip

    def rows() -> Iterator[Any]:  # the second reading: the runs the first one checked, stored as they come
        again = Fingerprint()
        for run in runs():
            again.add(run)
            yield from import_rows([run], bench_run_id, args.label, verdicts)
        if again.value != survey.fingerprint.value:
            raise TraceImportError(f"{traces}: changed while it was imported (its runs are not those read first);"
                                   " nothing imported")  # fmt: skip

    existed = db.exists()
    held = HeldInterrupts()  # from the COMMIT on, the import is stored: an interrupt there waits for the file closed
    committed = False
    try:
        con = connect(db)
        try:
            written = write_imported_bench_run(con, bench, rows(), committing=held.hold)
            committed = True
        finally:
            con.close()
    except BaseException:
        if not existed and not committed:  # nothing half-imported: a database this import created goes with it
            for leftover in (db, Path(f"{db}.wal")):
                with contextlib.suppress(OSError):  # a read-only file system refuses even removing nothing
                    leftover.unlink(missing_ok=True)
        raise
    finally:
        held.release()
    judged = [v for run_id in survey.trace_ids if (v := verdicts.get(run_id)) is not None]
    verdict = f"; {len(judged)} with a verdict, {sum(v.passed for v in judged)} passed" if judged else ""
    _say(f"imported {survey.runs} case runs from {traces} into {db} as bench run {bench_run_id} (label"
         f" {args.label}, {written} rows{verdict})")  # fmt: skip
    if held.received is not None:
        _say(f"({held.received.name} came while the import was being committed: it was let finish, every case run"
             " is stored)")  # fmt: skip
    return EXIT_OK
