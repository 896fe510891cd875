"""Benchmark: `harness-bench import` of a trace of N spans and of 10·N spans — its time and its peak resident
memory, and their ratios (memory ≈ 1: the import streams; time ≈ 10: it is linear).

The trace is the bench's own export with message contents (`export --otel --otel-content`) of three built-in cases,
its runs copied under new trace and run ids until the file holds the spans wanted (about 2.6 KB a span, as a real
agent's spans with contents). Each import runs in a fresh process (`python -m runners.cli import …`) into a new
database; its peak resident set size is the process's own (`resource.getrusage`), read by a wrapper in that
process. `--spans N` (default 2000) sets N; `--keep DIR` keeps the files.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

CASES = ("diagnosable_gateway_risk_pool_exhausted_t1", "empty_logs_gateway_timeout_t1",
         "budget_exhaustion_model_calls_sloppy_envelopes_risk_t7")  # fmt: skip

_MEASURED = """
import resource, sys
from runners.cli import main
code = main(sys.argv[1:])
print("maxrss_kb", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
sys.exit(code)
"""


def _cli(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "runners.cli", *args], check=True, capture_output=True)


def _export(folder: Path) -> list[str]:
    db, spans = folder / "source.duckdb", folder / "source.jsonl"
    _cli("run", "--db", str(db), "--label", "source", *(a for c in CASES for a in ("--case", c)))
    _cli("export", "--db", str(db), "--otel", str(spans), "--otel-content")
    return spans.read_text(encoding="utf-8").splitlines()


def _trace(lines: list[str], spans_wanted: int, out: Path) -> int:
    """`out` holds the runs of `lines` copied (new trace and run ids) until it has `spans_wanted` spans or more."""
    spans = copy = 0
    with out.open("w", encoding="utf-8") as f:
        while spans < spans_wanted:
            for line in lines:
                request = json.loads(line)
                trace = uuid.uuid4().hex
                for rs in request["resourceSpans"]:
                    for ss in rs["scopeSpans"]:
                        for s in ss["spans"]:
                            s["traceId"] = trace
                            spans += 1
                            for a in s["attributes"]:
                                if a["key"] == "gen_ai.conversation.id":
                                    _, case, epoch = a["value"]["stringValue"].split("/")
                                    a["value"]["stringValue"] = f"copy{copy}/{case}/{epoch}"
                f.write(json.dumps(request, ensure_ascii=False, separators=(",", ":")) + "\n")
            copy += 1
    return spans


def _import(trace: Path, db: Path) -> tuple[float, int]:
    """Seconds and peak resident KB of one import in a fresh process."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _MEASURED, "import", str(trace), "--db", str(db), "--label", "b"],
                          capture_output=True, text=True)  # fmt: skip
    seconds = time.perf_counter() - t0
    if done.returncode:
        raise SystemExit(f"import failed ({done.returncode}): {done.stderr.strip()}")
    rss = next(int(line.split()[1]) for line in done.stderr.splitlines() if line.startswith("maxrss_kb"))
    return seconds, rss


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--spans", type=int, default=2000, help="N: the smaller trace's spans (the larger has 10·N)")
    parser.add_argument("--keep", type=Path, help="keep the traces and databases in this folder")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-import-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        lines = _export(folder)
        figures = []
        for n in (args.spans, 10 * args.spans):
            trace = folder / f"trace-{n}.jsonl"
            spans = _trace(lines, n, trace)
            seconds, rss = _import(trace, folder / f"import-{n}.duckdb")
            size = trace.stat().st_size / 1e6
            print(f"{spans:>8} spans ({size:7.1f} MB): {seconds:7.1f} s, {seconds / spans * 1e3:.2f} ms a span;"
                  f" peak RSS {rss / 1024:6.0f} MB ({rss / spans:.1f} KB a span)", flush=True)  # fmt: skip
            figures.append((spans, seconds, rss))
    (s1, t1, m1), (s2, t2, m2) = figures
    print(f"ratios (10·N / N): spans {s2 / s1:.1f}, time {t2 / t1:.1f}, peak RSS {m2 / m1:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
