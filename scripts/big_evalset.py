"""A large evaluation file made from the built-in cases, and `harness-bench cases` timed on it: what the tests of the
streaming reader and the benchmark of `cases` on a large file (benchmarks/bench_cases_load.py) stand on.

    .venv/bin/python -m scripts.big_evalset OUT.yaml N     # writes N cases to OUT.yaml
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from runners.domain.evalset import BUILTIN_DIR
from runners.domain.suite import SUITE_FILE

ROOT = Path(__file__).resolve().parent.parent


def write_big_file(path: Path, n: int) -> int:
    """`n` cases: the built-in ones repeated with ids suffixed `-rN`; returns the file's size in bytes."""
    loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    blocks: list[tuple[str, str]] = []  # (id, the case's YAML with `@ID@` for its id), dumped once per built-in case
    for f in sorted(p for p in BUILTIN_DIR.glob("*.yaml") if p.name != SUITE_FILE):
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


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="write a large evaluation file made from the built-in cases")
    parser.add_argument("out", type=Path, help="the YAML file to write")
    parser.add_argument("n", type=int, help="how many cases")
    args = parser.parse_args(argv)
    if args.n < 1:
        print("error: n must be >= 1", file=sys.stderr)
        return 2
    size = write_big_file(args.out, args.n)
    print(f"{args.out}: {args.n:,} cases, {size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
