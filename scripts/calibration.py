"""Run the calibration study (runners/pipelines/calibration.py) and write its file, figures and tables.

    .venv/bin/python -m scripts.calibration [--part gate|recommend|power|all] [--pairs 60] [--epochs 3]

Writes `reports/calibration/calibration.json` (the parts already there are kept, a part run again is replaced),
`calibration.png` (gate) and `power.png` (power), and prints the docs' tables. Minutes to an hour.
Exit 0 done, 2 unusable input (a count below 1, a results file that is not the study's).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import pydantic

from runners.decisions.calibration_results import CalibrationResults, gate_key
from runners.pipelines.calibration import gate_study, power_study, recommend_study
from runners.rendering.calibration import gate_figure, gate_tables, power_figure, power_tables

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "reports" / "calibration"


def _read(path: Path) -> CalibrationResults:
    """The results written so far (none: an empty study)."""
    if not path.exists():
        return CalibrationResults()
    return CalibrationResults.model_validate_json(path.read_bytes())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=["gate", "recommend", "power", "all"], default="all")
    parser.add_argument("--pairs", type=int, default=60, help="seed pairs per stochastic profile (default 60)")
    parser.add_argument("--epochs", type=int, default=3, help="epochs of the gate runs (default 3)")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the DuckDB files here (default: a temp dir)")
    parser.add_argument("--out", type=Path, default=OUT, help=f"results folder (default {OUT.relative_to(ROOT)})")
    args = parser.parse_args(argv)
    if args.pairs < 1 or args.epochs < 1:
        print("error: --pairs and --epochs must be >= 1", file=sys.stderr)
        return 2
    results_path = args.out / "calibration.json"
    try:
        results = _read(results_path)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the file"
        print(f"error: {results_path}: not the study's results ({where}: {first['msg']})", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        if args.part in ("gate", "all"):
            print("gate: false alarms and detection …", file=sys.stderr)
            results.gates[gate_key(args.epochs)] = gate_study(args.pairs, args.epochs, work)
        if args.part in ("recommend", "all"):
            print("recommend: picks per profile and epochs …", file=sys.stderr)
            results.recommend = recommend_study(work)
        if args.part in ("power", "all"):
            print("power: predicted MDE against measured detection; the sequential mode …", file=sys.stderr)
            results.power = power_study(args.pairs)
    args.out.mkdir(parents=True, exist_ok=True)
    results_path.write_text(results.model_dump_json(indent=1) + "\n", encoding="utf-8")
    if gate_key(3) in results.gates:
        gate_figure(results, args.out / "calibration.png")
    if results.power is not None:
        power_figure(results.power, args.out / "power.png")
    print(gate_tables(results))
    if results.power is not None:
        print(power_tables(results.power))
    return 0


if __name__ == "__main__":
    sys.exit(main())
