"""Benchmarks 2-4: scripted throughput (concurrency 1 and 2), the 3,600-run sweep, cassette replay
vs in-process (ratio), and DuckDB writes (rows/s and share of wall time)."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._timing import measure
from runners.domain.evalset import load_cases
from runners.plan.options import BenchOptions
from runners.plan.settings import ModelSettings
from runners.run.bench import plan_run, run_bench
from runners.run.sweep import SweepGrid, SweepOptions, plan_sweep, run_sweep

ROOT = Path(__file__).resolve().parent.parent
TMP = Path(tempfile.mkdtemp(prefix="hb-bench-"))
N_CASES = len(load_cases())
_counter = [0]


def _db() -> Path:
    _counter[0] += 1
    return TMP / f"b{_counter[0]}.duckdb"


def scripted(concurrency: int, epochs: int = 3) -> tuple[float, float, float]:
    """(runs/s median, min, max) over repeats, plus the write share of the last run."""
    shares = []

    def once() -> None:
        s = run_bench(plan_run(BenchOptions.of(db=_db(), epochs=epochs, concurrency=concurrency)))
        shares.append(s.write_seconds / s.wall_seconds)

    t = measure(once, repeats=5)
    runs = N_CASES * epochs
    return runs / t.median, runs / t.high, runs / t.low


def replay_ratio() -> tuple[float, float, float]:
    os.environ.setdefault("HB_BENCH_KEY", "not-used")
    ins = measure(lambda: run_bench(plan_run(BenchOptions.of(db=_db()))), repeats=5)
    rep = measure(
        lambda: run_bench(plan_run(BenchOptions.of(
            db=_db(),
            model_settings=ModelSettings(
                model="openai:scripted", base_url="http://127.0.0.1:9/v1", api_key_env="HB_BENCH_KEY",
            ),
            cassettes=ROOT / "cassettes", record_mode="none",
        ))),
        repeats=5,
    )  # fmt: skip
    return rep.median / ins.median, ins.median, rep.median


def writes() -> tuple[float, float, int]:
    db = _db()
    s = run_bench(plan_run(BenchOptions.of(db=db, epochs=5)))
    return s.rows_written / s.write_seconds, s.write_seconds / s.wall_seconds, s.rows_written


def sweep_3600() -> tuple[float, int]:
    """4 thresholds x 3 tool budgets x 60 cases x 5 epochs = 3,600 case runs."""
    ids = [c.id for c in load_cases()][:60]
    t0 = time.perf_counter()
    run_sweep(plan_sweep(SweepOptions(
        SweepGrid(no_gain_threshold=(1, 2, 3, 4), max_tool_invocations=(6, 10, 16)),
        BenchOptions.of(case_ids=ids, db=_db(), epochs=5),
    )))  # fmt: skip
    return time.perf_counter() - t0, 4 * 3 * len(ids) * 5


def main() -> None:
    for conc in (1, 2):
        med, lo, hi = scripted(conc)
        print(f"[2] scripted, {N_CASES} cases x 3 epochs, concurrency {conc}: "
              f"{med:.1f} case runs/s (min {lo:.1f}, max {hi:.1f})")  # fmt: skip
    wall, runs = sweep_3600()
    print(f"[2] sweep of {runs} case runs (4 thresholds x 3 budgets x 60 cases x 5 epochs): {wall:.1f} s "
          f"= {runs / wall:.0f} runs/s")  # fmt: skip
    ratio, ins, rep = replay_ratio()
    print(f"[3] replay from committed cassettes via the openai SDK: {rep:.2f} s vs in-process {ins:.2f} s "
          f"for {N_CASES} cases -> ratio {ratio:.2f}x")  # fmt: skip
    rate, share, rows = writes()
    print(f"[4] DuckDB writes: {rows} rows (case_runs + tool_calls + events) at {rate:,.0f} rows/s; "
          f"{share:.1%} of the bench run's wall time")  # fmt: skip


if __name__ == "__main__":
    main()
