"""`harness-bench cases` on a large evaluation file: wall time and peak memory.

Writes one file of N cases (the built-in cases repeated with new ids; default 12,304 and 123,045) under a
temporary folder, then runs `harness-bench cases FILE` in a fresh process for each and prints seconds,
peak RSS (that process's own, from `wait4`) and cases per second, then how much the peak grew from the
smallest size to the largest. The big file is never kept. `python benchmarks/bench_cases_load.py [N ...]`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
SIZES = (12_304, 123_045)


def write_big_file(path: Path, n: int) -> int:
    """`n` cases: the built-in ones repeated with ids suffixed `-rN`; returns the file's size in bytes."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    blocks: list[tuple[str, str]] = []  # (id, the case's YAML with `@ID@` for its id), dumped once per built-in case
    for f in sorted((ROOT / "evalsets").glob("*.yaml")):
        for raw in yaml.load(f.read_text(encoding="utf-8"), Loader=loader)["cases"]:
            block = yaml.safe_dump([{**raw, "id": "@ID@"}], allow_unicode=True, sort_keys=False, width=1000)
            blocks.append((str(raw["id"])[:70], "".join("  " + line + "\n" for line in block.splitlines())))
    with path.open("w", encoding="utf-8") as out:
        out.write("cases:\n")
        for i in range(n):
            case_id, block = blocks[i % len(blocks)]
            out.write(block.replace("'@ID@'", f"{case_id}-r{i // len(blocks)}", 1))
    return path.stat().st_size


def run_cases(path: Path) -> tuple[float, float, int]:
    """(seconds, peak RSS in MB, exit code) of `harness-bench cases path` in a child process (its own peak,
    from `wait4`, whatever ran before)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "runners.cli", "cases", "--evalset", str(path)], cwd=ROOT, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    stderr = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    proc.returncode = code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.stderr.write(stderr.decode(errors="replace")[-2000:])
    return seconds, usage.ru_maxrss / 1024, code


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
