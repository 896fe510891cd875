"""`harness-bench merge`: join shard files (or any harness-bench databases) into one DuckDB file."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from runners.commands._common import EXIT_INTERRUPTED, EXIT_OK, _say, _sub

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    p = _sub(sub, "merge", "merge shard files (or any harness-bench databases) into one DuckDB file",
             "Copy the bench runs, sweeps, shards, case runs, tool calls and events of every SHARD file into OUT"
             " (created if missing). Idempotent: a case run OUT already holds is never copied twice. Refused,"
             " before OUT is touched: files that are not harness-bench databases of this schema version, copies"
             " of one run or sweep with different settings, cases, epochs or shard counts, and (without"
             " --partial) a sharded run missing a shard or an unfinished run.")  # fmt: skip
    p.add_argument("out", type=Path, metavar="OUT", help="the merged DuckDB file (created, or added to)")
    p.add_argument("shards", type=Path, nargs="+", metavar="SHARD", help="DuckDB files written by run/sweep --shard")
    p.add_argument("--partial", action="store_true",
                   help="merge runs with missing or unfinished shards too (their status says so)")  # fmt: skip
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from runners.run.interrupts import Interrupts
    from runners.store.merge import MergeInterrupted, merge

    signals: Interrupts = args.interrupts  # Ctrl-C and SIGTERM set a flag (runners/cli.py): statements complete
    try:
        summary = merge(args.out, args.shards, partial=args.partial, cancellation=signals.token)
    except MergeInterrupted as exc:
        _say(str(exc), stderr=True)
        return signals.exit_code or EXIT_INTERRUPTED
    for line in summary.runs + summary.sweeps:
        _say(line)
    _say(
        f"merged {len(summary.inputs)} file(s) → {summary.out}: {summary.case_runs_added} case runs added,"
        f" {summary.case_runs_present} already there"
    )
    if signals.received is not None:  # the signal came after COMMIT: the merge is whole
        _say(f"{signals.received.name} received after the merge was committed: {summary.out} is complete",
             stderr=True)  # fmt: skip
        return signals.received.exit_code
    return EXIT_OK
