"""Run every benchmark and print its figures: `make perf` (never part of `make test`)."""

from __future__ import annotations

import platform
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    print(f"# harness-bench benchmarks — {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    print(f"# machine: {platform.machine()}, {platform.processor() or 'cpu'}, Python {platform.python_version()}")
    status = 0
    scripts: list[tuple[str, list[str]]] = [
        ("bench_interceptor.py", []), ("bench_throughput.py", []), ("bench_scaling.py", []), ("bench_import.py", []),
        ("peers/run_peers.py", []), ("bench_transcripts.py", []), ("bench_otel.py", []), ("bench_store_open.py", []),
        ("bench_store_threads.py", []), ("bench_read_at_once.py", []),
        ("bench_concurrency.py", ["--repeats", "1"]),  # ~4 min; docs/measurements.md's table uses 3 repeats
    ]  # fmt: skip
    for script, args in scripts:
        path = HERE / script
        if not path.exists():
            continue
        print(f"\n## {script}", flush=True)
        rc = subprocess.call([sys.executable, str(path), *args])
        if rc:
            print(f"({script} exited {rc})")
            status = status or rc
    return status


if __name__ == "__main__":
    sys.exit(main())
