"""Re-record the committed cassettes: openai SDK → HTTP → serve-sim, for every built-in case.

    make cassettes        # or: .venv/bin/python -m scripts.record_cassettes [--out cassettes] [--case ID ...]

The cassettes replay offline in CI (record mode `none`, network blocked) and must give the same
outcome per case as the in-process scripted run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from runners.domain.evalset import load_cases
from runners.domain.profiles import trajectory_for_model
from runners.endpoints.simulator import SimulatorServer
from runners.plan.options import BenchOptions, RecordMode
from runners.plan.settings import ModelSettings
from runners.run.bench import plan_run, run_bench

MODEL = "openai:scripted"
KEY_ENV = "HARNESS_BENCH_SIM_KEY"


def record(out: Path, epochs: int = 1, only: list[str] | None = None) -> int:
    """Record every built-in case (`only`: those cases) into `out`, replacing what is there of them; returns failing
    case count."""
    cases = load_cases()
    if only:
        unknown = sorted(set(only) - {c.id for c in cases})
        if unknown:
            print(f"--case {unknown[0]}: not a built-in case", file=sys.stderr)
            return 1
        cases = [c for c in cases if c.id in only]
        for c in cases:
            shutil.rmtree(out / "openai_scripted" / c.id, ignore_errors=True)
    elif out.exists():
        shutil.rmtree(out / "openai_scripted", ignore_errors=True)
    os.environ.setdefault(KEY_ENV, "sk-sim-not-a-secret")
    with tempfile.TemporaryDirectory() as tmp, SimulatorServer(cases, trajectory_for=trajectory_for_model) as sim:
        summary = run_bench(
            plan_run(BenchOptions.of(
                model_settings=ModelSettings(model=MODEL, base_url=sim.base_url, api_key_env=KEY_ENV),
                db=Path(tmp) / "record.duckdb",
                cassettes=out, record_mode=RecordMode.ALL, epochs=epochs, case_ids=tuple(c.id for c in cases),
            ))
        )  # fmt: skip
    bad = [r for r in summary.runs if r.result.error]
    for r in bad:
        print(f"{r.case.id}: {r.result.error}", file=sys.stderr)
    print(f"recorded {summary.executed} case runs into {out} ({len(bad)} with errors)")
    return len(bad)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("cassettes"), help="cassette folder (default cassettes)")
    parser.add_argument("--case", action="append", default=None, help="record only this case (repeatable)")
    args = parser.parse_args(argv)
    return 1 if record(args.out, only=args.case) else 0


if __name__ == "__main__":
    sys.exit(main())
