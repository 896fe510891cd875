"""Capturing cases from a trace: every built-in case's run of one `export --otel --otel-content` file, as
`captured_runs_from_trace` captures them (what `capture --trace` and a script capturing a whole export use: the runs
imported together into a temporary in-memory database and read back at once) against an import and a read per run
(the same store functions, one run at a time), in CPU seconds, the file read once either way.

The fixed cost of an import and of a read (about forty DuckDB statements) is paid once per import, so the figure is
what grouping the runs saves. `python benchmarks/bench_capture.py [--rounds R]` prints the median of R interleaved
rounds.
"""

from __future__ import annotations

import contextlib
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runners.cli import main as cli
from runners.interchange.observed_rows import import_rows
from runners.interchange.otel_import import ObservedRun, TraceFormat, read_traces
from runners.interchange.otel_trace import captured_runs_from_trace
from runners.store.captured_runs import CapturedRun, load_captured_run
from runners.store.connection import connect, connect_in_memory
from runners.store.imported_runs import ImportedBenchRun, write_imported_bench_run


def _trace(folder: Path) -> tuple[Path, list[str]]:
    """Every built-in case run by the scripted model, exported with its contents; the trace and its run ids."""
    db, trace = folder / "cases.duckdb", folder / "spans.jsonl"
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli(["run", "--db", str(db), "--model", "scripted"]) == 0
        assert cli(["export", "--db", str(db), "--otel", str(trace), "--otel-content"]) == 0
    con = connect(db, read_only=True)
    try:
        ids = [str(r[0]) for r in con.execute("SELECT case_run_id FROM case_runs ORDER BY case_id").fetchall()]
    finally:
        con.close()
    return trace, ids


def _each_alone(trace: Path, runs: list[ObservedRun]) -> list[CapturedRun]:
    """The runs imported and read back one at a time: a bench run, an import and a read each."""
    con = connect_in_memory("one import per run")
    try:
        out = []
        for n, run in enumerate(runs):
            ((rows, transcript),) = import_rows([run], f"alone-{n}", label="")
            bench = ImportedBenchRun(f"alone-{n}", "", None, str(trace), (run.case_id,), run.epoch, "bench")
            write_imported_bench_run(con, bench, [(rows, transcript)])
            out.append(load_captured_run(con, str(trace), str(rows.case_run["case_run_id"])))
        return out
    finally:
        con.close()


def _cpu(fn: object) -> float:
    start = time.process_time()
    fn()  # type: ignore[operator]
    return time.process_time() - start


def main(argv: list[str]) -> int:
    rounds = int(argv[argv.index("--rounds") + 1]) if "--rounds" in argv else 3
    with tempfile.TemporaryDirectory(prefix="bench-capture-") as tmp:
        trace, ids = _trace(Path(tmp))
        parsed = {r.run_id: r for r in read_traces(trace, formats=(TraceFormat.OTLP_JSON,))}
        runs = [parsed[i] for i in ids]
        read = statistics.median(_cpu(lambda: read_traces(trace, formats=(TraceFormat.OTLP_JSON,))) for _ in range(3))
        at_once: list[float] = []
        alone: list[float] = []
        for _ in range(rounds):
            at_once.append(_cpu(lambda: captured_runs_from_trace(trace, ids)) - read)
            alone.append(_cpu(lambda: _each_alone(trace, runs)))
    a, b = statistics.median(at_once), statistics.median(alone)
    print(f"{len(ids)} runs from one trace (reading the file, {read:.2f} s CPU, left out), median of {rounds} rounds:")
    print(f"  imported together, read at once  {a:6.2f} s CPU (min {min(at_once):.2f}, max {max(at_once):.2f})")
    print(f"  an import and a read per run     {b:6.2f} s CPU (min {min(alone):.2f}, max {max(alone):.2f})")
    print(f"together: x{a / b:.2f} of one at a time")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
