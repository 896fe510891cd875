"""`harness-bench cases` on a large evaluation file: wall time and peak memory.

Writes one file of N cases (the built-in cases repeated with new ids; default 5,280 and 123,045) under a
temporary folder, then runs `harness-bench cases FILE` in a fresh process for each and prints seconds,
peak RSS and cases per second. The big file is never kept. `python benchmarks/bench_cases_load.py [N ...]`.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
SIZES = (5_280, 123_045)


def write_big_file(path: Path, n: int) -> int:
    """`n` cases: the built-in ones repeated with ids suffixed `-rN`; returns the file's size in bytes."""
    raws: list[dict[str, object]] = []
    for f in sorted((ROOT / "evalsets").glob("*.yaml")):
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        raws.extend(yaml.load(f.read_text(encoding="utf-8"), Loader=loader)["cases"])
    with path.open("w", encoding="utf-8") as out:
        out.write("cases:\n")
        for i in range(n):
            raw = dict(raws[i % len(raws)])
            raw["id"] = f"{str(raw['id'])[:70]}-r{i // len(raws)}"
            block = yaml.safe_dump([raw], allow_unicode=True, sort_keys=False, width=1000)
            out.write("".join("  " + line + "\n" for line in block.splitlines()))
    return path.stat().st_size


def run_cases(path: Path) -> tuple[float, float, int]:
    """(seconds, peak RSS in MB, exit code) of `harness-bench cases path` in a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "runners.cli", "cases", "--evalset", str(path)], cwd=ROOT, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, check=False,
    )  # fmt: skip
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr.decode(errors="replace")[-2000:])
    # ru_maxrss of children is the largest child so far: run the sizes smallest first
    return seconds, max(peak, before) / 1024, proc.returncode


def main(argv: list[str]) -> int:
    sizes = sorted(int(a) for a in argv) if argv else list(SIZES)
    with tempfile.TemporaryDirectory(prefix="bench-cases-") as tmp:
        for n in sizes:
            path = Path(tmp) / f"cases_{n}.yaml"
            size = write_big_file(path, n)
            seconds, peak_mb, rc = run_cases(path)
            print(
                f"{n:>8,} cases  {size / 1e6:6.1f} MB file  {seconds:7.1f} s  peak RSS {peak_mb:7.0f} MB  "
                f"{n / seconds:8,.0f} cases/s  exit {rc}"
            )
            path.unlink()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
