"""Sharded vs unsharded, and the Ray executor vs threads, on this machine.

Every built-in case × EPOCHS with the scripted model, through the real CLI (one process per command,
as on N machines): the unsharded run, 4 shards one after the other and 4 shards at once, `merge`, and
`--executor ray` (a local instance started by the run). Prints wall times, the shard sizes and whether
the merged database equals the unsharded one case by case. `python benchmarks/bench_shards.py [EPOCHS]`.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent
N = 4


def _cli(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "runners.cli", *args], cwd=ROOT, stdout=subprocess.DEVNULL)


def _wait(*procs: subprocess.Popen[bytes]) -> None:
    for p in procs:
        if p.wait() != 0:
            raise SystemExit(f"{p.args} exited {p.returncode}")


def _timed(label: str, *batches: list[list[str]]) -> float:
    t0 = time.perf_counter()
    for batch in batches:
        _wait(*(_cli(*argv) for argv in batch))
    wall = time.perf_counter() - t0
    print(f"{label:<44} {wall:7.1f} s")
    return wall


def _rows(db: Path) -> list[tuple[object, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT * EXCLUDE (wall_ms, finished_at) FROM case_runs ORDER BY case_run_id").fetchall()
    finally:
        con.close()


def main() -> int:
    epochs = sys.argv[1] if len(sys.argv) > 1 else "2"
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        common = ["--run-id", "bench", "--epochs", epochs]

        def shards(prefix: str) -> list[list[str]]:
            return [
                ["run", *common, "--shard", f"{i}/{N}", "--db", str(d / f"{prefix}-{i}.duckdb")]
                for i in range(1, N + 1)
            ]

        seq_argv, par_argv = shards("seq"), shards("par")
        full = _timed("unsharded, 1 process", [["run", *common, "--db", str(d / "full.duckdb")]])
        seq = _timed(f"{N} shards one after the other", *([a] for a in seq_argv))
        both = _timed(f"{N} shards at once ({N} processes)", par_argv)
        merge = _timed("merge of the 4 files", [["merge", str(d / "merged.duckdb"), *(a[-1] for a in seq_argv)]])
        ray = _timed("unsharded, --executor ray (local instance)",
                     [["run", *common, "--executor", "ray", "--db", str(d / "ray.duckdb")]])  # fmt: skip
        sizes = [len(_rows(Path(a[-1]))) for a in seq_argv]
        same = _rows(d / "merged.duckdb") == _rows(d / "full.duckdb") == _rows(d / "ray.duckdb")
        print(f"shard sizes {'/'.join(map(str, sizes))} of {sum(sizes)} case runs; merged == unsharded == ray: {same}")
        print(f"(each process pays ~2-3 s of start-up; {full=:.1f} {seq=:.1f} {both=:.1f} {merge=:.1f} {ray=:.1f})")
        return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
