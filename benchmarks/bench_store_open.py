"""Opening a metrics database: the store's `connect` (the file attached to the process's one DuckDB instance) against
a DuckDB instance of its own per open, as the store did before, in CPU milliseconds an open, interleaved.

Three kinds of open, each on files the store made: a new file (schema created), an existing file for writing (the
schema checked) and an existing file read-only; each as the store opens it and as `duckdb.connect` opens it alone
(the instance's cost without the store's checks). `python benchmarks/bench_store_open.py [--opens N] [--rounds R]`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import duckdb  # noqa: E402

from runners.store.connection import connect  # noqa: E402


def _cpu_ms(opens: int, one: Callable[[], object]) -> float:
    start = time.process_time()
    for _ in range(opens):
        one()
    return (time.process_time() - start) * 1000 / opens


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="CPU per open of a metrics database, the store's and DuckDB's own")
    parser.add_argument("--opens", type=int, default=100, help="opens per measurement (default 100)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds; the median is printed (default 5)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-store-open-") as tmp:
        folder = Path(tmp)
        existing = folder / "existing.duckdb"
        connect(existing).close()
        serial = iter(range(10**9))
        kinds: dict[str, Callable[[], object]] = {
            "store: new file": lambda: connect(folder / f"n{next(serial)}.duckdb").close(),
            "store: existing, writing": lambda: connect(existing).close(),
            "store: existing, read-only": lambda: connect(existing, read_only=True).close(),
            "own instance: existing, writing": lambda: duckdb.connect(str(existing)).close(),
            "own instance: existing, read-only": lambda: duckdb.connect(str(existing), read_only=True).close(),
        }
        samples: dict[str, list[float]] = {k: [] for k in kinds}
        for _ in range(args.rounds):
            for kind, one in kinds.items():
                samples[kind].append(_cpu_ms(args.opens, one))
    median = {k: statistics.median(v) for k, v in samples.items()}
    for kind, ms in median.items():
        print(f"{kind:<36} {ms:6.2f} ms CPU an open (min {min(samples[kind]):.2f}, max {max(samples[kind]):.2f})")
    for mode in ("read-only", "writing"):
        ratio = median[f"store: existing, {mode}"] / median[f"own instance: existing, {mode}"]
        print(f"an existing file, {mode}: the store's open (its checks included) x{ratio:.2f} of an instance's alone")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
