"""`harness-bench merge`: join shard files (or any harness-bench databases) into one DuckDB file."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Annotated, Any

from runners.commands._common import EXIT_INTERRUPTED, EXIT_OK, _say, _sub
from runners.plan.flags import Flag, FlagModel

__all__ = ["register", "run"]


class _MergeFlags(FlagModel):
    """`merge`'s arguments: the file merged into, the files merged, and whether unfinished runs may be."""

    out: Annotated[Path, Flag(positional=True, metavar="OUT")]
    """the merged DuckDB file (created, or added to)"""
    shards: Annotated[tuple[Path, ...], Flag(positional=True, metavar="SHARD")]
    """DuckDB files written by run/sweep --shard"""
    partial: bool = False
    """merge runs with missing or unfinished shards too (their status says so)"""


def register(sub: Any) -> None:
    p = _sub(sub, "merge", "merge shard files (or any harness-bench databases) into one DuckDB file",
             "Copy the bench runs, sweeps, shards, case runs, tool calls and events of every SHARD file into OUT"
             " (created if missing). Idempotent: a case run OUT already holds is never copied twice. Refused,"
             " before OUT is touched: files that are not harness-bench databases of this schema version, copies"
             " of one run or sweep with different settings, cases, epochs or shard counts, and (without"
             " --partial) a sharded run missing a shard or an unfinished run.")  # fmt: skip
    _MergeFlags.add_flags(p, "merge")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from runners.run.interrupts import Interrupts
    from runners.store.merge import MergeInterrupted, merge

    signals: Interrupts = args.interrupts  # Ctrl-C and SIGTERM set a flag (runners/cli.py): statements complete
    flags = _MergeFlags.from_args(args, "merge")
    try:
        summary = merge(flags.out, list(flags.shards), partial=flags.partial, cancellation=signals.token)
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
