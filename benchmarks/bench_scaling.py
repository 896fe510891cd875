"""Benchmark 5: wall time and peak memory for 1x, 4x and 16x the case runs, each in a fresh process
(peak RSS is per process). Linear time and flat memory mean no per-run leak."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHILD = """
import json, resource, sys, time, tracemalloc
from pathlib import Path
sys.path.insert(0, {root!r})
from runners.run.bench import BenchOptions, run_bench, plan_run
run_bench(plan_run(BenchOptions.of(db=Path({db!r}) / "warm.duckdb", epochs=1)))  # imports, DuckDB, fixtures, indexes
tracemalloc.start()
t0 = time.perf_counter()
s = run_bench(plan_run(BenchOptions.of(db=Path({db!r}) / "x.duckdb", epochs={epochs})), keep_runs=False)
wall = time.perf_counter() - t0
_, peak_py = tracemalloc.get_traced_memory()
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({{"runs": s.executed, "wall": wall, "peak_rss_mb": rss, "peak_traced_mb": peak_py / 2**20}}))
"""


def run(epochs: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        code = CHILD.format(root=str(ROOT), db=tmp, epochs=epochs)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    base = None
    for mult in (1, 4, 16):
        r = run(mult)
        base = base or r
        print(f"[5] {mult:>2}x: {int(r['runs']):>5} case runs in {r['wall']:.2f} s "
              f"({r['wall'] / base['wall']:.1f}x time), peak RSS {r['peak_rss_mb']:.0f} MB, "
              f"peak Python heap during the run {r['peak_traced_mb']:.1f} MB")  # fmt: skip


if __name__ == "__main__":
    main()
