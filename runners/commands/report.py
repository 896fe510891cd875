"""`harness-bench report`: a Markdown + HTML report with figures from a metrics database (one sweep, one bench run,
or everything)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Annotated, Any

from runners.commands._common import (
    EXIT_OK,
    RecommendFlags,
    _add_db,
    _add_recommend_choices,
    _check_outputs,
    _fail,
    _say,
    _sub,
)
from runners.domain.input_files import what_is
from runners.plan.flags import Flag, FlagModel
from runners.store.output_files import NamedPath

__all__ = ["register", "run"]


class _ReportFlags(FlagModel):
    """`report`'s flags: what it reports on and where it writes."""

    sweep: Annotated[str | None, Flag(metavar="SWEEP_ID")] = None
    """report on one sweep, 'latest' for the newest (adds the sweep figures)"""
    bench_run: Annotated[str | None, Flag(metavar="BENCH_RUN_ID")] = None
    """report on one bench run"""
    out: Annotated[Path, Flag(help="output folder (default {default})")] = Path("reports/out")
    """The folder of report.md, report.html and the figures."""


def register(sub: Any) -> None:
    p = _sub(sub, "report", "write a Markdown + HTML report with figures from DuckDB")
    _add_db(p)
    _ReportFlags.add_flags(p, "report")
    _add_recommend_choices(p, "report")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from runners.rendering.report import build_report
    from runners.store.connection import connect
    from runners.store.runs import bench_run_exists, sweep_ids

    choices = RecommendFlags.from_args(args, "report")
    if args.sweep and args.bench_run:
        _fail("give --sweep or --bench-run, not both")
    if args.out.exists() and not args.out.is_dir():
        _fail(
            f"--out {args.out} is {what_is(args.out)}; give a folder (it will hold report.md, report.html and figures)"
        )
    # the documents, never the database (the figures are checked once their names are known, before any write)
    _check_outputs([NamedPath("--out", args.out / name) for name in ("report.md", "report.html")],
                   [NamedPath("--db", args.db)])  # fmt: skip
    con = connect(args.db, read_only=True)
    try:
        known = sweep_ids(con)
        if args.sweep == "latest":
            if not known:
                _fail(f"--sweep latest: {args.db} holds no sweeps")
            args.sweep = known[0]
        if args.sweep and args.sweep not in known:
            _fail(f"--sweep: unknown sweep {args.sweep!r} in {args.db}")
        if args.bench_run and not bench_run_exists(con, args.bench_run):
            _fail(f"--bench-run: unknown bench run {args.bench_run!r} in {args.db}")
    finally:
        con.close()
    md, page = build_report(args.db, args.out, sweep_id=args.sweep, bench_run_id=args.bench_run,
                            objective=choices.objective, rule=choices.rule, margin=choices.margin)  # fmt: skip
    _say(f"wrote {md} and {page}")
    return EXIT_OK
