"""Transcripts: storage per 1,000 case runs, and the sweep slowdown with transcripts on vs off.

A sweep of every built-in case over a small grid (scripted model, one process) is run alternately with
and without `--no-transcripts`, each into a fresh DuckDB file; the figures are medians over repeats.
Storage is measured two ways: the bytes the `messages` and `prompts` columns hold (DuckDB's own
estimate, before compression) and the growth of the DuckDB file itself.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import duckdb

from runners.plan.options import BenchOptions
from runners.run.sweep import SweepGrid, SweepOptions, plan_sweep, run_sweep

TMP = Path(tempfile.mkdtemp(prefix="hb-transcripts-"))
GRID = SweepGrid(no_gain_threshold=(1, 2, 3), max_tool_invocations=(6, 10))


def _sweep(db: Path, transcripts: bool, epochs: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process — less sensitive to other work on a shared machine)."""
    t0, c0 = time.perf_counter(), time.process_time()
    base = BenchOptions.of(db=db, epochs=epochs, transcripts=transcripts)
    run_sweep(plan_sweep(SweepOptions(GRID, base)))
    return time.perf_counter() - t0, time.process_time() - c0


def _text_bytes(db: Path) -> tuple[int, int, int]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        runs = con.execute("SELECT count(*) FROM case_runs").fetchone()[0]  # type: ignore[index]
        text = con.execute(
            "SELECT sum(coalesce(strlen(content), 0) + coalesce(strlen(arguments), 0)"
            " + coalesce(strlen(scope), 0) + coalesce(strlen(decision_detail), 0)) FROM messages"
        ).fetchone()[0]  # type: ignore[index]
        prompts = con.execute("SELECT coalesce(sum(strlen(content)), 0) FROM prompts").fetchone()[0]  # type: ignore[index]
        return int(runs), int(text or 0), int(prompts)
    finally:
        con.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=3)
    args = ap.parse_args()
    on_t: list[float] = []
    off_t: list[float] = []
    on_c: list[float] = []
    off_c: list[float] = []
    sizes: list[tuple[int, int]] = []
    _sweep(TMP / "warm.duckdb", True, 1)  # imports, BM25 indexes, caches
    for i in range(args.repeats):
        order = [(True, on_t, on_c), (False, off_t, off_c)]
        for transcripts, times, cpu in order if i % 2 == 0 else order[::-1]:
            db = TMP / f"r{i}-{'on' if transcripts else 'off'}.duckdb"
            wall, used = _sweep(db, transcripts, args.epochs)
            times.append(wall)
            cpu.append(used)
            sizes.append((int(transcripts), db.stat().st_size))
    on_db = TMP / "r0-on.duckdb"
    runs, text, prompts = _text_bytes(on_db)
    on_size = statistics.median(s for t, s in sizes if t)
    off_size = statistics.median(s for t, s in sizes if not t)
    on, off = statistics.median(on_t), statistics.median(off_t)
    print(f"sweep: {runs} case runs per repeat (6 grid points), "
          f"{args.repeats} repeats each way")  # fmt: skip
    print(
        f"[T1] sweep wall time: transcripts on {on:.2f} s (min {min(on_t):.2f}, max {max(on_t):.2f}), "
        f"off {off:.2f} s (min {min(off_t):.2f}, max {max(off_t):.2f}) → {100 * (on / off - 1):+.1f}% (medians), "
        f"{100 * (min(on_t) / min(off_t) - 1):+.1f}% (fastest of each)"
    )
    con, coff = statistics.median(on_c), statistics.median(off_c)
    print(
        f"[T1] sweep CPU time: transcripts on {con:.2f} s (min {min(on_c):.2f}, max {max(on_c):.2f}), "
        f"off {coff:.2f} s (min {min(off_c):.2f}, max {max(off_c):.2f}) → {100 * (con / coff - 1):+.1f}% (medians), "
        f"{100 * (min(on_c) / min(off_c) - 1):+.1f}% (lowest of each)"
    )
    print(
        f"[T2] transcript text per 1,000 case runs: {1000 * text / runs / 1e6:.2f} MB in messages "
        f"(+ {prompts / 1e3:.1f} kB of prompts stored once)"
    )
    print(
        f"[T3] DuckDB file per 1,000 case runs: {1000 * on_size / runs / 1e6:.2f} MB with transcripts, "
        f"{1000 * off_size / runs / 1e6:.2f} MB without → {1000 * (on_size - off_size) / runs / 1e6:.2f} MB "
        "for the transcripts"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
