"""The store's DuckDB instance on one thread against DuckDB's default (one per core), in CPU milliseconds for a
one-case `run` into a new file followed by `show` of it, in process, interleaved.

The store's statements are many and small (a run's rows, catalog lookups, a summary over a few thousand rows); the
figure says what waking DuckDB's other worker threads for each of them costs. `python
benchmarks/bench_store_threads.py [--runs N] [--rounds R]`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from runners.cli import main as cli  # noqa: E402
from runners.store.connection import connect  # noqa: E402

CASE = "empty_logs_gateway_timeout_t1"


def _set_threads(folder: Path, threads: int) -> None:
    """`SET threads` is the instance's: set through any connection, it holds for every file the process opens."""
    con = connect(folder / "settings.duckdb")
    try:
        con.execute(f"SET threads = {threads}")
    finally:
        con.close()


def _cpu_ms(folder: Path, runs: int, tag: str) -> float:
    start = time.process_time()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        for i in range(runs):
            db = str(folder / f"{tag}-{i}.duckdb")
            assert cli(["run", "--db", db, "--case", CASE, "--label", "b"]) == 0
            assert cli(["show", "--db", db, "--label", "b", "--case", CASE]) == 0
    return (time.process_time() - start) * 1000 / runs


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="CPU of a one-case run and its show, the store on 1 thread or more")
    parser.add_argument("--runs", type=int, default=20, help="runs per measurement (default 20)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds; the median is printed (default 5)")
    args = parser.parse_args(argv)
    cores = os.cpu_count() or 1
    variants = {"1 thread (the store's)": 1, f"{cores} threads (DuckDB's default here)": cores}
    samples: dict[str, list[float]] = {k: [] for k in variants}
    with tempfile.TemporaryDirectory(prefix="bench-store-threads-") as tmp:
        folder = Path(tmp)
        _cpu_ms(folder, 2, "warm")  # imports, the built-in cases and their fixtures loaded once
        for r in range(args.rounds):
            for name, threads in variants.items():
                _set_threads(folder, threads)
                samples[name].append(_cpu_ms(folder, args.runs, f"r{r}-{threads}"))
    median = {k: statistics.median(v) for k, v in samples.items()}
    for name, ms in median.items():
        print(f"{name:<36} {ms:6.1f} ms CPU a run + show (min {min(samples[name]):.1f}, max {max(samples[name]):.1f})")
    one, many = median.values()
    print(f"one thread: x{one / many:.2f} of DuckDB's default CPU")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
