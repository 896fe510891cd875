"""`harness-bench cases` on a large evaluation file: wall time and peak memory.

Writes one file of N cases (the built-in cases repeated with new ids; default 12,304 and 123,045) under a
temporary folder, then runs `harness-bench cases FILE` in a fresh process for each and prints seconds,
peak RSS (that process's own, from `wait4`) and cases per second, then how much the peak grew from the
smallest size to the largest. The big file is never kept. `python benchmarks/bench_cases_load.py [N ...]`.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.big_evalset import run_cases, write_big_file  # noqa: E402

SIZES = (12_304, 123_045)


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="time and peak memory of `harness-bench cases` on generated files")
    parser.add_argument("sizes", nargs="*", type=int, metavar="N", help=f"cases per file (default {list(SIZES)})")
    sizes = sorted(parser.parse_args(argv).sizes or SIZES)
    peaks: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-cases-") as tmp:
        for n in sizes:
            path = Path(tmp) / f"cases_{n}.yaml"
            size = write_big_file(path, n)
            seconds, peak_mb, rc = run_cases(path)
            peaks.append(peak_mb)
            print(
                f"{n:>8,} cases  {size / 1e6:6.1f} MB file  {seconds:7.1f} s  peak RSS {peak_mb:7.0f} MB  "
                f"{n / seconds:8,.0f} cases/s  exit {rc}", flush=True,
            )  # fmt: skip
            path.unlink()
    if len(sizes) > 1:
        print(f"peak RSS x{peaks[-1] / peaks[0]:.2f} for x{sizes[-1] / sizes[0]:.1f} the cases")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
