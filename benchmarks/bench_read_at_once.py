"""Stored runs read at once against a read per run, in CPU seconds, over every built-in case's run (scripted model).

- Capture from a trace: the runs of one `export --otel --otel-content` file as `captured_runs_from_trace` captures
  them (imported together into a temporary in-memory database and read back at once: what `capture --trace` and a
  script capturing a whole export use) against an import and a read per run (the same store functions, one run at a
  time); the file is read once either way and left out.
- Exports: `load_case_runs` (what `export --inspect` and `export --otel --otel-content` read every run of a bench run
  with) against `load_case_run` per run, the transcripts and verdicts of every run.

The fixed cost of an import and of a read (tens of DuckDB statements) is paid once, not once per run: the figures are
what that saves. `python benchmarks/bench_read_at_once.py [--rounds R]` prints the median of R interleaved rounds.
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
from runners.store.transcripts import load_case_run, load_case_runs


def _trace(folder: Path) -> tuple[Path, Path, list[str]]:
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
    return db, trace, ids


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
    with tempfile.TemporaryDirectory(prefix="bench-read-at-once-") as tmp:
        db, trace, ids = _trace(Path(tmp))
        parsed = {r.run_id: r for r in read_traces(trace, formats=(TraceFormat.OTLP_JSON,))}
        runs = [parsed[i] for i in ids]
        read = statistics.median(_cpu(lambda: read_traces(trace, formats=(TraceFormat.OTLP_JSON,))) for _ in range(3))
        con = connect(db, read_only=True)
        samples: dict[str, list[float]] = {k: [] for k in ("capture", "capture alone", "export", "export alone")}
        try:
            for _ in range(rounds):
                samples["capture"].append(_cpu(lambda: captured_runs_from_trace(trace, ids)) - read)
                samples["capture alone"].append(_cpu(lambda: _each_alone(trace, runs)))
                samples["export"].append(_cpu(lambda: load_case_runs(con, str(db), ids)))
                samples["export alone"].append(_cpu(lambda: [load_case_run(con, str(db), i) for i in ids]))
        finally:
            con.close()
    m = {k: statistics.median(v) for k, v in samples.items()}
    print(f"{len(ids)} runs, median of {rounds} interleaved rounds (CPU seconds, min-max):")
    for what, together, alone in (("capture from a trace (reading the file left out)", "capture", "capture alone"),
                                  ("an export's reads of the runs", "export", "export alone")):  # fmt: skip
        print(
            f"  {what}: at once {m[together]:.2f} ({min(samples[together]):.2f}-{max(samples[together]):.2f}),"
            f" one at a time {m[alone]:.2f} ({min(samples[alone]):.2f}-{max(samples[alone]):.2f}):"
            f" x{m[together] / m[alone]:.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
