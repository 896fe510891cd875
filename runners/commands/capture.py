"""`harness-bench capture`: write an evaluation case from a stored case run, marked for review."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from runners.commands._common import EXIT_OK, _add_db, _check_outputs, _fail, _sub
from runners.store._files import NamedPath

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    p = _sub(sub, "capture", "write an evaluation case from a stored case run (its calls, records and Draft)",
             "Builds one case from the case run's transcript: the question and context, fixtures from the records"
             " its observations showed and each call's result (served again for the same scope), a trajectory"
             " replaying its calls, evaluations and Draft, and expectations from its outcome and counts, all marked"
             " for review. Replays with `harness-bench run --evalset FILE --model scripted` to the same outcome,"
             " stop reason and counts.")  # fmt: skip
    _add_db(p)
    p.add_argument("case_run", metavar="CASE_RUN_ID", help="the case run to capture (BENCH_RUN_ID/CASE/EPOCH)")
    p.add_argument("--out", type=Path, required=True, metavar="FILE", help="the evaluation file to write (.yaml)")
    p.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from runners.analysis.capture import CaptureError, build_case, case_yaml
    from runners.store._files import write_text
    from runners.store.captured_runs import CaptureSourceError, load_captured_run
    from runners.store.metrics_db import connect

    _check_outputs([NamedPath("--out", args.out)], [NamedPath("--db", args.db)])
    if args.out.exists() and not args.force:
        _fail(f"--out {args.out} exists; give --force to overwrite it or choose another path")
    con = connect(args.db, read_only=True)
    try:
        captured = load_captured_run(con, str(args.db), args.case_run)
    except CaptureSourceError as exc:
        _fail(str(exc))
    finally:
        con.close()
    try:
        case = build_case(captured)
    except CaptureError as exc:
        _fail(str(exc))
    write_text(args.out, case_yaml(captured, case))
    steps = len(case.trajectory.steps)
    sys.stdout.write(f"wrote {args.out} (case {case.id}: {steps} steps, expectations marked for review)\n")
    return EXIT_OK
