"""Benchmark 7: live concurrency against a simulated hosted endpoint, and cassette replay 1 vs 2.

    python benchmarks/bench_concurrency.py [--latency-ms 200] [--jitter-ms 0] [--n 1,8,32,64] [--repeats 3]

Starts `harness-bench serve-sim --port 0 --latency-ms L` in its own process (its own GIL, like a
remote endpoint), then times, in a fresh process each,

    harness-bench run --model openai:scripted --base-url http://127.0.0.1:PORT/v1 --concurrency N

Ideal throughput: N requests in flight, each taking L, so N/L model requests per second; divided
by the model requests one case run makes (model_calls + guard_calls, measured from the run's own
DuckDB rows), that is N / (L × requests per run) case runs per second. Each N gets enough epochs
that ~12 runs per slot amortise start-up and the ramp-down tail. "wall" is what the CLI prints
(the whole `run_bench`, case loading included); "steady" is the execution window only (first case
run started → last finished). Figures are medians of `--repeats` with min and max, and the load
average before each measurement is printed: on a shared machine the figures are noisy.

Then replay: the committed cassettes (`--record-mode none`) at `--concurrency 1` and `2`.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._serve_sim import BIN, start_simulator

ROOT = Path(__file__).resolve().parent.parent
N_CASES = 81
RATE = re.compile(r"executed \(\d+ already done\) in ([0-9.]+)s")


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f}/{five:.1f} on {os.cpu_count()} cpus"


@dataclass(frozen=True)
class Sample:
    """One `harness-bench run`."""

    runs: int
    """Case runs executed."""
    wall: float
    """Seconds the CLI reports for the bench run."""
    steady: float
    """Seconds from the first case run's start to the last one's end."""
    requests_per_run: float
    """Model HTTP requests per case run (diagnosis calls + guard calls)."""
    errors: int
    """Case runs with a loop error (should be 0)."""
    cpu: float
    """CPU seconds of the CLI process (user + system)."""


def run_cli(args: list[str], db: Path) -> Sample:
    """Run the CLI in a fresh process and read its DuckDB rows."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([str(BIN), "run", *args, "--db", str(db)], capture_output=True, text=True, check=False)
    match = RATE.search(proc.stdout.replace("\n", " "))
    if proc.returncode != 0 or match is None:
        raise SystemExit(f"harness-bench run failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    con = duckdb.connect(str(db), read_only=True)
    try:
        runs, calls, errors, first, last = con.execute(
            "SELECT count(*), sum(model_calls + guard_calls), count(error),"
            " min(epoch_ms(finished_at) - wall_ms), max(epoch_ms(finished_at)) FROM case_runs"
        ).fetchone()  # type: ignore[misc]
    finally:
        con.close()
    return Sample(runs, float(match.group(1)), (last - first) / 1000.0, calls / runs, errors, cpu)


def _proc_cpu(pid: int) -> float:
    """CPU seconds of a running process (Linux /proc; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _med(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}–{max(values):.1f})"


def live(latency_ms: float, jitter_ms: float, ns: list[int], repeats: int, tmp: Path, executors: list[str]) -> None:
    sim, url = start_simulator(latency_ms, jitter_ms)
    lat = latency_ms / 1000.0
    print(f"serve-sim at {url}, latency {latency_ms:g}±{jitter_ms:g} ms")
    print("| executor | N | epochs | case runs | model requests / run | ideal runs/s | wall runs/s (CLI) | % of ideal |"
          " steady runs/s | % of ideal | CPU ms / case run: client, serve-sim | load before |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    try:
        for executor, n in ((e, n) for n in ns for e in executors):
            epochs = 1 if n == 1 else max(2, math.ceil(n * 12 / N_CASES))
            samples, loads, sim_cpu = [], [], []
            for r in range(repeats):
                loads.append(_load())
                db = tmp / f"live-{executor}-n{n}-r{r}.duckdb"
                c0 = _proc_cpu(sim.pid)
                samples.append(run_cli(["--model", "openai:scripted", "--base-url", url, "--concurrency", str(n),
                                        "--epochs", str(epochs), "--executor", executor], db))  # fmt: skip
                sim_cpu.append((_proc_cpu(sim.pid) - c0) / samples[-1].runs)
            per_run = statistics.median(s.requests_per_run for s in samples)
            ideal = n / (lat * per_run)
            wall = [s.runs / s.wall for s in samples]
            steady = [s.runs / s.steady for s in samples]
            errors = sum(s.errors for s in samples)
            print(
                f"| {executor} | {n} | {epochs} | {samples[0].runs} | {per_run:.2f} | {ideal:.1f} | {_med(wall)} |"
                f" {statistics.median(wall) / ideal:.0%} | {_med(steady)} | {statistics.median(steady) / ideal:.0%} |"
                f" {statistics.median(s.cpu / s.runs for s in samples) * 1000:.0f},"
                f" {statistics.median(sim_cpu) * 1000:.1f} |"
                f" {loads[0]}{f' ({errors} case runs with errors!)' if errors else ''} |",
                flush=True,
            )
    finally:
        sim.terminate()
        sim.wait(timeout=10)


def replay(repeats: int, tmp: Path) -> None:
    print("\n| replay (committed cassettes, record mode none) | case runs | runs/s (CLI) | CPU ms / case run |"
          " load before |")  # fmt: skip
    print("|---|---|---|---|---|")
    base = {}
    for executor, n in (("local", 1), ("local", 2), ("processes", 2)):
        rates, cpus, load = [], [], _load()
        for r in range(repeats):
            s = run_cli(["--model", "openai:scripted", "--cassettes", str(ROOT / "cassettes"), "--record-mode", "none",
                         "--concurrency", str(n), "--epochs", "4", "--executor", executor],
                        tmp / f"replay-{executor}-n{n}-r{r}.duckdb")  # fmt: skip
            rates.append(s.runs / s.wall)
            cpus.append(s.cpu / s.runs * 1000)
        base[(executor, n)] = statistics.median(rates)
        print(f"| --executor {executor} --concurrency {n} | {s.runs} | {_med(rates)} | {statistics.median(cpus):.0f} |"
              f" {load} |", flush=True)  # fmt: skip
    one = base[("local", 1)]
    print(
        f"\nreplay / concurrency 1: threads ×2 {base[('local', 2)] / one:.2f}×, processes ×2"
        f" {base[('processes', 2)] / one:.2f}×"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--latency-ms", type=float, default=200.0)
    p.add_argument("--jitter-ms", type=float, default=0.0)
    p.add_argument("--n", default="1,8,32,64", help="concurrency levels (comma-separated)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--no-replay", action="store_true", help="skip the replay measurement")
    p.add_argument("--executors", default="local,processes", help="executors to compare (comma-separated)")
    args = p.parse_args(argv)
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench-not-a-secret")
    tmp = Path(tempfile.mkdtemp(prefix="hb-concurrency-"))
    t0 = time.perf_counter()
    print(f"# {_load()}")
    live(
        args.latency_ms,
        args.jitter_ms,
        [int(x) for x in args.n.split(",")],
        args.repeats,
        tmp,
        [e for e in args.executors.split(",") if e],
    )
    if not args.no_replay:
        replay(args.repeats, tmp)
    print(f"\n# done in {time.perf_counter() - t0:.0f}s; {_load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
